// Block formats: ABI layout, hand-computed golden blocks, edge cases, the
// BlockFormat concept (including a user-written format) and row round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace {

namespace q = hedge::quant;

// The block structs are GGUF's bytes: offsets, not just sizes, must agree.
static_assert(offsetof(q::q8_0::block, qs) == 2);
static_assert(offsetof(q::q4_0::block, qs) == 2);
static_assert(offsetof(q::q4_k::block, dmin) == 2 && offsetof(q::q4_k::block, scales) == 4 &&
              offsetof(q::q4_k::block, qs) == 16);
static_assert(offsetof(q::q8_k::block, qs) == 4 && offsetof(q::q8_k::block, bsums) == 260);
static_assert(offsetof(q::q6_k::block, qh) == 128 && offsetof(q::q6_k::block, scales) == 192 &&
              offsetof(q::q6_k::block, d) == 208 && sizeof(q::q6_k::block) == 210);
static_assert(static_cast<int>(q::q4_k::type_id) == 12 && static_cast<int>(q::bf16::type_id) == 30);
static_assert(static_cast<int>(q::q6_k::type_id) == 14 && q::q6_k::name == "q6_k");
static_assert(std::is_same_v<q::q6_k::activation, q::q8_k>);
static_assert(q::row_bytes<q::q4_0>(4096) == 128 * 18);

/// A user-written format: 2 elements per block stored as int16 hundredths.
/// It only has to provide the members the concept names.
struct centi_pair {
  static constexpr std::string_view name = "centi_pair";
  static constexpr q::gguf_type type_id = q::gguf_type::f32;
  static constexpr std::size_t block_elements = 2;
  static constexpr float max_input = 327.f;
  struct block {
    std::int16_t v[2];
  };
  using activation = q::f32;
  static void quantize_block(std::span<const float, 2> x, block& out) noexcept {
    for (int i = 0; i < 2; ++i) out.v[i] = static_cast<std::int16_t>(std::lround(x[i] * 100.f));
  }
  static void dequantize_block(const block& b, std::span<float, 2> out) noexcept {
    for (int i = 0; i < 2; ++i) out[i] = static_cast<float>(b.v[i]) / 100.f;
  }
};
static_assert(q::BlockFormat<centi_pair>);
static_assert(!q::BlockFormat<int>);

TEST(BlockFormat, UserFormatWorksWithTheRowFunctions) {
  const float x[4] = {1.234f, -2.5f, 0.f, 3.f};
  centi_pair::block blocks[2];
  ASSERT_TRUE(q::quantize<centi_pair>({x, 4}, {blocks, 2}));
  EXPECT_EQ(blocks[0].v[0], 123);
  float back[4];
  ASSERT_TRUE(q::dequantize<centi_pair>({blocks, 2}, {back, 4}));
  EXPECT_FLOAT_EQ(back[1], -2.5f);
}

template <class F>
typename F::block quantize_one(const std::vector<float>& x) {
  typename F::block b;
  std::memset(static_cast<void*>(&b), 0xAB, sizeof b);  // every byte must be written
  F::quantize_block(std::span<const float, F::block_elements>(x.data(), F::block_elements), b);
  return b;
}

TEST(Q8_0, HandComputedBlock) {
  // amax = 127 -> d = 1 exactly; q = roundf(x): ties away from zero.
  std::vector<float> x(32, 0.f);
  x[0] = 127.f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = -0.5f;
  x[5] = 1.4999f;
  x[6] = -126.51f;
  const auto b = quantize_one<q::q8_0>(x);
  EXPECT_EQ(b.d.bits, 0x3C00);
  const int expected[7] = {127, 3, -3, 1, -1, 1, -127};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b.qs[i], expected[i]) << i;
  for (int i = 7; i < 32; ++i) EXPECT_EQ(b.qs[i], 0);
}

TEST(Q8_0, ScaleIsRoundedToFp16FromAmaxOver127) {
  // amax = 16: d = 16/127 = 0.12598..., fp16 0x3008 (0.1259765625); the q use
  // the float d: x = 16 -> 127, x = 8 -> round(63.5) = 64.
  std::vector<float> x(32, 0.f);
  x[10] = -16.f;
  x[11] = 8.f;
  const auto b = quantize_one<q::q8_0>(x);
  EXPECT_EQ(b.d.bits, 0x3008);
  EXPECT_EQ(b.qs[10], -127);
  EXPECT_EQ(b.qs[11], 64);
}

