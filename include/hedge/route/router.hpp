// hedge/route/router.hpp: router<Policies...>, composing routing policies at compile time.
//
// Precedence (stated once, applied to every decision):
//   1. any `reject` verdict                      -> reject (the first rejecting policy decides)
//   2. an `edge_only` and a `cloud_only` verdict -> reject, reason no_tier_available: a request
//      that must stay on the device but that the device cannot hold is refused, never leaked
//   3. any `edge_only` verdict                   -> edge (privacy, offline, budget)
//   4. any `cloud_only` verdict                  -> cloud (context window, KV space)
//   5. otherwise the soft scores are summed: sum > threshold -> cloud, else edge; the policy
//      whose contribution pushed hardest towards the chosen tier is reported as deciding.
// Hard constraints therefore always beat preferences (cost, latency, quality), whatever
// the order of the policies; the order only picks which of several policies with the
// same kind of verdict is named as deciding, so list privacy and offline first.
//
// Every policy is evaluated on every call so the decision can explain itself; the
// decision is a value holding all verdicts, and nothing is allocated.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "hedge/core/arch.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

/// The outcome of routing one request, with everything needed to explain it.
/// \tparam N number of policies in the router
template <std::size_t N>
struct decision {
  static constexpr std::size_t no_policy = N;  ///< `deciding` when no policy had an opinion

  tier chosen = tier::edge;
  reason why = reason::none;        ///< the deciding verdict's reason, or the router's own
  std::size_t deciding = no_policy; ///< index of the deciding policy
  std::size_t conflicting = no_policy; ///< for no_tier_available: the cloud_only policy that clashed
  double score = 0.0;               ///< sum of soft contributions
  double threshold = 0.0;           ///< the router threshold it was compared with
  std::array<verdict, N> verdicts{};
  std::array<std::string_view, N> names{};
};

/// Routes requests with a fixed, compile-time list of policies.
/// \tparam Policies types modelling RoutingPolicy, in reporting precedence order
template <RoutingPolicy... Policies>
class router {
 public:
  static constexpr std::size_t size = sizeof...(Policies);
  using decision_type = decision<size>;

  constexpr router() = default;
  constexpr explicit router(Policies... policies, double threshold = 0.0) noexcept
      : policies_(std::move(policies)...), threshold_(threshold) {}

  /// Soft-score threshold: a summed score above it goes to the cloud.
  constexpr void set_threshold(double t) noexcept { threshold_ = t; }
  [[nodiscard]] constexpr double threshold() const noexcept { return threshold_; }

  template <std::size_t I>
  [[nodiscard]] constexpr auto& policy() noexcept { return std::get<I>(policies_); }
  template <std::size_t I>
  [[nodiscard]] constexpr const auto& policy() const noexcept { return std::get<I>(policies_); }

  /// Evaluates every policy and resolves their verdicts (file comment). The policies that
  /// scan the prompt (privacy, complexity) run the arch chosen here, once per decision.
  /// \tparam A instruction set of the prompt scans: arch::best (the best this CPU runs) or a tag
  template <class A = arch::best>
  [[nodiscard]] constexpr decision_type decide(const route_request& request, const route_context& context,
                                               A = {}) const noexcept {
    if (std::is_constant_evaluated()) return decide_as(request, context, arch::scalar{});
    return arch::visit<A>([&](auto tag) { return decide_as(request, context, tag); });
  }

