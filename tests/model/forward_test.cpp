// The forward pass against llama2.c's run.c: stories260K's greedy ids and per-step logits
// (../shared/models/reference), prefill against a loop of decodes, repacked and fused
// weights against the file's, executor synchronisations per token, sessions (rollback,
// fork), errors, and no heap per token.
#include "hedge/model/forward.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_quantize.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/os/thread_pool.hpp"
#include "support/alloc_counter.hpp"
#include "support/model_files.hpp"

namespace {

using namespace hedge::model;

const std::string& models = hedge::test::models_dir;

/// run.c's reference: prompt ids, then (pos, input, next) per forward step.
struct reference_run {
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> inputs, nexts;
  std::vector<float> logits;  // 512 per step
};

reference_run load_reference(const std::string& name) {
  reference_run r;
  std::ifstream ids(models + "reference/" + name + ".ids.txt");
  std::string line;
  std::getline(ids, line);
  std::istringstream head(line.substr(line.find(':') + 1));
  for (std::int32_t t; head >> t;) r.prompt.push_back(t);
  std::getline(ids, line);  // column names
  for (std::int64_t pos, in, next; ids >> pos >> in >> next;) {
    r.inputs.push_back(static_cast<std::int32_t>(in));
    r.nexts.push_back(static_cast<std::int32_t>(next));
  }
  std::size_t bytes = 0;
  r.logits = hedge::test::read_aligned(models + "reference/" + name + ".logits.f32", bytes);
  r.logits.resize(bytes / 4);
  return r;
}

struct stories {
  std::size_t bytes = 0;
  std::vector<float> file = hedge::test::read_aligned(models + "stories260K.bin", bytes);
  llama2c_checkpoint checkpoint =
      *llama2c_checkpoint::parse({reinterpret_cast<const std::byte*>(file.data()), bytes});
  llama_weights weights = std::move(*llama2c_weights(checkpoint));
};

std::int32_t argmax(std::span<const float> x) {
  std::size_t best = 0;
  for (std::size_t j = 1; j < x.size(); ++j)
    if (x[j] > x[best]) best = j;
  return static_cast<std::int32_t>(best);
}

/// Feeds run.c's input tokens and compares every step's logits and argmax.
void expect_matches_run_c(const std::string& name) {
  const stories s;
  const auto ref = load_reference(name);
  auto model = llama<>::make(s.weights);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto session = model->create_session();
  ASSERT_TRUE(session.ok());
  double worst = 0.0;
  for (std::size_t step = 0; step < ref.inputs.size(); ++step) {
    const auto logits = model->decode(*session, ref.inputs[step]);
    ASSERT_TRUE(logits.ok()) << logits.error().message();
    ASSERT_EQ(argmax(*logits), ref.nexts[step]) << name << " step " << step;
    for (std::size_t j = 0; j < 512; ++j) {
      const double expected = ref.logits[step * 512 + j];
      worst = std::max(worst, std::abs((*logits)[j] - expected) / (1.0 + std::abs(expected)));
    }
  }
  // Tolerance: run.c sums each dot product in float, element by element; the vector GEMVs
  // sum 8 or 16 lanes and then the lanes, and RoPE's table is computed in double: over 5
  // layers and 256 positions, differences stay in the last bits of the logits.
  EXPECT_LT(worst, 1e-4) << name;
  std::printf("%s: %zu steps, largest logit difference %.3g (relative to 1 + |logit|)\n", name.c_str(),
              ref.inputs.size(), worst);
}

TEST(LlamaForward, GreedyStepsMatchRunCWithoutPrompt) {
  SKIP_WITHOUT_MODELS();
  expect_matches_run_c("llama2c_noprompt_n256");
}

TEST(LlamaForward, GreedyStepsMatchRunCWithPrompt) {
  SKIP_WITHOUT_MODELS();
  expect_matches_run_c("llama2c_prompt_onceuponatime_n256");
}

/// stories260K.gguf in 4-byte aligned storage (the tensors are read in place).
struct stories_gguf {
  std::size_t bytes = 0;
  std::vector<float> file = hedge::test::read_aligned(models + "stories260K.gguf", bytes);
  gguf_file parsed = *gguf_file::parse({reinterpret_cast<const std::byte*>(file.data()), bytes});
};

/// stories260K re-quantized to `mix` as hedge-quantize writes it: the new file's bytes.
std::vector<std::byte> quantized_stories(const stories_gguf& g, quant_mix mix) {
  gguf_writer writer;
  quantized_storage storage;
  std::vector<std::byte> bytes;
  EXPECT_TRUE(quantize_gguf(g.parsed, mix, writer, storage).ok());
  EXPECT_TRUE(writer.write(bytes).ok());
  return bytes;
}

std::vector<std::int32_t> greedy(const llama_weights& w, std::vector<std::int32_t> prompt, std::size_t count) {
  auto model = llama<>::make(w, {.context = 256});
  EXPECT_TRUE(model.ok()) << model.error().message();
  if (!model) return {};
  auto seq = *model->create_session();
  auto logits = model->prefill(seq, prompt);
  std::vector<std::int32_t> out;
  while (logits) {
    out.push_back(argmax(*logits));
    if (out.size() == count) break;
    logits = model->decode(seq, out.back());
  }
  EXPECT_TRUE(logits.ok()) << logits.error().message();
  return out;
}

TEST(LlamaForward, GgufCheckpointMatchesRunC) {
  SKIP_WITHOUT_MODELS();
  const stories_gguf g;
  const auto w = gguf_weights(g.parsed);
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_FALSE(w->config.shared_classifier);  // the GGUF stores output.weight as a copy
  const auto ref = load_reference("llama2c_prompt_onceuponatime_n256");
  const std::vector<std::int32_t> expected(ref.nexts.begin() + static_cast<std::ptrdiff_t>(ref.prompt.size()) - 1,
                                           ref.nexts.end());
  const auto ids = greedy(*w, ref.prompt, expected.size());
  EXPECT_EQ(ids, expected);
}

/// llama.cpp's greedy ids on hedge-quantize's output (tests/model/data/llama_cpp_greedy_ids.txt).
std::vector<std::int32_t> llama_cpp_ids(const std::string& type) {
  std::ifstream in(std::string(HEDGE_SOURCE_DIR) + "/tests/model/data/llama_cpp_greedy_ids.txt");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name != type) continue;
    std::vector<std::int32_t> ids;
    for (std::int32_t t; fields >> t;) ids.push_back(t);
    return ids;
  }
  return {};
}