TEST(Q4_0, HandComputedBlock) {
  // max = -8 -> d = 1; nibble = min(15, (int8)(x + 8.5)).
  std::vector<float> x(32, 0.f);
  x[0] = -8.f;    // 0
  x[1] = 7.f;     // 15
  x[2] = -0.5f;   // (int8)8.0 = 8
  x[3] = -0.51f;  // (int8)7.99 = 7
  x[4] = 0.5f;    // 9
  x[16] = 7.9f;   // (int8)16.4 = 16 -> 15, high nibble of byte 0
  x[17] = -3.f;   // 5, high nibble of byte 1
  const auto b = quantize_one<q::q4_0>(x);
  EXPECT_EQ(b.d.bits, 0x3C00);
  EXPECT_EQ(b.qs[0], 0xF0);
  EXPECT_EQ(b.qs[1], 0x5F);
  EXPECT_EQ(b.qs[2], 0x88);
  EXPECT_EQ(b.qs[3], 0x87);
  EXPECT_EQ(b.qs[4], 0x89);
  for (int i = 5; i < 16; ++i) EXPECT_EQ(b.qs[i], 0x88) << i;
}

TEST(Q4_0, FirstValueOfLargestMagnitudeSetsTheSign) {
  std::vector<float> x(32, 0.f);
  x[3] = 8.f;
  x[7] = -8.f;  // same magnitude, later: ignored
  const auto b = quantize_one<q::q4_0>(x);
  EXPECT_EQ(b.d.bits, 0xBC00);  // d = 8 / -8 = -1
  EXPECT_EQ(b.qs[3] & 0x0F, 0);   // (0 - 8) * -1 = 8
  EXPECT_EQ(b.qs[7] & 0x0F, 15);  // (int8)(16.5) = 16 -> 15: -8 is stored as -7
}

// ggml's loops (quants.c: quantize_row_q4_0_ref's and quantize_row_q8_0_ref's), the
// specification of the branch-free helpers.
float ggml_signed_absmax(const std::vector<float>& x) {
  float amax = 0.f, max = 0.f;
  for (float v : x) {
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  return max;
}
float ggml_amax(const std::vector<float>& x) {
  float amax = 0.f;
  for (float v : x) amax = amax > std::fabs(v) ? amax : std::fabs(v);
  return amax;
}

TEST(BlockFormat, LargestMagnitudeHelpersAreGgmlsLoops) {
  std::mt19937 rng(29);
  const float specials[] = {0.f, -0.f, 1.f, -1.f, 3.5f, -3.5f, std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(), 65504.f, -65504.f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
  std::uniform_int_distribution<int> kind(0, 3), pick(0, 11), small(-3, 3), size(1, 300);
  std::normal_distribution<float> normal(0.f, 10.f);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<float> x(static_cast<std::size_t>(size(rng)));
    for (float& v : x) {
      const int k = kind(rng);  // many ties, signed zeros and infinities
      v = k == 0 ? specials[pick(rng)] : k == 1 ? static_cast<float>(small(rng)) : normal(rng);
    }
    const float want_signed = ggml_signed_absmax(x), got_signed = q::detail::signed_absmax(x);
    const float want_amax = ggml_amax(x), got_amax = q::detail::largest_magnitude(x);
    ASSERT_EQ(std::memcmp(&want_signed, &got_signed, 4), 0) << trial << ": " << want_signed << " " << got_signed;
    ASSERT_EQ(std::memcmp(&want_amax, &got_amax, 4), 0) << trial << ": " << want_amax << " " << got_amax;
  }
  EXPECT_EQ(std::signbit(q::detail::signed_absmax(std::vector<float>{-0.f, -0.f})), false);  // ggml's +0
}

TEST(Q4_K, ScaleMinPackingRoundTrips) {
  // Pack 6-bit values the way the quantizer does and unpack them again.
  std::uint8_t packed[12] = {};
  const std::uint8_t s[8] = {63, 1, 2, 40, 17, 63, 0, 33};
  const std::uint8_t m[8] = {0, 63, 5, 21, 62, 9, 48, 1};
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[j] = s[j];
      packed[j + 4] = m[j];
    } else {
      packed[j + 4] = static_cast<std::uint8_t>((s[j] & 0xF) | ((m[j] & 0xF) << 4));
      packed[j - 4] = static_cast<std::uint8_t>(packed[j - 4] | ((s[j] >> 4) << 6));
      packed[j] = static_cast<std::uint8_t>(packed[j] | ((m[j] >> 4) << 6));
    }
  }
  for (std::size_t j = 0; j < 8; ++j) {
    const auto sm = q::q4_k::unpack_scale_min(packed, j);
    EXPECT_EQ(sm.scale, s[j]) << j;
    EXPECT_EQ(sm.min, m[j]) << j;
  }
}

