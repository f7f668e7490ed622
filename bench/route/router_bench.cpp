// Router decision cost: privacy (PII scan) + health + context fit + latency + cost +
// complexity (the default 4096-bucket model) on 1 KB prompts, plus each expensive part alone.
// Reported per decision and per prompt byte (target: under 2 us per KB).
//
// Two kinds of prompt. `BM_<part>/<bytes>` repeats one prompt of five English sentences:
// every call sees the same bytes, so the branch predictor learns them and the figure is
// the code's best case. `BM_<part>Mmlu/1024/<n>` cycles through n different 1 KB texts
// made of real MMLU questions (../shared/routing/mmlu, shuffled with a fixed seed).
// `BM_<part>Mmlu/1024/4096` is traffic as a router serving it sees it, the figure to hold
// the target against: 4 MB of text, more than the branch predictor can learn, each text
// prefetched into the cache during the call before it (a server has just received the
// prompt; without that, fetching it from memory would add about 1,000 cycles per KB).
// With 256 texts the predictor learns part of them (about 10 fewer misses per KB: the
// figure is optimistic; `/4096` is the one to hold the target against); `BM_<part>Mmlu/1024/1`
// repeats the first text.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/cycles.hpp"
#include "hedge/model/random.hpp"
#include "hedge/os/csv_files.hpp"
#include "hedge/route/complexity_model.hpp"
#include "hedge/route/complexity_policy.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/cost_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/pii_detector.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/route/router.hpp"

