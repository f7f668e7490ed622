// The llama forward pass on real and synthetic checkpoints.
//
// BM_Stories260KDecode: ../shared/models/stories260K.bin (dim 64, 5 layers, vocabulary 512,
// float32) decoding 256 positions greedily from BOS, one thread: tokens/s over positions
// 0-255, as llama2.c's run.c reports its own speed for `-n 256` (the figure to compare with
// its ~5,200 tok/s at -O3 on this machine kind, ../shared/models/README.md).
//
// llama/...: the synthetic GGUFs of model/synthetic_model.hpp (TinyLlama-1.1B in Q4_0 and
// Q8_0; Llama-3.2-1B, Qwen3-1.7B and Gemma-3-1B in Q4_K_M and Q8_0: written on first use,
// then reused), loaded as hedge-generate loads a model (the file mapped, the repacked
// weights in a huge-page arena, the file's pages of those weights released), at 1 thread
// and at every hardware thread:
//   llama/decode/<arch>/<model>_<format>/cold/threads:<n>
//       greedy decode of positions 0-63 from id 1 (llama.cpp's peer starts from the
//       file's BOS: the same work), tokens/s. bytes_per_token counts what one token reads
//       from memory: every weight matrix but the embedding (one row of it; a classifier
//       tied to it is read whole), the norms, and the KV cache up to its position, written
//       row included, averaged over the 64 positions. bytes_per_second and bw_fraction (bytes/s over the read
//       bandwidth measured at the same thread count in this run, i.e. the bandwidth-bound
//       time per token over the achieved one) follow bench/common/report.hpp; bound_ms is
//       that bound time per token. rss_* are this process's /proc/self/status figures after
//       decoding (VmRSS, VmHWM, RssFile: mapped weights, RssAnon: heap, which includes the
//       bench's bandwidth buffer), file_bytes the GGUF's size.
//   llama/prefill<P>/<arch>/<model>_<format>/cold/threads:<n>
//       prefill of P = 128 or 512 tokens (BOS, then fixed pseudo-random ids) into an empty
//       session, tokens/s.
//   Their cpu_time is the process's (every thread's) CPU time: beside the wall clock, it
//   says how much of the run the machine's other work took.
// scripts/compare-llamacpp.sh runs these against llama.cpp on the same file. Run:
//   HEDGE_BENCH_MODELS=build/models build/<dir>/bench/hedge_bench_model --benchmark_filter=llama/
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/pool.hpp"
#include "common/report.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/os/mapped_file.hpp"
#include "model/synthetic_model.hpp"