TEST(LlamaForward, QuantizedFilesGiveLlamaCppsGreedyIds) {
  SKIP_WITHOUT_MODELS();
  const stories_gguf g;
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};  // BOS "Once upon a time"
  for (const auto& [name, mix] : {std::pair{"q8_0", quant_mix::q8_0}, std::pair{"q4_0", quant_mix::q4_0},
                                  std::pair{"q4_k_m", quant_mix::q4_k_m}, std::pair{"q5_k_m", quant_mix::q5_k_m}}) {
    const auto bytes = quantized_stories(g, mix);
    const auto aligned = hedge::test::aligned_copy(bytes);
    const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(aligned.data()), bytes.size()});
    ASSERT_TRUE(file.ok()) << file.error().message();
    const auto w = gguf_weights(*file);
    ASSERT_TRUE(w.ok()) << w.error().message();
    const auto expected = llama_cpp_ids(name);
    ASSERT_EQ(expected.size(), 40u) << name;
    const auto ids = greedy(*w, prompt, expected.size());
    std::size_t same = 0;
    while (same < ids.size() && ids[same] == expected[same]) ++same;
    EXPECT_GE(same, 32u) << name;
    std::printf("%s: the first %zu of %zu greedy ids equal llama.cpp's\n", name, same, expected.size());
  }
}

TEST(LlamaForward, WeightsQuantizedAtLoadTimeStayCloseToFloat) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const auto ref = load_reference("llama2c_prompt_onceuponatime_n256");
  const std::vector<std::int32_t> expected(ref.nexts.begin() + static_cast<std::ptrdiff_t>(ref.prompt.size()) - 1,
                                           ref.nexts.end());
  const auto check = [&](auto format, double max_logit_error, std::size_t min_same) {
    using F = decltype(format);
    std::vector<std::byte> arena(quantized_weights_bytes<F>(s.weights));
    const auto q = quantize_weights<F>(s.weights, arena);
    ASSERT_TRUE(q.ok()) << q.error().message();
    EXPECT_EQ(q->layers[0].wq.type, F::type_id);
    EXPECT_EQ(q->layers[0].w_down.type, hedge::quant::gguf_type::f32);  // rows of 172: not whole blocks
    // Logits of run.c's token stream, against the float32 reference.
    auto model = llama<>::make(*q);
    ASSERT_TRUE(model.ok());
    auto seq = *model->create_session();
    double worst = 0.0;
    for (std::size_t step = 0; step < ref.inputs.size(); ++step) {
      const auto logits = model->decode(seq, ref.inputs[step]);
      ASSERT_TRUE(logits.ok());
      for (std::size_t j = 0; j < 512; ++j)
        worst = std::max(worst, std::abs(double((*logits)[j]) - ref.logits[step * 512 + j]));
    }
    const auto ids = greedy(*q, ref.prompt, expected.size());
    std::size_t same = 0;
    while (same < ids.size() && ids[same] == expected[same]) ++same;
    std::printf("%s at load time: largest logit error %.3f, first %zu of %zu greedy ids equal float32's\n",
                F::name.data(), worst, same, expected.size());
    EXPECT_LT(worst, max_logit_error);
    EXPECT_GE(same, min_same);
  };
  // Bounds from the measured figures (logit error 0.45 and 8.7 on logits of about +-15; 110
  // and 23 ids), with margin: quantizing the 64-wide embedding and every matrix of this tiny
  // model shifts its logits enough to change its story after a sentence or two.
  check(hedge::quant::q8_0{}, 1.0, 64);
  check(hedge::quant::q4_0{}, 15.0, 16);
}

/// Logits of `tokens` run one decode at a time.
std::vector<float> decode_loop(llama<>& model, std::span<const std::int32_t> tokens) {
  auto seq = *model.create_session();
  std::span<const float> logits;
  for (const auto t : tokens) {
    auto r = model.decode(seq, t);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r) return {};
    logits = *r;
  }
  static_cast<void>(model.release(seq));
  return {logits.begin(), logits.end()};
}

