// hedge's main job until the hybrid engine lands: every layer that exists,
// working together on a built-in scenario.
//
//  1. Edge tier, measured: a Llama-shaped decoder stack (Q4_0 weights, f16 KV
//     cache, GQA) runs real decode steps on hedge's kernels: RMSNorm, GEMV,
//     RoPE, decode attention, SwiGLU. The weights are synthetic (random valid
//     Q4_0 blocks in the GGUF layout: this demo measures speed, not text), the
//     work per token is that of a real checkpoint of this shape. As a loader
//     would, it repacks each matrix once into the 8-row interleaved layout
//     (kernels/repack.hpp) and drops the GGUF copy.
//  2. The router decides for a set of requests with the measured edge speed in
//     its context (privacy, health, context fit, latency SLO, cost), and
//     explains each decision.
//  3. The verifier scores edge generations token by token and escalates the
//     unsure one (simulated log-prob streams: the model layer does not exist yet).
//
// Usage: hedge_example_hybrid_demo [layers] [context]   (default 8 layers, context 1024)
#include <hedge/os/thread_pool.hpp>
#include <hedge/hedge.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace {

using hedge::vector_view;
using q4_0 = hedge::quant::q4_0;
using weight_matrix = std::vector<q4_0::block>;

// The shape of a 1B-class Llama (TinyLlama 1.1B): the edge model this demo sizes for.
constexpr std::size_t dim = 2048, heads = 32, kv_heads = 4, head_dim = dim / heads, ffn = 5632;
constexpr float rope_base = 10000.0f;

/// Deterministic random Q4_0 blocks with a small scale: every nibble pattern is valid.
weight_matrix random_q4_0(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  weight_matrix w(rows * cols / q4_0::block_elements);
  for (auto& b : w) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    b.d = hedge::f32_to_f16(0.002f + 0.001f * static_cast<float>(seed >> 61));
    for (auto& q : b.qs) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      q = static_cast<std::uint8_t>(seed >> 56);
    }
  }
  return w;
}

/// A weight matrix in the layout the decode loop reads: repacked once at load.
struct packed_matrix {
  std::vector<hedge::kernels::interleaved<q4_0>::block> groups;
  std::size_t rows = 0, k = 0;
  [[nodiscard]] hedge::kernels::interleaved_view<q4_0> view() const { return {groups.data(), rows, k}; }
};

struct layer_weights {
  packed_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
  std::vector<float> attn_norm = std::vector<float>(dim, 1.0f), ffn_norm = std::vector<float>(dim, 1.0f);
};

/// Exits with the error's message: the demo has no way to continue without the step.
template <class T>
void check(const hedge::result<T>& r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: [%s] %s\n", what, hedge::to_string(r.error().code()).data(), r.error().c_str());
    std::exit(1);
  }
}

/// Synthetic GGUF-layout weights, repacked (the GGUF copy is freed on return).
packed_matrix random_packed_q4_0(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  const weight_matrix gguf = random_q4_0(rows, cols, seed);
  packed_matrix packed{std::vector<hedge::kernels::interleaved<q4_0>::block>(
                           hedge::kernels::interleaved_blocks<q4_0>(rows, cols)),
                       rows, cols};
  auto view = hedge::kernels::repack<q4_0>({gguf.data(), rows, cols / q4_0::block_elements}, packed.groups);
  check(view, "repack");
  return packed;
}

class edge_stack {
 public:
  edge_stack(std::size_t layers, std::size_t context, hedge::exec::thread_pool& pool) : pool_(pool) {
    for (std::size_t l = 0; l < layers; ++l) {
      layer_weights w;
      w.wq = random_packed_q4_0(dim, dim, 10 * l + 1);
      w.wk = random_packed_q4_0(kv_heads * head_dim, dim, 10 * l + 2);
      w.wv = random_packed_q4_0(kv_heads * head_dim, dim, 10 * l + 3);
      w.wo = random_packed_q4_0(dim, dim, 10 * l + 4);
      w.w_gate = random_packed_q4_0(ffn, dim, 10 * l + 5);
      w.w_up = random_packed_q4_0(ffn, dim, 10 * l + 6);
      w.w_down = random_packed_q4_0(dim, ffn, 10 * l + 7);
      layers_.push_back(std::move(w));
    }
    auto cache = cache_type::make(hedge::kv::kv_dynamic_shape{layers, kv_heads, head_dim},
                                  hedge::kv::kv_config{.max_sequences = 1, .max_tokens = context, .page_tokens = 64});
    check(cache ? hedge::ok() : hedge::result<void>{cache.error()}, "KV cache");
    cache_ = std::move(*cache);
    auto seq = cache_.create();
    check(seq ? hedge::ok() : hedge::result<void>{seq.error()}, "KV sequence");
    seq_ = *seq;
    workspace_.resize(hedge::kernels::gemv_workspace_bytes<q4_0>(ffn));
    attention_workspace_.resize(hedge::attention::decode_workspace_floats(heads, head_dim, 64));
  }

