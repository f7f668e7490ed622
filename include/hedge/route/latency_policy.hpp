// hedge/route/latency_policy.hpp: estimate time to first token on each tier from the
// measured speeds and lean towards the tier that meets the request's SLO.
//
//   edge TTFT  = prompt tokens / edge prefill speed
//   cloud TTFT = round trip + prompt tokens / cloud prefill speed
// A preference (soft score), not a constraint: privacy and offline verdicts win over it.
#pragma once

#include <string_view>

#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

class latency_policy {
 public:
  static constexpr std::string_view name = "latency";

  /// \param weight score pushed towards the only tier meeting the SLO (half when neither does)
  constexpr explicit latency_policy(double weight = 2.0) noexcept : weight_(weight) {}

  [[nodiscard]] static constexpr double edge_ttft_ms(const route_request& r, const route_context& c) noexcept {
    return 1000.0 * prompt_token_estimate(r) / positive(c.edge_prefill_tokens_per_s.value);
  }
  [[nodiscard]] static constexpr double cloud_ttft_ms(const route_request& r, const route_context& c) noexcept {
    return c.cloud_rtt_ms.value + 1000.0 * prompt_token_estimate(r) / positive(c.cloud_prefill_tokens_per_s.value);
  }

  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context& context) const noexcept {
    if (request.ttft_slo_ms <= 0.0) return verdict::abstain();
    const double edge = edge_ttft_ms(request, context), cloud = cloud_ttft_ms(request, context);
    const bool edge_ok = edge <= request.ttft_slo_ms, cloud_ok = cloud <= request.ttft_slo_ms;
    if (edge_ok && cloud_ok) return verdict::abstain(reason::edge_meets_slo);
    if (edge_ok) return verdict::soft(-weight_, reason::edge_meets_slo);
    if (cloud_ok) return verdict::soft(weight_, reason::cloud_meets_slo);
    return verdict::soft(edge <= cloud ? -weight_ / 2 : weight_ / 2, reason::no_tier_meets_slo);
  }

 private:
  static constexpr double positive(double v) noexcept { return v > 1e-9 ? v : 1e-9; }
  double weight_;
};

}  // namespace hedge::route