TEST(Q4_K, AllZeroBlockIsZero) {
  const auto b = quantize_one<q::q4_k>(std::vector<float>(256, 0.f));
  EXPECT_EQ(b.d.bits, 0);
  EXPECT_EQ(b.dmin.bits, 0);
  for (auto v : b.scales) EXPECT_EQ(v, 0);
  for (auto v : b.qs) EXPECT_EQ(v, 0);
}

TEST(Q8_K, SumsAreThePerSixteenSums) {
  std::vector<float> x(256);
  for (std::size_t i = 0; i < 256; ++i) x[i] = static_cast<float>(static_cast<int>(i % 37) - 18) * 0.25f;
  const auto b = quantize_one<q::q8_k>(x);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += b.qs[g * 16 + j];
    EXPECT_EQ(b.bsums[g], sum);
  }
  // max = -4.5 (first of largest magnitude), scale = -127 / -4.5: -4.5 -> -127.
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_FLOAT_EQ(b.d, -4.5f / -127.f);
}

/// Element e's 6-bit level as ggml's dequantize_row_q6_K reads it: for each
/// 128-element half and l < 32, four values from ql[l], ql[l + 32] and qh[l].
int ggml_q6_k_level(const q::q6_k::block& b, std::size_t e) {
  const std::uint8_t* ql = b.ql + 64 * (e / 128);
  const std::uint8_t* qh = b.qh + 32 * (e / 128);
  const std::size_t l = e % 32;
  switch ((e % 128) / 32) {
    case 0: return (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
    case 1: return (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
    case 2: return (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
    default: return (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
  }
}

TEST(Q6_K, LevelsAndValuesFollowGgmlLayout) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    q::q6_k::block b;
    auto* bytes = reinterpret_cast<std::uint8_t*>(&b);
    for (std::size_t i = 0; i < sizeof b; ++i) bytes[i] = static_cast<std::uint8_t>(rng());
    b.d = hedge::f32_to_f16(0.01f * static_cast<float>(trial - 50));
    float values[256];
    q::q6_k::dequantize_block(b, std::span<float, 256>(values, 256));
    for (std::size_t e = 0; e < 256; ++e) {
      ASSERT_EQ(q::q6_k::level(b, e), ggml_q6_k_level(b, e)) << e;
      // ggml: y = d * sc * q, left to right.
      const float expected = hedge::f16_to_f32(b.d) * static_cast<float>(b.scales[e / 16]) *
                             static_cast<float>(ggml_q6_k_level(b, e) - 32);
      ASSERT_EQ(values[e], expected) << e;
    }
  }
}

TEST(Q6_K, HandComputedBlock) {
  // Sub-block j holds (i - 16) / 2 * 2^-(j % 4), i = 0..15: the first largest
  // magnitude is x_0 = -8 * 2^-(j % 4), so iscale = 32 / (8 * 2^-(j % 4)) and
  // l = 2 (i - 16) exactly, the least-squares scale is exactly 2^-(j % 4) / 4 and
  // no other candidate fits better. Sub-block 0's scale (0.25) is the largest:
  // d = 0.25 / -128 = -2^-9 (fp16 0x9800), scale_j = -128 * 2^-(j % 4), and
  // every level is 2i: the round trip is exact.
  std::vector<float> x(256);
  for (std::size_t e = 0; e < 256; ++e) {
    x[e] = std::ldexp(static_cast<float>(static_cast<int>(e % 16) - 16) / 2.f, -static_cast<int>((e / 16) % 4));
  }
  const auto b = quantize_one<q::q6_k>(x);
  EXPECT_EQ(b.d.bits, 0x9800);
  for (std::size_t j = 0; j < 16; ++j) EXPECT_EQ(b.scales[j], -128 >> (j % 4)) << j;
  for (std::size_t e = 0; e < 256; ++e) ASSERT_EQ(q::q6_k::level(b, e), static_cast<int>(2 * (e % 16))) << e;
  // Bytes as ggml packs them: element l and l + 64 of a half share ql[l];
  // levels >= 16 (i >= 8) set the high bits in qh.
  for (std::size_t l = 0; l < 32; ++l) {
    const auto nibble = static_cast<std::uint8_t>((2 * (l % 16)) & 0xF);
    EXPECT_EQ(b.ql[l], nibble | (nibble << 4)) << l;
    EXPECT_EQ(b.qh[l], l % 16 >= 8 ? 0x55 : 0x00) << l;
  }
  float back[256];
  q::q6_k::dequantize_block(b, std::span<float, 256>(back, 256));
  for (std::size_t e = 0; e < 256; ++e) ASSERT_EQ(back[e], x[e]) << e;
}

TEST(Q6_K, AllZeroAndNegligibleBlocksAreZeroBytes) {
  // ggml zeroes a block whose largest sub-block scale is below 1e-15; 1e-14
  // gives scales of about 3e-16.
  for (float c : {0.f, 1e-14f, -1e-14f}) {
    const auto b = quantize_one<q::q6_k>(std::vector<float>(256, c));
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(&b);
    for (std::size_t i = 0; i < sizeof b; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i << " for " << c;
  }
}

TEST(Q6_K, ZeroSubBlockKeepsLevelZeroAndScaleZero) {
  // make_qx_quants gives an all-zero sub-block levels 0 (not 32) and scale 0;
  // with its stored scale 0 the requantization skips it, as in ggml.
  std::vector<float> x(256);
  for (std::size_t e = 0; e < 256; ++e) x[e] = std::sin(static_cast<float>(e)) + 0.1f;
  for (std::size_t e = 80; e < 96; ++e) x[e] = 0.f;
  const auto b = quantize_one<q::q6_k>(x);
  EXPECT_EQ(b.scales[5], 0);
  for (std::size_t e = 80; e < 96; ++e) EXPECT_EQ(q::q6_k::level(b, e), 0) << e;
  float back[256];
  q::q6_k::dequantize_block(b, std::span<float, 256>(back, 256));
  for (std::size_t e = 80; e < 96; ++e) EXPECT_EQ(back[e], 0.f) << e;
}

TEST(Q6_K, ConstantRowsRoundTrip) {
  // Every sub-block's scale is -c / 32, so d = c / 4096 and every level is 0:
  // exact where c / 4096 is an fp16 value.
  for (float c : {1.f, -3.f, 1024.f}) {
    const auto b = quantize_one<q::q6_k>(std::vector<float>(256, c));
    float back[256];
    q::q6_k::dequantize_block(b, std::span<float, 256>(back, 256));
    for (std::size_t e = 0; e < 256; ++e) ASSERT_EQ(back[e], c) << e << " for " << c;
  }
}

TEST(Q6_K, AlternatingSignsPreferAnUnclampedFit) {
  // +a first: the start iscale -32 / a maps -a to 32, clamped to 31; the search's
  // first candidate, -31.1 / a, maps +-a to -+31, an exact fit, and nothing fits
  // better: levels 1 and 63, scale -a / 31, and the round trip is off only by
  // the fp16 rounding of d.
  std::vector<float> x(256);
  for (std::size_t e = 0; e < 256; ++e) x[e] = e % 2 ? -2.f : 2.f;
  const auto b = quantize_one<q::q6_k>(x);
  for (std::size_t e = 0; e < 256; ++e) ASSERT_EQ(q::q6_k::level(b, e), e % 2 ? 63 : 1) << e;
  for (auto s : b.scales) EXPECT_EQ(s, -128);
  float back[256];
  q::q6_k::dequantize_block(b, std::span<float, 256>(back, 256));
  for (std::size_t e = 0; e < 256; ++e) ASSERT_NEAR(back[e], x[e], 2.f * 0x1p-11f) << e;
}

// ---- edge cases shared by every format ----------------------------------

template <class F>
class EveryFormat : public ::testing::Test {};
using Formats = ::testing::Types<q::q8_0, q::q4_0, q::q5_0, q::q5_1, q::q4_k, q::q5_k, q::q6_k, q::q8_k, q::f32,
                                 q::f16, q::bf16>;
TYPED_TEST_SUITE(EveryFormat, Formats);

/// Largest |error| allowed after a round trip of values in [-amax, amax]: half a
/// quantization step, plus the fp16 rounding of the scale (2^-11 relative,
/// times up to 127 steps for Q8_0); Q4_K's fitted scale can reach a whole step.
/// Q6_K: one step of the coarsest sub-block, about amax / 32 (levels run -32..31,
/// so a value opposite in sign to the largest can be clamped a step short).
template <class F>
float step_bound(float amax) {
  if constexpr (std::is_same_v<F, q::q8_0>) return amax / 127.f * (0.5f + 127.f * 0x1p-11f);
  if constexpr (std::is_same_v<F, q::q8_k>) return amax / 127.f * 0.5f * 1.01f;
  if constexpr (std::is_same_v<F, q::q4_0>) return amax / 8.f * 1.01f;  // the far end is a whole step off
  if constexpr (std::is_same_v<F, q::q5_0>) return amax / 16.f * 1.01f;
  if constexpr (std::is_same_v<F, q::q5_1>) return 2.f * amax / 31.f * (0.5f + 31.f * 0x1p-11f) + amax * 0x1p-11f;
  if constexpr (std::is_same_v<F, q::q4_k>) return 2.f * amax / 15.f;
  if constexpr (std::is_same_v<F, q::q5_k>) return 2.f * amax / 31.f;
  if constexpr (std::is_same_v<F, q::q6_k>) return amax / 31.f;
  if constexpr (std::is_same_v<F, q::f32>) return 0.f;
  if constexpr (std::is_same_v<F, q::f16>) return amax * 0x1p-11f;
  return amax * 0x1p-8f;
}

TYPED_TEST(EveryFormat, AllZerosRoundTripToZero) {
  constexpr std::size_t n = 2 * TypeParam::block_elements;
  std::vector<float> x(n, 0.f), back(n, 1.f);
  std::vector<typename TypeParam::block> blocks(n / TypeParam::block_elements);
  ASSERT_TRUE(q::quantize<TypeParam>({x.data(), n}, {blocks.data(), blocks.size()}));
  ASSERT_TRUE(q::dequantize<TypeParam>({blocks.data(), blocks.size()}, {back.data(), n}));
  for (float v : back) EXPECT_EQ(v, 0.f);
}

TYPED_TEST(EveryFormat, RandomRowsRoundTripWithinHalfAStep) {
  constexpr std::size_t n = 512;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  std::vector<float> x(n), back(n);
  for (auto& v : x) v = dist(rng);
  std::vector<typename TypeParam::block> blocks(n / TypeParam::block_elements);
  ASSERT_TRUE(q::quantize<TypeParam>({x.data(), n}, {blocks.data(), blocks.size()}));
  ASSERT_TRUE(q::dequantize<TypeParam>({blocks.data(), blocks.size()}, {back.data(), n}));
  for (std::size_t i = 0; i < n; i += TypeParam::block_elements) {
    float amax = 0.f;
    for (std::size_t j = 0; j < TypeParam::block_elements; ++j) amax = std::max(amax, std::fabs(x[i + j]));
    for (std::size_t j = 0; j < TypeParam::block_elements; ++j) {
      EXPECT_LE(std::fabs(back[i + j] - x[i + j]), step_bound<TypeParam>(amax)) << i + j;
    }
  }
}

TYPED_TEST(EveryFormat, NonFiniteInputIsRejected) {
  constexpr std::size_t n = TypeParam::block_elements;
  std::vector<typename TypeParam::block> blocks(1);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x(n, 1.f);
    x[n - 1] = bad;
    const auto r = q::quantize<TypeParam>({x.data(), n}, {blocks.data(), 1});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  }
}

TYPED_TEST(EveryFormat, ShapeMismatchIsRejected) {
  std::vector<float> x(TypeParam::block_elements + 1, 0.f);
  std::vector<typename TypeParam::block> blocks(1);
  const auto r = q::quantize<TypeParam>({x.data(), x.size()}, {blocks.data(), 1});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::shape_mismatch);
  std::vector<float> out(TypeParam::block_elements * 2);
  EXPECT_EQ(q::dequantize<TypeParam>({blocks.data(), 1}, {out.data(), out.size()}).error().code(),
            hedge::errc::shape_mismatch);
}

TYPED_TEST(EveryFormat, OneHugeValueDominatesAndOthersStaySmall) {
  constexpr std::size_t n = TypeParam::block_elements < 32 ? 32 : TypeParam::block_elements;
  std::vector<float> x(n, 0.001f), back(n);
  const float huge = std::min(TypeParam::max_input, 1e5f);
  x[n / 2] = huge;
  std::vector<typename TypeParam::block> blocks(n / TypeParam::block_elements);
  ASSERT_TRUE(q::quantize<TypeParam>({x.data(), n}, {blocks.data(), blocks.size()}));
  ASSERT_TRUE(q::dequantize<TypeParam>({blocks.data(), blocks.size()}, {back.data(), n}));
  EXPECT_NEAR(back[n / 2], huge, step_bound<TypeParam>(huge));
  for (float v : back) EXPECT_TRUE(std::isfinite(v));
}

TYPED_TEST(EveryFormat, ValueBeyondMaxInputIsRejected) {
  if (TypeParam::max_input == std::numeric_limits<float>::max()) GTEST_SKIP() << "every finite float fits";
  constexpr std::size_t n = TypeParam::block_elements;
  std::vector<float> x(n, 0.f);
  x[0] = -std::nextafter(TypeParam::max_input, std::numeric_limits<float>::infinity());
  std::vector<typename TypeParam::block> blocks(1);
  const auto r = q::quantize<TypeParam>({x.data(), n}, {blocks.data(), 1});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::out_of_range);
  x[0] = TypeParam::max_input;  // the bound itself fits and stays finite
  ASSERT_TRUE(q::quantize<TypeParam>({x.data(), n}, {blocks.data(), 1}));
  std::vector<float> back(n);
  ASSERT_TRUE(q::dequantize<TypeParam>({blocks.data(), 1}, {back.data(), n}));
  EXPECT_TRUE(std::isfinite(back[0]));
}

