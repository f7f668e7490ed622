// hedge/route/pii_prescan_scalar.hpp: the PII pre-scan's stop rule and its scalar
// reference (the AVX2 pre-scan is pii_prescan_avx2.hpp).
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

#include <cstddef>
#include <string_view>

#include "hedge/core/arch.hpp"
#include "hedge/route/pii_matchers.hpp"

namespace hedge::route::detail {

/// Whether a letter run starting with lower-case-or-not `c` then `next` may be a birth
/// keyword ("born", "birth...", "dob"): "bir", "bor", "dob" in any case.
constexpr bool pii_birth_start(unsigned char c, unsigned char next, unsigned char next2) noexcept {
  const auto a = static_cast<unsigned char>(c | 0x20), b = static_cast<unsigned char>(next | 0x20),
             d = static_cast<unsigned char>(next2 | 0x20);
  return (a == 'b' && (b == 'i' || b == 'o') && d == 'r') || (a == 'd' && b == 'o' && d == 'b');
}

/// Byte j of t[0, end); 0 from `end` on.
template <class Text>
constexpr unsigned char pii_byte(const Text& t, std::size_t j, std::size_t end) noexcept {
  return j < end ? static_cast<unsigned char>(t[j]) : static_cast<unsigned char>(0);
}

/// End of the run of hex digits from i in t[0, end).
template <class Text>
constexpr std::size_t pii_hex_run_end(const Text& t, std::size_t i, std::size_t end) noexcept {
  while (i < end && pii_hex(static_cast<unsigned char>(t[i]))) ++i;
  return i;
}

/// Whether the byte at p of t[0, end) can join two groups of a digit format: ':', '-', '.',
/// '/', or a space before a digit or '('.
template <class Text>
constexpr bool pii_follower(const Text& t, std::size_t p, std::size_t end) noexcept {
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
template <class Text>
constexpr bool pii_digit_entity_may_start(const Text& t, std::size_t i, std::size_t end) noexcept {
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
template <class Text>
constexpr bool pii_stop(const Text& t, std::size_t k, std::size_t end) noexcept {
  const unsigned char c = pii_byte(t, k, end), prev = k > 0 ? pii_byte(t, k - 1, end) : 0, next = pii_byte(t, k + 1, end);
  // The runs are read 13 bytes far at most (pii_digit_entity_may_start): a walk to the end
  // of a long run from each of its digits would make the scan quadratic in its length.
  if (pii_digit(c)) return pii_letter(prev) || pii_digit_entity_may_start(t, k, end);
  return c == '@' || ((c == '(' || c == '+') && pii_digit(next)) || (c == ':' && next == ':') ||
         (c == ':' && pii_hex_letter(prev) && pii_group_byte(next)) ||
         (c == '-' && pii_hex_letter(prev) && pii_group_byte(next) && pii_group_byte(pii_byte(t, k + 2, end))) ||
         (!pii_letter(prev) && pii_birth_start(c, next, pii_byte(t, k + 2, end)));
}

/// First stop position in [i, end) of a text, or end.
template <class Text>
constexpr std::size_t first_pii_stop(const Text& t, std::size_t i, std::size_t end) noexcept {
  while (i < end && !pii_stop(t, i, end)) ++i;
  return i;
}
/// The same over a string: the scalar reference of the pre-scan, overloaded per arch.
constexpr std::size_t next_pii_stop(std::string_view t, std::size_t i, std::size_t end, arch::scalar) noexcept {
  return first_pii_stop(t, i, end);
}

/// The scalar pre-scan over one text (pii_matchers.hpp says what a text may be) as a
/// cursor: next(i) is next_pii_stop(t, i, t.size(), arch::scalar{}).
template <class Text = std::string_view>
struct pii_prescan {
  Text t;
  constexpr explicit pii_prescan(Text text) noexcept : t(text) {}
  constexpr std::size_t next(std::size_t i) const noexcept { return first_pii_stop(t, i, t.size()); }
};

/// The pre-scan cursor of an arch (overloaded per arch; pii_prescan_avx2.hpp adds AVX2's).
constexpr pii_prescan<> make_pii_prescan(std::string_view text, arch::scalar) noexcept { return pii_prescan<>{text}; }

}  // namespace hedge::route::detail