/// Largest |a - b| / (1 + |b|).
double largest_difference(std::span<const float> a, std::span<const float> b) {
  double worst = 0.0;
  for (std::size_t j = 0; j < b.size(); ++j)
    worst = std::max(worst, std::abs(double(a[j]) - b[j]) / (1.0 + std::abs(double(b[j]))));
  return worst;
}

/// Prefill of `tokens` (in chunks of `chunk` rows) against the decode loop, then greedy
/// decoding on from the prefilled cache against run.c's ids.
void expect_prefill_matches_decodes(const llama_weights& w, const reference_run& ref, std::size_t tokens,
                                    std::size_t chunk, double tolerance) {
  auto model = llama<>::make(w, {.max_sessions = 2, .context = 256, .max_prefill = chunk});
  ASSERT_TRUE(model.ok()) << model.error().message();
  const std::span<const std::int32_t> prompt(ref.inputs.data(), tokens);
  const auto expected = decode_loop(*model, prompt);
  auto seq = *model->create_session();
  const auto logits = model->prefill(seq, prompt);
  ASSERT_TRUE(logits.ok()) << logits.error().message();
  EXPECT_EQ(*model->length(seq), tokens);
  const double worst = largest_difference(*logits, expected);
  EXPECT_LT(worst, tolerance) << tokens << " tokens in chunks of " << chunk;
  std::printf("prefill of %zu tokens in chunks of %zu: largest logit difference from decodes %.3g\n", tokens, chunk,
              worst);
  // The cache prefill wrote carries run.c's greedy continuation.
  std::int32_t next = argmax(*logits);
  for (std::size_t step = tokens; step < std::min<std::size_t>(tokens + 32, ref.inputs.size()); ++step) {
    ASSERT_EQ(next, ref.inputs[step]) << "step " << step << " after a prefill of " << tokens;
    const auto r = model->decode(seq, next);
    ASSERT_TRUE(r.ok());
    next = argmax(*r);
  }
}

// Tolerance: the projections' GEMM rows equal their GEMVs bit for bit (kernels/gemm.hpp), so
// prefill and decode differ only in attention: the prefill kernel sums scores over 64-key
// tiles with its own online-softmax rescaling, decode over one run of keys, both in float.
// Each attention output carries a few ulps of relative difference, which 5 layers carry to
// the logits; 1e-5 of 1 + |logit| leaves a factor ~10 over what is measured.
TEST(LlamaForward, PrefillEqualsTheDecodeLoop) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const auto ref = load_reference("llama2c_noprompt_n256");
  expect_prefill_matches_decodes(s.weights, ref, 5, 64, 1e-5);
  expect_prefill_matches_decodes(s.weights, ref, 150, 64, 1e-5);  // chunks of 64, 64, 22
  expect_prefill_matches_decodes(s.weights, ref, 100, 7, 1e-5);   // chunks smaller than a query tile
}

// prefill_logits: every row's logits, each as the decode loop gives them (the tolerance
// above), after a session that already holds positions; the last row is prefill's.
TEST(LlamaForward, PrefillLogitsGiveEveryRowsDecodeLogits) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const auto ref = load_reference("llama2c_noprompt_n256");
  auto model = llama<>::make(s.weights, {.max_sessions = 2, .context = 64, .max_prefill = 7});
  ASSERT_TRUE(model.ok()) << model.error().message();
  const std::span<const std::int32_t> ids(ref.inputs.data(), 40);
  auto loop = *model->create_session();
  std::vector<std::vector<float>> decoded;
  for (const auto t : ids) {
    const auto r = model->decode(loop, t);
    ASSERT_TRUE(r.ok()) << r.error().message();
    decoded.emplace_back(r->begin(), r->end());
  }
  auto seq = *model->create_session();
  ASSERT_TRUE(model->prefill(seq, ids.first(10)).ok());
  std::vector<float> rows(30 * 512);
  ASSERT_TRUE(model->prefill_logits(seq, ids.subspan(10), hedge::matrix_view<float>(rows.data(), 30, 512)).ok());
  EXPECT_EQ(*model->length(seq), 40u);
  double worst = 0.0;
  for (std::size_t i = 0; i < 30; ++i)
    worst = std::max(worst, largest_difference({rows.data() + i * 512, 512}, decoded[10 + i]));
  EXPECT_LT(worst, 1e-5);
  ASSERT_TRUE(model->rollback(seq, 10).ok());
  const auto last = model->prefill(seq, ids.subspan(10));
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(std::equal(last->begin(), last->end(), rows.data() + 29 * 512));
  const auto wrong = model->prefill_logits(seq, ids.first(3), hedge::matrix_view<float>(rows.data(), 2, 512));
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), hedge::errc::shape_mismatch);
  EXPECT_EQ(*model->length(seq), 40u);  // refused before anything ran
  // Without prefill buffers (max_prefill 0) the rows are decode's own logits.
  auto unbuffered = llama<>::make(s.weights, {.context = 64, .max_prefill = 0});
  ASSERT_TRUE(unbuffered.ok()) << unbuffered.error().message();
  auto one = *unbuffered->create_session();
  ASSERT_TRUE(unbuffered->prefill_logits(one, ids.first(30), hedge::matrix_view<float>(rows.data(), 30, 512)).ok());
  for (std::size_t i = 0; i < 30; ++i)
    EXPECT_TRUE(std::equal(decoded[i].begin(), decoded[i].end(), rows.data() + i * 512)) << "row " << i;
}

