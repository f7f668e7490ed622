// hedge/model/gguf_value.hpp: GGUF metadata values read in place (model/gguf.hpp's
// metadata): the value types of the spec, a typed view of one value, and ranges over
// the elements of an array. Values are views of a file that gguf_file::parse has
// validated; they copy nothing and stay valid while the file's bytes do.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/result.hpp"

namespace hedge::model {

/// Metadata value types (the GGUF spec's `gguf_metadata_value_type`; the numbers are the file ABI).
enum class gguf_value_type : std::uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

/// Lower-case name of a value type ("uint32", "string", ...), or "unknown".
constexpr std::string_view to_string(gguf_value_type t) noexcept {
  switch (t) {
    case gguf_value_type::uint8: return "uint8";
    case gguf_value_type::int8: return "int8";
    case gguf_value_type::uint16: return "uint16";
    case gguf_value_type::int16: return "int16";
    case gguf_value_type::uint32: return "uint32";
    case gguf_value_type::int32: return "int32";
    case gguf_value_type::float32: return "float32";
    case gguf_value_type::boolean: return "bool";
    case gguf_value_type::string: return "string";
    case gguf_value_type::array: return "array";
    case gguf_value_type::uint64: return "uint64";
    case gguf_value_type::int64: return "int64";
    case gguf_value_type::float64: return "float64";
  }
  return "unknown";
}

/// Bytes of one value of a fixed-size type; 0 for string, array and unknown types.
constexpr std::size_t fixed_size(gguf_value_type t) noexcept {
  switch (t) {
    case gguf_value_type::uint8:
    case gguf_value_type::int8:
    case gguf_value_type::boolean: return 1;
    case gguf_value_type::uint16:
    case gguf_value_type::int16: return 2;
    case gguf_value_type::uint32:
    case gguf_value_type::int32:
    case gguf_value_type::float32: return 4;
    case gguf_value_type::uint64:
    case gguf_value_type::int64:
    case gguf_value_type::float64: return 8;
    default: return 0;
  }
}

namespace detail {

/// Little-endian unsigned integer of `n` <= 8 bytes at p (any alignment, any host order).
inline std::uint64_t load_le(const std::byte* p, std::size_t n) noexcept {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace detail

class gguf_value;

/// Forward range over the elements of an array value (each a scalar gguf_value).
class gguf_array_range;
/// Forward range over the strings of an array of strings.
class gguf_string_range;

/// A typed view of one metadata value in the file (a scalar, a string or an array). Cheap
/// to copy; valid while the file's bytes are. Scalar reads check the type: the integer
/// reads accept any integer type whose value fits the requested one (llama.cpp's typed
/// getters demand the exact type; converters differ in the width they write, as u32 or
/// i32 token ids), the float reads accept float32 and float64, and booleans, strings and
/// arrays convert to nothing else.
class gguf_value {
 public:
  constexpr gguf_value() noexcept = default;

  [[nodiscard]] gguf_value_type type() const noexcept { return type_; }
  /// The key this value belongs to (for an array element, its array's key).
  [[nodiscard]] std::string_view key() const noexcept { return key_; }
  [[nodiscard]] bool is_array() const noexcept { return type_ == gguf_value_type::array; }
  /// For an array, the type of its elements; otherwise the value's own type.
  [[nodiscard]] gguf_value_type element_type() const noexcept { return is_array() ? element_type_ : type_; }
  /// Elements of an array; 1 for a scalar or a string.
  [[nodiscard]] std::uint64_t size() const noexcept { return is_array() ? count_ : 1; }

  /// The value as integer type T if it is an integer (of any width and sign) that fits T.
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  result<T> as_int() const noexcept {
    const std::size_t n = fixed_size(type_);
    const bool is_signed = type_ == gguf_value_type::int8 || type_ == gguf_value_type::int16 ||
                           type_ == gguf_value_type::int32 || type_ == gguf_value_type::int64;
    const bool is_unsigned = type_ == gguf_value_type::uint8 || type_ == gguf_value_type::uint16 ||
                             type_ == gguf_value_type::uint32 || type_ == gguf_value_type::uint64;
    if (!is_signed && !is_unsigned) return type_error("an integer");
    const std::uint64_t raw = detail::load_le(data_, n);
    if (is_unsigned) {
      if (raw > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return range_error(raw);
      return static_cast<T>(raw);
    }
    // Sign-extend the n-byte two's complement value.
    const unsigned shift = static_cast<unsigned>(64 - 8 * n);
    const std::int64_t v = static_cast<std::int64_t>(raw << shift) >> shift;
    if (v < 0) {
      if constexpr (std::is_unsigned_v<T>) {
        return error{errc::out_of_range} << "key " << quoted_key() << " is " << v << ", not a " << unsigned_name();
      } else {
        if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min())) return range_error(v);
      }
    } else if (static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      return range_error(v);
    }
    return static_cast<T>(v);
  }
  result<std::uint32_t> as_u32() const noexcept { return as_int<std::uint32_t>(); }
  result<std::int32_t> as_i32() const noexcept { return as_int<std::int32_t>(); }
  result<std::uint64_t> as_u64() const noexcept { return as_int<std::uint64_t>(); }
  result<std::int64_t> as_i64() const noexcept { return as_int<std::int64_t>(); }

  /// A float32 value, or a float64 one rounded to float (an error where it overflows float).
  result<float> as_f32() const noexcept {
    if (type_ == gguf_value_type::float32)
      return std::bit_cast<float>(static_cast<std::uint32_t>(detail::load_le(data_, 4)));
    if (type_ == gguf_value_type::float64) {
      const double d = std::bit_cast<double>(detail::load_le(data_, 8));
      if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max()))
        return error{errc::out_of_range} << "key " << quoted_key() << " is " << d << ", beyond float";
      return static_cast<float>(d);
    }
    return type_error("a float");
  }
  result<double> as_f64() const noexcept {
    if (type_ == gguf_value_type::float64) return std::bit_cast<double>(detail::load_le(data_, 8));
    if (type_ == gguf_value_type::float32)
      return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(detail::load_le(data_, 4))));
    return type_error("a float");
  }
  result<bool> as_bool() const noexcept {
    if (type_ != gguf_value_type::boolean) return type_error("a bool");
    return data_[0] != std::byte{0};
  }
  /// The bytes of a string value (the file's bytes; GGUF strings are not NUL-terminated).
  result<std::string_view> as_string() const noexcept {
    if (type_ != gguf_value_type::string) return type_error("a string");
    return std::string_view{reinterpret_cast<const char*>(data_), static_cast<std::size_t>(count_)};
  }

  /// Element i of an array, as a scalar value: O(1) for fixed-size elements, O(i) for
  /// strings (iterate with `strings()` to read them all).
  result<gguf_value> array_at(std::uint64_t i) const noexcept;
  result<std::string_view> array_string(std::uint64_t i) const noexcept;
  result<float> array_f32(std::uint64_t i) const noexcept;
  result<std::int32_t> array_i32(std::uint64_t i) const noexcept;
  result<std::uint32_t> array_u32(std::uint64_t i) const noexcept;

  /// Every element of an array, as scalar values; empty for a non-array.
  [[nodiscard]] gguf_array_range elements() const noexcept;
  /// Every string of an array of strings; empty for any other value.
  [[nodiscard]] gguf_string_range strings() const noexcept;

 private:
  friend class gguf_array_range;
  friend struct gguf_value_access;

  /// The element of an array starting at p (a string's p is its length field).
  gguf_value element_at(const std::byte* p) const noexcept {
    gguf_value v;
    v.key_ = key_;
    v.type_ = element_type_;
    if (element_type_ == gguf_value_type::string) {
      v.count_ = detail::load_le(p, 8);
      v.data_ = p + 8;
    } else {
      v.data_ = p;
    }
    return v;
  }

  error type_error(std::string_view wanted) const noexcept {
    return error{errc::invalid_argument} << "key " << quoted_key() << " is " << to_string(type_) << ", not "
                                         << wanted;
  }
  template <class V>
  error range_error(V v) const noexcept {
    return error{errc::out_of_range} << "key " << quoted_key() << " is " << v << ", out of range";
  }
  static constexpr std::string_view unsigned_name() noexcept { return "non-negative integer"; }
  std::string_view quoted_key() const noexcept { return key_.substr(0, 48); }

  std::string_view key_;
  const std::byte* data_ = nullptr;  ///< scalar bytes, string bytes, or first array element
  std::uint64_t count_ = 0;          ///< string length, or array element count
  gguf_value_type type_ = gguf_value_type::uint8;
  gguf_value_type element_type_ = gguf_value_type::uint8;
};

/// Builds values while decoding (the decoder is the only place that knows their layout).
struct gguf_value_access {
  static gguf_value make(std::string_view key, gguf_value_type type, const std::byte* data, std::uint64_t count,
                         gguf_value_type element_type) noexcept {
    gguf_value v;
    v.key_ = key;
    v.type_ = type;
    v.data_ = data;
    v.count_ = count;
    v.element_type_ = element_type;
    return v;
  }
  static const std::byte* data(const gguf_value& v) noexcept { return v.data_; }
};

class gguf_array_range {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = gguf_value;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = gguf_value;

    iterator() noexcept = default;
    iterator(const gguf_value* array, const std::byte* p, std::uint64_t left) noexcept
        : array_(array), p_(p), left_(left) {}
    gguf_value operator*() const noexcept { return array_->element_at(p_); }
    iterator& operator++() noexcept {
      const std::size_t n = fixed_size(array_->element_type_);
      p_ += n != 0 ? n : 8 + detail::load_le(p_, 8);
      --left_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator copy = *this;
      ++*this;
      return copy;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.left_ == b.left_; }

   private:
    const gguf_value* array_ = nullptr;
    const std::byte* p_ = nullptr;
    std::uint64_t left_ = 0;
  };

  explicit gguf_array_range(const gguf_value& array) noexcept : array_(array) {}
  [[nodiscard]] iterator begin() const noexcept {
    return array_.is_array() ? iterator{&array_, gguf_value_access::data(array_), array_.size()} : end();
  }
  [[nodiscard]] iterator end() const noexcept { return iterator{&array_, nullptr, 0}; }
  [[nodiscard]] std::uint64_t size() const noexcept { return array_.is_array() ? array_.size() : 0; }

 private:
  gguf_value array_;
};

class gguf_string_range {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::string_view;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string_view;

    iterator() noexcept = default;
    iterator(const std::byte* p, std::uint64_t left) noexcept : p_(p), left_(left) {}
    std::string_view operator*() const noexcept {
      return {reinterpret_cast<const char*>(p_ + 8), static_cast<std::size_t>(detail::load_le(p_, 8))};
    }
    iterator& operator++() noexcept {
      p_ += 8 + detail::load_le(p_, 8);
      --left_;
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator copy = *this;
      ++*this;
      return copy;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.left_ == b.left_; }

   private:
    const std::byte* p_ = nullptr;
    std::uint64_t left_ = 0;
  };

  gguf_string_range() noexcept = default;
  gguf_string_range(const std::byte* first, std::uint64_t count) noexcept : first_(first), count_(count) {}
  [[nodiscard]] iterator begin() const noexcept { return {first_, count_}; }
  [[nodiscard]] iterator end() const noexcept { return {nullptr, 0}; }
  [[nodiscard]] std::uint64_t size() const noexcept { return count_; }

 private:
  const std::byte* first_ = nullptr;
  std::uint64_t count_ = 0;
};

inline gguf_array_range gguf_value::elements() const noexcept { return gguf_array_range{*this}; }

inline gguf_string_range gguf_value::strings() const noexcept {
  if (!is_array() || element_type_ != gguf_value_type::string) return {};
  return {data_, count_};
}

inline result<gguf_value> gguf_value::array_at(std::uint64_t i) const noexcept {
  if (!is_array()) return type_error("an array");
  if (i >= count_)
    return error{errc::out_of_range} << "key " << quoted_key() << ": index " << i << " >= " << count_
                                     << " elements";
  const std::size_t n = fixed_size(element_type_);
  if (n != 0) return element_at(data_ + i * n);
  const std::byte* p = data_;
  for (std::uint64_t k = 0; k < i; ++k) p += 8 + detail::load_le(p, 8);
  return element_at(p);
}

inline result<std::string_view> gguf_value::array_string(std::uint64_t i) const noexcept {
  auto v = array_at(i);
  if (!v) return v.error();
  return v->as_string();
}
inline result<float> gguf_value::array_f32(std::uint64_t i) const noexcept {
  auto v = array_at(i);
  if (!v) return v.error();
  return v->as_f32();
}
inline result<std::int32_t> gguf_value::array_i32(std::uint64_t i) const noexcept {
  auto v = array_at(i);
  if (!v) return v.error();
  return v->as_i32();
}
inline result<std::uint32_t> gguf_value::array_u32(std::uint64_t i) const noexcept {
  auto v = array_at(i);
  if (!v) return v.error();
  return v->as_u32();
}

}  // namespace hedge::model