namespace {

using namespace hedge::model;
namespace hb = hedge::bench;
namespace q = hedge::quant;

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
    auto weights = llama2c_weights(*s->checkpoint);
    if (!weights) return nullptr;
    s->weights = std::move(*weights);
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


/// A synthetic model mapped from its file, with its weights' views.
struct synthetic {
  std::string path;
  hedge::os::mapped_file file;
  llama_weights weights;
};

/// `model` in `format`, written first if absent; one model is mapped at a time, so a
/// file's RSS figures do not include another's pages. Null, with `why`, on failure.
const synthetic* load_synthetic(const std::string& model, const std::string& format, std::string& why) {
  static std::unique_ptr<synthetic> current;
  static std::string current_name;
  const std::string name = model + "-" + format;
  if (current && current_name == name) return current.get();
  current.reset();
  double seconds = 0.0;
  auto path = hb::synthetic_model_gguf(model, format, &seconds);
  if (!path) {
    why = "cannot write the synthetic model: " + std::string(path.error().c_str());
    return nullptr;
  }
  auto m = std::make_unique<synthetic>();
  m->path = *path;
  auto file = hedge::os::mapped_file::open(m->path);
  if (!file) {
    why = file.error().c_str();
    return nullptr;
  }
  m->file = std::move(*file);
  if (seconds > 0.0)
    std::fprintf(stderr, "hedge bench: wrote %s (%.0f MB) in %.1f s\n", m->path.c_str(), double(m->file.size()) * 1e-6,
                 seconds);
  auto gguf = gguf_file::parse(m->file.bytes());
  if (!gguf) {
    why = m->path + ": " + gguf.error().c_str();
    return nullptr;
  }
  auto weights = gguf_weights(*gguf);
  if (!weights) {
    why = m->path + ": " + weights.error().c_str();
    return nullptr;
  }
  m->weights = std::move(*weights);
  current = std::move(m);
  current_name = name;
  return current.get();
}

/// Bytes of `m` as stored (all its rows).
std::size_t matrix_bytes(const weight_matrix& m) {
  std::size_t bytes = 0;
  static_cast<void>(visit_format<all_weight_formats>(m.type, [&](auto format) -> hedge::result<void> {
    bytes = m.rows * q::row_bytes<decltype(format)>(m.cols);
    return hedge::ok();
  }));
  return bytes;
}

/// Bytes a decode at positions 0 .. positions-1 reads per token on average: the weights
/// (one embedding row, the classifier), the norms, and the f32 KV cache (every position up to the current
/// one, K and V, each layer).
double decode_bytes_per_token(const llama_weights& w, std::size_t positions) {
  const auto& c = w.config;
  // One embedding row, and the whole classifier: a tied one is the embedding read again.
  double weights = double(matrix_bytes(w.token_embedding)) / double(c.vocab_size) + double(matrix_bytes(w.output));
  for (const auto& y : w.layers)
    for (const auto* m : {&y.wq, &y.wk, &y.wv, &y.wo, &y.w_gate, &y.w_up, &y.w_down}) weights += double(matrix_bytes(*m));
  weights += double((2 * c.n_layers + 1) * c.dim * sizeof(float));
  const double kv_per_position = double(c.n_layers) * 2.0 * double(c.kv_dim()) * sizeof(float);
  const double mean_positions_read = double(positions + 1) / 2.0;  // position p reads p + 1 rows
  return weights + kv_per_position * mean_positions_read;
}

/// This process's memory figure `key` from /proc/self/status, in bytes (0 when absent).
double status_bytes(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(status, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return std::stod(line.substr(n + 1)) * 1024.0;
  return 0.0;
}

/// The model of `m` with `options`, as os::make_llama makes it: its packed weights in
/// `arena` (on huge pages), and the file pages of the weights it packed released. Every
/// projection is fused and every matrix repacked, Q8_0 too (os/model_file.hpp says why).
hedge::result<llama<>> make_model(const synthetic& m, llama_options options, hedge::os::mapped_memory& arena) {
  options.fuse = llama_fusion::all;
  options.repack = llama_repack::all;
  const auto bytes = llama_weight_arena_bytes(m.weights, options);
  if (!bytes) return bytes.error();
  auto memory = hedge::os::mapped_memory::allocate(*bytes);
  if (!memory) return memory.error();
  arena = std::move(*memory);
  options.weight_arena = arena.bytes();
  return llama<>::make(m.weights, options, [&](std::span<const std::byte> range) { m.file.release(range); });
}

constexpr std::size_t decode_positions = 64;
constexpr std::size_t synthetic_context = 1024;  // room for the 512-token prefill

/// A synthetic model made for one benchmark: its file, its packed weights, the model and
/// `options.max_sessions` sessions.
struct bench_model {
  const synthetic* file = nullptr;
  hedge::os::mapped_memory arena;
  std::optional<llama<>> model;
  std::vector<hedge::kv::kv_seq> sessions;
};

/// What every synthetic-model benchmark starts with: the model of `name` and `format` with
/// `options` (make_model), its sessions, then `warm(model, sessions)`, one step that maps
/// the weights' pages in before the clock runs. False, after state.SkipWithError with the
/// reason, when any of it fails.
template <class Warm>
bool start(benchmark::State& state, const std::string& name, const std::string& format, llama_options options,
           bench_model& b, Warm warm) {
  std::string why;
  b.file = load_synthetic(name, format, why);
  if (b.file == nullptr) return state.SkipWithError(why.c_str()), false;
  auto model = make_model(*b.file, options, b.arena);
  if (!model) return state.SkipWithError(model.error().c_str()), false;
  b.model.emplace(std::move(*model));
  for (std::size_t i = 0; i < options.max_sessions; ++i) {
    auto session = b.model->create_session();
    if (!session) return state.SkipWithError(session.error().c_str()), false;
    b.sessions.push_back(*session);
  }
  if (auto warmed = warm(*b.model, b.sessions); !warmed) return state.SkipWithError(warmed.error().c_str()), false;
  return true;
}

/// start() for one session of synthetic_context positions, warmed by decoding one token.
bool start_session(benchmark::State& state, const std::string& name, const std::string& format, std::size_t threads,
                   bench_model& b) {
  auto& executor = hb::pool(threads);
  return start(state, name, format, {.context = synthetic_context, .max_threads = threads}, b,
               [&](llama<>& model, const auto& sessions) { return model.decode(sessions[0], 1, executor); });
}

void BM_SyntheticDecode(benchmark::State& state, const std::string& name, const std::string& format, std::size_t threads) {
  bench_model b;
  if (!start_session(state, name, format, threads, b)) return;
  auto& executor = hb::pool(threads);
  const auto seq = b.sessions[0];
  const hb::loop_clock clock;
  for (auto _ : state) {
    static_cast<void>(b.model->rollback(seq, 0));
    std::int32_t token = 1;
    for (std::size_t pos = 0; pos < decode_positions; ++pos) {
      const auto logits = b.model->decode(seq, token, executor);
      if (!logits) {
        state.SkipWithError(logits.error().c_str());
        return;
      }
      std::size_t best = 0;
      for (std::size_t j = 1; j < logits->size(); ++j)
        if ((*logits)[j] > (*logits)[best]) best = j;
      token = static_cast<std::int32_t>(best);
    }
    benchmark::DoNotOptimize(token);
  }
  const double bytes_per_token = decode_bytes_per_token(b.file->weights, decode_positions);
  const double tokens = double(state.iterations()) * double(decode_positions);
  state.SetItemsProcessed(static_cast<std::int64_t>(tokens));
  state.counters["tok_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["bytes_per_token"] = bytes_per_token;
  hb::set_bandwidth_counters(state, bytes_per_token * double(decode_positions), threads, hb::residency::cold, clock);
  state.counters["bound_ms"] = bytes_per_token / hb::measured_bandwidth(threads) * 1e3;
  state.counters["rss_bytes"] = status_bytes("VmRSS");
  state.counters["rss_peak_bytes"] = status_bytes("VmHWM");
  state.counters["rss_file_bytes"] = status_bytes("RssFile");
  state.counters["rss_anon_bytes"] = status_bytes("RssAnon");
  state.counters["file_bytes"] = double(b.file->file.size());
}

void BM_SyntheticPrefill(benchmark::State& state, const std::string& name, const std::string& format, std::size_t threads, std::size_t length) {
  bench_model b;
  if (!start_session(state, name, format, threads, b)) return;
  auto& executor = hb::pool(threads);
  const auto seq = b.sessions[0];
  // BOS, then ids from a fixed LCG over the non-special pieces (3 .. vocab-1).
  std::vector<std::int32_t> tokens(length, 1);
  std::uint32_t seed = 12345;
  for (std::size_t i = 1; i < length; ++i) {
    seed = seed * 1664525u + 1013904223u;
    tokens[i] = static_cast<std::int32_t>(3 + (seed >> 8) % (b.file->weights.config.vocab_size - 3));
  }
  for (auto _ : state) {
    static_cast<void>(b.model->rollback(seq, 0));
    const auto logits = b.model->prefill(seq, tokens, executor);
    if (!logits) {
      state.SkipWithError(logits.error().c_str());
      return;
    }
    benchmark::DoNotOptimize(logits->data());
  }
  const double n = double(state.iterations()) * double(length);
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["tok_per_s"] = benchmark::Counter(n, benchmark::Counter::kIsRate);
}

/// A decode step of `batch` sessions at once (llama::decode_batch), each decoding greedily
/// from BOS over positions 0 .. decode_positions-1: tok_per_s counts every session's tokens,
/// the aggregate that continuous batching serves. The weights are repacked (llama_repack::all),
/// as a batching server runs them: every GEMM row is then its GEMV, so a session's tokens are
/// the same alone and batched.
void BM_SyntheticBatchedDecode(benchmark::State& state, const std::string& name, const std::string& format,
                               std::size_t threads, std::size_t batch) {
  auto& executor = hb::pool(threads);
  std::vector<std::int32_t> tokens(batch, 1);
  const auto one_step = [&](llama<>& model, const auto& sessions) {
    return model.decode_batch(sessions, tokens, executor);
  };
  bench_model b;
  if (!start(state, name, format,
             {.max_sessions = batch, .context = decode_positions, .max_threads = threads, .max_batch = batch,
              .repack = llama_repack::all},
             b, one_step))
    return;
  const auto& sessions = b.sessions;
  for (auto _ : state) {
    for (const auto s : sessions) static_cast<void>(b.model->rollback(s, 0));
    std::fill(tokens.begin(), tokens.end(), 1);
    for (std::size_t pos = 0; pos < decode_positions; ++pos) {
      const auto rows = b.model->decode_batch(sessions, tokens, executor);
      if (!rows) {
        state.SkipWithError(rows.error().c_str());
        return;
      }
      for (std::size_t i = 0; i < batch; ++i) {
        const auto logits = rows->row(i);
        tokens[i] = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      }
    }
    benchmark::DoNotOptimize(tokens.data());
  }
  const double n = double(state.iterations()) * double(decode_positions * batch);
  state.SetItemsProcessed(static_cast<std::int64_t>(n));
  state.counters["tok_per_s"] = benchmark::Counter(n, benchmark::Counter::kIsRate);
  state.counters["sessions"] = double(batch);
}

void register_synthetic(const std::string& model, const std::string& format) {
  const std::string shape = model + "_" + format;
  const std::string arch(hedge::arch::best_name());
  for (std::size_t threads : hb::thread_counts()) {
    hb::register_benchmark(
        hb::benchmark_name("llama/decode", arch, shape, hb::residency::cold, threads),
        [=](benchmark::State& state) { BM_SyntheticDecode(state, model, format, threads); })
        ->MeasureProcessCPUTime()
        ->Unit(benchmark::kMillisecond);
    for (std::size_t length : {std::size_t{128}, std::size_t{512}}) {
      hb::register_benchmark(
          hb::benchmark_name("llama/prefill" + std::to_string(length), arch, shape, hb::residency::cold, threads),
          [=](benchmark::State& state) { BM_SyntheticPrefill(state, model, format, threads, length); })
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
    for (std::size_t batch : {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
      hb::register_benchmark(
          hb::benchmark_name("llama/batch_decode" + std::to_string(batch), arch, shape, hb::residency::cold, threads),
          [=](benchmark::State& state) { BM_SyntheticBatchedDecode(state, model, format, threads, batch); })
          ->MeasureProcessCPUTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

const bool forward_registered = [] {
  for (const auto& m : hb::synthetic_models) {
    hb::begin_family("llama/" + std::string(m.name));
    for (const auto format : m.formats) register_synthetic(std::string(m.name), std::string(format));
  }
  return true;
}();

}  // namespace