// Tolerance: the interleaved kernels take the same integer block products per row as the
// file layout's, and add the per-block float terms in another order (8 rows in the lanes
// of one register, not one row across them): each dot product moves by a few ulps.
TEST(LlamaForward, RepackedAndFusedQuantizedWeightsPrefillAsTheyDecode) {
  SKIP_WITHOUT_MODELS();
  const stories_gguf g;
  for (const auto& [name, mix] : {std::pair{"q8_0", quant_mix::q8_0}, std::pair{"q4_0", quant_mix::q4_0},
                                  std::pair{"q4_k_m", quant_mix::q4_k_m}, std::pair{"q5_k_m", quant_mix::q5_k_m}}) {
    const auto bytes = quantized_stories(g, mix);
    const auto aligned = hedge::test::aligned_copy(bytes);
    const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(aligned.data()), bytes.size()});
    ASSERT_TRUE(file.ok()) << file.error().message();
    const auto w = gguf_weights(*file);
    ASSERT_TRUE(w.ok()) << w.error().message();
    const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378, 281, 263, 300, 400, 270, 290, 301};
    // The file's layout, one matrix per projection: the reference.
    auto plain =
        llama<>::make(*w, {.context = 64, .max_prefill = 5, .repack = llama_repack::none, .fuse = llama_fusion::none});
    ASSERT_TRUE(plain.ok()) << plain.error().message();
    EXPECT_EQ(plain->weight_arena_bytes(), 0u);
    const auto expected = decode_loop(*plain, prompt);
    auto packed = llama<>::make(*w, {.context = 64, .max_prefill = 5, .repack = llama_repack::all});
    ASSERT_TRUE(packed.ok()) << packed.error().message();
    EXPECT_GT(packed->weight_arena_bytes(), 0u);
    const auto decoded = decode_loop(*packed, prompt);
    auto seq = *packed->create_session();
    const auto logits = packed->prefill(seq, prompt);
    ASSERT_TRUE(logits.ok()) << logits.error().message();
    const double repacked = largest_difference(decoded, expected), prefilled = largest_difference(*logits, expected);
    std::printf("%s: repacked and fused decodes differ from the file layout's by %.3g, their prefill by %.3g\n",
                name, repacked, prefilled);
    EXPECT_LT(repacked, 1e-5);
    EXPECT_LT(prefilled, 1e-5);
    // By default Q8_0 keeps the file's layout (its GEMV decodes no faster repacked); the
    // K-quant mixes of stories260K hold Q5_0/Q5_1 (repacked), Q8_0 and F16.
    auto by_default = llama<>::make(*w, {.context = 64});
    ASSERT_TRUE(by_default.ok());
    EXPECT_EQ(by_default->weight_arena_bytes() > 0, mix != quant_mix::q8_0) << name;
  }
}

TEST(LlamaForward, MakeReportsTheBytesItNoLongerReads) {
  SKIP_WITHOUT_MODELS();
  const stories_gguf g;
  const auto bytes = quantized_stories(g, quant_mix::q4_0);
  auto aligned = hedge::test::aligned_copy(bytes);
  std::byte* const data = reinterpret_cast<std::byte*>(aligned.data());
  const auto file = gguf_file::parse({data, bytes.size()});
  ASSERT_TRUE(file.ok()) << file.error().message();
  const auto w = gguf_weights(*file);
  ASSERT_TRUE(w.ok()) << w.error().message();
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};
  auto plain = llama<>::make(*w, {.context = 64, .repack = llama_repack::none, .fuse = llama_fusion::none});
  ASSERT_TRUE(plain.ok());
  const auto expected = decode_loop(*plain, prompt);

  std::vector<std::span<const std::byte>> released;
  const auto collect = [&](std::span<const std::byte> r) { released.push_back(r); };
  auto unpacked = llama<>::make(*w, {.context = 64, .repack = llama_repack::none, .fuse = llama_fusion::none}, collect);
  ASSERT_TRUE(unpacked.ok());
  EXPECT_TRUE(released.empty()) << "nothing packed, nothing released";

  auto packed = llama<>::make(*w, {.context = 64}, collect);
  ASSERT_TRUE(packed.ok()) << packed.error().message();
  // Every layer's six Q4_0 matrices were repacked (w_down's rows of 172 are not whole
  // blocks: it stays as it is): each reported once, inside the file, none overlapping.
  ASSERT_GE(released.size(), 6 * w->config.n_layers);
  std::sort(released.begin(), released.end(), [](auto a, auto b) { return a.data() < b.data(); });
  for (std::size_t i = 0; i < released.size(); ++i) {
    EXPECT_GE(released[i].data(), data);
    EXPECT_LE(released[i].data() + released[i].size(), data + bytes.size());
    if (i > 0) {
      EXPECT_LE(released[i - 1].data() + released[i - 1].size(), released[i].data());
    }
  }
  // The model never reads them again: overwritten, the logits do not change.
  for (const auto r : released) std::memset(data + (r.data() - data), 0x7F, r.size());
  const auto after = decode_loop(*packed, prompt);
  EXPECT_LT(largest_difference(after, expected), 1e-5);
}