TYPED_TEST(EveryFormat, DenormalsQuantizeToFiniteValuesNearZero) {
  constexpr std::size_t n = TypeParam::block_elements < 32 ? 32 : TypeParam::block_elements;
  std::vector<float> x(n), back(n);
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(static_cast<int>(i % 7) - 3) * tiny * 1000.f;
  std::vector<typename TypeParam::block> blocks(n / TypeParam::block_elements);
  ASSERT_TRUE(q::quantize<TypeParam>({x.data(), n}, {blocks.data(), blocks.size()}));
  ASSERT_TRUE(q::dequantize<TypeParam>({blocks.data(), blocks.size()}, {back.data(), n}));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_TRUE(std::isfinite(back[i]));
    EXPECT_LE(std::fabs(back[i]), 1e-30f);
  }
}

TEST(FloatFormats, ConvertWithRoundToNearestEven) {
  q::f16::block h;
  q::f16::quantize_block(std::span<const float, 1>(std::array<float, 1>{1.f + 0x1p-11f}.data(), 1), h);
  EXPECT_EQ(h.bits, 0x3C00);  // a tie rounds to the even mantissa
  q::bf16::block b;
  q::bf16::quantize_block(std::span<const float, 1>(std::array<float, 1>{1.f + 3 * 0x1p-8f}.data(), 1), b);
  EXPECT_EQ(b.bits, 0x3F82);  // 1.5 ulp: a tie, up to the even 2 ulp
}

}  // namespace

