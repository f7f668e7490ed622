// hedge/model/gguf_writer.hpp: writes GGUF version 3 files (the layout model/gguf.hpp
// describes): metadata of every value type, `general.alignment`, and tensors.
//
// Build the file with add(...) / add_array(...) / add_value(...) / add_tensor(...), then
// write() it to a sink (a callback taking byte spans, or a std::vector<std::byte>).
// Metadata is encoded as it is added; tensor data is referenced, not copied, and must
// stay alive until write(). The alignment is `general.alignment` if the caller adds that
// key (a uint32 power of two), else the default 32; the data section and every tensor
// start on a multiple of it, with zero padding after each tensor (as llama.cpp's
// gguf_write and gguf-py do).
//
// Every add checks what the reader would reject (key and name lengths, duplicates, dims,
// tensor type and data size); the first failure is kept and returned by write(), so a
// chain of adds needs one check. Uses the heap: a tool and test utility, not a runtime path.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::model {

/// The GGUF value type of a C++ scalar type (none for other types).
template <class T>
inline constexpr std::optional<gguf_value_type> gguf_value_type_of = std::nullopt;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::uint8_t> = gguf_value_type::uint8;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::int8_t> = gguf_value_type::int8;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::uint16_t> = gguf_value_type::uint16;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::int16_t> = gguf_value_type::int16;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::uint32_t> = gguf_value_type::uint32;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::int32_t> = gguf_value_type::int32;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<float> = gguf_value_type::float32;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<bool> = gguf_value_type::boolean;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::uint64_t> = gguf_value_type::uint64;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<std::int64_t> = gguf_value_type::int64;
template <> inline constexpr std::optional<gguf_value_type> gguf_value_type_of<double> = gguf_value_type::float64;

/// A C++ type stored as one fixed-size GGUF scalar.
template <class T>
concept gguf_scalar = gguf_value_type_of<T>.has_value();

class gguf_writer {
 public:
  /// Where write() sends the file, in order; an error stops the write.
  using sink = function_ref<result<void>(std::span<const std::byte>)>;

  /// A scalar metadata entry (uint8 ... float64, bool by the C++ type).
  template <gguf_scalar T>
  gguf_writer& add(std::string_view key, T value) {
    if (!begin_key(key, *gguf_value_type_of<T>)) return *this;
    if constexpr (std::is_same_v<T, std::uint32_t>) {
      if (key == "general.alignment") set_alignment(value);
    }
    put_scalar(value);
    return *this;
  }
  /// A string metadata entry.
  gguf_writer& add(std::string_view key, std::string_view value) {
    if (begin_key(key, gguf_value_type::string)) put_string(value);
    return *this;
  }
  gguf_writer& add(std::string_view key, const char* value) { return add(key, std::string_view{value}); }

  /// An array of scalars.
  template <gguf_scalar T>
  gguf_writer& add_array(std::string_view key, std::span<const T> values) {
    if (!begin_key(key, gguf_value_type::array)) return *this;
    put_scalar(static_cast<std::uint32_t>(*gguf_value_type_of<T>));
    put_scalar(static_cast<std::uint64_t>(values.size()));
    for (const T v : values) put_scalar(v);
    return *this;
  }
  /// An array of strings (string_view, std::string or anything converting to string_view).
  template <class S>
    requires std::is_convertible_v<const S&, std::string_view>
  gguf_writer& add_array(std::string_view key, std::span<const S> values) {
    if (!begin_key(key, gguf_value_type::array)) return *this;
    put_scalar(static_cast<std::uint32_t>(gguf_value_type::string));
    put_scalar(static_cast<std::uint64_t>(values.size()));
    for (const S& v : values) put_string(std::string_view{v});
    return *this;
  }

  /// A copy of a value read from a parsed file (any type, arrays included), under `key`.
  gguf_writer& add_value(std::string_view key, const gguf_value& value) {
    if (!begin_key(key, value.type())) return *this;
    if (value.type() == gguf_value_type::uint32 && key == "general.alignment") set_alignment(*value.as_u32());
    put_value(value);
    return *this;
  }