TEST(LlamaForward, AMappedFileWithItsPackedTensorsReleased) {
  // As hedge-generate loads a model: the file mapped, the arena on huge pages, the pages of
  // the packed tensors released; the logits are those of the model read from memory.
  SKIP_WITHOUT_MODELS();
  const stories_gguf g;
  const auto bytes = quantized_stories(g, quant_mix::q4_0);
  const std::string path = ::testing::TempDir() + "hedge_forward_released.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  auto file = hedge::os::mapped_file::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  const auto parsed = gguf_file::parse(file->bytes());
  ASSERT_TRUE(parsed.ok());
  const auto w = gguf_weights(*parsed);
  ASSERT_TRUE(w.ok());
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};
  auto reference = llama<>::make(*w, {.context = 64, .repack = llama_repack::none, .fuse = llama_fusion::none});
  ASSERT_TRUE(reference.ok());
  const auto expected = decode_loop(*reference, prompt);

  llama_options options{.context = 64, .fuse = llama_fusion::all};
  const auto arena_bytes = llama_weight_arena_bytes(*w, options);
  ASSERT_TRUE(arena_bytes.ok());
  auto arena = hedge::os::mapped_memory::allocate(*arena_bytes);
  ASSERT_TRUE(arena.ok()) << arena.error().message();
  EXPECT_EQ(arena->size(), *arena_bytes);
  options.weight_arena = arena->bytes();
  std::size_t released = 0, reported = 0;
  auto model = llama<>::make(*w, options, [&](std::span<const std::byte> r) {
    reported += r.size();
    released += file->release(r);
  });
  ASSERT_TRUE(model.ok()) << model.error().message();
  EXPECT_GT(reported, 0u);
  EXPECT_LE(released, reported);  // whole pages only
  EXPECT_LT(largest_difference(decode_loop(*model, prompt), expected), 1e-5);
  // Released pages read back as the file's bytes; ranges outside the mapping release nothing.
  EXPECT_GT(file->release(file->bytes()), 0u);  // the file spans several pages
  EXPECT_LE(file->release(file->bytes()), file->size());
  EXPECT_EQ(std::memcmp(file->bytes().data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(file->release(std::span<const std::byte>(bytes)), 0u);
  std::remove(path.c_str());
}

TEST(LlamaForward, PackedMatricesKeepEveryRow) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  std::vector<std::byte> quantized(quantized_weights_bytes<hedge::quant::q4_0>(s.weights));
  const auto q = quantize_weights<hedge::quant::q4_0>(s.weights, quantized);
  ASSERT_TRUE(q.ok());
  const auto& y = q->layers[0];
  // Q (64 rows), K and V (32 each) as one interleaved matrix; the embedding (512 rows) alone.
  for (const std::vector<weight_matrix>& parts : {std::vector{y.wq, y.wk, y.wv}, std::vector{q->token_embedding}}) {
    const std::size_t bytes = packed_matrix_bytes<all_weight_formats>(parts, true);
    ASSERT_GT(bytes, 0u);
    std::vector<std::uint64_t> arena(bytes / 8 + 1);
    const auto packed =
        pack_matrices<all_weight_formats>(parts, true, {reinterpret_cast<std::byte*>(arena.data()), bytes});
    ASSERT_TRUE(packed.ok()) << packed.error().message();
    EXPECT_TRUE(packed->interleaved);
    std::vector<float> got(64), want(64);
    std::size_t row = 0;
    for (const weight_matrix& part : parts) {
      for (std::size_t r = 0; r < part.rows; ++r, ++row) {
        ASSERT_TRUE(dequantize_row<all_weight_formats>(*packed, row, got).ok());
        ASSERT_TRUE(dequantize_row<all_weight_formats>(part, r, want).ok());
        ASSERT_EQ(got, want) << "row " << row;
      }
    }
    EXPECT_EQ(packed->rows, row);
  }
  // Parts whose rows are not whole 8-row groups (gate: 172) cannot be laid end to end
  // interleaved; F32 has no interleaved layout.
  EXPECT_EQ(packed_matrix_bytes<all_weight_formats>(std::vector{y.w_gate, y.w_up}, true), 0u);
  EXPECT_EQ(packed_matrix_bytes<all_weight_formats>(std::vector{s.weights.layers[0].wq}, true), 0u);
}

TEST(LlamaForward, FusedFloatWeightsGiveTheSameLogits) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};
  auto separate = llama<>::make(s.weights, {.context = 64, .fuse = llama_fusion::none});
  auto fused = llama<>::make(s.weights, {.context = 64, .fuse = llama_fusion::all});
  ASSERT_TRUE(separate.ok() && fused.ok());
  EXPECT_EQ(separate->weight_arena_bytes(), 0u);
  // Q/K/V (64 + 32 + 32 rows) and gate/up (172 + 172 rows) of 64 floats, 5 layers.
  EXPECT_EQ(fused->weight_arena_bytes(), 5 * (128 + 344) * 64 * sizeof(float));
  EXPECT_EQ(decode_loop(*fused, prompt), decode_loop(*separate, prompt));
}

/// An executor that runs inline and counts its parallel_for calls.
struct counting_executor {
  std::size_t calls = 0;
  static constexpr std::size_t concurrency() noexcept { return 2; }
  template <class Body>
  void parallel_for(std::size_t n, Body&& body) {
    ++calls;
    if (n != 0) body(std::size_t{0}, n);
  }
};

