// hedge/route/pii_prescan_avx2.hpp: the PII pre-scan, AVX2: the stop bits of 32 bytes per
// step (the rule and why it is exact: pii_prescan_scalar.hpp, whose next_pii_stop is the
// specification this must equal). Compiled with the AVX2 target attribute wherever x86
// variants are compiled, so a baseline x86-64 build runs it on an AVX2 CPU.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include "hedge/compiler/attributes.hpp"
#include "hedge/compiler/barrier.hpp"
#include "hedge/compiler/intrinsics.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/route/avx2_bytes.hpp"
#include "hedge/route/pii_prescan_scalar.hpp"

#if HEDGE_SIMD_X86
namespace hedge::route {
namespace avx2 {

/// The rules of pii_stop but its digit rule, one bit each (pii_block_stops; digits are
/// looked at apart).
struct pii_rule {
  enum : unsigned { at_sign, opens_before_digit, double_colon, colon_after_hex, dash_after_hex, bir_bor, dob, count };
};

/// Nibble tables of one byte position of the pre-scan's rules (pii_block_stops): rule bit r
/// of lo[x & 15] & hi[x >> 4] is set when byte x meets the rule's condition at that
/// position, a set of byte values of the form {hi << 4 | lo : lo in `lo`, hi in `hi`}; a rule
/// with no condition there accepts every byte.
struct pii_nibble_tables {
  std::array<std::uint8_t, 16> lo{}, hi{};
};
struct pii_condition {
  unsigned rule;
  std::uint16_t lo, hi;  ///< sets of nibble values (bit n: nibble n)
};
constexpr std::uint16_t nibbles(std::initializer_list<unsigned> values) noexcept {
  std::uint16_t set = 0;
  for (const unsigned n : values) set = static_cast<std::uint16_t>(set | 1u << n);
  return set;
}
constexpr pii_nibble_tables pii_tables(std::initializer_list<pii_condition> conditions) noexcept {
  unsigned constrained = 0;
  for (const auto& c : conditions) constrained |= 1u << c.rule;
  pii_nibble_tables t;
  for (unsigned n = 0; n < 16; ++n) {
    unsigned lo = ~constrained & ((1u << pii_rule::count) - 1), hi = lo;
    for (const auto& c : conditions) {
      if ((c.lo >> n) & 1u) lo |= 1u << c.rule;
      if ((c.hi >> n) & 1u) hi |= 1u << c.rule;
    }
    t.lo[n] = static_cast<std::uint8_t>(lo);
    t.hi[n] = static_cast<std::uint8_t>(hi);
  }
  return t;
}
// Their conditions on the byte, the byte before it, after it, and the one after that.
inline constexpr std::uint16_t any_digit = nibbles({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
inline constexpr std::uint16_t letter_rows = nibbles({4, 6});  // A-O, a-o
inline constexpr std::uint16_t hex_letter_lo = nibbles({1, 2, 3, 4, 5, 6});  // with letter_rows: A-F, a-f
inline constexpr std::uint16_t group_lo = any_digit, group_hi = nibbles({3, 4, 6});  // pii_group_byte
inline constexpr pii_nibble_tables pii_byte_rules = pii_tables({
    {pii_rule::at_sign, nibbles({0}), nibbles({4})},
    {pii_rule::opens_before_digit, nibbles({8, 11}), nibbles({2})},
    {pii_rule::double_colon, nibbles({10}), nibbles({3})},
    {pii_rule::colon_after_hex, nibbles({10}), nibbles({3})},
    {pii_rule::dash_after_hex, nibbles({13}), nibbles({2})},
    {pii_rule::bir_bor, nibbles({2}), letter_rows},
    {pii_rule::dob, nibbles({4}), letter_rows},
});
inline constexpr pii_nibble_tables pii_before_rules = pii_tables({
    {pii_rule::colon_after_hex, hex_letter_lo, letter_rows},
    {pii_rule::dash_after_hex, hex_letter_lo, letter_rows},
});
inline constexpr pii_nibble_tables pii_after_rules = pii_tables({
    {pii_rule::opens_before_digit, any_digit, nibbles({3})},
    {pii_rule::double_colon, nibbles({10}), nibbles({3})},
    {pii_rule::colon_after_hex, group_lo, group_hi},
    {pii_rule::dash_after_hex, group_lo, group_hi},
    {pii_rule::bir_bor, nibbles({9, 15}), letter_rows},
    {pii_rule::dob, nibbles({15}), letter_rows},
});
inline constexpr pii_nibble_tables pii_after2_rules = pii_tables({
    {pii_rule::bir_bor, nibbles({2}), nibbles({5, 7})},
    {pii_rule::dob, nibbles({2}), letter_rows},
    {pii_rule::dash_after_hex, group_lo, group_hi},
});

/// The constants of pii_digit_run_bits, made and kept as those of pii_stop_constants (which
/// extends them: the case bit and the digit range serve both).
struct pii_digit_constants {
  __m256i case_bit, space, paren, colon, dash, one;
  byte_range digits, hex_letters, separators, dash_dot;

  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE pii_digit_constants() noexcept
      : case_bit(compiler::opaque(_mm256_set1_epi8(0x20))),
        space(compiler::opaque(_mm256_set1_epi8(' '))),
        paren(compiler::opaque(_mm256_set1_epi8('('))),
        colon(compiler::opaque(_mm256_set1_epi8(':'))),
        dash(compiler::opaque(_mm256_set1_epi8('-'))),
        one(compiler::opaque(_mm256_set1_epi8('1'))),
        digits(opaque_range(byte_range{'0', '9'})),
        hex_letters(opaque_range(byte_range{'a', 'f'})),
        separators(opaque_range(byte_range{'-', '/'})),  // '-', '.', '/' are adjacent
        dash_dot(opaque_range(byte_range{'-', '.'})) {}
};

/// Bit k set when pii_digit_entity_may_start holds at q + k (for any byte; the caller keeps
/// the digits), from the bit masks of the 64 bytes at q and the one after: hex bytes H,
/// followers F, card bytes C, ':' and a separator before '('. "The hex run from k ends
/// before a byte with property P" is found by marking the run's last byte (H & P >> 1)
/// and spreading the mark down through the run 1, 2, 4 and 8 bytes at a time (a hex byte
/// takes the mark of the byte 2^s later when the 2^s bytes from it are hex), 15 bytes in
/// all; "13 bytes from k have property P" by doubling too. Once for the second run (it ends
/// before F, or is 13 long), then for the first (it ends before ':', or before an F before
/// such a second run); a run "1" before a separator and '(' is one byte, no spreading. For
/// k <= 31 a first run of 13 or more bytes makes 13 card bytes, and a shorter one and its
/// second run end inside the window: every bit kept is exact. `avail`: bytes from q to
/// the end of the scanned range; bytes past it read as 0.
HEDGE_TARGET_AVX2 inline std::uint32_t pii_digit_run_bits(const unsigned char* q, std::size_t avail,
                                                          const pii_digit_constants& k) noexcept {
  std::array<unsigned char, 65> padded;  // the window's 64 bytes and the one after
  if (avail < padded.size()) {           // the window passes the end: a copy with zeros after it
    padded.fill(0);
    std::memcpy(padded.data(), q, avail);
    q = padded.data();
  }
  std::uint64_t hex = 0, follower = 0, card = 0, colon = 0, one = 0, opens = 0;
  for (std::size_t half = 0; half < 2; ++half) {
    const __m256i v = load32(q + 32 * half), next = load32(q + 32 * half + 1);
    const __m256i h = _mm256_or_si256(in_range(v, k.digits), in_range(_mm256_or_si256(v, k.case_bit), k.hex_letters));
    const __m256i space = _mm256_cmpeq_epi8(v, k.space), paren = _mm256_cmpeq_epi8(next, k.paren);
    const __m256i c = _mm256_cmpeq_epi8(v, k.colon);
    const __m256i f = _mm256_or_si256(_mm256_or_si256(c, in_range(v, k.separators)),
                                      _mm256_and_si256(space, _mm256_or_si256(in_range(next, k.digits), paren)));
    const unsigned at = 32 * static_cast<unsigned>(half);
    hex |= std::uint64_t{bits(h)} << at;
    follower |= std::uint64_t{bits(f)} << at;
    card |= std::uint64_t{bits(_mm256_or_si256(h, _mm256_or_si256(space, _mm256_cmpeq_epi8(v, k.dash))))} << at;
    colon |= std::uint64_t{bits(c)} << at;
    one |= std::uint64_t{bits(_mm256_cmpeq_epi8(v, k.one))} << at;
    opens |= std::uint64_t{bits(_mm256_and_si256(_mm256_or_si256(space, in_range(v, k.dash_dot)), paren))} << at;
  }
  const auto run_ends_before = [hex](std::uint64_t marked) {
    std::uint64_t through = hex;
    for (unsigned step = 1; step < 16; step *= 2) {
      marked |= (marked >> step) & through;
      through &= through >> step;
    }
    return marked;
  };
  const auto thirteen = [](std::uint64_t m) {
    const std::uint64_t m2 = m & (m >> 1), m4 = m2 & (m2 >> 2), m8 = m4 & (m4 >> 4);
    return m8 & (m4 >> 8) & (m >> 12);
  };
  const std::uint64_t second = run_ends_before(hex & (follower >> 1)) | thirteen(hex);
  const std::uint64_t first = run_ends_before(hex & ((colon | (follower & (second >> 1))) >> 1));
  return static_cast<std::uint32_t>(first | (one & (opens >> 1)) | thirteen(card));
}

/// The constants of pii_block_stops, made once per pii_prescan::next call (once per stop,
/// and once more, in a scan) and opaque (compiler/barrier.hpp): built in the block itself, GCC
/// rebuilt them from immediates in every block, a fifth of its instructions. (Not members
/// of the cursor: it is made in constant evaluation too, where intrinsics cannot run.)
struct pii_stop_constants : pii_digit_constants {
  struct lookup {
    __m256i lo, hi;
  };
  lookup byte, before, after, after2;
  __m256i nibble, birth;
  byte_range lower;

  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE pii_stop_constants() noexcept
      : byte(tables(pii_byte_rules)),
        before(tables(pii_before_rules)),
        after(tables(pii_after_rules)),
        after2(tables(pii_after2_rules)),
        nibble(compiler::opaque(_mm256_set1_epi8(0x0f))),
        birth(compiler::opaque(_mm256_set1_epi8(static_cast<char>((1u << pii_rule::bir_bor) | (1u << pii_rule::dob))))),
        lower(opaque_range(byte_range{'a', 'z'})) {}

  /// Rule bits of the byte classes of x (pii_nibble_tables).
  [[nodiscard]] HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i classes(__m256i x, const lookup& t) const noexcept {
    const __m256i lo = _mm256_shuffle_epi8(t.lo, _mm256_and_si256(x, nibble));
    const __m256i hi = _mm256_shuffle_epi8(t.hi, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble));
    return _mm256_and_si256(lo, hi);
  }

 private:
  HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE static lookup tables(const pii_nibble_tables& t) noexcept {
    return {compiler::opaque(broadcast16(t.lo)), compiler::opaque(broadcast16(t.hi))};
  }
};

/// The bytes of x moved down by one (byte k+1 at k, 0 shifted in at the top).
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i shift_down(__m256i x) noexcept {
  return _mm256_alignr_epi8(_mm256_permute2x128_si256(x, x, 0x81), x, 1);
}
/// The bytes of x moved up by one (byte k at k+1, 0 shifted in at the bottom).
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE __m256i shift_up(__m256i x) noexcept {
  return _mm256_alignr_epi8(x, _mm256_permute2x128_si256(x, x, 0x08), 15);
}

/// Stop bits (bit k: byte k) of the 32 bytes at q, as pii_stop defines them. `avail`: bytes
/// from q to the end of the scanned range (>= 32); bytes past it read as 0. `first`: q is the
/// text's first byte (the byte before reads as 0). Each rule of pii_stop is one bit of a byte
/// class; the classes of a byte and of its neighbours are nibble-table lookups (vpshufb),
/// and a byte is a stop when a rule bit survives the AND of the four, the birth-keyword
/// rules only where the byte before is not a letter. One pass, no branch per byte kind.
HEDGE_TARGET_AVX2 HEDGE_ALWAYS_INLINE std::uint32_t pii_block_stops(const unsigned char* q, std::size_t avail,
                                                                    bool first, const pii_stop_constants& k) noexcept {
  const __m256i v = load32(q);
  const __m256i before = first ? shift_up(v) : load32(q - 1);
  const __m256i after = avail > 32 ? load32(q + 1) : shift_down(v);
  const __m256i after2 = avail > 33 ? load32(q + 2) : shift_down(after);
  const __m256i rules = _mm256_and_si256(_mm256_and_si256(k.classes(v, k.byte), k.classes(before, k.before)),
                                         _mm256_and_si256(k.classes(after, k.after), k.classes(after2, k.after2)));
  const __m256i after_letter = in_range(_mm256_or_si256(before, k.case_bit), k.lower);
  const __m256i kept = _mm256_andnot_si256(_mm256_and_si256(after_letter, k.birth), rules);
  const std::uint32_t stops = ~bits(_mm256_cmpeq_epi8(kept, _mm256_setzero_si256()));
  // Digits: after a letter (an IBAN's, or a hex group's), or where their run shows an
  // entity may start (rare in prose: looked at only in blocks with digits).
  const std::uint32_t digits = bits(in_range(v, k.digits));
  if (digits == 0) return stops;
  return stops | (digits & (bits(after_letter) | pii_digit_run_bits(q, avail, k)));
}

/// AVX2: 32 bytes per step into a stop mask. The cursor keeps the mask of the block it
/// classified last, so a scan that resumes inside that block after a stop (the usual case:
/// the matchers consume a token and go on) reads the next stop from it instead of
/// classifying the block again: a byte's stop bit depends only on the bytes around it, not
/// on where the scan resumed.
struct pii_prescan {
  std::string_view t;
  std::size_t base;         ///< first byte of the block in `stops` (far past the text: none)
  std::uint32_t stops = 0;  ///< its stop bits
  constexpr explicit pii_prescan(std::string_view text) noexcept : t(text), base(text.size() + 64) {}

  HEDGE_TARGET_AVX2 std::size_t next(std::size_t i) noexcept {
    const auto first = [](std::uint32_t m) { return static_cast<std::size_t>(__builtin_ctz(m)); };
    if (i - base < 32) {  // unsigned: false for i < base
      if (const std::uint32_t rest = stops & (~0u << (i - base)); rest != 0) return base + first(rest);
      i = base + 32;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(t.data());
    const std::size_t end = t.size();
    const pii_stop_constants k;
    for (; i + 32 <= end; i += 32) {
      if (const std::uint32_t m = pii_block_stops(p + i, end - i, i == 0, k); m != 0) {
        base = i;
        stops = m;
        return i + first(m);
      }
    }
    if (i >= end) return end;
    if (end < 32) return detail::next_pii_stop(t, i, end, arch::scalar{});
    // Tail: the block of the last 32 bytes, overlapping what was scanned, its bytes before i
    // masked off. Cheaper than bytes one by one.
    base = end - 32;
    stops = pii_block_stops(p + base, 32, base == 0, k);
    const std::uint32_t rest = stops & ~((1u << (i - base)) - 1);  // i - base in 1..31
    return rest != 0 ? base + first(rest) : end;
  }
};

}  // namespace avx2

namespace detail {
/// AVX2 overloads of the pre-scan (pii_prescan_scalar.hpp has the scalar ones; avx512bw
/// and the other tags derived from avx2 run these).
constexpr avx2::pii_prescan make_pii_prescan(std::string_view text, arch::avx2) noexcept {
  return avx2::pii_prescan{text};
}
HEDGE_TARGET_AVX2 inline std::size_t next_pii_stop(std::string_view t, std::size_t i, std::size_t end,
                                                   arch::avx2) noexcept {
  return avx2::pii_prescan{std::string_view(t.data(), end < t.size() ? end : t.size())}.next(i);
}
}  // namespace detail

}  // namespace hedge::route
#endif
