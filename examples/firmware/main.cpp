// A Cortex-M7 firmware program running hedge's own kernels, KV cache, decode attention
// and router, with static storage only (no heap, no exceptions, no RTTI, no SIMD):
//
//   1. RMSNorm of an input vector (kernels::rmsnorm);
//   2. GEMV of the normalized vector with Q8_0 and Q4_0 weights (kernels::gemv),
//      quantized at start-up by the reference quantizers into static block arrays;
//   3. a paged f16 KV cache in a static_storage, filled for 12 positions, and one
//      decode-attention step with grouped-query heads;
//   4. a router decision, with the privacy policy, on a prompt holding a card number;
//   5. a whole model (built with HEDGE_FIRMWARE_GGUF, stories260K): its GGUF, Q8_0, read
//      in place from flash by hedge's GGUF reader and weight loader, the prompt encoded
//      by its SentencePiece tokenizer, prefill and greedy decoding as llama2.c's run.c
//      does, every buffer in static RAM. It prints run.c's text between two marker lines
//      (check.cmake compares it with run.c's output byte for byte) and the speed.
//
// Steps 1 to 4 are checked against a reference this program computes itself in double
// precision, and printed; the last line is "hedge firmware: PASS" (exit code 0) or
// "hedge firmware: FAIL" (exit code 1). examples/firmware/check.cmake runs the image
// under QEMU (board mps2-an500) and checks that line, and checks with nm that the image
// links no heap or exception runtime. docs/firmware.md states the image's sizes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "console.hpp"
#include "hedge/attention/decode.hpp"
#include "hedge/core/half.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/norm.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/route/router.hpp"

#if HEDGE_FIRMWARE_MODEL
#include "hedge/core/storage.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/model/weights.hpp"
#include "model_flash.hpp"
#endif

extern "C" std::uint32_t __stack_bottom[], __stack_top[];  // link.ld

namespace {

using firmware::line;

bool all_passed = true;

/// Prints one check's outcome; a failed check makes the program fail.
void report(std::string_view what, bool passed) {
  all_passed = all_passed && passed;
  (line{} << (passed ? "ok   " : "FAIL ") << what).end();
}

/// A numeric check: passes when error <= bound (so a NaN error fails).
void report(std::string_view what, double error, double bound) {
  const bool passed = error <= bound;
  all_passed = all_passed && passed;
  (line{} << (passed ? "ok   " : "FAIL ") << what << ": error " << error << " (bound " << bound << ")").end();
}

/// The larger error, NaN sticking (std::fmax would drop a NaN and hide a broken result).
double worse(double worst, double error) { return worst != worst || error <= worst ? worst : error; }

void report_error(std::string_view what, const hedge::error& e) {
  all_passed = false;
  (line{} << "FAIL " << what << ": " << e.message()).end();
}

/// Deterministic test values in [-1, 1) (a 32-bit integer hash, so the weights need no
/// float table in flash: the reference recomputes them).
float test_value(std::uint32_t seed, std::uint32_t i) {
  std::uint32_t h = seed * 0x9E3779B9u ^ (i + 0x7F4A7C15u) * 0x85EBCA6Bu;
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  return static_cast<float>(h >> 8) / static_cast<float>(1u << 23) - 1.0f;
}

// Each step is a function of its own, not inlined into main(): the stack then holds the
// deepest step's frames, not all of them at once (main() prints the stack it used).

// ---- 1. RMSNorm -----------------------------------------------------------------------

constexpr std::size_t k = 256;  // the model width: RMSNorm length and GEMV row length
constexpr float rms_eps = 1e-5f;

float input[k];
float norm_weight[k];
float normalized[k];

[[gnu::noinline]] void run_rmsnorm() {
  for (std::uint32_t i = 0; i < k; ++i) {
    input[i] = 3.0f * test_value(1, i);
    norm_weight[i] = 1.0f + 0.25f * test_value(2, i);
  }
  hedge::kernels::rmsnorm({input, k}, {norm_weight, k}, rms_eps, {normalized, k});

  double sum_squares = 0.0;
  for (float v : input) sum_squares += double(v) * double(v);
  const double scale = 1.0 / std::sqrt(sum_squares / k + double(rms_eps));
  double worst = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    const double expected = double(norm_weight[i]) * scale * double(input[i]);
    worst = worse(worst, std::fabs(double(normalized[i]) - expected) / (std::fabs(expected) + 1e-30));
  }
  report("rmsnorm, 256 values, vs double reference (relative)", worst, 1e-6);
}

