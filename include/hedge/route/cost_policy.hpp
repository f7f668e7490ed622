// hedge/route/cost_policy.hpp: token prices, the remaining budget and the cloud rate limit.
//
// Cloud cost = prompt tokens x input price + expected output tokens x output price.
// Unaffordable (over the remaining budget or the request's cap) or no rate-limit headroom
// -> edge only. Otherwise the cost (minus the edge's own cost, e.g. energy) weighs towards
// the edge, and so does a nearly exhausted rate limit.
#pragma once

#include <string_view>

#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

/// Prices per token, in the caller's currency unit.
struct token_prices {
  double cloud_input = 1e-6;
  double cloud_output = 3e-6;
  double edge_input = 0.0;
  double edge_output = 0.0;
};

class cost_policy {
 public:
  static constexpr std::string_view name = "cost";

  /// \param prices          per-token prices of both tiers
  /// \param weight_per_unit soft score per currency unit of extra cloud cost
  /// \param low_headroom    rate-limit headroom below which the cloud is discouraged
  constexpr explicit cost_policy(token_prices prices = {}, double weight_per_unit = 100.0,
                                 double low_headroom = 0.1) noexcept
      : prices_(prices), weight_(weight_per_unit), low_headroom_(low_headroom) {}

  [[nodiscard]] constexpr double cloud_cost(const route_request& r) const noexcept {
    return prompt_token_estimate(r) * prices_.cloud_input + r.expected_output_tokens * prices_.cloud_output;
  }
  [[nodiscard]] constexpr double edge_cost(const route_request& r) const noexcept {
    return prompt_token_estimate(r) * prices_.edge_input + r.expected_output_tokens * prices_.edge_output;
  }

  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context& context) const noexcept {
    if (context.cloud_rate_headroom <= 0.0) return verdict::edge_only(reason::rate_limited);
    const double cost = cloud_cost(request);
    if (context.budget_remaining >= 0.0 && cost > context.budget_remaining) return verdict::edge_only(reason::budget_exhausted);
    if (request.max_cost > 0.0 && cost > request.max_cost) return verdict::edge_only(reason::over_request_cost_cap);
    double score = -weight_ * (cost - edge_cost(request));
    if (context.cloud_rate_headroom < low_headroom_) score -= 1.0;
    return verdict::soft(score, context.cloud_rate_headroom < low_headroom_ ? reason::rate_limited : reason::cloud_cost);
  }

 private:
  token_prices prices_;
  double weight_;
  double low_headroom_;
};

}  // namespace hedge::route
