// fp16/bf16 conversions against an independent reference: the hardware F16C
// conversion where this CPU has it, and a float64 round-to-nearest-even model.
#include "hedge/core/half.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

// Reference fp16 rounding in double precision: the nearest representable half,
// ties to the even mantissa, overflow to inf.
std::uint16_t reference_f32_to_f16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = (bits >> 16) & 0x8000u;
  if (std::isnan(f)) return 0;  // NaN handled separately by callers
  double a = std::fabs(static_cast<double>(f));
  if (a == 0.0) return sign;
  int e;
  std::frexp(a, &e);                 // a = m * 2^e, m in [0.5, 1)
  int exponent = std::max(e - 1, -14);  // binade of a, clamped to the subnormal range
  double ulp = std::ldexp(1.0, exponent - 10);
  double q = a / ulp;                // exact: power-of-two scaling
  double fl = std::floor(q);
  double frac = q - fl;
  double m = fl;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) == 1.0)) m += 1.0;
  double value = m * ulp;
  if (value >= 65520.0 || value > 65504.0) return sign | 0x7C00u;
  // Encode: value = m * 2^(exponent-10), m may have carried to 2048.
  if (m >= 2048.0) {
    m /= 2.0;
    exponent += 1;
  }
  if (m < 1024.0) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(m));  // subnormal
  return static_cast<std::uint16_t>(sign | ((exponent + 15) << 10) | (static_cast<std::uint16_t>(m) - 1024));
}

}  // namespace

TEST(Half, AllHalfValuesRoundTrip) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const hedge::f16 h{static_cast<std::uint16_t>(b)};
    const float f = hedge::f16_to_f32(h);
    const bool nan = (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_TRUE(std::isnan(hedge::f16_to_f32(hedge::f32_to_f16(f)))) << b;
      continue;
    }
    ASSERT_EQ(hedge::f32_to_f16(f).bits, b) << "half 0x" << std::hex << b;
  }
}

TEST(Half, WideningIsExact) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const std::uint32_t exponent = (b >> 10) & 0x1F, mantissa = b & 0x3FF;
    if (exponent == 0x1F) continue;
    double expected = exponent == 0 ? std::ldexp(static_cast<double>(mantissa), -24)
                                    : std::ldexp(1.0 + mantissa / 1024.0, static_cast<int>(exponent) - 15);
    if (b & 0x8000u) expected = -expected;
    ASSERT_EQ(static_cast<double>(hedge::f16_to_f32(hedge::f16{static_cast<std::uint16_t>(b)})), expected) << b;
  }
  EXPECT_TRUE(std::isinf(hedge::f16_to_f32(hedge::f16{0x7C00})));
  EXPECT_TRUE(std::signbit(hedge::f16_to_f32(hedge::f16{0x8000})));
}

TEST(Half, RandomFloatsMatchReferenceRounding) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 4'000'000; ++i) {
    // Mix of arbitrary bit patterns and values near the half range, where rounding matters.
    std::uint32_t bits = any_bits(rng);
    if (i % 2) bits = (bits & 0x807FFFFFu) | ((97u + bits % 48u) << 23);
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      EXPECT_EQ(hedge::f32_to_f16(f).bits & 0x7E00u, 0x7E00u);
      continue;
    }
    ASSERT_EQ(hedge::f32_to_f16(f).bits, reference_f32_to_f16(f)) << std::hexfloat << f;
  }
}

TEST(Half, TiesAndBoundaries) {
  EXPECT_EQ(hedge::f32_to_f16(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(hedge::f32_to_f16(65519.99f).bits, 0x7BFF);
  EXPECT_EQ(hedge::f32_to_f16(65520.0f).bits, 0x7C00);  // tie to even rounds up to inf
  EXPECT_EQ(hedge::f32_to_f16(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie to even: zero
  EXPECT_EQ(hedge::f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits, 0x0001);
  EXPECT_EQ(hedge::f32_to_f16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3C00);  // tie, even stays
  EXPECT_EQ(hedge::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3C02);  // tie, odd rounds up
  EXPECT_EQ(hedge::f32_to_f16(-std::numeric_limits<float>::infinity()).bits, 0xFC00);
  EXPECT_EQ(hedge::f32_to_f16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
}

#if defined(__F16C__)
TEST(Half, MatchesF16CHardware) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng));
    if (std::isnan(f)) continue;
    const auto hw = static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_EQ(hedge::f32_to_f16(f).bits, hw) << std::hexfloat << f;
  }
}
#endif

TEST(BFloat16, RoundTripAndNearestEven) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const float f = hedge::bf16_to_f32(hedge::bf16{static_cast<std::uint16_t>(b)});
    if (std::isnan(f)) continue;
    ASSERT_EQ(hedge::f32_to_bf16(f).bits, b);
  }
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 2'000'000; ++i) {
    const std::uint32_t bits = any_bits(rng);
    const float f = std::bit_cast<float>(bits);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(hedge::bf16_to_f32(hedge::f32_to_bf16(f))));
      continue;
    }
    // Reference: pick the nearer of the two bf16 neighbours, even on ties.
    const std::uint32_t lo = bits & 0xFFFF0000u, hi = lo + 0x10000u;
    const std::uint32_t rest = bits & 0xFFFFu;
    std::uint32_t expected = rest < 0x8000u ? lo : rest > 0x8000u ? hi : ((lo >> 16) & 1u ? hi : lo);
    ASSERT_EQ(hedge::f32_to_bf16(f).bits, expected >> 16) << std::hexfloat << f;
  }
}

static_assert(hedge::f16_to_f32(hedge::f32_to_f16(0.333251953125f)) == 0.333251953125f);
static_assert(hedge::bf16_to_f32(hedge::f32_to_bf16(1.0f)) == 1.0f);