// ---- 2. GEMV, Q8_0 and Q4_0 weights ---------------------------------------------------

constexpr std::size_t rows = 32;

float weight(std::size_t row, std::size_t col) { return test_value(3, static_cast<std::uint32_t>(row * k + col)); }

template <class W>
struct gemv_case {
  static constexpr std::size_t blocks_per_row = k / W::block_elements;
  static inline typename W::block weights[rows * blocks_per_row]{};  // {}: zeroed at compile time, no start-up code
  static inline hedge::kernels::gemv_workspace<W, k> workspace;
  static inline float out[rows];
};

/// W's weights with its reference quantizer, the GEMV, then two references: the
/// dequantized weights times the Q8_0-rounded activation (what the kernel computes; only
/// summation order differs) and the float weights times the float input (what the
/// quantization costs).
template <class W>
[[gnu::noinline]] void run_gemv(std::string_view name, double quantization_bound) {
  using c = gemv_case<W>;
  float row_values[k];
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < k; ++i) row_values[i] = weight(r, i);
    if (auto q = hedge::quant::quantize<W>({row_values, k}, {c::weights + r * c::blocks_per_row, c::blocks_per_row});
        !q) {
      return report_error(name, q.error());
    }
  }
  const hedge::matrix_view<const typename W::block> w{c::weights, rows, c::blocks_per_row};
  if (auto y = hedge::kernels::gemv<W>(w, {normalized, k}, {c::out, rows}, c::workspace.span()); !y)
    return report_error(name, y.error());

  hedge::quant::q8_0::block x_blocks[k / 32];
  float x_rounded[k], w_rounded[k];
  if (auto q = hedge::quant::quantize<hedge::quant::q8_0>({normalized, k}, {x_blocks, k / 32}); !q)
    return report_error(name, q.error());
  (void)hedge::quant::dequantize<hedge::quant::q8_0>({x_blocks, k / 32}, {x_rounded, k});
  double kernel_error = 0.0, quantization_error = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    (void)hedge::quant::dequantize<W>({c::weights + r * c::blocks_per_row, c::blocks_per_row}, {w_rounded, k});
    double same_inputs = 0.0, exact = 0.0, magnitude = 0.0;
    for (std::size_t i = 0; i < k; ++i) {
      same_inputs += double(w_rounded[i]) * double(x_rounded[i]);
      exact += double(weight(r, i)) * double(normalized[i]);
      magnitude += std::fabs(double(weight(r, i)) * double(normalized[i]));
    }
    kernel_error = worse(kernel_error, std::fabs(double(c::out[r]) - same_inputs) / magnitude);
    quantization_error = worse(quantization_error, std::fabs(double(c::out[r]) - exact) / magnitude);
  }
  (line{} << "     gemv " << name << ": " << rows << " x " << k << ", y[0] = " << double(c::out[0])).end();
  report("  vs dequantized weights x Q8_0 activation (relative to sum |w x|)", kernel_error, 1e-5);
  report("  vs float weights x float input (quantization error)", quantization_error, quantization_bound);
}

// ---- 3. KV cache and one decode-attention step ----------------------------------------

using kv_shape = hedge::kv::kv_static_shape<1, 2, 32>;  // 1 layer, 2 KV heads of 32
using kv_element = hedge::kv::kv_f16;
constexpr std::size_t q_heads = 4;  // grouped-query attention: 2 query heads per KV head
constexpr std::size_t positions = 12;
constexpr hedge::kv::kv_config kv_config{.max_sequences = 1, .max_tokens = 16, .page_tokens = 8};
constexpr std::size_t kv_values = kv_shape::kv_heads() * kv_shape::head_dim();

hedge::kv::kv_cache<kv_shape, kv_element,
                    hedge::static_storage<std::byte, hedge::kv::kv_storage_bytes<kv_element>(kv_shape{}, kv_config)>>
    kv;
float query[q_heads * kv_shape::head_dim()];
float attended[q_heads * kv_shape::head_dim()];
float attention_workspace[hedge::attention::decode_workspace_floats(q_heads, kv_shape::head_dim(), 1)];

float key_value(std::size_t pos, std::size_t i) {
  return test_value(4, static_cast<std::uint32_t>(pos * kv_values + i));
}
float value_value(std::size_t pos, std::size_t i) {
  return test_value(5, static_cast<std::uint32_t>(pos * kv_values + i));
}
double f16_rounded(float v) { return double(hedge::f16_to_f32(hedge::f32_to_f16(v))); }