namespace {

using namespace hedge::route;
using model_t = complexity_model<>;

const model_t& bench_model() {
  static const auto model = [] {
    auto m = std::make_unique<model_t>();
    hedge::model::seeded_random rng{42};
    for (auto& group : m->hashed)
      for (auto& w : group) w = static_cast<model_t::hashed_weight>(rng.below(2 * 32767 + 1)) - 32767;
    m->scale = {3e-6f, 3e-6f};
    return m;
  }();
  return *model;
}

/// ~1 KB of ordinary prompt text without PII (so the scan runs to the end).
std::string prompt_of(std::size_t bytes) {
  static const char* sentences[] = {
      "Explain how a transformer decoder generates text one token at a time. ",
      "Compare the cost of running a 7B model on a phone with calling a hosted API, in dollars per month. ",
      "Write a short Python function that merges two sorted lists, and state its complexity. ",
      "Our meeting on 2024-05-14 covered version 3.2.1 of the firmware and the release plan. ",
      "Which of the following best describes the role of the mitochondria in a eukaryotic cell? ",
  };
  std::string s;
  for (std::size_t k = 0; s.size() < bytes; ++k) s += sentences[k % 5];
  s.resize(bytes);
  return s;
}

/// 4096 different 1 KB texts: the MMLU questions of all 57 domains, shuffled with a fixed
/// seed and concatenated (each followed by a newline), cut every 1024 bytes. Empty when the
/// data is missing.
const std::vector<std::string>& mmlu_texts() {
  static const auto texts = [] {
    std::vector<std::string> prompts;
    if (const auto files = hedge::os::csv_files_in(HEDGE_SHARED_DIR "/routing/mmlu"))
      for (const auto& file : *files) {
        const auto rows = hedge::os::load_labelled_csv(file);
        if (!rows) continue;
        for (const auto& row : *rows) prompts.push_back(row.prompt);
      }
    hedge::model::seeded_random rng{7};
    rng.shuffle(std::span<std::string>(prompts));
    std::vector<std::string> out;
    std::string current;
    for (const auto& p : prompts) {
      current += p;
      current += '\n';
      if (current.size() >= 1024) {
        out.push_back(current.substr(0, 1024));
        current.clear();
        if (out.size() == 4096) break;
      }
    }
    return out;
  }();
  return texts;
}

/// The router the decision benchmarks time: every built-in policy, the complexity one on
/// the benchmark model.
auto decision_router() {
  return router<privacy_policy, health_policy, context_fit_policy, latency_policy, cost_policy,
                complexity_policy<model_t>>{privacy_policy{}, health_policy{},  context_fit_policy{}, latency_policy{},
                                            cost_policy{},    complexity_policy<model_t>{&bench_model(), 0.5}};
}

/// Runs `call` as the benchmark loop and reports bytes/s, ns per byte and, where the
/// counter works, the thread's user cycles per call (steady under host preemption, which
/// CPU time is not on a shared VM).
template <class Call>
void measure(benchmark::State& state, std::size_t bytes, Call&& call) {
  const hedge::bench::user_cycles cycles;
  for (auto _ : state) call();
  const auto calls = static_cast<double>(state.iterations());
  if (const auto per_call = cycles.per(calls)) state.counters["cycles"] = *per_call;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["ns_per_byte"] = benchmark::Counter(static_cast<double>(bytes) * calls,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_RouterDecision(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::string prompt = prompt_of(bytes);
  const auto r = decision_router();
  const route_request request{.prompt = prompt, .ttft_slo_ms = 1500.0};
  const route_context context;
  measure(state, bytes, [&] {
    auto d = r.decide(request, context);
    benchmark::DoNotOptimize(d);
  });
}
BENCHMARK(BM_RouterDecision)->Arg(256)->Arg(1024)->Arg(4096);

void BM_PiiScan(benchmark::State& state) {
  const std::string prompt = prompt_of(static_cast<std::size_t>(state.range(0)));
  const pii_detector detector;
  measure(state, prompt.size(), [&] { benchmark::DoNotOptimize(detector.first(prompt)); });
}
BENCHMARK(BM_PiiScan)->Arg(1024);

void BM_ComplexityScore(benchmark::State& state) {
  const std::string prompt = prompt_of(static_cast<std::size_t>(state.range(0)));
  const auto& model = bench_model();
  measure(state, prompt.size(), [&] { benchmark::DoNotOptimize(model.logit(prompt)); });
}
BENCHMARK(BM_ComplexityScore)->Arg(1024);

/// Calls call(text) for the next of the first state.range(1) MMLU texts each iteration,
/// with the text after it prefetched: 4096 is the varied traffic; 1 repeats one MMLU text,
/// the control that separates what the text's content costs from what the branch predictor
/// learns on a repeated input.
template <class Call>
void measure_mmlu(benchmark::State& state, Call&& call) {
  const auto& texts = mmlu_texts();
  const auto count = static_cast<std::size_t>(state.range(1));
  if (texts.size() < count) {
    state.SkipWithError(HEDGE_SHARED_DIR "/routing/mmlu is missing or has too few questions");
    return;
  }
  std::size_t next = 0;
  measure(state, 1024, [&] {
    const std::size_t current = next;
    next = next + 1 == count ? 0 : next + 1;
    for (std::size_t line = 0; line < 1024; line += 64) __builtin_prefetch(texts[next].data() + line);
    call(std::string_view(texts[current]));
  });
}

void BM_RouterDecisionMmlu(benchmark::State& state) {
  const auto r = decision_router();
  const route_context context;
  measure_mmlu(state, [&](std::string_view text) {
    auto d = r.decide(route_request{.prompt = text, .ttft_slo_ms = 1500.0}, context);
    benchmark::DoNotOptimize(d);
  });
}
BENCHMARK(BM_RouterDecisionMmlu)->Args({1024, 4096})->Args({1024, 256})->Args({1024, 1});

void BM_PiiScanMmlu(benchmark::State& state) {
  const pii_detector detector;
  measure_mmlu(state, [&](std::string_view text) { benchmark::DoNotOptimize(detector.first(text)); });
}
BENCHMARK(BM_PiiScanMmlu)->Args({1024, 4096})->Args({1024, 256})->Args({1024, 1});

void BM_ComplexityScoreMmlu(benchmark::State& state) {
  const auto& model = bench_model();
  measure_mmlu(state, [&](std::string_view text) { benchmark::DoNotOptimize(model.logit(text)); });
}
BENCHMARK(BM_ComplexityScoreMmlu)->Args({1024, 4096})->Args({1024, 256})->Args({1024, 1});

// Adversarial prompts: the worst families of tests/route/pii_scan_cost_test.cpp, whose
// scan is linear (bytes read per input byte bounded), timed at 1 KB (beside the MMLU
// figure) and at 1 MB (a pasted file; ns per byte must match the 1 KB figure):
//   0 digit_tokens  "1 1 1 ...": every token starts every digit matcher (the most reads)
//   1 at_digits     "@" then "1 1 ...": the same after an e-mail stop
//   2 a1_letters    "a1" then letters: a stop, then one plain run to the end (the shape
//                   that made the scan quadratic before it kept the pre-scan's answer)
//   3 born_digits   "born 1 1 ...": a birth window kept open, matchers at every token
std::string adversarial_prompt(std::int64_t family, std::size_t bytes) {
  static constexpr std::string_view heads[] = {"1 ", "@", "a1", "born "};
  static constexpr std::string_view runs[] = {"1 ", "1 ", "b", "1 "};
  const auto f = static_cast<std::size_t>(family);
  std::string s(heads[f]);
  while (s.size() < bytes) s += runs[f];
  s.resize(bytes);
  return s;
}

void BM_PiiScanAdversarial(benchmark::State& state) {
  const std::string prompt = adversarial_prompt(state.range(0), static_cast<std::size_t>(state.range(1)));
  const pii_detector detector;
  std::array<pii_match, 16> found{};
  measure(state, prompt.size(), [&] { benchmark::DoNotOptimize(detector.find(prompt, found)); });
}
BENCHMARK(BM_PiiScanAdversarial)->ArgsProduct({{0, 1, 2, 3}, {1024, 1 << 20}});

void BM_RouterDecisionAdversarial(benchmark::State& state) {
  const std::string prompt = adversarial_prompt(state.range(0), static_cast<std::size_t>(state.range(1)));
  const auto r = decision_router();
  const route_context context;
  measure(state, prompt.size(), [&] {
    auto d = r.decide(route_request{.prompt = prompt, .ttft_slo_ms = 1500.0}, context);
    benchmark::DoNotOptimize(d);
  });
}
BENCHMARK(BM_RouterDecisionAdversarial)->ArgsProduct({{0, 1, 2, 3}, {1024, 1 << 20}});

// Fixed iteration counts for instruction counting: under valgrind --tool=callgrind, the
// difference of the 1200- and 200-iteration runs divided by 1000 is one call, free of setup
// (docs/routing.md).
BENCHMARK(BM_RouterDecision)->Arg(1024)->Iterations(200);
BENCHMARK(BM_RouterDecision)->Arg(1024)->Iterations(1200);
BENCHMARK(BM_PiiScan)->Arg(1024)->Iterations(200);
BENCHMARK(BM_PiiScan)->Arg(1024)->Iterations(1200);
BENCHMARK(BM_ComplexityScore)->Arg(1024)->Iterations(200);
BENCHMARK(BM_ComplexityScore)->Arg(1024)->Iterations(1200);
// The same over the 256 MMLU texts: calls 200 to 1199 take each text about 4 times.
BENCHMARK(BM_RouterDecisionMmlu)->Args({1024, 256})->Iterations(200);
BENCHMARK(BM_RouterDecisionMmlu)->Args({1024, 256})->Iterations(1200);
BENCHMARK(BM_PiiScanMmlu)->Args({1024, 256})->Iterations(200);
BENCHMARK(BM_PiiScanMmlu)->Args({1024, 256})->Iterations(1200);
BENCHMARK(BM_ComplexityScoreMmlu)->Args({1024, 256})->Iterations(200);
BENCHMARK(BM_ComplexityScoreMmlu)->Args({1024, 256})->Iterations(1200);

}  // namespace

BENCHMARK_MAIN();
