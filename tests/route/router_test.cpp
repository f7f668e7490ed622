// router<Policies...>: hard-constraint precedence, soft-score combination, explanations,
// a user-written policy, and zero allocations per decision.
#include "hedge/route/router.hpp"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>

#include "hedge/route/complexity_model.hpp"
#include "hedge/route/complexity_policy.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/cost_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

/// A user-written policy: always pushes by a fixed amount, or forces a verdict.
struct fixed_policy {
  static constexpr std::string_view name = "fixed";
  verdict answer = verdict::abstain();
  [[nodiscard]] constexpr verdict evaluate(const route_request&, const route_context&) const noexcept { return answer; }
};
static_assert(RoutingPolicy<fixed_policy>);
static_assert(RoutingPolicy<privacy_policy>);
static_assert(RoutingPolicy<health_policy>);
static_assert(RoutingPolicy<context_fit_policy>);
static_assert(RoutingPolicy<latency_policy>);
static_assert(RoutingPolicy<cost_policy>);
static_assert(RoutingPolicy<complexity_policy<complexity_model<64>>>);

/// A user-written complexity scorer (e.g. a remote classifier's cached answer) fits the policy.
struct length_scorer {
  float logit(std::string_view prompt) const noexcept { return static_cast<float>(prompt.size()) / 100.0f - 1.0f; }
};
static_assert(ComplexityScorer<length_scorer>);
static_assert(RoutingPolicy<complexity_policy<length_scorer>>);

TEST(Router, UserScorerDropsIntoComplexityPolicy) {
  const length_scorer scorer;
  const complexity_policy<length_scorer> policy{&scorer, 0.5};  // logit 0 <=> 100 bytes
  EXPECT_EQ(policy.evaluate(route_request{.prompt = std::string(300, 'x')}, route_context{}).why, reason::complex_prompt);
  EXPECT_EQ(policy.evaluate(route_request{.prompt = "short"}, route_context{}).why, reason::simple_prompt);
}

struct not_a_policy {
  verdict evaluate(const route_request&, const route_context&) const { return {}; }  // no name, not noexcept
};
static_assert(!RoutingPolicy<not_a_policy>);

using full_router = router<privacy_policy, health_policy, context_fit_policy, latency_policy, cost_policy, fixed_policy>;

full_router make_router(verdict quality) {
  return full_router{privacy_policy{}, health_policy{}, context_fit_policy{}, latency_policy{}, cost_policy{},
                     fixed_policy{quality}};
}

TEST(Router, PrivacyEdgeOnlyBeatsEveryPreference) {
  const auto r = make_router(verdict::soft(100.0, reason::complex_prompt));
  route_request req{.prompt = "my card is 4111 1111 1111 1111, why declined?"};
  const auto d = r.decide(req, route_context{});
  EXPECT_EQ(d.chosen, tier::edge);
  EXPECT_EQ(d.why, reason::pii_detected);
  EXPECT_EQ(d.names[d.deciding], "privacy");
  EXPECT_EQ(d.verdicts[0].detail, "credit_card");
}

TEST(Router, PrivateRequestTheEdgeCannotHoldIsRejectedNotLeaked) {
  const auto r = make_router(verdict::abstain());
  route_context ctx;
  ctx.edge_context_tokens = 64;
  route_request req{.prompt = "summarize", .classes = data_class::regulated, .expected_output_tokens = 500};
  const auto d = r.decide(req, ctx);
  EXPECT_EQ(d.chosen, tier::reject);
  EXPECT_EQ(d.why, reason::no_tier_available);
  EXPECT_EQ(d.names[d.deciding], "privacy");
  EXPECT_EQ(d.names[d.conflicting], "context_fit");
  std::array<char, 512> text{};
  explain(d, text);
  EXPECT_NE(std::string{text.data()}.find("reject by privacy (no_tier_available: regulated) conflicts with context_fit"),
            std::string::npos)
      << text.data();
}

TEST(Router, OfflineGoesToEdgeAndTooLongGoesToCloud) {
  const auto r = make_router(verdict::abstain());
  route_context offline;
  offline.offline = true;
  EXPECT_EQ(r.decide(route_request{.prompt = "hi"}, offline).why, reason::offline);
  route_context small_kv;
  small_kv.edge_kv_free_tokens = 10;
  const auto d = r.decide(route_request{.prompt = "hi", .expected_output_tokens = 100}, small_kv);
  EXPECT_EQ(d.chosen, tier::cloud);
  EXPECT_EQ(d.why, reason::exceeds_edge_kv);
}