namespace {

TEST(Rounding, RoundHalfAwayMatchesRoundf) {
  // Every tie k + 0.5 and its float neighbours in the Q8_0 range, then random values.
  for (int k = -200; k <= 200; ++k) {
    for (float v : {static_cast<float>(k) + 0.5f, static_cast<float>(k) - 0.5f}) {
      for (float t : {v, std::nextafter(v, 1e9f), std::nextafter(v, -1e9f)}) {
        ASSERT_EQ(hedge::quant::detail::round_half_away(t), static_cast<int>(std::round(t))) << t;
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  for (int i = 0; i < 1000000; ++i) {
    const float t = dist(rng) / static_cast<float>(1 << (i % 20));
    ASSERT_EQ(hedge::quant::detail::round_half_away(t), static_cast<int>(std::round(t))) << t;
  }
}

TEST(Rounding, NearestIntRoundsTiesToEven) {
  EXPECT_EQ(hedge::quant::detail::nearest_int(2.5f), 2);
  EXPECT_EQ(hedge::quant::detail::nearest_int(3.5f), 4);
  EXPECT_EQ(hedge::quant::detail::nearest_int(-2.5f), -2);
  EXPECT_EQ(hedge::quant::detail::nearest_int(-126.7f), -127);
}

}  // namespace

namespace {

TEST(Q4_K, BulkUnpackAgreesWithPerFieldUnpack) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 1000; ++trial) {
    std::uint8_t packed[12];
    for (auto& b : packed) b = static_cast<std::uint8_t>(rng());
    const auto all = hedge::quant::q4_k::unpack_scales_mins(packed);
    for (std::size_t j = 0; j < 8; ++j) {
      const auto one = hedge::quant::q4_k::unpack_scale_min(packed, j);
      ASSERT_EQ(all.scales[j], one.scale) << j;
      ASSERT_EQ(all.mins[j], one.min) << j;
    }
  }
}

}  // namespace
