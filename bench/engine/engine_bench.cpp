// The hybrid engine's own cost: routing (five policies, the PII scan included), redaction,
// the commit buffer, event delivery, bookkeeping and telemetry, with backends that cost
// nothing (an edge and a cloud that hand over scripted tokens at once). Reported per
// request (`/1`: one token) and per token (the slope between `/1` and `/257`), with
// allocations per request counted after warm-up (tests/support/alloc_counter.cpp, the
// tests' counting allocator, is linked into this binary). Targets (issue 24): under 5 us per request,
// under 50 ns per token, zero allocations.
//
//   build/bench/bench/hedge_bench_engine --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/cost_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge;
using namespace hedge::engine;

/// Tokens of a realistic width (4 bytes), as many as asked, with confident log-probs.
struct instant_edge {
  std::uint32_t tokens = 1;
  [[nodiscard]] bool ready() const noexcept { return true; }
  [[nodiscard]] std::uint32_t context_tokens() const noexcept { return 4096; }
  result<edge_summary> generate(const edge_call& call, function_ref<bool(const edge_token&)> on_token) {
    edge_summary s;
    s.prompt_tokens = 32;
    const std::uint32_t n = tokens < call.max_tokens ? tokens : call.max_tokens;
    for (std::uint32_t i = 0; i < n; ++i) {
      ++s.generated;
      if (!on_token(edge_token{" tok", static_cast<std::int32_t>(i), -0.05f, 0.3f})) break;
    }
    return s;
  }
};

struct instant_cloud {
  static constexpr bool concurrent = false;
  std::uint32_t tokens = 1;
  result<void> begin(const cloud_call&) { return ok(); }
  cloud_poll poll(function_ref<bool(const cloud_piece&)> on_piece, std::chrono::milliseconds) {
    for (std::uint32_t i = 0; i < tokens; ++i) on_piece(cloud_piece{" tok"});
    cloud_poll p;
    p.state = cloud_state::finished;
    p.finish_reason = "stop";
    return p;
  }
  void cancel() {}
};

using bench_router = route::router<route::privacy_policy, route::health_policy, route::context_fit_policy,
                                   route::latency_policy, route::cost_policy>;
using bench_engine = hybrid_engine<instant_edge, instant_cloud, bench_router, verify::logistic_verifier,
                                   os::steady_clock, telemetry>;

verify::logistic_verifier verifier() {
  verify::deferral_rule rule;
  rule.bias = -3.0f;
  rule.weights[0] = -4.0f;
  return verify::logistic_verifier(rule);
}

constexpr std::string_view plain_prompt =
    "Write a short note to the team about the schedule for next week, with the meeting moved to Thursday.";
constexpr std::string_view pii_prompt =
    "Write to jane.doe@example.com about card 4111 1111 1111 1111 and call +1 415 555 0100 tomorrow.";

void run_engine(benchmark::State& state, mode m, std::string_view prompt) {
  const auto tokens = static_cast<std::uint32_t>(state.range(0));
  instant_edge edge{tokens};
  instant_cloud cloud{tokens};
  std::vector<instant_cloud*> clouds{&cloud};
  bench_engine engine(edge, std::span<instant_cloud* const>(clouds), bench_router{}, verifier(), os::steady_clock{});
  const cloud::chat_message messages[] = {{"user", prompt}};
  engine_request r;
  r.messages = messages;
  r.requested = m;
  r.sampling.max_tokens = tokens;
  std::size_t delivered = 0;
  auto on_event = [&](const engine_event& e) { delivered += e.text.size(); };
  for (int i = 0; i < 16; ++i) engine.run(r, on_event);  // warm-up: buffers reach their size
  const std::size_t before = hedge::test::allocation_count();
  for (auto _ : state) {
    auto out = engine.run(r, on_event);
    benchmark::DoNotOptimize(out);
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["allocs/request"] = static_cast<double>(hedge::test::allocation_count() - before) / runs;
  state.counters["tokens"] = tokens;
  benchmark::DoNotOptimize(delivered);
  if (delivered == 0) state.SkipWithError("no text delivered");
}

void BM_EdgeFirst(benchmark::State& state) { run_engine(state, mode::edge_first, plain_prompt); }
void BM_EdgeRouted(benchmark::State& state) { run_engine(state, mode::automatic, plain_prompt); }
void BM_CloudOnly(benchmark::State& state) { run_engine(state, mode::cloud_only, plain_prompt); }
void BM_CloudOnlyRedacted(benchmark::State& state) { run_engine(state, mode::cloud_only, pii_prompt); }

BENCHMARK(BM_EdgeFirst)->Arg(1)->Arg(257);
BENCHMARK(BM_EdgeRouted)->Arg(1)->Arg(257);
BENCHMARK(BM_CloudOnly)->Arg(1)->Arg(257);
BENCHMARK(BM_CloudOnlyRedacted)->Arg(1)->Arg(257);

}  // namespace

BENCHMARK_MAIN();
