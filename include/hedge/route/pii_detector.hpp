// hedge/route/pii_detector.hpp: personal-data detection without regular expressions.
//
// One left-to-right pass over the prompt; at each token boundary a small hand-written
// matcher per entity family tries to parse the entity and, where the format has one,
// checks its check digits, so look-alikes are rejected:
//   e-mail         local@domain.tld (TLD of 2+ letters, at least two labels)
//   phone          +CC groups (8-15 digits) or North American (NNN) NNN-NNNN layouts;
//                  bare digit runs are not phones (order and account numbers look the same)
//   credit card    13-19 digits, optionally grouped by spaces or dashes, Luhn check
//   IBAN           CC + 2 check digits + up to 30 alphanumerics, ISO 7064 mod-97 == 1
//   US SSN         NNN-NN-NNNN, excluding the never-issued areas 000, 666, 9xx, group 00, serial 0000
//   IPv4           four octets <= 255, not after a version word ("version 1.2.3.4")
//   IPv6           eight hex groups, or fewer with one "::"
//   MAC            six hex pairs joined by ':' or '-'
//   date of birth  a date (numeric or with a month name) within 32 bytes after
//                  "born", "birth", "birthday", "birthdate" or "DOB"; other dates are not PII
// No allocation, no exceptions: matches go into a caller span.
//
// Plain-run skip (`find`, `first`): most prompt bytes are letters, spaces and punctuation
// that no matcher can start on. A pre-scan (AVX2: 32 bytes per step) finds the next
// "stop" byte (`pii_stop`): '@'; a digit after a letter (an IBAN's, or a hex group's) or
// where its hex runs show an entity may start (`pii_digit_entity_may_start`: 13 card
// bytes, ':' after the first run, "1" before a separator and '(', or a second run between
// two followers); '(' or '+' before a digit (a phone); ':' before ':' (IPv6); ':' or '-'
// after a hex letter and before a hex character (`pii_group_byte`; for '-', the next two
// bytes: MAC and IPv6 groups written in letters); or a letter that starts a run (the byte before is not a
// letter) with "bir", "bor" or "dob" in any case (a birth keyword may begin there; "do",
// "both", "big" are ordinary words). Every other byte, including every byte from 0x80, is
// plain. The scan jumps to the start of the letter run before that stop and runs the
// matchers from there. Why this finds exactly what the byte-by-byte scan
// (`find_reference`, the specification) finds:
// - at a plain byte the byte-by-byte scan only steps on: no match starts there and no state
//   changes. Bytes other than letters, digits, '@', '(', '+', ':' start nothing; '(' and '+'
//   start only phones (a digit follows), ':' only "::"; a digit not after a letter whose
//   runs show no entity starts nothing (the test the scan's own digit shortcut makes); a letter
//   is plain unless it starts a birth keyword (below), and its run is looked at from the
//   stop that ends it;
// - every entity but e-mail needs a stop at most one letter run after its start, and that
//   run ends at it: IBAN, 2 upper-case letters then a digit; MAC and IPv6, at most 4 hex
//   letters then a digit, or ':' or '-' before the next group (their run ends in a hex
//   letter; a MAC's group after '-' is two hex characters, an IPv6 group after ':' is
//   hex, and "abcd::" stops at "::"); dates, cards,
//   phones, SSNs, IPs start with a digit or at '(' / '+' before one. A text date of birth
//   is only looked for inside a birth window, and the skip is off inside one;
// - an e-mail is matched at its '@' (a stop), backwards to the end of the previous match,
//   which both scans track alike, wherever the scan was before it;
// - no birth keyword starts in a plain run: those start with "bir", "bor" or "dob", a stop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/route/avx2_bytes.hpp"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace hedge::route {

/// PII entity kinds, usable as a bit set (`pii_entity::email | pii_entity::iban`).
enum class pii_entity : std::uint16_t {
  none = 0,
  email = 1u << 0,
  phone = 1u << 1,
  credit_card = 1u << 2,
  iban = 1u << 3,
  ssn = 1u << 4,
  ipv4 = 1u << 5,
  ipv6 = 1u << 6,
  mac = 1u << 7,
  date_of_birth = 1u << 8,
  all = (1u << 9) - 1,
};
constexpr pii_entity operator|(pii_entity a, pii_entity b) noexcept {
  return static_cast<pii_entity>(static_cast<std::uint16_t>(a) | static_cast<std::uint16_t>(b));
}
constexpr bool contains(pii_entity set, pii_entity e) noexcept {
  return (static_cast<std::uint16_t>(set) & static_cast<std::uint16_t>(e)) != 0;
}

constexpr std::string_view to_string(pii_entity e) noexcept {
  switch (e) {
    case pii_entity::email: return "email";
    case pii_entity::phone: return "phone";
    case pii_entity::credit_card: return "credit_card";
    case pii_entity::iban: return "iban";
    case pii_entity::ssn: return "ssn";
    case pii_entity::ipv4: return "ipv4";
    case pii_entity::ipv6: return "ipv6";
    case pii_entity::mac: return "mac";
    case pii_entity::date_of_birth: return "date_of_birth";
    default: return "pii";
  }
}

/// One detected entity: its kind and where it is in the prompt.
struct pii_match {
  pii_entity entity = pii_entity::none;
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
};