[[gnu::noinline]] void run_attention() {
  if (auto r = kv.init(kv_shape{}, kv_config); !r) return report_error("kv cache init", r.error());
  const auto seq = kv.create();
  if (!seq) return report_error("kv cache create", seq.error());
  if (auto first = kv.extend(*seq, positions); !first) return report_error("kv cache extend", first.error());
  float keys[kv_values], values[kv_values];
  for (std::size_t pos = 0; pos < positions; ++pos) {
    for (std::size_t i = 0; i < kv_values; ++i) keys[i] = key_value(pos, i), values[i] = value_value(pos, i);
    if (auto w = kv.write(*seq, 0, pos, {keys, kv_values}, {values, kv_values}); !w)
      return report_error("kv cache write", w.error());
  }
  for (std::size_t i = 0; i < q_heads * kv_shape::head_dim(); ++i) query[i] = 2.0f * test_value(6, i);
  const auto view = kv.view(*seq);
  if (!view) return report_error("kv cache view", view.error());
  const float scale = 1.0f / std::sqrt(float(kv_shape::head_dim()));
  const hedge::attention::attention_params params{.scale = scale};
  if (auto a = hedge::attention::decode_attention(*view, 0, query, attended, params, attention_workspace); !a)
    return report_error("decode attention", a.error());

  constexpr std::size_t dim = kv_shape::head_dim(), group = q_heads / kv_shape::kv_heads();
  double worst = 0.0;
  for (std::size_t h = 0; h < q_heads; ++h) {
    const std::size_t kv_head = h / group;
    double logits[positions], top = -1e300, total = 0.0;
    for (std::size_t pos = 0; pos < positions; ++pos) {
      double dot = 0.0;
      for (std::size_t i = 0; i < dim; ++i)
        dot += double(query[h * dim + i]) * f16_rounded(key_value(pos, kv_head * dim + i));
      logits[pos] = dot * double(scale);
      top = logits[pos] > top ? logits[pos] : top;
    }
    for (double& l : logits) total += (l = std::exp(l - top));
    for (std::size_t i = 0; i < dim; ++i) {
      double expected = 0.0;
      for (std::size_t pos = 0; pos < positions; ++pos)
        expected += logits[pos] / total * f16_rounded(value_value(pos, kv_head * dim + i));
      worst = worse(worst, std::fabs(double(attended[h * dim + i]) - expected));
    }
  }
  (line{} << "     kv cache: f16, " << kv.total_pages() << " pages of " << kv.layout().page_tokens << " tokens, "
          << kv.layout().total_bytes << " bytes static; decode attention over " << positions << " positions, "
          << q_heads << " query heads")
      .end();
  report("  decode attention vs double reference (|v| <= 1)", worst, 1e-5);
}

// ---- 4. Router with the privacy policy ------------------------------------------------

/// The decision's tier, deciding policy, reason and detail, e.g. "edge by privacy
/// (pii_detected: credit_card)". Not route::explain(): it formats scores with
/// std::to_chars(double), whose tables would dominate this image's flash.
template <std::size_t N>
void print_decision(std::string_view prompt, const hedge::route::decision<N>& d) {
  line out;
  out << "     " << prompt << ": " << to_string(d.chosen);
  if (d.deciding != d.no_policy) out << " by " << d.names[d.deciding];
  out << " (" << to_string(d.why);
  if (d.deciding != d.no_policy && !d.verdicts[d.deciding].detail.empty()) out << ": " << d.verdicts[d.deciding].detail;
  out << "), privacy verdict " << to_string(d.verdicts[0].kind);
  out.end();
}

[[gnu::noinline]] void run_router() {
  using namespace hedge::route;
  const router<privacy_policy, health_policy, context_fit_policy> r{privacy_policy{}, health_policy{},
                                                                    context_fit_policy{}};
  const route_context context;
  const auto card = r.decide({.prompt = "my card is 4111 1111 1111 1111, why was it declined?"}, context);
  const auto clean = r.decide({.prompt = "why was my payment declined?"}, context);
  print_decision("card prompt ", card);
  print_decision("clean prompt", clean);
  const bool private_edge = card.chosen == tier::edge && card.deciding == 0 &&
                            card.verdicts[0].kind == verdict_kind::edge_only && card.why == reason::pii_detected &&
                            card.verdicts[0].detail == "credit_card";
  const bool clean_abstains = clean.verdicts[0].kind == verdict_kind::abstain;
  report("router: card number -> edge only, by privacy (pii_detected: credit_card)", private_edge);
  report("router: same prompt without it -> privacy abstains", clean_abstains);
}

