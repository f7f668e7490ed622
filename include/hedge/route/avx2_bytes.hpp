// hedge/route/avx2_bytes.hpp: AVX2 byte-vector helpers shared by the route scanners (the
// complexity feature pass and the PII pre-scan): 32 bytes loaded, classified by range and
// turned into a bit mask. Each carries the AVX2 target attribute, so a baseline x86-64
// build compiles them too; empty where no x86 variant is compiled (HEDGE_SIMD_X86 is 0).
#pragma once

#include <array>
#include <cstdint>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"

#if HEDGE_SIMD_X86
namespace hedge::route::avx2 {

/// The 32 bytes at p (unaligned).
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i load32(const unsigned char* p) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// The byte range [lo, hi] (unsigned values, lo <= hi < 0x80) as the two constants of a
/// range test: bytes are moved so that lo is -128, then one signed compare.
struct byte_range {
  __m256i move, bound;
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE byte_range(char lo, char hi) noexcept
      : move(_mm256_set1_epi8(static_cast<char>(-128 - lo))),
        bound(_mm256_set1_epi8(static_cast<char>(-128 + (hi - lo + 1)))) {}
};

/// r, its constants opaque (compiler/barrier.hpp), for a range made once, before a loop.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE byte_range opaque_range(byte_range r) noexcept {
  r.move = compiler::opaque(r.move);
  r.bound = compiler::opaque(r.bound);
  return r;
}

/// Bytes of v in the range r, as 0xff / 0.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i in_range(__m256i v, const byte_range& r) noexcept {
  return _mm256_cmpgt_epi8(r.bound, _mm256_add_epi8(v, r.move));
}
/// Bytes of v in [lo, hi] (unsigned values, lo <= hi < 0x80), as 0xff / 0.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i in_range(__m256i v, char lo, char hi) noexcept {
  return in_range(v, byte_range{lo, hi});
}

/// A 16-byte table (a vpshufb lookup table) in both 128-bit lanes.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i broadcast16(const std::array<std::uint8_t, 16>& t) noexcept {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.data())));
}

/// Bit k set when byte k of the mask m is set.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE std::uint32_t bits(__m256i m) noexcept {
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(m));
}

}  // namespace hedge::route::avx2
#endif
