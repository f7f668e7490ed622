// Every architecture hedge runs (model/config.hpp) against llama.cpp: a small synthetic
// GGUF of each, with random weights (model/synthetic_llama.hpp), fed the same token ids;
// hedge's greedy ids must equal llama.cpp's and its logits lie within a stated tolerance
// of llama.cpp's at every step (tests/model/data/llama_cpp_architectures.txt, made by
// scripts/architecture-references.sh). Also the hostile files of issue 28: counts a file
// cannot hold, and each new tensor kind with a wrong shape, refused with its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/model/forward.hpp"
#include "synthetic_gguf.hpp"

namespace {

using namespace hedge::model;
using hedge::errc;
using hedge::test::expect_error;
using hedge::test::load_synthetic;
using hedge::test::write_synthetic_gguf;

// Tolerance: max_j |hedge_j - llama.cpp_j| <= tol * max_j |llama.cpp_j| at every step. With
// F32 weights they differ by summation order (float32, a few ulps per dot product of
// at most 128 terms), RoPE angles (hedge in float64, ggml in float32 powers: up to about
// position x 1e-7 radians), and ggml's GELU, which reads a table of F16 inputs: GeGLU's
// gate is rounded to 11 bits (2^-12 relative) before the activation, about 2e-4 of each
// FFN output per layer. 2e-3 bounds all of them; a wrong index, norm, scale, mask or
// factor moves them by 8e-2 to 1 (dropping the RoPE factors: 0.17; the window: 0.08).
constexpr double architecture_float_tolerance = 2e-3;
// With Q8_0 weights both round each activation block to Q8_0 (d = amax / 127): the same
// rounding, but an input one ulp apart can round to the neighbouring step, about 0.4% of
// the block's amax, and the difference travels through the later layers (2.4e-2 seen on
// qwen3, 2026-11-27): 5e-2.
constexpr double q8_0_tolerance = 5e-2;

/// One architecture's synthetic model, a 64-token vocabulary, and the logits' tolerance.
struct architecture_case {
  std::string name;
  synthetic_llama spec;
  double tolerance;
};

std::vector<architecture_case> architecture_cases() {
  const synthetic_llama base{.dim = 64, .hidden_dim = 96, .layers = 2, .heads = 4, .kv_heads = 2, .context = 64,
                             .vocab = 64};
  std::vector<architecture_case> cases;
  const auto add = [&](std::string name, auto&& shape) {
    synthetic_llama s = base;
    s.name = "hedge synthetic";  // not the architecture's name: llama.cpp gives "phi3" models Phi-3's special tokens
    s.seed = std::hash<std::string>{}(name);
    shape(s);
    const double tolerance =
        s.attention == hedge::quant::gguf_type::f32 ? architecture_float_tolerance : q8_0_tolerance;
    cases.push_back({std::move(name), s, tolerance});
  };
  // Llama 3: per-pair RoPE factors, a large base, the classifier tied to the embedding,
  // key_length given.
  add("llama", [](synthetic_llama& s) {
    s.rope_factors = true, s.rope_theta = 500000.0f, s.shared_classifier = true, s.head_dim = 16;
  });
  add("smollm3", [](synthetic_llama& s) { s.architecture = "smollm3", s.layers = 4; });
  add("qwen2", [](synthetic_llama& s) { s.architecture = "qwen2", s.rope_theta = 1000000.0f; });
  // Heads of 32: Q is 128 wide in a model of width 64.
  add("qwen3", [](synthetic_llama& s) { s.architecture = "qwen3", s.head_dim = 32; });
  // 12 of 16 dimensions rotated; LongRoPE factors, the long ones (context 64 > 32).
  add("phi3", [](synthetic_llama& s) { s.architecture = "phi3", s.rope_dim = 12, s.rope_factors = true; });
  // Windows of 4 positions, shorter than the prompt, every other layer.
  add("gemma2", [](synthetic_llama& s) {
    s.architecture = "gemma2", s.head_dim = 32, s.heads = 2, s.kv_heads = 1, s.sliding_window = 4;
  });
  // Two local layers in three, their own RoPE base; the global layer's positions scaled by 1/8.
  add("gemma3", [](synthetic_llama& s) {
    s.architecture = "gemma3", s.layers = 3, s.head_dim = 32, s.sliding_window = 4, s.sliding_pattern = 3;
    s.rope_theta = 1000000.0f, s.rope_scaling = 8.0f;
  });
  // Q8_0 weights: both quantize the activations to Q8_0 blocks (ggml's rounding).
  add("qwen3_q8_0", [](synthetic_llama& s) {
    s.architecture = "qwen3", s.head_dim = 32;
    s.all_types(hedge::quant::gguf_type::q8_0);
  });
  return cases;
}

/// The prompt's ids, and how many ids llama.cpp generated after them.
const std::vector<std::int32_t> prompt = {1, 7, 21, 33, 45, 12, 60, 5, 19, 40};
constexpr std::size_t generated = 16;

/// llama.cpp's ids and logits at each step for one architecture.
struct reference {
  std::vector<std::int32_t> ids;
  std::vector<std::vector<float>> logits;
};

/// tests/model/data/llama_cpp_architectures.txt: per architecture a line "arch NAME", a
/// line of ids, then one line of logits per id.
std::map<std::string, reference> read_references() {
  std::map<std::string, reference> out;
  std::ifstream in(std::string(HEDGE_SOURCE_DIR) + "/tests/model/data/llama_cpp_architectures.txt");
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "arch") {
      fields >> name;
    } else if (kind == "ids") {
      for (std::int32_t id; fields >> id;) out[name].ids.push_back(id);
    } else if (kind == "logits") {
      auto& row = out[name].logits.emplace_back();
      for (float z; fields >> z;) row.push_back(z);
    }
  }
  return out;
}


