// hedge/route/policy.hpp: the RoutingPolicy concept and the verdict a policy returns.
//
// A policy looks at (request, context) and answers with one verdict:
//   edge_only  - the request must not (or cannot) go to the cloud (privacy, offline, budget)
//   cloud_only - the edge cannot serve it (context window, KV space)
//   reject     - nobody may serve it
//   soft       - a score contribution; positive favours the cloud, negative the edge
//   abstain    - no opinion
// and always a reason code, so every decision can be explained.
#pragma once

#include <concepts>
#include <cstdint>
#include <string_view>

#include "hedge/route/request.hpp"

namespace hedge::route {

enum class verdict_kind : std::uint8_t { abstain, soft, edge_only, cloud_only, reject };

constexpr std::string_view to_string(verdict_kind k) noexcept {
  switch (k) {
    case verdict_kind::abstain: return "abstain";
    case verdict_kind::soft: return "soft";
    case verdict_kind::edge_only: return "edge_only";
    case verdict_kind::cloud_only: return "cloud_only";
    case verdict_kind::reject: return "reject";
  }
  return "unknown";
}

/// Why a policy said what it said. Values from `reason::user_first` up are free
/// for user-written policies (give them a name with your own to_string).
enum class reason : std::uint16_t {
  none = 0,
  pii_detected,            ///< the privacy policy found an entity (the verdict's detail names it)
  restricted_data_class,   ///< the caller tagged the request with a class that stays on device
  offline,                 ///< the device has no network
  circuit_open,            ///< the cloud circuit breaker is open
  rate_limited,            ///< no cloud rate-limit headroom left
  exceeds_edge_context,    ///< prompt + output do not fit the edge model's context window
  exceeds_edge_kv,         ///< prompt + output do not fit the free edge KV cache
  fits_edge,               ///< the edge can hold the request
  edge_meets_slo,          ///< only the edge meets the latency SLO (or it is faster)
  cloud_meets_slo,         ///< only the cloud meets the latency SLO (or it is faster)
  no_tier_meets_slo,       ///< neither tier meets the SLO; leaning to the faster one
  budget_exhausted,        ///< the cloud call would exceed the remaining budget
  over_request_cost_cap,   ///< the cloud call would exceed the request's max cost
  cloud_cost,              ///< the cloud call is affordable; its cost weighs towards the edge
  complex_prompt,          ///< the complexity scorer expects the edge model to fail
  simple_prompt,           ///< the complexity scorer expects the edge model to do well
  no_tier_available,       ///< hard constraints conflict (e.g. must stay on edge, edge cannot hold it)
  score_above_threshold,   ///< soft scores sum above the router threshold
  score_below_threshold,   ///< soft scores sum at or below the router threshold
  user_first = 1000,
};

constexpr std::string_view to_string(reason r) noexcept {
  switch (r) {
    case reason::none: return "none";
    case reason::pii_detected: return "pii_detected";
    case reason::restricted_data_class: return "restricted_data_class";
    case reason::offline: return "offline";
    case reason::circuit_open: return "circuit_open";
    case reason::rate_limited: return "rate_limited";
    case reason::exceeds_edge_context: return "exceeds_edge_context";
    case reason::exceeds_edge_kv: return "exceeds_edge_kv";
    case reason::fits_edge: return "fits_edge";
    case reason::edge_meets_slo: return "edge_meets_slo";
    case reason::cloud_meets_slo: return "cloud_meets_slo";
    case reason::no_tier_meets_slo: return "no_tier_meets_slo";
    case reason::budget_exhausted: return "budget_exhausted";
    case reason::over_request_cost_cap: return "over_request_cost_cap";
    case reason::cloud_cost: return "cloud_cost";
    case reason::complex_prompt: return "complex_prompt";
    case reason::simple_prompt: return "simple_prompt";
    case reason::no_tier_available: return "no_tier_available";
    case reason::score_above_threshold: return "score_above_threshold";
    case reason::score_below_threshold: return "score_below_threshold";
    case reason::user_first: break;
  }
  return "user";
}

/// One policy's answer. `detail` must point to static storage (an entity name,
/// a constant string): verdicts are copied into decisions and outlive the call.
struct verdict {
  verdict_kind kind = verdict_kind::abstain;
  reason why = reason::none;
  double score = 0.0;  ///< soft verdicts only: > 0 favours the cloud
  std::string_view detail{};

  static constexpr verdict abstain(reason r = reason::none) noexcept { return {verdict_kind::abstain, r, 0.0, {}}; }
  static constexpr verdict soft(double s, reason r, std::string_view d = {}) noexcept {
    return {verdict_kind::soft, r, s, d};
  }
  static constexpr verdict edge_only(reason r, std::string_view d = {}) noexcept {
    return {verdict_kind::edge_only, r, 0.0, d};
  }
  static constexpr verdict cloud_only(reason r, std::string_view d = {}) noexcept {
    return {verdict_kind::cloud_only, r, 0.0, d};
  }
  static constexpr verdict reject(reason r, std::string_view d = {}) noexcept { return {verdict_kind::reject, r, 0.0, d}; }
};

/// A routing policy: a named type whose const `evaluate(request, context)` is
/// noexcept and returns a verdict. It must not allocate (the router promises
/// zero heap allocations per decision).
template <class P>
concept RoutingPolicy = requires(const P& policy, const route_request& request, const route_context& context) {
  { P::name } -> std::convertible_to<std::string_view>;
  { policy.evaluate(request, context) } noexcept -> std::same_as<verdict>;
};

namespace detail {
/// policy.evaluate(request, context, tag) where the policy takes the arch of its prompt scan
/// (privacy, complexity: the router picks it once per decision), else evaluate(request, context).
template <RoutingPolicy P, class Tag>
constexpr verdict evaluate_policy(const P& policy, const route_request& request, const route_context& context,
                                  Tag tag) noexcept {
  if constexpr (requires {
                  { policy.evaluate(request, context, tag) } noexcept -> std::same_as<verdict>;
                }) {
    return policy.evaluate(request, context, tag);
  } else {
    return policy.evaluate(request, context);
  }
}
}  // namespace detail

}  // namespace hedge::route