TEST(LlamaForward, SynchronisationsPerToken) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const std::size_t layers = s.weights.config.n_layers;
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};
  const auto count = [&](llama_fusion fuse, bool prefill, std::size_t min_bytes = 0) {
    auto model =
        llama<>::make(s.weights, {.context = 64, .max_threads = 2, .fuse = fuse, .parallel_min_bytes = min_bytes});
    EXPECT_TRUE(model.ok());
    auto seq = *model->create_session();
    counting_executor counter;
    EXPECT_TRUE((prefill ? model->prefill(seq, prompt, counter) : model->decode(seq, 1, counter)).ok());
    return counter.calls;
  };
  // Per layer: Q, K, V, attention, output, gate, up, down; then the classifier.
  EXPECT_EQ(count(llama_fusion::none, false), 8 * layers + 1);
  EXPECT_EQ(count(llama_fusion::all, false), 5 * layers + 1);
  // A prefill chunk: two per GEMM (activation packing, product), one for attention.
  EXPECT_EQ(count(llama_fusion::none, true), 15 * layers + 1);
  EXPECT_EQ(count(llama_fusion::all, true), 9 * layers + 1);
  // By default a decode step of this model (its largest matrix 128 KiB) wakes no worker.
  EXPECT_EQ(count(llama_fusion::repacked, false, llama_options{}.parallel_min_bytes), 0u);
}

TEST(LlamaForward, ACallerSizedWeightArena) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  const llama_options options{.context = 64, .fuse = llama_fusion::all};
  const auto bytes = llama_weight_arena_bytes(s.weights, options);
  ASSERT_TRUE(bytes.ok());
  std::vector<std::uint64_t> storage(*bytes / 8 + 8);
  auto* aligned = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) / 64 * 64);
  auto small = options;
  small.weight_arena = {aligned, *bytes - 1};
  EXPECT_EQ(llama<>::make(s.weights, small).error().code(), hedge::errc::capacity_exceeded);
  auto fits = options;
  fits.weight_arena = {aligned, *bytes};
  auto model = llama<>::make(s.weights, fits);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto separate = llama<>::make(s.weights, {.context = 64, .fuse = llama_fusion::none});
  const std::vector<std::int32_t> prompt{1, 403, 407};
  EXPECT_EQ(decode_loop(*model, prompt), decode_loop(*separate, prompt));
}

TEST(LlamaForward, RollbackAndForkReproduceTheSameLogits) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto model = llama<>::make(s.weights, {.max_sessions = 2, .context = 64});
  ASSERT_TRUE(model.ok());
  auto a = *model->create_session();
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378};
  ASSERT_TRUE(model->prefill(a, prompt).ok());
  const auto first = model->decode(a, 10);
  ASSERT_TRUE(first.ok());
  const std::vector<float> after_prompt(first->begin(), first->end());
  ASSERT_TRUE(model->decode(a, 11).ok());
  // Roll back to the prompt and redo the first decode.
  ASSERT_TRUE(model->rollback(a, prompt.size()).ok());
  EXPECT_EQ(*model->length(a), prompt.size());
  const auto again = model->decode(a, 10);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::vector<float>(again->begin(), again->end()), after_prompt);
  // A fork of the prompt continues as the original did.
  ASSERT_TRUE(model->rollback(a, prompt.size()).ok());
  auto b = model->fork(a);
  ASSERT_TRUE(b.ok());
  const auto forked = model->decode(*b, 10);
  ASSERT_TRUE(forked.ok());
  EXPECT_EQ(std::vector<float>(forked->begin(), forked->end()), after_prompt);
}

TEST(LlamaForward, BadTokensAndAFullContextAreErrorsThatLeaveTheSessionUsable) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto model = llama<>::make(s.weights, {.context = 4});
  ASSERT_TRUE(model.ok());
  auto seq = *model->create_session();
  EXPECT_EQ(model->decode(seq, 512).error().code(), hedge::errc::out_of_range);
  EXPECT_EQ(model->decode(seq, -1).error().code(), hedge::errc::out_of_range);
  EXPECT_EQ(*model->length(seq), 0u);
  const std::vector<std::int32_t> five{1, 2, 3, 4, 5}, bad{1, 2, 600};
  EXPECT_EQ(model->prefill(seq, five).error().code(), hedge::errc::capacity_exceeded);
  EXPECT_EQ(model->prefill(seq, bad).error().code(), hedge::errc::out_of_range);
  EXPECT_EQ(*model->length(seq), 0u);
  for (std::int32_t t : {1, 2, 3, 4}) ASSERT_TRUE(model->decode(seq, t).ok());
  const auto full = model->decode(seq, 5);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(*model->length(seq), 4u);
  ASSERT_TRUE(model->rollback(seq, 3).ok());
  EXPECT_TRUE(model->decode(seq, 4).ok());
}

TEST(LlamaForward, ShapeErrorsNameTheTensor) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto weights = std::move(*copy_weights(s.weights));
  weights.layers[3].wk.rows = 31;
  const auto model = llama<>::make(weights);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message().find("wk of layer 3"), std::string_view::npos) << model.error().message();
  // A build for Q4_0 weights only refuses float32 ones when the model is made.
  const auto only_q4 = llama<weight_formats<hedge::quant::q4_0>>::make(s.weights);
  ASSERT_FALSE(only_q4.ok());
  EXPECT_EQ(only_q4.error().code(), hedge::errc::unsupported);
  EXPECT_NE(only_q4.error().message().find("token embedding"), std::string_view::npos) << only_q4.error().message();
}