class Architecture : public ::testing::TestWithParam<architecture_case> {};

TEST_P(Architecture, GreedyIdsAndLogitsMatchLlamaCpp) {
  const architecture_case& c = GetParam();
  if (const char* dir = std::getenv("HEDGE_WRITE_ARCHITECTURE_MODELS")) {  // scripts/architecture-references.sh
    const auto bytes = write_synthetic_gguf(c.spec);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message();
    std::ofstream(std::string(dir) + "/" + c.name + ".gguf", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes->span().data()), static_cast<std::streamsize>(bytes->size));
  }
  const auto references = read_references();
  const auto found = references.find(c.name);
  ASSERT_NE(found, references.end()) << "no llama.cpp reference for " << c.name;
  const reference& ref = found->second;
  ASSERT_EQ(ref.ids.size(), generated);
  ASSERT_EQ(ref.logits.size(), generated);

  const auto loaded = load_synthetic(c.spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message();
  for (const auto& a : detail::architectures) {
    if (a.name == c.spec.architecture) {
      EXPECT_EQ(loaded->weights.config.architecture, a.architecture);
    }
  }
  for (const bool prefill : {false, true}) {
    auto model = llama<>::make(loaded->weights, {.max_prefill = 4});
    ASSERT_TRUE(model.ok()) << model.error().message();
    auto seq = model->create_session();
    ASSERT_TRUE(seq.ok());
    std::span<const float> logits;
    if (prefill) {  // chunks of 4 rows: a local layer's window spans chunks
      auto out = model->prefill(*seq, prompt);
      ASSERT_TRUE(out.ok()) << out.error().message();
      logits = *out;
    } else {
      for (const std::int32_t id : prompt) {
        auto out = model->decode(*seq, id);
        ASSERT_TRUE(out.ok()) << out.error().message();
        logits = *out;
      }
    }
    double worst = 0.0;
    for (std::size_t step = 0; step < generated; ++step) {
      const std::vector<float>& expected = ref.logits[step];
      ASSERT_EQ(expected.size(), logits.size());
      double most = 0.0, scale = 0.0;
      for (std::size_t j = 0; j < expected.size(); ++j) {
        most = std::max(most, std::abs(static_cast<double>(logits[j]) - expected[j]));
        scale = std::max(scale, std::abs(static_cast<double>(expected[j])));
      }
      worst = std::max(worst, most / scale);
      EXPECT_LT(most / scale, c.tolerance) << c.name << (prefill ? " prefill" : " decode") << ", step " << step;
      const auto id = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ASSERT_EQ(id, ref.ids[step]) << c.name << (prefill ? " prefill" : " decode") << ", step " << step;
      auto out = model->decode(*seq, id);
      ASSERT_TRUE(out.ok()) << out.error().message();
      logits = *out;
    }
    std::printf("%s (%s): %zu greedy ids equal llama.cpp's, worst logit error / max|logit| %.3g (tolerance %.3g)\n",
                c.name.c_str(), prefill ? "prefill" : "decode", generated, worst, c.tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, Architecture, ::testing::ValuesIn(architecture_cases()),
                         [](const ::testing::TestParamInfo<architecture_case>& info) { return info.param.name; });

// ---- Hostile files: every count checked against what the file holds before it sizes anything. ----

synthetic_llama small(std::string architecture) {
  synthetic_llama s{.dim = 32, .hidden_dim = 32, .layers = 1, .heads = 2, .kv_heads = 1, .context = 8, .vocab = 8};
  s.architecture = std::move(architecture);
  return s;
}

TEST(HostileFile, BlockCountAboveTheTensorsIsRefusedBeforeAllocating) {
  // The file: 2^30 layers (0x4e00000000 bytes of layer records) in a one-layer file.
  for (const std::uint32_t claimed : {1u << 30, 0xffffffffu, 2u}) {
    auto s = small("llama");
    s.defects.block_count = claimed;
    const auto loaded = load_synthetic(s);
    ASSERT_FALSE(loaded.ok());
    if (claimed == 2u) {  // within the tensor count: the missing layer's first tensor is named
      EXPECT_NE(loaded.error().message().find("blk.1.attn_norm.weight"), std::string_view::npos)
          << loaded.error().message();
    } else {
      expect_error(loaded.error(), errc::parse_error, "block_count " + std::to_string(claimed) + " needs at least");
    }
  }
}

TEST(HostileFile, ContextLengthAboveAnyCacheIsRefused) {
  auto s = small("qwen2");
  s.context = 0xffffffffu;
  expect_error(load_synthetic(s).error(), errc::invalid_argument, "context length 4294967295 above");
}

TEST(HostileFile, CountsThatDisagreeWithTheTensorsAreRefusedByName) {
  auto s = small("qwen3");
  s.head_dim = 64;  // heads of 64 in a model of width 32
  expect_error(load_synthetic(s).error(), errc::invalid_argument, "2 heads of 64 for a width of 32");
  s = small("llama");
  s.vocab = 8;
  s.defects.extra_row = "token_embd.weight";  // 9 rows for 8 tokens
  expect_error(load_synthetic(s).error(), errc::shape_mismatch, "token_embd.weight");
}

TEST(HostileFile, EachNewTensorKindOfTheWrongShapeIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"qwen2", "blk.0.attn_k.bias"},          {"qwen3", "blk.0.attn_q_norm.weight"},
      {"gemma2", "blk.0.post_attention_norm.weight"}, {"gemma3", "blk.0.post_ffw_norm.weight"},
      {"phi3", "blk.0.attn_qkv.weight"},       {"phi3", "blk.0.ffn_up.weight"},
  };
  for (const auto& [architecture, tensor] : cases) {
    auto s = small(architecture);
    s.defects.extra_row = tensor;
    const auto loaded = load_synthetic(s);
    ASSERT_FALSE(loaded.ok()) << tensor;
    expect_error(loaded.error(), errc::shape_mismatch, std::string("tensor '") + tensor + "'");
    s.defects.extra_row.clear();
    s.defects.missing = tensor;
    ASSERT_FALSE(load_synthetic(s).ok()) << tensor << " missing";
  }
  auto s = small("llama");
  s.rope_factors = true;
  s.defects.extra_row = "rope_freqs.weight";
  expect_error(load_synthetic(s).error(), errc::shape_mismatch, "tensor 'rope_freqs.weight'");
  s = small("gemma3");
  s.defects.f16_norm = "blk.0.attn_k_norm.weight";
  const auto f16 = load_synthetic(s);
  ASSERT_FALSE(f16.ok());
  EXPECT_NE(f16.error().message().find("blk.0.attn_k_norm.weight"), std::string_view::npos) << f16.error().message();
}