/// Luhn (mod-10) check over the digits of `s`, ignoring spaces and dashes.
constexpr bool luhn_valid(std::string_view s) noexcept {
  int sum = 0, n = 0;
  for (std::size_t k = s.size(); k-- > 0;) {
    const char c = s[k];
    if (c == ' ' || c == '-') continue;
    if (c < '0' || c > '9') return false;
    int d = c - '0';
    if (n++ % 2 == 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return n > 1 && sum % 10 == 0;
}

/// ISO 13616 IBAN check: move the first four characters to the end, read letters as
/// 10..35, and the number must be 1 mod 97 (ISO 7064 MOD 97-10). Spaces are ignored.
constexpr bool iban_valid(std::string_view s) noexcept {
  char chars[34] = {};
  std::size_t n = 0;
  for (char c : s) {
    if (c == ' ') continue;
    if (n == sizeof chars) return false;
    chars[n++] = c;
  }
  if (n < 15) return false;
  unsigned remainder = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const char c = chars[(k + 4) % n];
    if (c >= '0' && c <= '9') {
      remainder = (remainder * 10 + static_cast<unsigned>(c - '0')) % 97;
    } else if (c >= 'A' && c <= 'Z') {
      remainder = (remainder * 100 + static_cast<unsigned>(c - 'A' + 10)) % 97;
    } else {
      return false;
    }
  }
  return remainder == 1;
}

namespace detail {
constexpr bool pii_letter(unsigned char c) noexcept { return static_cast<unsigned char>((c | 0x20) - 'a') < 26; }
/// Whether a letter run starting with lower-case-or-not `c` then `next` may be a birth
/// keyword ("born", "birth...", "dob"): "bir", "bor", "dob" in any case.
constexpr bool pii_birth_start(unsigned char c, unsigned char next, unsigned char next2) noexcept {
  const auto a = static_cast<unsigned char>(c | 0x20), b = static_cast<unsigned char>(next | 0x20),
             d = static_cast<unsigned char>(next2 | 0x20);
  return (a == 'b' && (b == 'i' || b == 'o') && d == 'r') || (a == 'd' && b == 'o' && d == 'b');
}

/// Byte j of t[0, end); 0 from `end` on.
constexpr unsigned char pii_byte(std::string_view t, std::size_t j, std::size_t end) noexcept {
  return j < end ? static_cast<unsigned char>(t[j]) : static_cast<unsigned char>(0);
}
constexpr bool pii_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool pii_hex_letter(unsigned char c) noexcept { return static_cast<unsigned char>((c | 0x20) - 'a') < 6; }
constexpr bool pii_hex(unsigned char c) noexcept { return pii_digit(c) || pii_hex_letter(c); }

/// End of the run of hex digits from i in t[0, end).
constexpr std::size_t pii_hex_run_end(std::string_view t, std::size_t i, std::size_t end) noexcept {
  while (i < end && pii_hex(static_cast<unsigned char>(t[i]))) ++i;
  return i;
}

/// Whether the byte at p of t[0, end) can join two groups of a digit format: ':', '-', '.',
/// '/', or a space before a digit or '('.
constexpr bool pii_follower(std::string_view t, std::size_t p, std::size_t end) noexcept {
  const unsigned char a = pii_byte(t, p, end), b = pii_byte(t, p + 1, end);
  return a == ':' || a == '-' || a == '.' || a == '/' || (a == ' ' && (pii_digit(b) || b == '('));
}
/// A byte of a card number in one or two groups: a hex digit (a superset of the digits),
/// a space or a dash.
constexpr bool pii_card_byte(unsigned char c) noexcept { return pii_hex(c) || c == ' ' || c == '-'; }

/// Whether an entity other than a text date (looked for in birth windows only) may start
/// at the digit at i of t[0, end), from the two hex runs there. It may when
/// - the 13 bytes from i are card bytes: a card of 13-19 digits in one group, or in two
///   joined by a space or a dash, starts so;
/// - the first run is followed by ':' (MAC "12:", IPv6 "2001:", "1::");
/// - the first run is "1", then '-', '.' or ' ', then '(' (phones "1-(800)", "1 (800)");
/// - or the first run is followed by a follower (pii_follower) and a second run that is
///   followed by another: every other digit format has a third group (MAC "12-34-", SSN
///   "123-45-", IPv4 "1.2.", numeric dates "2024-05-" and "14/05/", North American phones
///   "555 123 " and "1-800-"). Runs are read 13 bytes far at most (a longer first run
///   makes 13 card bytes anyway), and a second run of 13 or more counts as followed: no
///   format needs that, but it keeps the definition within what the vector pass sees.
/// So a digit that starts none of these starts nothing: the decimals, ranges, fractions
/// and times of prose ("3.14 m", "10-20 years", "1/2 of", "10 20") cost a few compares
/// instead of every matcher.
constexpr bool pii_digit_entity_may_start(std::string_view t, std::size_t i, std::size_t end) noexcept {
  std::size_t n = 0;
  while (n < 13 && pii_card_byte(pii_byte(t, i + n, end))) ++n;
  if (n == 13) return true;
  const std::size_t r = pii_hex_run_end(t, i, i + 13 < end ? i + 13 : end);
  const unsigned char a = pii_byte(t, r, end), b = pii_byte(t, r + 1, end);
  if (a == ':' || (r == i + 1 && pii_byte(t, i, end) == '1' && (a == '-' || a == '.' || a == ' ') && b == '('))
    return true;
  if (!pii_follower(t, r, end)) return false;
  const std::size_t r2 = pii_hex_run_end(t, r + 1, r + 14 < end ? r + 14 : end);
  return r2 != r + 1 && (r2 - (r + 1) == 13 || pii_follower(t, r2, end));
}

/// Whether c may start the group after the ':' or '-' that follows a MAC or IPv6 group
/// written in letters: a hex character (the second ':' of "::" is a stop of its own).
/// Tested as one nibble-table condition (high nibble 3, 4 or 6, low nibble 0-9), so '@',
/// 'G'-'I', '`' and 'g'-'i' pass too: the stops stay a superset.
constexpr bool pii_group_byte(unsigned char c) noexcept {
  const unsigned hi = c >> 4, lo = c & 15u;
  return (hi == 3 || hi == 4 || hi == 6) && lo <= 9;
}

/// Whether the byte at k of t[0, end) is a stop of the pre-scan (see the file comment); bytes
/// before 0 and from `end` on read as 0.
constexpr bool pii_stop(std::string_view t, std::size_t k, std::size_t end) noexcept {
  const unsigned char c = pii_byte(t, k, end), prev = k > 0 ? pii_byte(t, k - 1, end) : 0, next = pii_byte(t, k + 1, end);
  // The runs are read 13 bytes far at most (pii_digit_entity_may_start): a walk to the end
  // of a long run from each of its digits would make the scan quadratic in its length.
  if (pii_digit(c)) return pii_letter(prev) || pii_digit_entity_may_start(t, k, end);
  return c == '@' || ((c == '(' || c == '+') && pii_digit(next)) || (c == ':' && next == ':') ||
         (c == ':' && pii_hex_letter(prev) && pii_group_byte(next)) ||
         (c == '-' && pii_hex_letter(prev) && pii_group_byte(next) && pii_group_byte(pii_byte(t, k + 2, end))) ||
         (!pii_letter(prev) && pii_birth_start(c, next, pii_byte(t, k + 2, end)));
}

/// First stop position in [i, end), or end. Scalar reference of the pre-scan.
constexpr std::size_t next_pii_stop(std::string_view t, std::size_t i, std::size_t end, arch::scalar) noexcept {
  while (i < end && !pii_stop(t, i, end)) ++i;
  return i;
}

/// The pre-scan over one text as a cursor: next(i) is next_pii_stop(t, i, t.size(), Arch{}).
template <class Arch>
struct pii_prescan {
  std::string_view t;
  constexpr explicit pii_prescan(std::string_view text) noexcept : t(text) {}
  std::size_t next(std::size_t i) const noexcept { return next_pii_stop(t, i, t.size(), Arch{}); }
};

#if defined(__AVX2__)
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
  __m256i case_bit = opaque(_mm256_set1_epi8(0x20)), space = opaque(_mm256_set1_epi8(' ')),
          paren = opaque(_mm256_set1_epi8('(')), colon = opaque(_mm256_set1_epi8(':')),
          dash = opaque(_mm256_set1_epi8('-')), one = opaque(_mm256_set1_epi8('1'));
  byte_range digits = opaque(byte_range{'0', '9'}), hex_letters = opaque(byte_range{'a', 'f'}),
             separators = opaque(byte_range{'-', '/'}),  // '-', '.', '/' are adjacent
      dash_dot = opaque(byte_range{'-', '.'});
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
inline std::uint32_t pii_digit_run_bits(const unsigned char* q, std::size_t avail,
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
    const auto at = [half](__m256i m) { return std::uint64_t{bits(m)} << (32 * half); };
    hex |= at(h);
    follower |= at(f);
    card |= at(_mm256_or_si256(h, _mm256_or_si256(space, _mm256_cmpeq_epi8(v, k.dash))));
    colon |= at(c);
    one |= at(_mm256_cmpeq_epi8(v, k.one));
    opens |= at(_mm256_and_si256(_mm256_or_si256(space, in_range(v, k.dash_dot)), paren));
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
/// and once more, in a scan) and opaque (avx2_bytes.hpp): built in the block itself, GCC
/// rebuilt them from immediates in every block, a fifth of its instructions. (Not members
/// of the cursor: it is made in constant evaluation too, where intrinsics cannot run.)
struct pii_stop_constants : pii_digit_constants {
  struct lookup {
    __m256i lo, hi;
  };
  lookup byte, before, after, after2;
  __m256i nibble, birth;
  byte_range lower;

  pii_stop_constants() noexcept
      : byte(tables(pii_byte_rules)),
        before(tables(pii_before_rules)),
        after(tables(pii_after_rules)),
        after2(tables(pii_after2_rules)),
        nibble(opaque(_mm256_set1_epi8(0x0f))),
        birth(opaque(_mm256_set1_epi8(static_cast<char>((1u << pii_rule::bir_bor) | (1u << pii_rule::dob))))),
        lower(opaque(byte_range{'a', 'z'})) {}

  /// Rule bits of the byte classes of x (pii_nibble_tables).
  [[nodiscard]] HEDGE_ALWAYS_INLINE __m256i classes(__m256i x, const lookup& t) const noexcept {
    const __m256i lo = _mm256_shuffle_epi8(t.lo, _mm256_and_si256(x, nibble));
    const __m256i hi = _mm256_shuffle_epi8(t.hi, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble));
    return _mm256_and_si256(lo, hi);
  }

 private:
  static lookup tables(const pii_nibble_tables& t) noexcept {
    return {opaque(broadcast16(t.lo)), opaque(broadcast16(t.hi))};
  }
};

/// Stop bits (bit k: byte k) of the 32 bytes at q, as pii_stop defines them. `avail`: bytes
/// from q to the end of the scanned range (>= 32); bytes past it read as 0. `first`: q is the
/// text's first byte (the byte before reads as 0). Each rule of pii_stop is one bit of a byte
/// class; the classes of a byte and of its neighbours are nibble-table lookups (vpshufb),
/// and a byte is a stop when a rule bit survives the AND of the four, the birth-keyword
/// rules only where the byte before is not a letter. One pass, no branch per byte kind.
HEDGE_ALWAYS_INLINE std::uint32_t pii_block_stops(const unsigned char* q, std::size_t avail, bool first,
                                                  const pii_stop_constants& k) noexcept {
  // Bytes moved down by one (byte k+1 at k, 0 shifted in at the top) and up by one.
  const auto down = [](__m256i x) { return _mm256_alignr_epi8(_mm256_permute2x128_si256(x, x, 0x81), x, 1); };
  const auto up = [](__m256i x) { return _mm256_alignr_epi8(x, _mm256_permute2x128_si256(x, x, 0x08), 15); };
  const __m256i v = load32(q);
  const __m256i before = first ? up(v) : load32(q - 1);
  const __m256i after = avail > 32 ? load32(q + 1) : down(v);
  const __m256i after2 = avail > 33 ? load32(q + 2) : down(after);
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
template <class Arch>
  requires std::is_base_of_v<arch::avx2, Arch>
struct pii_prescan<Arch> {
  std::string_view t;
  std::size_t base;         ///< first byte of the block in `stops` (far past the text: none)
  std::uint32_t stops = 0;  ///< its stop bits
  constexpr explicit pii_prescan(std::string_view text) noexcept : t(text), base(text.size() + 64) {}

  std::size_t next(std::size_t i) noexcept {
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
    if (end < 32) return next_pii_stop(t, i, end, arch::scalar{});
    // Tail: the block of the last 32 bytes, overlapping what was scanned, its bytes before i
    // masked off. Cheaper than bytes one by one.
    base = end - 32;
    stops = pii_block_stops(p + base, 32, base == 0, k);
    const std::uint32_t rest = stops & ~((1u << (i - base)) - 1);  // i - base in 1..31
    return rest != 0 ? base + first(rest) : end;
  }
};

inline std::size_t next_pii_stop(std::string_view t, std::size_t i, std::size_t end, arch::avx2) noexcept {
  return pii_prescan<arch::avx2>{t.substr(0, end)}.next(i);
}
#endif
}  // namespace detail

/// Finds personal data in text. Cheap to copy; configure which entities count.
class pii_detector {
 public:
  constexpr explicit pii_detector(pii_entity enabled = pii_entity::all) noexcept : enabled_(enabled) {}
  [[nodiscard]] constexpr pii_entity enabled() const noexcept { return enabled_; }

  /// Writes up to out.size() matches in text order; returns how many were written.
  /// With an empty `out` it still scans and returns 0; use `first` to stop at the first hit.
  /// \tparam Arch pre-scan instruction set (arch::scalar: the byte-by-byte pre-scan)
  template <class Arch = arch::native>
  constexpr std::size_t find(std::string_view text, std::span<pii_match> out, Arch = {}) const noexcept {
    return write_matches<Arch, true>(text, out);
  }

  /// The specification of `find`: every byte visited, no plain-run skip.
  constexpr std::size_t find_reference(std::string_view text, std::span<pii_match> out) const noexcept {
    return write_matches<arch::scalar, false>(text, out);
  }

  /// The first entity in the text, if any.
  template <class Arch = arch::native>
  [[nodiscard]] constexpr std::optional<pii_match> first(std::string_view text, Arch = {}) const noexcept {
    std::optional<pii_match> found;
    scan<Arch, true>(text, [&](const pii_match& m) {
      found = m;
      return false;
    });
    return found;
  }

 private:
  // The matchers read `char`s; the byte classes are the pre-scan's (detail::pii_*).
  static constexpr bool digit(char c) noexcept { return detail::pii_digit(static_cast<unsigned char>(c)); }
  static constexpr bool upper(char c) noexcept { return c >= 'A' && c <= 'Z'; }
  static constexpr bool alpha(char c) noexcept { return detail::pii_letter(static_cast<unsigned char>(c)); }
  static constexpr bool alnum(char c) noexcept { return digit(c) || alpha(c); }
  static constexpr bool hex(char c) noexcept { return detail::pii_hex(static_cast<unsigned char>(c)); }
  static constexpr char lower(char c) noexcept { return upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }
  static constexpr bool word(char c) noexcept { return alnum(c) || c == '_'; }

  static constexpr char at(std::string_view t, std::size_t i) noexcept { return i < t.size() ? t[i] : '\0'; }

  /// No identifier continues past `end`: not a letter/digit, and not a joiner ('.', '-', ':', '/')
  /// followed by one ("1.2.3.4.5" is not an IPv4 address).
  static constexpr bool ends_token(std::string_view t, std::size_t end) noexcept {
    const char c = at(t, end);
    if (word(c)) return false;
    if ((c == '.' || c == '-' || c == ':' || c == '/') && alnum(at(t, end + 1))) return false;
    return true;
  }
  /// Mirror of ends_token on the left of `i`.
  static constexpr bool starts_token(std::string_view t, std::size_t i) noexcept {
    if (i == 0) return true;
    const char c = t[i - 1];
    if (word(c)) return false;
    if ((c == '.' || c == '-' || c == ':' || c == '/') && i >= 2 && alnum(t[i - 2])) return false;
    return true;
  }

  static constexpr bool word_is(std::string_view t, std::size_t i, std::size_t n, std::string_view w) noexcept {
    if (n != w.size()) return false;
    for (std::size_t k = 0; k < n; ++k)
      if (lower(t[i + k]) != w[k]) return false;
    return true;
  }

  /// Reads 1..max digits at i; returns the count (0 if none) and the value.
  static constexpr std::size_t digits(std::string_view t, std::size_t i, std::size_t max, unsigned& value) noexcept {
    std::size_t n = 0;
    value = 0;
    while (n < max && digit(at(t, i + n))) value = value * 10 + static_cast<unsigned>(t[i + n++] - '0');
    if (digit(at(t, i + n))) return 0;  // longer than allowed
    return n;
  }

  // --- matchers: each returns the matched length at i, or 0 -------------------------------

  static constexpr std::size_t match_ssn(std::string_view t, std::size_t i) noexcept {
    unsigned area = 0, group = 0, serial = 0;
    if (digits(t, i, 3, area) != 3 || at(t, i + 3) != '-') return 0;
    if (digits(t, i + 4, 2, group) != 2 || at(t, i + 6) != '-') return 0;
    if (digits(t, i + 7, 4, serial) != 4 || !ends_token(t, i + 11)) return 0;
    if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return 0;
    return 11;
  }

  static constexpr bool after_version_word(std::string_view t, std::size_t i) noexcept {
    std::size_t e = i;
    while (e > 0 && (t[e - 1] == ' ' || t[e - 1] == ':')) --e;
    std::size_t b = e;
    while (b > 0 && alpha(t[b - 1])) --b;
    const std::size_t n = e - b;
    // Words after which a dotted quad is a version or a section number, not an address.
    constexpr std::array<std::string_view, 22> version_words{
        "version", "ver",    "release", "build",   "section", "chapter", "v",      "firmware",
        "revision", "rev",   "step",    "figure",  "table",   "clause",  "paragraph", "python",
        "java",    "node",   "ios",     "android", "windows", "kernel"};
    for (auto w : version_words)
      if (word_is(t, b, n, w)) return true;
    return false;
  }

  static constexpr std::size_t match_ipv4(std::string_view t, std::size_t i) noexcept {
    std::size_t p = i;
    for (int part = 0; part < 4; ++part) {
      unsigned v = 0;
      const std::size_t n = digits(t, p, 3, v);
      if (n == 0 || v > 255) return 0;
      p += n;
      if (part < 3) {
        if (at(t, p) != '.') return 0;
        ++p;
      }
    }
    if (!ends_token(t, p) || after_version_word(t, i)) return 0;
    return p - i;
  }

  static constexpr std::size_t match_mac(std::string_view t, std::size_t i) noexcept {
    const char sep = at(t, i + 2);
    if (sep != ':' && sep != '-') return 0;
    for (std::size_t g = 0; g < 6; ++g) {
      const std::size_t p = i + g * 3;
      if (!hex(at(t, p)) || !hex(at(t, p + 1))) return 0;
      if (g < 5 && at(t, p + 2) != sep) return 0;
    }
    return ends_token(t, i + 17) ? 17 : 0;
  }

  static constexpr std::size_t match_ipv6(std::string_view t, std::size_t i) noexcept {
    std::size_t p = i, groups = 0;
    bool compressed = false;
    if (at(t, p) == ':' && at(t, p + 1) == ':') compressed = true, p += 2;
    while (true) {
      std::size_t n = 0;
      while (n < 5 && hex(at(t, p + n))) ++n;
      if (n == 0 || n > 4) {
        if (n > 4) return 0;
        // Nothing after a separator: only "::" may end an address.
        if (!(compressed && p >= 2 && t[p - 1] == ':' && t[p - 2] == ':')) return 0;
        break;
      }
      ++groups;
      p += n;
      if (at(t, p) != ':') break;
      if (at(t, p + 1) == ':') {
        if (compressed) return 0;
        compressed = true;
        p += 2;
      } else {
        ++p;
      }
    }
    if (word(at(t, p)) || at(t, p) == ':') return 0;
    if (compressed ? (groups == 0 || groups > 7) : groups != 8) return 0;
    return p - i;
  }

  /// Numeric date with one separator kind: Y-M-D or D/M/Y, M/D/Y, D.M.Y (years 1900-2099).
  static constexpr std::size_t match_numeric_date(std::string_view t, std::size_t i) noexcept {
    unsigned a = 0, b = 0, c = 0;
    const std::size_t na = digits(t, i, 4, a);
    const char sep = at(t, i + na);
    if (na == 0 || (sep != '-' && sep != '/' && sep != '.')) return 0;
    const std::size_t nb = digits(t, i + na + 1, 2, b);
    if (nb == 0 || at(t, i + na + 1 + nb) != sep) return 0;
    const std::size_t nc = digits(t, i + na + nb + 2, 4, c);
    const std::size_t len = na + nb + nc + 2;
    if (nc == 0 || !ends_token(t, i + len)) return 0;
    const auto year = [](unsigned y) { return y >= 1900 && y <= 2099; };
    if (na == 4) return year(a) && b >= 1 && b <= 12 && nc <= 2 && c >= 1 && c <= 31 ? len : 0;
    if (na > 2 || nc != 4 || !year(c) || a == 0 || b == 0) return 0;
    return (a <= 12 && b <= 31) || (a <= 31 && b <= 12) ? len : 0;
  }

  static constexpr bool month_word(std::string_view t, std::size_t i, std::size_t n) noexcept {
    constexpr std::array<std::string_view, 12> months{"january", "february", "march",     "april",   "may",      "june",
                                                      "july",    "august",   "september", "october", "november", "december"};
    for (auto m : months)
      if (word_is(t, i, n, m) || word_is(t, i, n, m.substr(0, 3)) || (m == "september" && word_is(t, i, n, "sept")))
        return true;
    return false;
  }
  static constexpr std::size_t alpha_run(std::string_view t, std::size_t i) noexcept {
    std::size_t e = i;
    while (e < t.size() && alpha(t[e])) ++e;
    return e - i;
  }
  static constexpr std::size_t skip_spaces(std::string_view t, std::size_t p) noexcept {
    while (at(t, p) == ' ') ++p;
    return p;
  }
  static constexpr std::size_t year_at(std::string_view t, std::size_t p) noexcept {
    unsigned y = 0;
    return digits(t, p, 4, y) == 4 && y >= 1900 && y <= 2099 && ends_token(t, p + 4) ? 4 : 0;
  }

  /// "March 3, 1985", "Mar 3 1985", "3 March 1985", "3rd of March 1985".
  static constexpr std::size_t match_text_date(std::string_view t, std::size_t i) noexcept {
    unsigned day = 0;
    if (alpha(at(t, i))) {
      const std::size_t n = alpha_run(t, i);
      if (!month_word(t, i, n)) return 0;
      std::size_t p = i + n;
      if (at(t, p) == '.') ++p;
      p = skip_spaces(t, p);
      const std::size_t nd = digits(t, p, 2, day);
      if (nd == 0 || day == 0 || day > 31) return 0;
      p += nd;
      p += alpha_run(t, p) <= 2 ? alpha_run(t, p) : 0;  // 1st, 2nd, 3rd, 4th
      if (at(t, p) == ',') ++p;
      p = skip_spaces(t, p);
      const std::size_t ny = year_at(t, p);
      return ny != 0 ? p + ny - i : 0;
    }
    const std::size_t nd = digits(t, i, 2, day);
    if (nd == 0 || day == 0 || day > 31) return 0;
    std::size_t p = i + nd;
    p += alpha_run(t, p) <= 2 ? alpha_run(t, p) : 0;
    p = skip_spaces(t, p);
    if (word_is(t, p, alpha_run(t, p), "of")) p = skip_spaces(t, p + 2);
    const std::size_t n = alpha_run(t, p);
    if (!month_word(t, p, n)) return 0;
    p += n;
    if (at(t, p) == '.' || at(t, p) == ',') ++p;
    p = skip_spaces(t, p);
    const std::size_t ny = year_at(t, p);
    return ny != 0 ? p + ny - i : 0;
  }

  /// 13-19 digits grouped by single spaces or dashes; the longest Luhn-valid prefix
  /// that ends at a group boundary.
  static constexpr std::size_t match_card(std::string_view t, std::size_t i) noexcept {
    std::size_t p = i, count = 0, best = 0;
    while (true) {
      while (digit(at(t, p))) ++p, ++count;
      if (count > 19) break;
      if (count >= 13 && ends_token(t, p) && luhn_valid(t.substr(i, p - i))) best = p - i;
      const char s = at(t, p);
      if ((s == ' ' || s == '-') && digit(at(t, p + 1))) {
        ++p;
        continue;
      }
      break;
    }
    return best;
  }

  static constexpr std::size_t match_phone(std::string_view t, std::size_t i) noexcept {
    if (at(t, i) == '+') {
      std::size_t p = i + 1, count = 0, best = 0;
      while (true) {
        const bool paren = at(t, p) == '(';
        if (paren) ++p;
        std::size_t n = 0;
        while (digit(at(t, p))) ++p, ++n;
        if (n == 0 || (paren && at(t, p++) != ')')) break;
        count += n;
        if (count > 15) break;
        if (count >= 8 && ends_token(t, p)) best = p - i;
        const char s = at(t, p);
        if ((s == ' ' || s == '-' || s == '.') && (digit(at(t, p + 1)) || at(t, p + 1) == '(')) {
          ++p;
        } else if (!(digit(at(t, p)) || at(t, p) == '(')) {
          break;
        }
      }
      return best;
    }
    // North American layouts: [1-](NNN) NNN-NNNN, NNN-NNN-NNNN, NNN.NNN.NNNN, NNN NNN NNNN.
    std::size_t p = i;
    unsigned v = 0;
    if (at(t, p) == '1' && (at(t, p + 1) == '-' || at(t, p + 1) == ' ' || at(t, p + 1) == '.')) p += 2;
    if (at(t, p) == '(') {
      if (digits(t, p + 1, 3, v) != 3 || at(t, p + 4) != ')') return 0;
      p += 5;
      if (at(t, p) == ' ' || at(t, p) == '-') ++p;
    } else {
      const char s = at(t, p + 3);
      if (digits(t, p, 3, v) != 3 || (s != '-' && s != '.' && s != ' ')) return 0;
      p += 4;
    }
    const char s = at(t, p + 3);
    if (digits(t, p, 3, v) != 3 || (s != '-' && s != '.' && s != ' ')) return 0;
    if (digits(t, p + 4, 4, v) != 4 || !ends_token(t, p + 8)) return 0;
    return p + 8 - i;
  }

  /// `floor`: the end of the previous match; the local part never reaches back past it.
  static constexpr std::size_t match_email(std::string_view t, std::size_t at_sign, std::size_t floor,
                                           std::size_t& start) noexcept {
    const auto local = [](char c) { return alnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'; };
    std::size_t b = at_sign;
    while (b > floor && local(t[b - 1])) --b;
    while (b < at_sign && t[b] == '.') ++b;
    if (b == at_sign) return 0;
    std::size_t p = at_sign + 1, labels = 0, last_label = 0, last_start = p;
    while (true) {
      std::size_t n = 0;
      while (alnum(at(t, p + n)) || (n > 0 && at(t, p + n) == '-')) ++n;
      if (n == 0) break;
      ++labels;
      last_start = p;
      last_label = n;
      p += n;
      if (at(t, p) == '.' && alnum(at(t, p + 1))) {
        ++p;
        continue;
      }
      break;
    }
    if (labels < 2 || last_label < 2) return 0;
    for (std::size_t k = 0; k < last_label; ++k)
      if (!alpha(t[last_start + k])) return 0;
    start = b;
    return p - b;
  }

  /// IBAN: the longest candidate (spaces allowed between groups of four) passing mod-97.
  /// `shape` receives the longest IBAN-shaped length even when no candidate passes, so
  /// the caller can skip an invalid IBAN whole (its digit groups are not a card number).
  static constexpr std::size_t match_iban(std::string_view t, std::size_t i, std::size_t& shape) noexcept {
    shape = 0;
    if (!upper(at(t, i)) || !upper(at(t, i + 1)) || !digit(at(t, i + 2)) || !digit(at(t, i + 3))) return 0;
    std::array<std::size_t, 35> ends{};
    std::size_t n_ends = 0, p = i, chars = 0, in_group = 0;
    while (chars < 34) {
      const char c = at(t, p);
      if (upper(c) || digit(c)) {
        ++chars, ++in_group, ++p;
        if (ends_token(t, p)) ends[n_ends++] = p;
      } else if (c == ' ' && in_group == 4 && (upper(at(t, p + 1)) || digit(at(t, p + 1)))) {
        in_group = 0;
        ++p;
      } else {
        break;
      }
    }
    if (n_ends > 0 && ends[n_ends - 1] - i >= 15) shape = ends[n_ends - 1] - i;
    while (n_ends > 0) {
      const std::size_t e = ends[--n_ends];
      if (iban_valid(t.substr(i, e - i))) return e - i;
    }
    return 0;
  }

  static constexpr bool birth_keyword(std::string_view t, std::size_t i, std::size_t n) noexcept {
    return word_is(t, i, n, "born") || word_is(t, i, n, "birth") || word_is(t, i, n, "birthday") ||
           word_is(t, i, n, "birthdate") || word_is(t, i, n, "dob");
  }

  template <class Sink>
  constexpr bool report(Sink& sink, pii_entity e, std::size_t offset, std::size_t length) const noexcept {
    return sink(pii_match{e, static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(length)});
  }

  template <class Arch, bool SkipPlainRuns>
  constexpr std::size_t write_matches(std::string_view text, std::span<pii_match> out) const noexcept {
    std::size_t written = 0;
    scan<Arch, SkipPlainRuns>(text, [&](const pii_match& m) {
      if (written < out.size()) out[written++] = m;
      return written < out.size();
    });
    return written;
  }

  /// Calls sink(match) for every entity in order; stops when sink returns false.
  template <class Arch, bool SkipPlainRuns, class Sink>
  constexpr void scan(std::string_view t, Sink&& sink) const noexcept {
    const auto on = [this](pii_entity e) { return contains(enabled_, e); };
    std::size_t birth_until = 0;  // dates before this offset are dates of birth
    detail::pii_prescan<Arch> prescan{t};
    std::size_t last_end = 0;     // end of the previous match: matches never overlap
    std::size_t i = 0;
    while (i < t.size()) {
      if constexpr (SkipPlainRuns) {
        if (i >= birth_until) {
          std::size_t stop = t.size();
          if (std::is_constant_evaluated()) {
            stop = detail::next_pii_stop(t, i, t.size(), arch::scalar{});
          } else {
            stop = prescan.next(i);
          }
          std::size_t resume = stop;  // back to the start of the letter run the stop ends
          while (resume > i && alpha(t[resume - 1])) --resume;
          i = resume;
          if (i == t.size()) break;
        }
      }
      const char c = t[i];
      if (c == ' ' || c == '\n' || c == ',') {  // the commonest bytes start nothing
        ++i;
        continue;
      }
      if (c == '@') {
        std::size_t start = 0;
        if (on(pii_entity::email)) {
          if (const auto n = match_email(t, i, last_end, start); n != 0) {
            if (!report(sink, pii_entity::email, start, n)) return;
            i = last_end = start + n;
            continue;
          }
        }
        ++i;
        continue;
      }
      if (!starts_token(t, i)) {
        ++i;
        continue;
      }
      std::size_t n = 0;
      pii_entity kind = pii_entity::none;
      const auto attempt = [&](pii_entity e, std::size_t len) {
        if (kind == pii_entity::none && len != 0) kind = e, n = len;
      };
      // With the skip on, a digit's first hex run decides which digit formats may start.
      const bool filtered = SkipPlainRuns && digit(c);
      if (alpha(c)) {
        // Cheap pre-checks on the letter run keep ordinary words at a few compares each.
        const std::size_t w = alpha_run(t, i);
        const char after = at(t, i + w);
        if (w >= 3 && w <= 9 && (lower(c) == 'b' || lower(c) == 'd') && birth_keyword(t, i, w)) birth_until = i + w + 32;
        std::size_t iban_shape = 0;
        if (w == 2 && digit(after) && on(pii_entity::iban)) attempt(pii_entity::iban, match_iban(t, i, iban_shape));
        if (w <= 4 && hex(c) && (after == ':' || after == '-' || digit(after))) {
          if (on(pii_entity::mac)) attempt(pii_entity::mac, match_mac(t, i));
          if (on(pii_entity::ipv6)) attempt(pii_entity::ipv6, match_ipv6(t, i));
        }
        if (i < birth_until && on(pii_entity::date_of_birth)) attempt(pii_entity::date_of_birth, match_text_date(t, i));
        if (kind == pii_entity::none) {
          i += iban_shape > w ? iban_shape : w;  // skip the word (or invalid IBAN) whole
          continue;
        }
      } else if (filtered && i >= birth_until && !detail::pii_digit_entity_may_start(t, i, t.size())) {
        // Nothing starts here ("7B", "42 words"): straight to the failed-token skip below.
      } else if (digit(c) || ((c == '+' || c == '(') && digit(at(t, i + 1)))) {
        // With the skip on, the byte after a digit's first hex run rules out the formats that
        // need another separator there (MAC ':' or '-', IPv6 ':', SSN '-', IPv4 '.', numeric
        // date '-', '/' or '.'), so "2024-05-14" and "3.2.1" try two or three matchers, not all.
        const char sep = filtered ? at(t, detail::pii_hex_run_end(t, i, t.size())) : '\0';
        if (on(pii_entity::mac) && (!filtered || sep == ':' || sep == '-')) attempt(pii_entity::mac, match_mac(t, i));
        if (on(pii_entity::ipv6) && (!filtered || sep == ':')) attempt(pii_entity::ipv6, match_ipv6(t, i));
        if (on(pii_entity::ssn) && (!filtered || sep == '-')) attempt(pii_entity::ssn, match_ssn(t, i));
        if (on(pii_entity::ipv4) && (!filtered || sep == '.')) attempt(pii_entity::ipv4, match_ipv4(t, i));
        // A date is consumed even when it is not a birth date, so its digits are not
        // mistaken for a phone number.
        if (const auto d = !filtered || sep == '-' || sep == '/' || sep == '.' ? match_numeric_date(t, i) : 0;
            kind == pii_entity::none && d != 0) {
          if (i >= birth_until || !on(pii_entity::date_of_birth)) {
            i += d;
            continue;
          }
          attempt(pii_entity::date_of_birth, d);
        }
        if (i < birth_until && on(pii_entity::date_of_birth)) attempt(pii_entity::date_of_birth, match_text_date(t, i));
        if (on(pii_entity::credit_card)) attempt(pii_entity::credit_card, match_card(t, i));
        if (on(pii_entity::phone)) attempt(pii_entity::phone, match_phone(t, i));
      } else if (c == ':' && at(t, i + 1) == ':' && on(pii_entity::ipv6)) {
        attempt(pii_entity::ipv6, match_ipv6(t, i));
      }
      if (kind != pii_entity::none) {
        if (!report(sink, kind, i, n)) return;
        i = last_end = i + n;
      } else {
        ++i;
        while (i < t.size() && alnum(c) && alnum(t[i])) ++i;  // skip the rest of a failed token
        // With the skip on, also past joiners inside it ("3.2.1", "a-b"): no byte after a
        // joiner that follows an alphanumeric starts a token, so the scan would only step over
        // them, one pre-scan stop each.
        if constexpr (SkipPlainRuns) {
          while (i < t.size() && alnum(c) && (alnum(t[i]) || ((t[i] == '.' || t[i] == '-' || t[i] == ':' || t[i] == '/') &&
                                                               alnum(at(t, i + 1)))))
            ++i;
        }
      }
    }
  }

  pii_entity enabled_;
};

}  // namespace hedge::route
