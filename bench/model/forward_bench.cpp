// The llama forward pass on real and synthetic checkpoints.
//
// BM_Stories260KDecode: ../shared/models/stories260K.bin (dim 64, 5 layers, vocabulary 512,
// float32) decoding 256 positions greedily from BOS, one thread: tokens/s over positions
// 0-255, as llama2.c's run.c reports its own speed for `-n 256` (the figure to compare with
// its ~5,200 tok/s at -O3 on this machine kind, ../shared/models/README.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "hedge/model/forward.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/weights.hpp"

namespace {

using namespace hedge::model;

struct stories260k {
  std::vector<float> file;
  std::unique_ptr<llama2c_checkpoint> checkpoint;
  llama_weights weights;
};

/// The checkpoint, loaded once; null when ../shared/models is absent.
const stories260k* load_stories() {
  static const std::unique_ptr<stories260k> loaded = []() -> std::unique_ptr<stories260k> {
    std::ifstream in(HEDGE_SHARED_DIR "/models/stories260K.bin", std::ios::binary);
    const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (raw.empty()) return nullptr;
    auto s = std::make_unique<stories260k>();
    s->file.resize((raw.size() + 3) / 4);
    std::memcpy(s->file.data(), raw.data(), raw.size());
    auto c = llama2c_checkpoint::parse({reinterpret_cast<const std::byte*>(s->file.data()), raw.size()});
    if (!c) return nullptr;
    s->checkpoint = std::make_unique<llama2c_checkpoint>(*c);
    s->weights = llama2c_weights(*s->checkpoint);
    return s;
  }();
  return loaded.get();
}

void BM_Stories260KDecode(benchmark::State& state) {
  const auto* s = load_stories();
  if (s == nullptr) {
    state.SkipWithError(HEDGE_SHARED_DIR "/models/stories260K.bin is missing");
    return;
  }
  auto model = llama<>::make(s->weights, {.context = 256});
  if (!model) {
    state.SkipWithError(model.error().c_str());
    return;
  }
  auto seq = *model->create_session();
  constexpr int positions = 256;
  for (auto _ : state) {
    static_cast<void>(model->rollback(seq, 0));
    std::int32_t token = 1;
    for (int pos = 0; pos < positions; ++pos) {
      const auto logits = model->decode(seq, token);
      std::size_t best = 0;
      for (std::size_t j = 1; j < logits->size(); ++j)
        if ((*logits)[j] > (*logits)[best]) best = j;
      token = static_cast<std::int32_t>(best);
    }
    benchmark::DoNotOptimize(token);
  }
  state.SetItemsProcessed(state.iterations() * positions);
  state.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * positions,
                                                   benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Stories260KDecode)->Unit(benchmark::kMillisecond);

}  // namespace
