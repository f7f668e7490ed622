// hedge/route/pii_detector.hpp: personal-data detection without regular expressions.
//
// One left-to-right pass over the prompt; at each token boundary the entity matchers
// (pii_matchers.hpp) try to parse an entity. `find` and `first` skip plain runs with a
// pre-scan (pii_prescan_scalar.hpp states its rule and why it finds what the byte-by-byte
// `find_reference` finds; pii_prescan_avx2.hpp classifies 32 bytes per step). The pre-scan
// variant is chosen once per call (core/dispatch.hpp): a baseline x86-64 build runs the
// AVX2 one on an AVX2 CPU. No allocation, no exceptions: matches go into a caller span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/route/pii_matchers.hpp"
#include "hedge/route/pii_prescan_avx2.hpp"
#include "hedge/route/pii_prescan_scalar.hpp"

namespace hedge::route {

namespace detail {

/// The detector's scan over a `Text` (pii_matchers.hpp says what a text may be).
template <class Text>
struct pii_scan : pii_matchers<Text> {
  using m = pii_matchers<Text>;
  using m::alnum, m::alpha, m::alpha_run, m::at, m::birth_keyword, m::digit, m::hex, m::lower, m::match_card,
      m::match_email, m::match_iban, m::match_ipv4, m::match_ipv6, m::match_mac, m::match_numeric_date, m::match_phone,
      m::match_ssn, m::match_text_date, m::starts_token;
  pii_entity enabled;

  constexpr explicit pii_scan(pii_entity entities) noexcept : enabled(entities) {}

  template <class Sink>
  static constexpr bool report(Sink& sink, pii_entity e, std::size_t offset, std::size_t length) noexcept {
    return sink(pii_match{e, static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(length)});
  }

  /// Calls sink(match) for every entity in order; stops when sink returns false. With
  /// SkipPlainRuns, `prescan` (a pre-scan cursor of pii_prescan_*.hpp) finds where to look.
  template <bool SkipPlainRuns, class PreScan, class Sink>
  constexpr void run(Text t, PreScan& prescan, Sink&& sink) const noexcept {
    const auto on = [this](pii_entity e) { return contains(enabled, e); };
    std::size_t birth_until = 0;  // dates before this offset are dates of birth
    std::size_t last_end = 0;     // end of the previous match: matches never overlap
    // The pre-scan's last answer: the first stop at or after the position it was asked
    // about, and where the letter run that stop ends begins (not before that position). It
    // stays the answer for every later position up to the stop, so the scan asks again
    // only past it: each byte is classified once and walked back over at most once, and
    // the scan is linear in the text however its stops lie.
    std::size_t stop = 0, run_start = 0;
    bool asked = false;
    std::size_t i = 0;
    while (i < t.size()) {
      if constexpr (SkipPlainRuns) {
        if (i >= birth_until) {
          if (!asked || i > stop) {
            stop = prescan.next(i);
            run_start = stop;
            while (run_start > i && alpha(t[run_start - 1])) --run_start;
            asked = true;
          }
          if (run_start > i) i = run_start;
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
        // With the skip on, past the rest of an alphanumeric run too: none of its bytes
        // starts a token.
        if constexpr (SkipPlainRuns) {
          if (alnum(c))
            while (i < t.size() && alnum(t[i])) ++i;
        }
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

};

}  // namespace detail

/// Finds personal data in text. Cheap to copy; configure which entities count.
class pii_detector {
 public:
  constexpr explicit pii_detector(pii_entity enabled = pii_entity::all) noexcept : enabled_(enabled) {}
  [[nodiscard]] constexpr pii_entity enabled() const noexcept { return enabled_; }

  /// Writes up to out.size() matches in text order; returns how many were written.
  /// With an empty `out` it still scans and returns 0; use `first` to stop at the first hit.
  /// \tparam A pre-scan instruction set: arch::best (the best this CPU runs, chosen once per
  ///   call), or a tag (arch::scalar: the byte-by-byte pre-scan; arch::avx2: 32 bytes per step)
  template <class A = arch::best>
  constexpr std::size_t find(std::string_view text, std::span<pii_match> out, A = {}) const noexcept {
    if (std::is_constant_evaluated()) return write_matches<true>(text, out, detail::pii_prescan{text});
    return arch::visit<A>([&](auto tag) { return write_matches<true>(text, out, detail::make_pii_prescan(text, tag)); });
  }

  /// The specification of `find`: every byte visited, no plain-run skip.
  constexpr std::size_t find_reference(std::string_view text, std::span<pii_match> out) const noexcept {
    return write_matches<false>(text, out, detail::pii_prescan{text});
  }

  /// The first entity in the text, if any.
  /// \tparam A pre-scan instruction set, as for `find`
  template <class A = arch::best>
  [[nodiscard]] constexpr std::optional<pii_match> first(std::string_view text, A = {}) const noexcept {
    if (std::is_constant_evaluated()) return first_match(text, detail::pii_prescan{text});
    return arch::visit<A>([&](auto tag) { return first_match(text, detail::make_pii_prescan(text, tag)); });
  }

 private:
  template <bool SkipPlainRuns, class PreScan>
  constexpr std::size_t write_matches(std::string_view text, std::span<pii_match> out, PreScan prescan) const noexcept {
    std::size_t written = 0;
    detail::pii_scan<std::string_view>{enabled_}.template run<SkipPlainRuns>(text, prescan, [&](const pii_match& m) {
      if (written < out.size()) out[written++] = m;
      return written < out.size();
    });
    return written;
  }

  template <class PreScan>
  constexpr std::optional<pii_match> first_match(std::string_view text, PreScan prescan) const noexcept {
    std::optional<pii_match> found;
    detail::pii_scan<std::string_view>{enabled_}.template run<true>(text, prescan, [&](const pii_match& m) {
      found = m;
      return false;
    });
    return found;
  }

  pii_entity enabled_;
};

}  // namespace hedge::route