TEST(LlamaForward, DecodeAllocatesNothing) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto model = llama<>::make(s.weights, {.context = 64});
  ASSERT_TRUE(model.ok());
  auto seq = *model->create_session();
  ASSERT_TRUE(model->decode(seq, 1).ok());
  const hedge::test::alloc_scope scope;
  for (std::int32_t t = 2; t < 40; ++t) ASSERT_TRUE(model->decode(seq, t).ok());
  EXPECT_EQ(scope.count(), 0u);
}

TEST(LlamaForward, PrefillAndDecodeOfRepackedFusedWeightsAllocateNothing) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  std::vector<std::byte> arena(quantized_weights_bytes<hedge::quant::q8_0>(s.weights));
  const auto q = quantize_weights<hedge::quant::q8_0>(s.weights, arena);
  ASSERT_TRUE(q.ok());
  auto model =
      llama<>::make(*q, {.context = 64, .max_prefill = 8, .repack = llama_repack::all, .fuse = llama_fusion::all});
  ASSERT_TRUE(model.ok());
  EXPECT_GT(model->weight_arena_bytes(), 0u);
  auto seq = *model->create_session();
  const std::vector<std::int32_t> prompt{1, 403, 407, 261, 378, 281, 263, 300, 400, 270, 290, 301};
  const hedge::test::alloc_scope scope;
  ASSERT_TRUE(model->prefill(seq, prompt).ok());
  for (std::int32_t t = 2; t < 20; ++t) ASSERT_TRUE(model->decode(seq, t).ok());
  EXPECT_EQ(scope.count(), 0u);
}

/// Four sessions with prompts of different lengths, decoded greedily in batched steps; a
/// session leaves after 6 steps, a new one joins after 9. Each session's logits are
/// compared, step by step, with the same session decoded alone on a model of its own.
/// `exact`: bit for bit (every GEMM row is its GEMV: float and repacked weights);
/// otherwise the same greedy ids, the difference printed (the file layouts' on-the-fly
/// packed GEMM sums in another order than their GEMV, a few ulps per product, which a
/// quantized activation can round to the next level: stories260K's Q4_0 and Q8_0 logits
/// move by up to 0.2 over 20 steps).
template <class E>
void expect_batch_equals_alone(const llama_weights& w, const llama_options& options, bool exact, E& executor) {
  const std::vector<std::vector<std::int32_t>> prompts{
      {1, 403, 407, 261, 378}, {1, 300}, {1, 281, 263, 300, 400, 270, 290, 301, 33}, {1, 270, 290}, {1, 50, 60, 70}};
  llama_options batched = options;
  batched.max_sessions = batched.max_batch = 4;
  auto model = llama<>::make(w, batched);
  ASSERT_TRUE(model.ok()) << model.error().message();
  auto alone = llama<>::make(w, {.max_sessions = 5, .context = options.context, .max_threads = options.max_threads,
                                 .repack = options.repack, .fuse = options.fuse,
                                 .parallel_min_bytes = options.parallel_min_bytes});
  ASSERT_TRUE(alone.ok()) << alone.error().message();
  struct live {
    hedge::kv::kv_seq batched, alone;
    std::int32_t next;
  };
  std::vector<live> running;
  const auto join = [&](const std::vector<std::int32_t>& prompt) {
    live s{*model->create_session(), *alone->create_session(), 0};
    const auto a = model->prefill(s.batched, prompt, executor);
    const auto b = alone->prefill(s.alone, prompt, executor);
    ASSERT_TRUE(a.ok() && b.ok());
    s.next = argmax(*b);
    running.push_back(s);
  };
  for (std::size_t p = 0; p < 4; ++p) join(prompts[p]);
  double worst = 0.0;
  for (std::size_t step = 0; step < 20; ++step) {
    if (step == 6) {
      ASSERT_TRUE(model->release(running[1].batched).ok());
      running.erase(running.begin() + 1);
    }
    if (step == 9) join(prompts[4]);
    std::vector<hedge::kv::kv_seq> sessions;
    std::vector<std::int32_t> tokens;
    for (const live& s : running) sessions.push_back(s.batched), tokens.push_back(s.next);
    const auto rows = model->decode_batch(sessions, tokens, executor);
    ASSERT_TRUE(rows.ok()) << rows.error().message();
    ASSERT_EQ(rows->rows(), running.size());
    for (std::size_t i = 0; i < running.size(); ++i) {
      const auto expected = alone->decode(running[i].alone, running[i].next, executor);
      ASSERT_TRUE(expected.ok());
      const auto row = rows->row(i);
      const std::vector<float> got(row.begin(), row.end()), want(expected->begin(), expected->end());
      if (exact) {
        ASSERT_EQ(got, want) << "step " << step << " row " << i;
      }
      worst = std::max(worst, largest_difference(got, want));
      ASSERT_EQ(argmax(got), argmax(want)) << "step " << step << " row " << i << " (largest difference " << worst << ")";
      running[i].next = argmax(want);
      EXPECT_EQ(*model->length(running[i].batched), *alone->length(running[i].alone));
    }
  }
  std::printf("batched vs alone (%s): largest difference %.3g\n", exact ? "bit for bit" : "greedy ids", worst);
}

