// hedge/route/privacy_policy.hpp: keeps personal and restricted data on the device.
//
// Edge-only when the caller tagged the request with a restricted data class or the PII
// detector finds an entity in the prompt. The router never overrides an edge-only verdict
// with a preference; if the edge cannot take the request it is rejected, not sent out.
#pragma once

#include <string_view>

#include "hedge/core/dispatch.hpp"
#include "hedge/route/pii_detector.hpp"
#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

class privacy_policy {
 public:
  static constexpr std::string_view name = "privacy";

  /// \param restricted data classes that must stay on the device
  /// \param detector   which PII entities count
  constexpr explicit privacy_policy(
      data_class restricted = data_class::personal | data_class::regulated | data_class::contractual,
      pii_detector detector = pii_detector{}) noexcept
      : restricted_(restricted), detector_(detector) {}

  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context& context) const noexcept {
    return evaluate(request, context, arch::best{});
  }
  /// \tparam A instruction set of the PII pre-scan (pii_detector::first)
  template <class A>
  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context&, A arch) const noexcept {
    if (const auto hit = request.classes & restricted_; any(hit)) return verdict::edge_only(reason::restricted_data_class, class_name(hit));
    if (const auto found = detector_.first(request.prompt, arch))
      return verdict::edge_only(reason::pii_detected, to_string(found->entity));
    return verdict::abstain();
  }

 private:
  static constexpr std::string_view class_name(data_class c) noexcept {
    if (any(c & data_class::regulated)) return "regulated";
    if (any(c & data_class::personal)) return "personal";
    if (any(c & data_class::contractual)) return "contractual";
    if (any(c & data_class::internal)) return "internal";
    return "public";
  }

  data_class restricted_;
  pii_detector detector_;
};

}  // namespace hedge::route