  /// Weight bytes one decode step streams.
  std::size_t weight_bytes() const {
    std::size_t bytes = 0;
    for (const auto& w : layers_)
      for (const auto* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down})
        bytes += m->groups.size() * sizeof(hedge::kernels::interleaved<q4_0>::block);
    return bytes;
  }
  std::size_t kv_bytes_per_token() const { return cache_.bytes_per_token(); }

  /// One decode step at the next position: the residual stream x goes through every layer.
  void step() {
    auto pos = cache_.extend(seq_, 1);
    check(pos ? hedge::ok() : hedge::result<void>{pos.error()}, "KV extend");
    const std::uint64_t p = *pos;
    check(hedge::kernels::rope_table(hedge::kernels::rope_layout::adjacent_pairs, p, rope_base, cos_, sin_), "rope");
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer_weights& w = layers_[l];
      hedge::kernels::rmsnorm(x_, w.attn_norm, 1e-5f, xn_);
      gemv(w.wq, xn_, q_);
      gemv(w.wk, xn_, k_);
      gemv(w.wv, xn_, v_);
      hedge::kernels::rope(hedge::kernels::rope_layout::adjacent_pairs, {q_.data(), heads, head_dim}, cos_, sin_);
      hedge::kernels::rope(hedge::kernels::rope_layout::adjacent_pairs, {k_.data(), kv_heads, head_dim}, cos_, sin_);
      check(cache_.write(seq_, l, p, k_, v_), "KV write");
      auto kv = cache_.view(seq_);
      check(kv ? hedge::ok() : hedge::result<void>{kv.error()}, "KV view");
      const hedge::attention::attention_params params{.scale = 1.0f / std::sqrt(static_cast<float>(head_dim))};
      check(hedge::attention::decode_attention(*kv, l, q_, attn_, params, attention_workspace_, pool_), "attention");
      gemv(w.wo, attn_, o_);
      for (std::size_t i = 0; i < dim; ++i) x_[i] += o_[i];
      hedge::kernels::rmsnorm(x_, w.ffn_norm, 1e-5f, xn_);
      gemv(w.w_gate, xn_, gate_);
      gemv(w.w_up, xn_, up_);
      hedge::kernels::silu_mul(gate_, up_, gate_);
      gemv(w.w_down, gate_, o_);
      for (std::size_t i = 0; i < dim; ++i) x_[i] += o_[i];
    }
  }

  bool finite() const {
    for (float v : x_)
      if (!std::isfinite(v)) return false;
    return true;
  }

 private:
  using cache_type = hedge::kv::kv_cache<hedge::kv::kv_dynamic_shape, hedge::kv::kv_f16>;

  void gemv(const packed_matrix& w, const std::vector<float>& in, std::vector<float>& out) {
    check(hedge::kernels::gemv<q4_0>(w.view(), in, out, workspace_, pool_), "gemv");
  }

  hedge::exec::thread_pool& pool_;
  std::vector<layer_weights> layers_;
  cache_type cache_;
  hedge::kv::kv_seq seq_{};
  std::vector<std::byte> workspace_;
  std::vector<float> attention_workspace_;
  // Activations live in vectors: their sizes are run-time values to the kernels.
  std::vector<float> x_ = [] {
    std::vector<float> a(dim);
    for (std::size_t i = 0; i < dim; ++i) a[i] = std::sin(0.1f * static_cast<float>(i));
    return a;
  }();
  std::vector<float> xn_ = std::vector<float>(dim), q_ = std::vector<float>(dim), attn_ = std::vector<float>(dim),
                     o_ = std::vector<float>(dim);
  std::vector<float> k_ = std::vector<float>(kv_heads * head_dim), v_ = std::vector<float>(kv_heads * head_dim);
  std::vector<float> gate_ = std::vector<float>(ffn), up_ = std::vector<float>(ffn);
  std::vector<float> cos_ = std::vector<float>(head_dim), sin_ = std::vector<float>(head_dim);
};

struct simulated_generation {
  const char* label;
  float mean_logprob;  // the stream alternates around this value
  float entropy;
};

}  // namespace

