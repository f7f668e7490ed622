// hedge/route/complexity_policy.hpp: the learned complexity scorer as a routing policy.
//
// Soft score = weight x (logit(p) - logit(threshold)), where p is the scorer's
// probability that the edge model will fail and the threshold comes from calibration
// (calibration.hpp): with the other policies abstaining, the router sends to the cloud
// exactly the prompts scoring above the calibrated threshold.
#pragma once

#include <cmath>
#include <concepts>
#include <string_view>

#include "hedge/core/dispatch.hpp"
#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

/// A prompt scorer: higher logit means harder for the edge model.
template <class S>
concept ComplexityScorer = requires(const S& scorer, std::string_view prompt) {
  { scorer.logit(prompt) } noexcept -> std::convertible_to<float>;
};

/// \tparam Scorer a ComplexityScorer, e.g. complexity_model<>; held by pointer because
///         models are large and shared between routers
template <ComplexityScorer Scorer>
class complexity_policy {
 public:
  static constexpr std::string_view name = "complexity";

  /// \param scorer    the model (must outlive the policy)
  /// \param threshold probability in (0, 1) above which the prompt counts as complex; or
  ///                  call set_threshold_logit with a calibrated logit (hedge-route-train prints one)
  /// \param weight    score scale relative to the other soft policies
  constexpr complexity_policy(const Scorer* scorer, double threshold, double weight = 1.0) noexcept
      : scorer_(scorer), threshold_logit_(std::log(threshold / (1.0 - threshold))), weight_(weight) {}

  /// Sets the threshold from a calibrated logit (calibration works on logits).
  constexpr void set_threshold_logit(double t) noexcept { threshold_logit_ = t; }

  [[nodiscard]] verdict evaluate(const route_request& request, const route_context& context) const noexcept {
    return evaluate(request, context, arch::best{});
  }
  /// \tparam A instruction set of the scorer's feature passes, where the scorer takes one
  ///   (complexity_model::logit does)
  template <class A>
  [[nodiscard]] verdict evaluate(const route_request& request, const route_context&, A arch) const noexcept {
    const double z = static_cast<double>(logit(request.prompt, arch)) - threshold_logit_;
    return verdict::soft(weight_ * z, z > 0 ? reason::complex_prompt : reason::simple_prompt);
  }

 private:
  template <class A>
  float logit(std::string_view prompt, A arch) const noexcept {
    if constexpr (requires { { scorer_->logit(prompt, arch) } noexcept -> std::convertible_to<float>; }) {
      return scorer_->logit(prompt, arch);
    } else {
      return scorer_->logit(prompt);
    }
  }

  const Scorer* scorer_;
  double threshold_logit_;
  double weight_;
};

}  // namespace hedge::route
