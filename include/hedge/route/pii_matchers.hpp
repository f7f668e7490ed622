// hedge/route/pii_matchers.hpp: the PII entity kinds, their check digits, and one
// hand-written matcher per entity family (no regular expressions).
//
// At a token boundary, each matcher tries to parse its entity and, where the format has
// one, checks its check digits, so look-alikes are rejected:
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
// No allocation, no exceptions. The detector (pii_detector.hpp) runs them left to right.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

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
/// Byte classes of the matchers and of the pre-scan (pii_prescan_scalar.hpp): one
/// definition of a letter, a digit and a hex digit.
constexpr bool pii_letter(unsigned char c) noexcept { return static_cast<unsigned char>((c | 0x20) - 'a') < 26; }
constexpr bool pii_digit(unsigned char c) noexcept { return c >= '0' && c <= '9'; }
constexpr bool pii_hex_letter(unsigned char c) noexcept { return static_cast<unsigned char>((c | 0x20) - 'a') < 6; }
constexpr bool pii_hex(unsigned char c) noexcept { return pii_digit(c) || pii_hex_letter(c); }

/// Bytes [i, i + n) of the text, for the check-digit functions (n is at most 34).
constexpr std::string_view pii_slice(std::string_view t, std::size_t i, std::size_t n) noexcept {
  return std::string_view(t.data() + i, n);
}

/// The entity matchers and the token rules they share, over the `char`s of a `Text`:
/// std::string_view, or any type with `size()`, `operator[]` and a `pii_slice` overload
/// (found by argument-dependent lookup), such as the tests' byte-counting text that
/// proves every scan linear. Each `match_*` returns the length of its entity at i, or 0.
template <class Text = std::string_view>
struct pii_matchers {
  static constexpr bool digit(char c) noexcept { return pii_digit(static_cast<unsigned char>(c)); }
  static constexpr bool upper(char c) noexcept { return c >= 'A' && c <= 'Z'; }
  static constexpr bool alpha(char c) noexcept { return pii_letter(static_cast<unsigned char>(c)); }
  static constexpr bool alnum(char c) noexcept { return digit(c) || alpha(c); }
  static constexpr bool hex(char c) noexcept { return pii_hex(static_cast<unsigned char>(c)); }
  static constexpr char lower(char c) noexcept { return upper(c) ? static_cast<char>(c - 'A' + 'a') : c; }
  static constexpr bool word(char c) noexcept { return alnum(c) || c == '_'; }

  static constexpr char at(Text t, std::size_t i) noexcept { return i < t.size() ? t[i] : '\0'; }

  /// No identifier continues past `end`: not a letter/digit, and not a joiner ('.', '-', ':', '/')
  /// followed by one ("1.2.3.4.5" is not an IPv4 address).
  static constexpr bool ends_token(Text t, std::size_t end) noexcept {
    const char c = at(t, end);
    if (word(c)) return false;
    if ((c == '.' || c == '-' || c == ':' || c == '/') && alnum(at(t, end + 1))) return false;
    return true;
  }
  /// Mirror of ends_token on the left of `i`.
  static constexpr bool starts_token(Text t, std::size_t i) noexcept {
    if (i == 0) return true;
    const char c = t[i - 1];
    if (word(c)) return false;
    if ((c == '.' || c == '-' || c == ':' || c == '/') && i >= 2 && alnum(t[i - 2])) return false;
    return true;
  }

  static constexpr bool word_is(Text t, std::size_t i, std::size_t n, std::string_view w) noexcept {
    if (n != w.size()) return false;
    for (std::size_t k = 0; k < n; ++k)
      if (lower(t[i + k]) != w[k]) return false;
    return true;
  }

  /// Reads 1..max digits at i; returns the count (0 if none) and the value.
  static constexpr std::size_t digits(Text t, std::size_t i, std::size_t max, unsigned& value) noexcept {
    std::size_t n = 0;
    value = 0;
    while (n < max && digit(at(t, i + n))) value = value * 10 + static_cast<unsigned>(t[i + n++] - '0');
    if (digit(at(t, i + n))) return 0;  // longer than allowed
    return n;
  }


  static constexpr std::size_t match_ssn(Text t, std::size_t i) noexcept {
    unsigned area = 0, group = 0, serial = 0;
    if (digits(t, i, 3, area) != 3 || at(t, i + 3) != '-') return 0;
    if (digits(t, i + 4, 2, group) != 2 || at(t, i + 6) != '-') return 0;
    if (digits(t, i + 7, 4, serial) != 4 || !ends_token(t, i + 11)) return 0;
    if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return 0;
    return 11;
  }

  static constexpr bool after_version_word(Text t, std::size_t i) noexcept {
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

  static constexpr std::size_t match_ipv4(Text t, std::size_t i) noexcept {
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

  static constexpr std::size_t match_mac(Text t, std::size_t i) noexcept {
    const char sep = at(t, i + 2);
    if (sep != ':' && sep != '-') return 0;
    for (std::size_t g = 0; g < 6; ++g) {
      const std::size_t p = i + g * 3;
      if (!hex(at(t, p)) || !hex(at(t, p + 1))) return 0;
      if (g < 5 && at(t, p + 2) != sep) return 0;
    }
    return ends_token(t, i + 17) ? 17 : 0;
  }

  static constexpr std::size_t match_ipv6(Text t, std::size_t i) noexcept {
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
      if (++groups > 8) return 0;  // no address has more: stop reading
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
  static constexpr std::size_t match_numeric_date(Text t, std::size_t i) noexcept {
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

  static constexpr bool month_word(Text t, std::size_t i, std::size_t n) noexcept {
    constexpr std::array<std::string_view, 12> months{"january", "february", "march",     "april",   "may",      "june",
                                                      "july",    "august",   "september", "october", "november", "december"};
    for (auto m : months)
      if (word_is(t, i, n, m) || word_is(t, i, n, std::string_view(m.data(), 3)) || (m == "september" && word_is(t, i, n, "sept")))
        return true;
    return false;
  }
  static constexpr std::size_t alpha_run(Text t, std::size_t i) noexcept {
    std::size_t e = i;
    while (e < t.size() && alpha(t[e])) ++e;
    return e - i;
  }
  static constexpr std::size_t skip_spaces(Text t, std::size_t p) noexcept {
    while (at(t, p) == ' ') ++p;
    return p;
  }
  static constexpr std::size_t year_at(Text t, std::size_t p) noexcept {
    unsigned y = 0;
    return digits(t, p, 4, y) == 4 && y >= 1900 && y <= 2099 && ends_token(t, p + 4) ? 4 : 0;
  }

  /// "March 3, 1985", "Mar 3 1985", "3 March 1985", "3rd of March 1985".
  static constexpr std::size_t match_text_date(Text t, std::size_t i) noexcept {
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
  /// that ends at a group boundary. The Luhn sums of every prefix are kept as it grows
  /// (`plain`: the last digit read counts once, `doubled`: it counts doubled), so each
  /// group boundary is checked in O(1): luhn_valid of the prefix, without re-reading it.
  static constexpr std::size_t match_card(Text t, std::size_t i) noexcept {
    std::size_t p = i, count = 0, best = 0;
    unsigned plain = 0, doubled = 0;
    while (true) {
      // Reading stops at the 20th digit: the match fails there whatever follows, and each
      // matcher reads a bounded number of bytes, so the scan stays linear in the text.
      for (char c; count <= 19 && digit(c = at(t, p)); ++p, ++count) {
        const unsigned d = static_cast<unsigned>(c - '0');
        const unsigned next_plain = doubled + d;
        doubled = plain + (d * 2 > 9 ? d * 2 - 9 : d * 2);
        plain = next_plain;
      }
      if (count > 19) break;
      if (count >= 13 && plain % 10 == 0 && ends_token(t, p)) best = p - i;
      const char s = at(t, p);
      if ((s == ' ' || s == '-') && digit(at(t, p + 1))) {
        ++p;
        continue;
      }
      break;
    }
    return best;
  }

  static constexpr std::size_t match_phone(Text t, std::size_t i) noexcept {
    if (at(t, i) == '+') {
      std::size_t p = i + 1, count = 0, best = 0;
      while (true) {
        const bool paren = at(t, p) == '(';
        if (paren) ++p;
        std::size_t n = 0;
        while (count + n <= 15 && digit(at(t, p))) ++p, ++n;  // bounded, as in match_card
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
  static constexpr std::size_t match_email(Text t, std::size_t at_sign, std::size_t floor,
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
  static constexpr std::size_t match_iban(Text t, std::size_t i, std::size_t& shape) noexcept {
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
      if (iban_valid(pii_slice(t, i, e - i))) return e - i;
    }
    return 0;
  }

  static constexpr bool birth_keyword(Text t, std::size_t i, std::size_t n) noexcept {
    return word_is(t, i, n, "born") || word_is(t, i, n, "birth") || word_is(t, i, n, "birthday") ||
           word_is(t, i, n, "birthdate") || word_is(t, i, n, "dob");
  }
};
}  // namespace detail

}  // namespace hedge::route