TEST(Router, RejectVerdictWinsOverEverything) {
  const auto r = make_router(verdict::reject(reason::user_first));
  const auto d = r.decide(route_request{.prompt = "4111 1111 1111 1111"}, route_context{});
  EXPECT_EQ(d.chosen, tier::reject);
  EXPECT_EQ(d.names[d.deciding], "fixed");
}

TEST(Router, BudgetAndRateLimitKeepRequestsOnTheEdge) {
  const auto r = make_router(verdict::soft(5.0, reason::complex_prompt));
  route_context broke;
  broke.budget_remaining = 0.0;
  EXPECT_EQ(r.decide(route_request{.prompt = "prove it"}, broke).why, reason::budget_exhausted);
  route_context limited;
  limited.cloud_rate_headroom = 0.0;
  EXPECT_EQ(r.decide(route_request{.prompt = "prove it"}, limited).why, reason::rate_limited);
}

TEST(Router, SoftScoresAreSummedAndComparedWithTheThreshold) {
  auto r = make_router(verdict::soft(0.5, reason::complex_prompt));
  const route_request req{.prompt = "prove the theorem"};
  auto d = r.decide(req, route_context{});
  EXPECT_EQ(d.chosen, tier::cloud);
  EXPECT_EQ(d.names[d.deciding], "fixed");
  EXPECT_EQ(d.why, reason::complex_prompt);
  r.set_threshold(1.0);
  d = r.decide(req, route_context{});
  EXPECT_EQ(d.chosen, tier::edge);
  EXPECT_EQ(d.why, reason::cloud_cost);  // the cost policy is the only push towards the edge
}

TEST(Router, LatencySloPrefersTheTierThatMeetsIt) {
  const auto r = make_router(verdict::abstain());
  route_context slow_edge;
  slow_edge.edge_prefill_tokens_per_s.value = 10.0;  // 250 tokens -> 25 s on the edge
  const std::string prompt(1000, 'a');
  auto d = r.decide(route_request{.prompt = prompt, .ttft_slo_ms = 500.0}, slow_edge);
  EXPECT_EQ(d.chosen, tier::cloud);
  EXPECT_EQ(d.why, reason::cloud_meets_slo);
  route_context slow_cloud;
  slow_cloud.cloud_rtt_ms.value = 2000.0;
  d = r.decide(route_request{.prompt = "short", .ttft_slo_ms = 500.0}, slow_cloud);
  EXPECT_EQ(d.chosen, tier::edge);
  EXPECT_EQ(d.why, reason::edge_meets_slo);
}

TEST(Router, EwmaSmoothsSpeedSamples) {
  ewma speed{0.0, 0.5, false};
  speed.update(100.0);
  EXPECT_DOUBLE_EQ(speed.value, 100.0);
  speed.update(50.0);
  EXPECT_DOUBLE_EQ(speed.value, 75.0);
}

TEST(Router, ExplainListsEveryVerdict) {
  const auto r = make_router(verdict::soft(2.0, reason::complex_prompt));
  const auto d = r.decide(route_request{.prompt = "why is the sky blue"}, route_context{});
  std::array<char, 512> text{};
  const auto n = explain(d, text);
  const std::string s{text.data(), n};
  EXPECT_EQ(s.rfind("cloud by fixed (complex_prompt) score=", 0), 0u) << s;
  for (auto name : {"privacy=abstain", "health=abstain", "context_fit=abstain:fits_edge", "cost=soft", "fixed=soft(2.000)"})
    EXPECT_NE(s.find(name), std::string::npos) << name << " in " << s;
  std::array<char, 8> tiny{};
  EXPECT_EQ(explain(d, tiny), 7u);  // cut, still terminated
}

TEST(Router, DecisionAllocatesNothing) {
  static complexity_model<1024> model;  // zero weights: probability 0.5
  router<privacy_policy, health_policy, context_fit_policy, latency_policy, cost_policy,
         complexity_policy<complexity_model<1024>>>
      r{privacy_policy{}, health_policy{}, context_fit_policy{}, latency_policy{}, cost_policy{},
        complexity_policy<complexity_model<1024>>{&model, 0.4}};
  std::string prompt;
  while (prompt.size() < 1024) prompt += "Explain why the derivative of x^2 is 2x, with an example. ";
  const route_request req{.prompt = prompt, .ttft_slo_ms = 800.0};
  const route_context ctx;
  hedge::test::alloc_scope scope;
  const auto d = r.decide(req, ctx);
  std::array<char, 256> text{};
  explain(d, text);
  EXPECT_EQ(scope.count(), 0u);
  EXPECT_EQ(d.chosen, tier::cloud);  // only the cloud meets the SLO, and p = 0.5 > calibrated 0.4
  EXPECT_EQ(d.why, reason::cloud_meets_slo);
  EXPECT_EQ(d.verdicts[5].why, reason::complex_prompt);
}

}  // namespace