#if HEDGE_FIRMWARE_MODEL
// ---- 5. The whole model: stories260K, Q8_0 in flash -----------------------------------

namespace model = hedge::model;

/// The formats hedge-quantize's Q8_0 mix writes: Q8_0, F16 where a row is not whole
/// 32-blocks (stories260K's ffn_down: 172 columns), F32 norms. No other kernel is linked.
using model_formats = model::weight_formats<hedge::quant::f32, hedge::quant::f16, hedge::quant::q8_0>;
/// An f32 KV cache, as run.c's, in the model's memory block (buffer_storage): no heap.
using model_type = model::llama<model_formats, hedge::kv::kv_f32, hedge::buffer_storage<std::byte>>;

/// run.c -n 61 -i "Once upon a time": 61 positions, the prompt's included; its output is the
/// first line of ../shared/models/reference/llama2c_prompt_onceuponatime_n256.txt.
constexpr std::string_view model_prompt = "Once upon a time";
constexpr std::size_t model_steps = 61;
/// No prefill buffers: the prompt runs token by token, as run.c reads it, and the scratch
/// holds one token's activations (docs/firmware.md: what the prefill rows would cost).
constexpr model::llama_options model_options{.context = model_steps, .max_prefill = 0};

// Static RAM for everything the model keeps, sized for stories260K (5 layers, 512 tokens);
// the library checks each size at run time (gguf_weights, read_gguf_vocabulary, make_in)
// and the program prints what it asked for (llama::memory_bytes).
constexpr std::size_t model_max_layers = 8;
constexpr std::size_t model_memory_bytes = 84 * 1024;
constexpr std::size_t vocabulary_memory_bytes = model::vocabulary::memory_bytes(512);
constexpr std::size_t max_prompt_ids = 64;
constexpr std::size_t max_text_bytes = 1024;

model::llama_layer model_layers[model_max_layers];
alignas(64) std::byte model_memory[model_memory_bytes];
alignas(64) std::byte vocabulary_memory[vocabulary_memory_bytes];
alignas(64) std::byte encode_workspace[model::tokenizer::workspace_bytes(model_prompt.size())];
model::token_id prompt_ids[max_prompt_ids];
char text[max_text_bytes + 2];  // and run.c's closing newline, and the NUL
std::size_t text_bytes = 0;

/// Appends token id's piece to the text as run.c prints it (the first piece after BOS
/// without its leading space).
hedge::result<void> print_piece(const model::tokenizer& tok, model::token_id id, bool after_bos) {
  return tok.visit_piece(
      id,
      [](std::string_view piece) {
        for (char c : piece)
          if (text_bytes < max_text_bytes) text[text_bytes++] = c;
      },
      {.strip_leading_space = after_bos});
}