  /// A tensor of `type` with `dims` in ggml order (dims[0] the row length), whose bytes
  /// are `data` (referenced until write()).
  gguf_writer& add_tensor(std::string_view name, quant::gguf_type type, std::span<const std::uint64_t> dims,
                          std::span<const std::byte> data) {
    if (failed()) return *this;
    const auto fail = [&](errc code) -> error& {
      error_ = error{code};
      error_ << "tensor ";
      return detail::append_name(error_, name);
    };
    if (name.empty() || name.size() > gguf_limits::max_tensor_name_bytes) {
      fail(errc::invalid_argument) << " name is not 1 to " << gguf_limits::max_tensor_name_bytes << " bytes";
      return *this;
    }
    if (tensors_.size() == gguf_limits::max_tensor_count) {
      fail(errc::capacity_exceeded) << " is one more than the " << gguf_limits::max_tensor_count << " tensors a file holds";
      return *this;
    }
    for (const tensor_entry& t : tensors_) {
      if (t.name == name) {
        fail(errc::invalid_argument) << " added twice";
        return *this;
      }
    }
    if (dims.empty() || dims.size() > gguf_limits::max_dims) {
      fail(errc::invalid_argument) << " has " << dims.size() << " dims, not 1 to 4";
      return *this;
    }
    const gguf_type_traits traits = type_traits(type);
    if (traits.name.empty()) {
      fail(errc::invalid_argument) << " has unknown type " << static_cast<std::uint32_t>(type);
      return *this;
    }
    std::uint64_t elements = 1;
    for (const std::uint64_t d : dims) {
      if (d == 0 || d > max_size / elements) {
        fail(errc::invalid_argument) << " has a zero dim or more than 2^63 elements";
        return *this;
      }
      elements *= d;
    }
    if (dims[0] % traits.block_elements != 0) {
      fail(errc::shape_mismatch) << " row of " << dims[0] << " is not a multiple of " << traits.name << "'s block";
      return *this;
    }
    const std::uint64_t blocks = elements / traits.block_elements;
    if (blocks > max_size / traits.block_bytes ||
        blocks * traits.block_bytes != data.size()) {
      fail(errc::shape_mismatch) << " has " << data.size() << " bytes, its shape needs "
                                 << blocks * traits.block_bytes;
      return *this;
    }
    tensor_entry t;
    t.name = std::string{name};
    t.type = type;
    t.n_dims = static_cast<std::uint32_t>(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) t.dims[d] = dims[d];
    t.data = data;
    tensors_.push_back(std::move(t));
    return *this;
  }
  gguf_writer& add_tensor(std::string_view name, quant::gguf_type type, std::initializer_list<std::uint64_t> dims,
                          std::span<const std::byte> data) {
    return add_tensor(name, type, std::span<const std::uint64_t>{dims.begin(), dims.size()}, data);
  }

  /// The first error of the adds so far (ok if none).
  [[nodiscard]] result<void> status() const noexcept {
    if (failed()) return error_;
    return ok();
  }

