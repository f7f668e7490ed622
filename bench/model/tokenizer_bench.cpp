// hedge_bench_model: tokenizer encode throughput with Llama 2's 32,000-piece vocabulary
// (../shared/models/llama2-vocab.gguf), on English prose and on CJK, 1 KB and 1 MB inputs:
// the MB/s of the two sizes staying close is the O(n log n) merge loop at work (an
// O(n^2) one would lose a factor of ~1000 at 1 MB). The workspace and output are the
// caller's, as in a serving loop. Run:
//   build/<dir>/bench/hedge_bench_model --benchmark_filter=Encode --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/tokenizer.hpp"

namespace {

struct loaded {
  std::vector<char> bytes;
  hedge::model::tokenizer tokenizer;
  bool ok = false;
};

const loaded& llama2() {
  static const std::unique_ptr<loaded> l = [] {
    auto out = std::make_unique<loaded>();
    const std::string path = HEDGE_SHARED_DIR "/models/llama2-vocab.gguf";
    std::ifstream in(path, std::ios::binary);
    out->bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    auto gguf = hedge::model::gguf_file::parse({reinterpret_cast<const std::byte*>(out->bytes.data()), out->bytes.size()});
    if (!gguf) return out;
    auto vocab = hedge::model::read_gguf_vocabulary(*gguf);
    if (!vocab) return out;
    out->tokenizer = hedge::model::tokenizer{std::move(*vocab)};
    out->ok = true;
    return out;
  }();
  return *l;
}

/// `bytes` bytes of repeated text, cut at a character boundary.
std::string repeat_to(const std::string& unit, std::size_t bytes) {
  std::string s;
  while (s.size() + unit.size() <= bytes) s += unit;
  return s;
}

const std::string prose =
    "The quick brown fox jumps over the lazy dog while the committee, having reviewed the "
    "quarterly figures, concluded that inference at the edge would cut latency and cost. ";
const std::string cjk = "人工智能正在改变世界，我们在边缘设备上运行语言模型以降低延迟和成本。";

void BM_Encode(benchmark::State& state, const std::string* unit) {
  const loaded& l = llama2();
  if (!l.ok) {
    state.SkipWithError("../shared/models/llama2-vocab.gguf is absent or unreadable");
    return;
  }
  const std::string text = repeat_to(*unit, static_cast<std::size_t>(state.range(0)));
  std::vector<std::byte> workspace(hedge::model::tokenizer::workspace_bytes(text.size()));
  std::vector<hedge::model::token_id> out(l.tokenizer.max_tokens(text.size()));
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto n = l.tokenizer.encode(text, out, workspace);
    if (!n) {
      state.SkipWithError(n.error().c_str());
      return;
    }
    tokens = *n;
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}

BENCHMARK_CAPTURE(BM_Encode, prose, &prose)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, cjk, &cjk)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace

