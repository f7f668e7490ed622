// hedge/route/avx2_bytes.hpp: AVX2 byte-vector helpers shared by the route scanners (the
// complexity feature pass and the PII pre-scan): 32 bytes loaded, classified by range and
// turned into a bit mask; constants kept out of the compiler's sight. Empty without AVX2.
#pragma once

#include <array>
#include <cstdint>

#include "hedge/core/config.hpp"

#if defined(__AVX2__)
#include <immintrin.h>

namespace hedge::route::detail {

/// The 32 bytes at p (unaligned).
HEDGE_ALWAYS_INLINE __m256i load32(const unsigned char* p) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// v, as a value the compiler cannot see through (nor rebuild from its constant). For
/// constants made once before a loop: for want of registers, GCC otherwise rebuilds each
/// from an immediate in every iteration (a move and a broadcast, or two, each) instead of
/// keeping it or reloading it with one load.
HEDGE_ALWAYS_INLINE __m256i opaque(__m256i v) noexcept {
  __asm__("" : "+x"(v));
  return v;
}

/// The byte range [lo, hi] (unsigned values, lo <= hi < 0x80) as the two constants of a
/// range test: bytes are moved so that lo is -128, then one signed compare.
struct byte_range {
  __m256i move, bound;
  byte_range(char lo, char hi) noexcept
      : move(_mm256_set1_epi8(static_cast<char>(-128 - lo))),
        bound(_mm256_set1_epi8(static_cast<char>(-128 + (hi - lo + 1)))) {}
};

/// r, its constants opaque (for a range made once, before a loop).
HEDGE_ALWAYS_INLINE byte_range opaque(byte_range r) noexcept {
  r.move = opaque(r.move);
  r.bound = opaque(r.bound);
  return r;
}

/// Bytes of v in the range r, as 0xff / 0.
HEDGE_ALWAYS_INLINE __m256i in_range(__m256i v, const byte_range& r) noexcept {
  return _mm256_cmpgt_epi8(r.bound, _mm256_add_epi8(v, r.move));
}
/// Bytes of v in [lo, hi] (unsigned values, lo <= hi < 0x80), as 0xff / 0.
HEDGE_ALWAYS_INLINE __m256i in_range(__m256i v, char lo, char hi) noexcept { return in_range(v, byte_range{lo, hi}); }

/// A 16-byte table (a vpshufb lookup table) in both 128-bit lanes.
HEDGE_ALWAYS_INLINE __m256i broadcast16(const std::array<std::uint8_t, 16>& t) noexcept {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.data())));
}

/// Bit k set when byte k of the mask m is set.
HEDGE_ALWAYS_INLINE std::uint32_t bits(__m256i m) noexcept {
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(m));
}

}  // namespace hedge::route::detail
#endif