  /// Writes the file to `out`; the first error of an add, or of `out`, stops it.
  result<void> write(sink out) const {
    HEDGE_TRY(status());
    std::vector<std::byte> head;
    const auto put = [&](auto value) {
      for (std::size_t i = 0; i < sizeof value; ++i)
        head.push_back(static_cast<std::byte>(static_cast<std::uint64_t>(value) >> (8 * i)));
    };
    head.insert(head.end(), {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}});
    put(std::uint32_t{3});
    put(static_cast<std::uint64_t>(tensors_.size()));
    put(static_cast<std::uint64_t>(keys_.size()));
    head.insert(head.end(), metadata_.begin(), metadata_.end());
    std::uint64_t offset = 0;
    for (const tensor_entry& t : tensors_) {
      put(static_cast<std::uint64_t>(t.name.size()));
      for (const char ch : t.name) head.push_back(static_cast<std::byte>(ch));
      put(t.n_dims);
      for (std::uint32_t d = 0; d < t.n_dims; ++d) put(t.dims[d]);
      put(static_cast<std::uint32_t>(t.type));
      put(offset);
      offset += padded(t.data.size());
    }
    head.resize(static_cast<std::size_t>(padded(head.size())), std::byte{0});
    HEDGE_TRY(out(head));
    static constexpr std::byte zeros[256] = {};
    for (const tensor_entry& t : tensors_) {
      HEDGE_TRY(out(t.data));
      for (std::uint64_t pad = padded(t.data.size()) - t.data.size(); pad > 0;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(pad, sizeof zeros));
        HEDGE_TRY(out(std::span<const std::byte>{zeros, n}));
        pad -= n;
      }
    }
    return ok();
  }

  /// Appends the file to `out`.
  result<void> write(std::vector<std::byte>& out) const {
    return write([&](std::span<const std::byte> bytes) -> result<void> {
      out.insert(out.end(), bytes.begin(), bytes.end());
      return ok();
    });
  }

 private:
  struct tensor_entry {
    std::string name;
    quant::gguf_type type = quant::gguf_type::f32;
    std::uint32_t n_dims = 0;
    std::uint64_t dims[4] = {1, 1, 1, 1};
    std::span<const std::byte> data;
  };

  static constexpr std::uint64_t max_size = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

  bool failed() const noexcept { return error_.code() != errc::ok; }

  std::uint64_t padded(std::uint64_t n) const noexcept { return (n + alignment_ - 1) / alignment_ * alignment_; }

  /// Checks the key and writes it with the value type; false after an error.
  bool begin_key(std::string_view key, gguf_value_type type) {
    if (failed()) return false;
    if (key.empty() || key.size() > gguf_limits::max_key_bytes) {
      error_ = error{errc::invalid_argument} << "key of " << key.size() << " bytes is not 1 to "
                                             << gguf_limits::max_key_bytes;
      return false;
    }
    if (key == "general.alignment" && type != gguf_value_type::uint32) {
      error_ = error{errc::invalid_argument} << "general.alignment must be uint32, not " << to_string(type);
      return false;
    }
    if (keys_.size() == gguf_limits::max_metadata_count) {
      error_ = error{errc::capacity_exceeded} << "more than " << gguf_limits::max_metadata_count << " metadata entries";
      return false;
    }
    for (const std::string& k : keys_) {
      if (k == key) {
        error_ = error{errc::invalid_argument} << "key ";
        detail::append_name(error_, key) << " added twice";
        return false;
      }
    }
    keys_.emplace_back(key);
    put_string(key);
    put_scalar(static_cast<std::uint32_t>(type));
    return true;
  }

  void set_alignment(std::uint32_t alignment) {
    if (!tensors_.empty()) {
      error_ = error{errc::invalid_argument} << "general.alignment must be added before the tensors";
    } else if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      error_ = error{errc::invalid_argument} << "general.alignment " << alignment << " is not a power of two";
    } else {
      alignment_ = alignment;
    }
  }

  template <class T>
  void put_scalar(T value) {
    if constexpr (std::is_same_v<T, bool>) {
      metadata_.push_back(std::byte{value ? std::uint8_t{1} : std::uint8_t{0}});
    } else {
      std::uint64_t bits;
      if constexpr (std::is_same_v<T, float>) bits = std::bit_cast<std::uint32_t>(value);
      else if constexpr (std::is_same_v<T, double>) bits = std::bit_cast<std::uint64_t>(value);
      else bits = static_cast<std::uint64_t>(value);
      for (std::size_t i = 0; i < sizeof(T); ++i) metadata_.push_back(static_cast<std::byte>(bits >> (8 * i)));
    }
  }

  void put_string(std::string_view s) {
    put_scalar(static_cast<std::uint64_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    metadata_.insert(metadata_.end(), p, p + s.size());
  }

  /// A parsed value's encoding: its bytes in the source file are already GGUF's.
  void put_value(const gguf_value& value) {
    if (value.type() == gguf_value_type::string) {
      put_string(*value.as_string());
      return;
    }
    if (!value.is_array()) {
      const auto* p = gguf_value_access::data(value);
      metadata_.insert(metadata_.end(), p, p + fixed_size(value.type()));
      return;
    }
    put_scalar(static_cast<std::uint32_t>(value.element_type()));
    put_scalar(static_cast<std::uint64_t>(value.size()));
    if (value.element_type() == gguf_value_type::string) {
      for (const std::string_view s : value.strings()) put_string(s);
    } else {
      const auto* p = gguf_value_access::data(value);
      metadata_.insert(metadata_.end(), p, p + value.size() * fixed_size(value.element_type()));
    }
  }

  std::vector<std::byte> metadata_;
  std::vector<std::string> keys_;
  std::vector<tensor_entry> tensors_;
  std::uint32_t alignment_ = gguf_limits::default_alignment;
  error error_;
};

}  // namespace hedge::model