 private:
  template <class Tag>
  constexpr decision_type decide_as(const route_request& request, const route_context& context, Tag tag) const noexcept {
    decision_type d;
    d.threshold = threshold_;
    d.names = {std::string_view{Policies::name}...};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((d.verdicts[I] = detail::evaluate_policy(std::get<I>(policies_), request, context, tag)), ...);
    }(std::make_index_sequence<size>{});
    resolve(d);
    return d;
  }

  constexpr static std::size_t first_of(const decision_type& d, verdict_kind k) noexcept {
    for (std::size_t i = 0; i < size; ++i)
      if (d.verdicts[i].kind == k) return i;
    return size;
  }

  constexpr void resolve(decision_type& d) const noexcept {
    if (auto i = first_of(d, verdict_kind::reject); i != size) return settle(d, tier::reject, i, d.verdicts[i].why);
    const auto edge_only = first_of(d, verdict_kind::edge_only);
    const auto cloud_only = first_of(d, verdict_kind::cloud_only);
    if (edge_only != size && cloud_only != size) {
      d.conflicting = cloud_only;
      return settle(d, tier::reject, edge_only, reason::no_tier_available);
    }
    if (edge_only != size) return settle(d, tier::edge, edge_only, d.verdicts[edge_only].why);
    if (cloud_only != size) return settle(d, tier::cloud, cloud_only, d.verdicts[cloud_only].why);

    double sum = 0.0;
    for (const auto& v : d.verdicts)
      if (v.kind == verdict_kind::soft) sum += v.score;
    d.score = sum;
    const bool to_cloud = sum > threshold_;
    // The deciding policy is the strongest push towards the chosen side.
    std::size_t strongest = size;
    double best = 0.0;
    for (std::size_t i = 0; i < size; ++i) {
      const auto& v = d.verdicts[i];
      if (v.kind != verdict_kind::soft) continue;
      const double push = to_cloud ? v.score : -v.score;
      if (push > best) best = push, strongest = i;
    }
    d.chosen = to_cloud ? tier::cloud : tier::edge;
    d.deciding = strongest;
    d.why = strongest != size ? d.verdicts[strongest].why
                              : (to_cloud ? reason::score_above_threshold : reason::score_below_threshold);
  }

  constexpr static void settle(decision_type& d, tier t, std::size_t i, reason r) noexcept {
    d.chosen = t;
    d.deciding = i;
    d.why = r;
  }

  std::tuple<Policies...> policies_{};
  double threshold_ = 0.0;
};

namespace detail {
/// Appends to a caller buffer, cutting (never allocating) when it is full.
struct text_sink {
  std::span<char> out;
  std::size_t used = 0;

  constexpr void put(std::string_view s) noexcept {
    for (char c : s) {
      if (used + 1 >= out.size()) return;
      out[used++] = c;
    }
  }
  constexpr void put(double v) noexcept {
    char digits[hedge::detail::fixed3_max];
    put(std::string_view{digits, hedge::detail::fixed3(v, digits)});
  }
  constexpr std::size_t finish() noexcept {
    if (!out.empty()) out[used] = '\0';
    return used;
  }
};
}  // namespace detail

/// One-line explanation of a decision, e.g.
/// `cloud by complexity (complex_prompt) score=1.250 > 0.000 | privacy=abstain ...`,
/// written into `out` (NUL-terminated, cut if too small). Returns the length written.
template <std::size_t N>
std::size_t explain(const decision<N>& d, std::span<char> out) noexcept {
  detail::text_sink s{out};
  s.put(to_string(d.chosen));
  if (d.deciding != d.no_policy) {
    s.put(" by ");
    s.put(d.names[d.deciding]);
  }
  s.put(" (");
  s.put(to_string(d.why));
  if (d.deciding != d.no_policy && !d.verdicts[d.deciding].detail.empty()) {
    s.put(": ");
    s.put(d.verdicts[d.deciding].detail);
  }
  s.put(")");
  if (d.conflicting != d.no_policy) {
    s.put(" conflicts with ");
    s.put(d.names[d.conflicting]);
    s.put(" (");
    s.put(to_string(d.verdicts[d.conflicting].why));
    s.put(")");
  }
  s.put(" score=");
  s.put(d.score);
  s.put(d.score > d.threshold ? " > " : " <= ");
  s.put(d.threshold);
  for (std::size_t i = 0; i < N; ++i) {
    s.put(i == 0 ? " | " : ", ");
    s.put(d.names[i]);
    s.put("=");
    s.put(to_string(d.verdicts[i].kind));
    if (d.verdicts[i].kind == verdict_kind::soft) {
      s.put("(");
      s.put(d.verdicts[i].score);
      s.put(")");
    }
    s.put(":");
    s.put(to_string(d.verdicts[i].why));
  }
  return s.finish();
}

}  // namespace hedge::route
