// hedge/core/result.hpp: errors as values.
//
// hedge never throws: every fallible call returns `result<T>`, which holds
// either a T or an `error` (a code for programs, a message for people). The
// message lives in a fixed in-object buffer so building one never allocates,
// which keeps error paths usable in firmware and in no-heap decode loops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "hedge/core/config.hpp"

namespace hedge {

/// What went wrong, for programs to branch on.
enum class errc : std::uint8_t {
  ok = 0,
  invalid_argument,  ///< a caller-supplied value is outside the documented domain
  out_of_range,      ///< an index or token id beyond its bound
  shape_mismatch,    ///< operand shapes do not agree
  misaligned,        ///< a caller buffer violates the 64-byte alignment contract
  capacity_exceeded, ///< a fixed-size buffer or cache is full
  out_of_memory,     ///< a heap allocation failed
  parse_error,       ///< malformed input file or message
  unsupported,       ///< valid input this build does not handle
  io_error,          ///< the OS refused a file or socket operation
  timeout,           ///< a deadline passed
  unavailable,       ///< a tier or service cannot take the request now
  rejected,          ///< a policy refused the request
};

/// Stable lower-case name of an error code, e.g. "capacity_exceeded".
constexpr std::string_view to_string(errc c) noexcept {
  switch (c) {
    case errc::ok: return "ok";
    case errc::invalid_argument: return "invalid_argument";
    case errc::out_of_range: return "out_of_range";
    case errc::shape_mismatch: return "shape_mismatch";
    case errc::misaligned: return "misaligned";
    case errc::capacity_exceeded: return "capacity_exceeded";
    case errc::out_of_memory: return "out_of_memory";
    case errc::parse_error: return "parse_error";
    case errc::unsupported: return "unsupported";
    case errc::io_error: return "io_error";
    case errc::timeout: return "timeout";
    case errc::unavailable: return "unavailable";
    case errc::rejected: return "rejected";
  }
  return "unknown";
}

namespace detail {

/// The longest text fixed3 writes: a sign, 19 digits, the point and 3 decimals.
inline constexpr std::size_t fixed3_max = 24;

/// Writes `value` as fixed-point with 3 decimals ("-12.345", "nan", "inf") into out and
/// returns its length: enough for latencies, prices and scores in messages, without
/// printf's or to_chars' float formatting (which pull in tables of tens of KB on a
/// Cortex-M, and allocate in some libcs).
constexpr std::size_t fixed3(double value, char (&out)[fixed3_max]) noexcept {
  std::size_t n = 0;
  auto put = [&](std::string_view s) {
    for (char c : s) out[n++] = c;
  };
  if (value != value) {
    put("nan");
    return n;
  }
  if (value < 0) {
    put("-");
    value = -value;
  }
  if (value > 9.2e18) {
    put("inf");
    return n;
  }
  auto whole = static_cast<std::uint64_t>(value);
  auto milli = static_cast<std::uint64_t>((value - static_cast<double>(whole)) * 1000.0 + 0.5);
  if (milli == 1000) {
    ++whole;
    milli = 0;
  }
  char digits[20];
  std::size_t count = 0;
  do {
    digits[count++] = static_cast<char>('0' + whole % 10);
    whole /= 10;
  } while (whole != 0);
  while (count > 0) out[n++] = digits[--count];
  out[n++] = '.';
  out[n++] = static_cast<char>('0' + milli / 100);
  out[n++] = static_cast<char>('0' + milli / 10 % 10);
  out[n++] = static_cast<char>('0' + milli % 10);
  return n;
}

}  // namespace detail

/// An error code plus a human message of at most `max_message` bytes.
/// Build messages with `<<`: `error{errc::out_of_range} << "token " << id << " >= vocab " << n`.
/// Text beyond the buffer is cut, never allocated.
class error {
 public:
  static constexpr std::size_t max_message = 191;

  constexpr error() noexcept = default;
  constexpr explicit error(errc code) noexcept : code_(code) {}
  constexpr error(errc code, std::string_view message) noexcept : code_(code) { *this << message; }

  [[nodiscard]] constexpr errc code() const noexcept { return code_; }
  [[nodiscard]] constexpr std::string_view message() const noexcept { return {text_, length_}; }
  /// NUL-terminated message, for C APIs and printf.
  [[nodiscard]] constexpr const char* c_str() const noexcept { return text_; }