[[gnu::noinline]] void run_model() {
  const std::span<const std::byte> gguf = firmware::model_gguf();
  auto file = model::gguf_file::parse(gguf);
  if (!file) return report_error("model: GGUF in flash", file.error());
  auto weights = model::gguf_weights(*file, model_layers);
  if (!weights) return report_error("model: weights", weights.error());
  const auto vocabulary_bytes = model::gguf_vocabulary_bytes(*file);
  if (!vocabulary_bytes) return report_error("model: vocabulary size", vocabulary_bytes.error());
  auto vocabulary = model::read_gguf_vocabulary(*file, vocabulary_memory);
  if (!vocabulary) return report_error("model: vocabulary", vocabulary.error());
  const model::tokenizer tok{std::move(*vocabulary)};
  const auto memory_bytes = model_type::memory_bytes(*weights, model_options);
  if (!memory_bytes) return report_error("model: memory size", memory_bytes.error());
  auto llama = model_type::make_in(*weights, model_options, model_memory);
  if (!llama) return report_error("model: make_in", llama.error());
  const auto& c = llama->config();
  (line{} << "     model: GGUF " << gguf.size() << " bytes in flash, " << std::size_t{c.n_layers} << " layers, dim "
          << std::size_t{c.dim} << ", vocab " << std::size_t{c.vocab_size} << "; static RAM: model " << *memory_bytes
          << " of " << model_memory_bytes << " bytes, vocabulary " << *vocabulary_bytes << " of "
          << vocabulary_memory_bytes << ", layer table " << std::size_t{c.n_layers} << " of " << model_max_layers)
      .end();

  const auto n = tok.encode(model_prompt, prompt_ids, encode_workspace);
  if (!n) return report_error("model: encode", n.error());
  const std::span<const model::token_id> prompt(prompt_ids, *n);
  line ids;
  ids << "     prompt \"" << model_prompt << "\": ids";
  for (const model::token_id id : prompt) ids << " " << static_cast<std::size_t>(id);
  ids.end();
  constexpr model::token_id run_c_prompt[] = {1, 403, 407, 261, 378};  // run.c's ids for the prompt
  bool same_prompt = prompt.size() == std::size(run_c_prompt);
  for (std::size_t i = 0; same_prompt && i < prompt.size(); ++i) same_prompt = prompt[i] == run_c_prompt[i];
  report("model: prompt encoded on the device = run.c's ids (1 403 407 261 378)", same_prompt);
  const auto session = llama->create_session();
  if (!session) return report_error("model: session", session.error());

  // run.c's loop: every position prints its next token, the prompt's included; generation
  // stops at BOS or after model_steps positions.
  for (std::size_t i = 1; i < prompt.size(); ++i)
    if (auto p = print_piece(tok, prompt[i], i == 1); !p) return report_error("model: piece", p.error());
  firmware::systick::start();
  double seconds = firmware::host_seconds();
  std::uint32_t tick = firmware::systick::now();
  auto logits = llama->prefill(*session, prompt);
  if (!logits) return report_error("model: prefill", logits.error());
  const std::uint32_t prefill_ticks = firmware::systick::between(tick, firmware::systick::now());
  const double prefill_seconds = firmware::host_seconds() - seconds;
  const model::token_id bos = tok.vocab().settings().bos;
  std::size_t decoded = 0;
  std::uint64_t decode_ticks = 0;
  double decode_seconds = 0.0;
  model::token_id next = model::argmax(*logits);  // the prompt's last position's next token
  for (std::size_t pos = prompt.size(); next != bos; ++pos) {
    if (auto p = print_piece(tok, next, false); !p) return report_error("model: piece", p.error());
    if (pos == model_steps) break;
    seconds = firmware::host_seconds();
    tick = firmware::systick::now();
    logits = llama->decode(*session, next);
    decode_ticks += firmware::systick::between(tick, firmware::systick::now());
    decode_seconds += firmware::host_seconds() - seconds;
    ++decoded;
    if (!logits) return report_error("model: decode", logits.error());
    next = model::argmax(*logits);
  }
  text[text_bytes++] = '\n';  // run.c ends its output with a newline
  text[text_bytes] = '\0';
  firmware::write("hedge firmware: run.c text begins\n");
  firmware::write(text);
  firmware::write("hedge firmware: run.c text ends\n");
  (line{} << "     prefill: " << prompt.size() << " tokens, " << std::size_t{prefill_ticks} << " SysTick ticks, "
          << prefill_seconds << " s of QEMU time")
      .end();
  (line{} << "     decode: " << decoded << " tokens, " << static_cast<std::size_t>(decode_ticks / (decoded ? decoded : 1))
          << " SysTick ticks/token, " << decoded / decode_seconds << " tok/s of QEMU time")
      .end();
  report("model: generated to the last position without an error", decoded + prompt.size() == model_steps);
}
#endif

/// Stack bytes used so far: from the top down to the deepest word that is not zero (QEMU
/// starts RAM zeroed and nothing else writes the stack region; a zero pushed at the very
/// bottom would go uncounted, so this is a lower bound).
std::size_t stack_bytes_used() {
  const std::uint32_t* word = __stack_bottom;
  while (word < __stack_top && *word == 0) ++word;
  return static_cast<std::size_t>(__stack_top - word) * sizeof(std::uint32_t);
}

}  // namespace

int main() {
  (line{} << "hedge firmware: Cortex-M7, scalar kernels, static storage").end();
  run_rmsnorm();
  run_gemv<hedge::quant::q8_0>("q8_0", 0.01);
  run_gemv<hedge::quant::q4_0>("q4_0", 0.05);
  run_attention();
  run_router();
#if HEDGE_FIRMWARE_MODEL
  run_model();
#endif
  // A stack that overflows runs into .bss silently: keep an eighth of it unused.
  const std::size_t stack_used = stack_bytes_used();
  const std::size_t stack_size = static_cast<std::size_t>(__stack_top - __stack_bottom) * sizeof(std::uint32_t);
  (line{} << "     stack: " << stack_used << " of " << stack_size << " bytes used").end();
  report("stack: at most 7/8 of link.ld's STACK_BYTES used", stack_used <= stack_size / 8 * 7);
  (line{} << "hedge firmware: " << (all_passed ? "PASS" : "FAIL")).end();
  return all_passed ? 0 : 1;
}