TEST(HostileFile, UnsupportedArchitecturesAndRopeScalingAreRefusedByName) {
  hedge::model::gguf_writer w;
  w.add("general.architecture", "mamba");
  std::vector<std::byte> bytes;
  ASSERT_TRUE(w.write(bytes).ok());
  const auto aligned = hedge::test::aligned_copy(bytes);
  const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(aligned.data()), bytes.size()});
  ASSERT_TRUE(file.ok());
  expect_error(read_llama_config(*file).error(), errc::unsupported, "architecture 'mamba' is not supported");
  // YaRN (Qwen's long-context files) is refused by name.
  auto s = small("qwen2");
  s.rope_scaling = 4.0f;
  const auto linear = write_synthetic_gguf(s);
  ASSERT_TRUE(linear.ok());
  std::vector<std::byte> yarn(linear->span().begin(), linear->span().end());
  const std::string_view from = "linear", to("yarn\0\0", 6);
  const auto at = std::search(yarn.begin(), yarn.end(), reinterpret_cast<const std::byte*>(from.data()),
                              reinterpret_cast<const std::byte*>(from.data()) + from.size());
  ASSERT_NE(at, yarn.end());
  // The string's length field (u64 before it) says 6: "yarn" and two NULs keep the layout.
  std::copy_n(reinterpret_cast<const std::byte*>(to.data()), to.size(), at);
  const auto aligned_yarn = hedge::test::aligned_copy(yarn);
  const auto yarn_file = gguf_file::parse({reinterpret_cast<const std::byte*>(aligned_yarn.data()), yarn.size()});
  ASSERT_TRUE(yarn_file.ok()) << yarn_file.error().message();
  expect_error(read_llama_config(*yarn_file).error(), errc::unsupported, "RoPE scaling other than linear and longrope");
}

}  // namespace
