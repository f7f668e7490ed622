// hedge_bench_model: tokenizer encode throughput with Llama 2's 32,000-piece SentencePiece
// vocabulary (../shared/models/llama2-vocab.gguf) and the byte-level BPE vocabularies of
// Llama 3 and Qwen2 (../shared/models/vocab/ggml-vocab-{llama-bpe,qwen2}.gguf), on English
// prose and on CJK, 1 KB and 1 MB inputs: the MB/s of the two sizes staying close is the
// O(n log n) merge loop at work (an O(n^2) one would lose a factor of ~1000 at 1 MB). The
// workspace and output are the caller's, as in a serving loop. Run:
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

std::unique_ptr<loaded> load(const std::string& path) {
  auto out = std::make_unique<loaded>();
  std::ifstream in(path, std::ios::binary);
  out->bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  auto gguf = hedge::model::gguf_file::parse({reinterpret_cast<const std::byte*>(out->bytes.data()), out->bytes.size()});
  if (!gguf) return out;
  auto vocab = hedge::model::read_gguf_vocabulary(*gguf);
  if (!vocab) return out;
  out->tokenizer = hedge::model::tokenizer{std::move(*vocab)};
  out->ok = true;
  return out;
}

/// The vocabularies, each loaded once: 0 Llama 2 (SPM), 1 Llama 3 (BPE), 2 Qwen2 (BPE).
const loaded& vocabulary(int which) {
  static const std::unique_ptr<loaded> all[3] = {load(HEDGE_SHARED_DIR "/models/llama2-vocab.gguf"),
                                                 load(HEDGE_SHARED_DIR "/models/vocab/ggml-vocab-llama-bpe.gguf"),
                                                 load(HEDGE_SHARED_DIR "/models/vocab/ggml-vocab-qwen2.gguf")};
  return *all[which];
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

void BM_Encode(benchmark::State& state, const std::string* unit, int which) {
  const loaded& l = vocabulary(which);
  if (!l.ok) {
    state.SkipWithError("the vocabulary (../shared/models/llama2-vocab.gguf or vocab/) is absent or unreadable");
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

BENCHMARK_CAPTURE(BM_Encode, prose, &prose, 0)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, cjk, &cjk, 0)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, llama3_prose, &prose, 1)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, llama3_cjk, &cjk, 1)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2_prose, &prose, 2)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2_cjk, &cjk, 2)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace

