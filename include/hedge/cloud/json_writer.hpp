// hedge/cloud/json_writer.hpp: JSON text written into a caller's buffer.
//
// Request bodies are small and flat, so a writer of ~150 lines is simpler than rapidjson's
// Writer, which keeps its nesting levels in a heap-backed stack. This one never allocates:
// it fills a caller span, remembers the first error (a full buffer, invalid UTF-8, a
// non-finite number) and reports it from finish(), so call sites stay straight-line.
//
// Strings are escaped per RFC 8259 section 7: '"', '\\' and the controls U+0000..U+001F
// (as \n, \t... or \u00XX); everything else is copied. Invalid UTF-8 (RFC 3629: overlong
// forms, surrogates, code points above U+10FFFF, truncated sequences) is refused, since a
// server would answer 400 or, worse, substitute U+FFFD silently.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/core/result.hpp"

namespace hedge::cloud {

/// Length of the valid UTF-8 prefix of `s` (s.size() when all of it is valid).
constexpr std::size_t valid_utf8_prefix(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<std::uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n;
    std::uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1Fu;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0Fu;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07u;
    else return i;
    if (s.size() - i <= n) return i;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<std::uint8_t>(s[i + k]);
      if ((cc & 0xC0u) != 0x80u) return i;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return i;
    i += n + 1;
  }
  return i;
}

/// Writes one JSON value into a caller buffer. Commas between members and elements are
/// inserted automatically; nesting is bounded by max_depth.
class json_writer {
 public:
  static constexpr std::size_t max_depth = 32;

  explicit json_writer(std::span<char> out) noexcept : out_(out) {}

  json_writer& begin_object() noexcept { return open('{'); }
  json_writer& end_object() noexcept { return close('}'); }
  json_writer& begin_array() noexcept { return open('['); }
  json_writer& end_array() noexcept { return close(']'); }

  /// An object member's name; the next call writes its value.
  json_writer& key(std::string_view name) noexcept {
    separate();
    quoted(name);
    put(':');
    after_key_ = true;
    return *this;
  }
  json_writer& string(std::string_view s) noexcept {
    separate();
    quoted(s);
    return *this;
  }
  json_writer& boolean(bool b) noexcept {
    separate();
    return raw_text(b ? "true" : "false");
  }
  json_writer& null() noexcept {
    separate();
    return raw_text("null");
  }
  json_writer& integer(std::int64_t v) noexcept {
    separate();
    char digits[24];
    std::size_t n = 0;
    std::uint64_t m = v < 0 ? ~static_cast<std::uint64_t>(v) + 1 : static_cast<std::uint64_t>(v);
    do {
      digits[n++] = static_cast<char>('0' + m % 10);
      m /= 10;
    } while (m != 0);
    if (v < 0) put('-');
    while (n > 0) put(digits[--n]);
    return *this;
  }
  /// A number with at most 6 decimals (sampling parameters: temperature, top_p, penalties).
  /// Written as fixed-point without printf, whose float formatting costs tens of KB on a
  /// Cortex-M; non-finite values and magnitudes of 1e15 or more are refused.
  json_writer& number(double v) noexcept {
    if (!std::isfinite(v) || std::fabs(v) >= 1e15) return fail(error{errc::invalid_argument} << "a JSON number must be finite and below 1e15");
    separate();
    if (v < 0) put('-'), v = -v;
    auto scaled = static_cast<std::uint64_t>(std::llround(v * 1e6));
    const std::uint64_t whole = scaled / 1'000'000;
    std::uint64_t frac = scaled % 1'000'000;
    char digits[24];
    std::size_t n = 0;
    std::uint64_t w = whole;
    do {
      digits[n++] = static_cast<char>('0' + w % 10);
      w /= 10;
    } while (w != 0);
    while (n > 0) put(digits[--n]);
    if (frac != 0) {
      put('.');
      int places = 6;
      while (frac % 10 == 0) frac /= 10, --places;
      char f[6];
      for (int k = places - 1; k >= 0; --k) f[k] = static_cast<char>('0' + frac % 10), frac /= 10;
      for (int k = 0; k < places; ++k) put(f[k]);
    }
    return *this;
  }
  /// A value given as JSON text, copied verbatim (the caller vouches for its syntax).
  json_writer& raw_value(std::string_view json) noexcept {
    separate();
    return raw_text(json);
  }

  /// Bytes written so far.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The unused tail of the buffer (scratch space for validation before a raw write).
  [[nodiscard]] std::span<char> spare() const noexcept { return out_.subspan(size_); }
  [[nodiscard]] bool failed() const noexcept { return failed_; }
  json_writer& fail(const error& e) noexcept {
    if (!failed_) failed_ = true, error_ = e;
    return *this;
  }

  /// The text, or the first error met while writing (or unbalanced nesting).
  [[nodiscard]] result<std::string_view> finish() const noexcept {
    if (failed_) return error_;
    if (depth_ != 0) return error{errc::invalid_argument} << "unbalanced JSON nesting";
    return std::string_view{out_.data(), size_};
  }

 private:
  json_writer& open(char c) noexcept {
    separate();
    if (depth_ == max_depth) return fail(error{errc::capacity_exceeded} << "JSON nesting deeper than " << max_depth);
    first_[depth_++] = true;
    return put(c);
  }
  json_writer& close(char c) noexcept {
    if (depth_ == 0) return fail(error{errc::invalid_argument} << "unbalanced JSON nesting");
    --depth_;
    return put(c);
  }
  // A comma before every member or element but the first of its container.
  void separate() noexcept {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (depth_ == 0) return;
    if (first_[depth_ - 1]) first_[depth_ - 1] = false;
    else put(',');
  }
  void quoted(std::string_view s) noexcept {
    if (valid_utf8_prefix(s) != s.size()) {
      fail(error{errc::invalid_argument} << "invalid UTF-8 at byte " << valid_utf8_prefix(s) << " of a JSON string");
      return;
    }
    put('"');
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': raw_text("\\\""); break;
        case '\\': raw_text("\\\\"); break;
        case '\n': raw_text("\\n"); break;
        case '\r': raw_text("\\r"); break;
        case '\t': raw_text("\\t"); break;
        case '\b': raw_text("\\b"); break;
        case '\f': raw_text("\\f"); break;
        default:
          if (c < 0x20) {
            constexpr char hex[] = "0123456789abcdef";
            const char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            raw_text({esc, 6});
          } else {
            put(ch);
          }
      }
    }
    put('"');
  }
  json_writer& raw_text(std::string_view s) noexcept {
    if (failed_) return *this;
    if (out_.size() - size_ < s.size()) return fail(error{errc::capacity_exceeded} << "request body larger than its " << out_.size() << "-byte buffer");
    for (char c : s) out_[size_++] = c;
    return *this;
  }
  json_writer& put(char c) noexcept { return raw_text({&c, 1}); }

  std::span<char> out_;
  std::size_t size_ = 0;
  std::size_t depth_ = 0;
  bool first_[max_depth] = {};
  bool after_key_ = false;
  bool failed_ = false;
  error error_{};
};

}  // namespace hedge::cloud