int main(int argc, char** argv) {
  const std::size_t layers = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8;
  const std::size_t context = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 1024;
  if (layers == 0 || context < 64) return std::fprintf(stderr, "usage: %s [layers>0] [context>=64]\n", argv[0]), 2;

  hedge::exec::thread_pool pool;
  std::printf("hedge hybrid demo: arch %s, %zu threads\n\n", hedge::arch::best_name().data(), pool.concurrency());

  // 1. The edge tier, measured on this machine.
  edge_stack edge(layers, context, pool);
  std::printf("edge model: %zu layers of dim %zu, %zu heads (%zu KV heads), FFN %zu, Q4_0 weights %.1f MiB, "
              "f16 KV %zu bytes/token\n",
              layers, dim, heads, kv_heads, ffn, static_cast<double>(edge.weight_bytes()) / (1 << 20),
              edge.kv_bytes_per_token());
  const std::size_t warmup = 4, steps = std::min<std::size_t>(context - warmup, 48);
  for (std::size_t i = 0; i < warmup; ++i) edge.step();
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < steps; ++i) edge.step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!edge.finite()) return std::fprintf(stderr, "edge stack produced non-finite activations\n"), 1;
  const double tokens_per_s = static_cast<double>(steps) / seconds;
  std::printf("edge decode: %.1f tokens/s over %zu steps (%.2f ms/token, weights streamed at %.2f GB/s)\n\n",
              tokens_per_s, steps, 1e3 * seconds / static_cast<double>(steps),
              static_cast<double>(edge.weight_bytes()) * tokens_per_s / 1e9);

  // 2. Route requests with the measured edge speed. Prefill is measured as
  //    sequential decode steps here: a lower bound of what the GEMM path does.
  using namespace hedge::route;
  route_context ctx;
  ctx.edge_decode_tokens_per_s = ewma{tokens_per_s, 0.2, true};
  ctx.edge_prefill_tokens_per_s = ewma{tokens_per_s, 0.2, true};
  ctx.edge_context_tokens = static_cast<std::uint32_t>(context);
  ctx.edge_kv_free_tokens = static_cast<std::uint32_t>(context - warmup - steps);
  router<privacy_policy, health_policy, context_fit_policy, latency_policy, cost_policy> route{
      privacy_policy{}, health_policy{}, context_fit_policy{}, latency_policy{}, cost_policy{}};

  struct scenario {
    const char* label;
    route_request request;
    bool cloud_down;
  };
  const scenario scenarios[] = {
      {"card number in the prompt", {.prompt = "My card 4111 1111 1111 1111 was charged twice, write a complaint."}, false},
      {"regulated data class", {.prompt = "Summarise this discharge letter.", .classes = data_class::regulated}, false},
      {"short question, no SLO", {.prompt = "What is the capital of France?", .expected_output_tokens = 16}, false},
      {"tight time-to-first-token",
       {.prompt = "Explain the difference between TCP and UDP in depth.", .ttft_slo_ms = 5.0,
        .expected_output_tokens = 64, .prompt_tokens = 600},
       false},
      {"long document", {.prompt = "Summarise the attached contract.", .expected_output_tokens = 512,
                         .prompt_tokens = 6000}, false},
      {"long document, cloud down", {.prompt = "Summarise the attached contract.", .expected_output_tokens = 512,
                                     .prompt_tokens = 6000}, true},
  };
  std::array<char, 512> why{};
  std::size_t edge_requests = 0;
  for (const auto& s : scenarios) {
    route_context c = ctx;
    if (s.cloud_down) c.cloud_circuit = circuit::open;
    const auto d = route.decide(s.request, c);
    explain(d, why);
    std::printf("%-28s -> %-6s %s\n", s.label, to_string(d.chosen).data(), why.data());
    edge_requests += d.chosen == tier::edge;
  }

  // 3. Verify edge generations token by token. The deferral weights here are
  //    illustrative; fit real ones with hedge::route::train_logistic on
  //    labelled generations and calibrate the threshold (docs/routing.md).
  hedge::verify::deferral_rule rule;
  rule.bias = -2.0f;
  rule.weights = {-1.5f, 0.0f, -2.0f, 0.5f, 0.0f};
  rule.threshold = 0.5;
  hedge::verify::logistic_verifier verifier{rule};
  const simulated_generation generations[] = {{"confident answer", -0.15f, 0.4f}, {"unsure answer", -2.6f, 3.1f}};
  std::printf("\n%zu of %zu requests routed to the edge; verifying two edge generations:\n", edge_requests,
              std::size(scenarios));
  for (const auto& g : generations) {
    verifier.begin("");
    hedge::verify::verify_verdict v{};
    std::size_t t = 0;
    for (; t < 64 && v.action == hedge::verify::verify_action::keep_going; ++t)
      v = verifier.observe({static_cast<std::int32_t>(t), g.mean_logprob * (t % 2 ? 0.5f : 1.5f), g.entropy});
    if (v.action == hedge::verify::verify_action::keep_going) v = verifier.finish();
    std::printf("  %-16s after %2zu tokens: %-8s (%s, confidence %.2f)\n", g.label, t,
                v.action == hedge::verify::verify_action::accept ? "accept" : "escalate",
                hedge::verify::to_string(v.why).data(), v.confidence);
  }
  return 0;
}