TEST(LlamaForward, ABatchedDecodeStepEqualsEachSessionAlone) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  hedge::exec::serial serial;
  expect_batch_equals_alone(s.weights, {.context = 64}, true, serial);
  // Split attention on two threads (every product and attention shared): the same splits
  // alone and in a batch.
  hedge::exec::thread_pool pool(2);
  expect_batch_equals_alone(s.weights, {.context = 64, .max_threads = 2, .parallel_min_bytes = 0}, true, pool);
  const stories_gguf g;
  for (const auto mix : {quant_mix::q4_0, quant_mix::q8_0, quant_mix::q4_k_m}) {
    const auto bytes = quantized_stories(g, mix);
    const auto aligned = hedge::test::aligned_copy(bytes);
    const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(aligned.data()), bytes.size()});
    ASSERT_TRUE(file.ok());
    const auto w = gguf_weights(*file);
    ASSERT_TRUE(w.ok());
    SCOPED_TRACE(std::string(traits_of(mix).name));
    expect_batch_equals_alone(*w, {.context = 64, .repack = llama_repack::all}, true, serial);
    expect_batch_equals_alone(*w, {.context = 64}, false, serial);
  }
}

TEST(LlamaForward, BatchedDecodeErrorsLeaveEverySessionAsItWas) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto model = llama<>::make(s.weights, {.max_sessions = 3, .context = 8, .max_batch = 3});
  ASSERT_TRUE(model.ok());
  auto a = *model->create_session(), b = *model->create_session(), c = *model->create_session();
  ASSERT_TRUE(model->prefill(a, std::vector<std::int32_t>{1, 2, 3}).ok());
  ASSERT_TRUE(model->prefill(b, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8}).ok());  // full
  ASSERT_TRUE(model->prefill(c, std::vector<std::int32_t>{1}).ok());
  hedge::exec::serial serial;
  const auto lengths = [&] { return std::vector<std::uint64_t>{*model->length(a), *model->length(b), *model->length(c)}; };
  const auto before = lengths();
  const std::vector<hedge::kv::kv_seq> ab{a, b}, ac{a, c}, aa{a, a}, none{}, four{a, b, c, a};
  const auto full = model->decode_batch(ab, std::vector<std::int32_t>{5, 6}, serial);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_NE(full.error().message().find("batch row 1"), std::string_view::npos) << full.error().message();
  EXPECT_EQ(model->decode_batch(ac, std::vector<std::int32_t>{5, 512}, serial).error().code(),
            hedge::errc::out_of_range);
  EXPECT_EQ(model->decode_batch(aa, std::vector<std::int32_t>{5, 6}, serial).error().code(),
            hedge::errc::invalid_argument);
  EXPECT_EQ(model->decode_batch(none, std::vector<std::int32_t>{}, serial).error().code(),
            hedge::errc::invalid_argument);
  EXPECT_EQ(model->decode_batch(four, std::vector<std::int32_t>{1, 2, 3, 4}, serial).error().code(),
            hedge::errc::invalid_argument);
  EXPECT_EQ(model->decode_batch(ac, std::vector<std::int32_t>{5}, serial).error().code(),
            hedge::errc::invalid_argument);
  EXPECT_EQ(lengths(), before);
  // The sessions go on as if nothing had been tried.
  const auto rows = model->decode_batch(ac, std::vector<std::int32_t>{5, 6}, serial);
  ASSERT_TRUE(rows.ok()) << rows.error().message();
  EXPECT_EQ(lengths(), (std::vector<std::uint64_t>{4, 8, 2}));
  // A batch of one on a model made for no more equals decode.
  auto single = llama<>::make(s.weights, {.context = 8});
  ASSERT_TRUE(single.ok());
  auto d = *single->create_session();
  const auto one = single->decode_batch(std::vector<hedge::kv::kv_seq>{d}, std::vector<std::int32_t>{1}, serial);
  ASSERT_TRUE(one.ok()) << one.error().message();
  const std::vector<float> batched(one->row(0).begin(), one->row(0).end());
  ASSERT_TRUE(single->rollback(d, 0).ok());
  const auto alone = single->decode(d, 1);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(batched, std::vector<float>(alone->begin(), alone->end()));
  EXPECT_EQ(llama<>::make(s.weights, {.max_sessions = 2, .max_batch = 3}).error().code(),
            hedge::errc::invalid_argument);
  EXPECT_EQ(llama<>::make(s.weights, {.max_batch = 0}).error().code(), hedge::errc::invalid_argument);
}

TEST(LlamaForward, BatchedDecodeAllocatesNothing) {
  SKIP_WITHOUT_MODELS();
  const stories s;
  auto model = llama<>::make(s.weights, {.max_sessions = 4, .context = 64, .max_batch = 4});
  ASSERT_TRUE(model.ok());
  std::vector<hedge::kv::kv_seq> sessions;
  for (int i = 0; i < 4; ++i) sessions.push_back(*model->create_session());
  hedge::exec::serial serial;
  std::vector<std::int32_t> tokens{1, 1, 1, 1};
  ASSERT_TRUE(model->decode_batch(sessions, tokens, serial).ok());
  const hedge::test::alloc_scope scope;
  for (std::int32_t t = 2; t < 30; ++t) {
    std::fill(tokens.begin(), tokens.end(), t);
    ASSERT_TRUE(model->decode_batch(sessions, tokens, serial).ok());
  }
  EXPECT_EQ(scope.count(), 0u);
}

}  // namespace