  constexpr error& operator<<(std::string_view s) noexcept {
    for (char c : s) {
      if (length_ == max_message) break;
      text_[length_++] = c;
    }
    text_[length_] = '\0';
    return *this;
  }
  constexpr error& operator<<(const char* s) noexcept { return *this << std::string_view{s}; }
  constexpr error& operator<<(char c) noexcept { return *this << std::string_view{&c, 1}; }

  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, char> && !std::is_same_v<I, bool>)
  constexpr error& operator<<(I value) noexcept {
    char digits[24];
    std::size_t n = 0;
    bool negative = false;
    std::uint64_t magnitude;
    if constexpr (std::is_signed_v<I>) {
      negative = value < 0;
      magnitude = negative ? ~static_cast<std::uint64_t>(value) + 1 : static_cast<std::uint64_t>(value);
    } else {
      magnitude = value;
    }
    do {
      digits[n++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude != 0);
    if (negative) *this << '-';
    while (n > 0) *this << digits[--n];
    return *this;
  }

  /// Fixed-point with 3 decimals (detail::fixed3).
  constexpr error& operator<<(double value) noexcept {
    char digits[detail::fixed3_max];
    return *this << std::string_view{digits, detail::fixed3(value, digits)};
  }
  constexpr error& operator<<(float value) noexcept { return *this << static_cast<double>(value); }

 private:
  errc code_ = errc::ok;
  std::uint16_t length_ = 0;
  char text_[max_message + 1] = {};
};

/// Either a value of T or an error. Never throws; reading the wrong side is a
/// debug assertion. `result<void>` carries only success or an error.
template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "result<T&> is not supported: return a pointer or a view");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, hedge::error>, "result<error> is ambiguous");

 public:
  using value_type = T;

  template <class U = T>
    requires std::is_constructible_v<T, U&&> && (!std::is_same_v<std::remove_cvref_t<U>, result>) &&
             (!std::is_same_v<std::remove_cvref_t<U>, hedge::error>)
  constexpr result(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) : has_value_(true) {
    std::construct_at(&value_, std::forward<U>(value));
  }
  constexpr result(hedge::error e) noexcept : has_value_(false) { std::construct_at(&error_, e); }

  constexpr result(const result& other) : has_value_(other.has_value_) {
    if (has_value_) std::construct_at(&value_, other.value_);
    else std::construct_at(&error_, other.error_);
  }
  constexpr result(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
      : has_value_(other.has_value_) {
    if (has_value_) std::construct_at(&value_, std::move(other.value_));
    else std::construct_at(&error_, other.error_);
  }
  constexpr result& operator=(const result& other) {
    if (this != &other) {
      destroy();
      has_value_ = other.has_value_;
      if (has_value_) std::construct_at(&value_, other.value_);
      else std::construct_at(&error_, other.error_);
    }
    return *this;
  }
  constexpr result& operator=(result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      destroy();
      has_value_ = other.has_value_;
      if (has_value_) std::construct_at(&value_, std::move(other.value_));
      else std::construct_at(&error_, other.error_);
    }
    return *this;
  }
  constexpr ~result() { destroy(); }

  [[nodiscard]] constexpr bool has_value() const noexcept { return has_value_; }
  [[nodiscard]] constexpr bool ok() const noexcept { return has_value_; }
  constexpr explicit operator bool() const noexcept { return has_value_; }

  [[nodiscard]] constexpr T& value() & noexcept { HEDGE_ASSERT(has_value_); return value_; }
  [[nodiscard]] constexpr const T& value() const& noexcept { HEDGE_ASSERT(has_value_); return value_; }
  [[nodiscard]] constexpr T&& value() && noexcept { HEDGE_ASSERT(has_value_); return std::move(value_); }
  constexpr T& operator*() & noexcept { return value(); }
  constexpr const T& operator*() const& noexcept { return value(); }
  constexpr T&& operator*() && noexcept { return std::move(*this).value(); }
  constexpr T* operator->() noexcept { return &value(); }
  constexpr const T* operator->() const noexcept { return &value(); }

  [[nodiscard]] constexpr const hedge::error& error() const noexcept { HEDGE_ASSERT(!has_value_); return error_; }

  template <class U>
  [[nodiscard]] constexpr T value_or(U&& fallback) const& {
    return has_value_ ? value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  constexpr void destroy() noexcept {
    if (has_value_) value_.~T();
    else error_.~error();
  }

  bool has_value_;
  union {
    T value_;
    hedge::error error_;
  };
};

template <>
class [[nodiscard]] result<void> {
 public:
  using value_type = void;
  constexpr result() noexcept = default;
  constexpr result(hedge::error e) noexcept : error_(e), has_value_(false) {}

  [[nodiscard]] constexpr bool has_value() const noexcept { return has_value_; }
  [[nodiscard]] constexpr bool ok() const noexcept { return has_value_; }
  constexpr explicit operator bool() const noexcept { return has_value_; }
  constexpr void value() const noexcept { HEDGE_ASSERT(has_value_); }
  [[nodiscard]] constexpr const hedge::error& error() const noexcept { HEDGE_ASSERT(!has_value_); return error_; }

 private:
  hedge::error error_{};
  bool has_value_ = true;
};

/// Success for `result<void>`: `return hedge::ok();`.
constexpr result<void> ok() noexcept { return {}; }

}  // namespace hedge

/// Propagate an error from an expression returning result<...>: the enclosing
/// function must return a result. Evaluates `expr` once.
#define HEDGE_TRY(expr)                                       \
  do {                                                        \
    if (auto hedge_try_r_ = (expr); !hedge_try_r_.has_value()) \
      return hedge_try_r_.error();                            \
  } while (0)
