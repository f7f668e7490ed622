// hedge/model/gguf.hpp: GGUF files (llama.cpp's model format), versions 2 and 3, read
// in place from a byte span.
//
//   offset 0   "GGUF" | version u32 | tensor_count u64 | metadata_count u64
//   24         metadata_count x { key: string | value_type u32 | value }
//              tensor_count   x { name: string | n_dims u32 | dims u64[n_dims] | type u32 | offset u64 }
//              zero padding to `general.alignment` (default 32)
//   data       tensor bytes; each tensor at data + offset, offsets multiples of the alignment
//
//   string = length u64 | bytes (no terminator)     array = element_type u32 | count u64 | elements
//
// Little-endian throughout (a big-endian file is reported as unsupported). Versions 2 and 3
// share this layout; version 1 had 32-bit counts and lengths and is rejected.
//
// `gguf_file::parse` validates the whole file once: every length, count, type, key, tensor
// shape and data range is checked against the buffer with overflow-safe arithmetic, and a
// failure is an error naming the byte offset, key or tensor. A file is untrusted input
// (llama.cpp's GGUF CVEs were reads past the buffer from lying lengths and counts, and
// allocations sized by them): nothing here reads before checking, and nothing allocates.
// The parsed file keeps only the span and a few offsets; metadata and tensor infos are
// decoded again on access by walking the (validated) bytes, so `find` and the by-index
// accessors cost a walk of the metadata or tensor-info section, and the ranges
// `metadata()` and `tensors()` visit every entry in one pass.
//
// Limits beyond the format's own (`gguf_limits`): at most 4096 metadata entries and 65536
// tensors (duplicate detection compares names without a heap, in work that grows with the
// square of these counts); keys of 1 to 65535 bytes (the GGUF spec's bound); tensor names
// of 1 to 64 bytes (the spec's bound); 1 to 4 dims, each nonzero, their product and the
// byte size below 2^63 (ggml's int64 sizes); no arrays of arrays (llama.cpp writes none and
// its reader rejects them); booleans 0 or 1 (the spec); tensor data in the order of the
// tensor infos, without overlap (llama.cpp's reader requires exactly consecutive tensors).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "hedge/core/config.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/model/gguf_value.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::model {

/// The bounds `gguf_file::parse` enforces beyond the format's own (see the file comment).
struct gguf_limits {
  static constexpr std::uint64_t max_metadata_count = 4096;
  static constexpr std::uint64_t max_tensor_count = 65536;
  static constexpr std::uint64_t max_key_bytes = 65535;
  static constexpr std::uint64_t max_tensor_name_bytes = 64;
  static constexpr std::uint32_t max_dims = 4;
  static constexpr std::uint32_t default_alignment = 32;
};

/// Storage of a ggml tensor type: `block_elements` values in `block_bytes` bytes.
struct gguf_type_traits {
  std::string_view name;        ///< ggml's name in lower case ("q4_k"); empty for an unknown id
  std::size_t block_elements;   ///< values per block (1 for plain floats and ints)
  std::size_t block_bytes;      ///< bytes per block
};

/// Traits of every tensor type ggml defines (ggml.c's `type_traits`); an unknown id has
/// an empty name. Ids 4, 5 and 31..33 are retired in ggml and unknown here.
constexpr gguf_type_traits type_traits(quant::gguf_type type) noexcept {
  switch (static_cast<std::uint32_t>(type)) {
    case 0: return {"f32", 1, 4};
    case 1: return {"f16", 1, 2};
    case 2: return {"q4_0", 32, 18};
    case 3: return {"q4_1", 32, 20};
    case 6: return {"q5_0", 32, 22};
    case 7: return {"q5_1", 32, 24};
    case 8: return {"q8_0", 32, 34};
    case 9: return {"q8_1", 32, 36};
    case 10: return {"q2_k", 256, 84};
    case 11: return {"q3_k", 256, 110};
    case 12: return {"q4_k", 256, 144};
    case 13: return {"q5_k", 256, 176};
    case 14: return {"q6_k", 256, 210};
    case 15: return {"q8_k", 256, 292};
    case 16: return {"iq2_xxs", 256, 66};
    case 17: return {"iq2_xs", 256, 74};
    case 18: return {"iq3_xxs", 256, 98};
    case 19: return {"iq1_s", 256, 50};
    case 20: return {"iq4_nl", 32, 18};
    case 21: return {"iq3_s", 256, 110};
    case 22: return {"iq2_s", 256, 82};
    case 23: return {"iq4_xs", 256, 136};
    case 24: return {"i8", 1, 1};
    case 25: return {"i16", 1, 2};
    case 26: return {"i32", 1, 4};
    case 27: return {"i64", 1, 8};
    case 28: return {"f64", 1, 8};
    case 29: return {"iq1_m", 256, 56};
    case 30: return {"bf16", 1, 2};
    case 34: return {"tq1_0", 256, 54};
    case 35: return {"tq2_0", 256, 66};
    case 39: return {"mxfp4", 32, 17};
    default: return {"", 0, 0};
  }
}

namespace detail {

/// Appends a name from the file to an error, at most 48 bytes of it, with bytes outside
/// printable ASCII as '?': a hostile name must not put control sequences into a terminal.
inline error& append_name(error& e, std::string_view name) noexcept {
  e << '\'';
  const std::size_t shown = std::min<std::size_t>(name.size(), 48);
  for (std::size_t i = 0; i < shown; ++i) {
    const char c = name[i];
    e << (c >= 0x20 && c < 0x7F ? c : '?');
  }
  if (shown < name.size()) e << "...";
  return e << '\'';
}

/// A read position in the file with checked primitive reads: every read states what it
/// reads, and a short read is an error at its byte offset.
struct gguf_cursor {
  std::span<const std::byte> bytes;
  std::uint64_t at = 0;

  [[nodiscard]] std::uint64_t left() const noexcept { return bytes.size() - at; }

  result<std::uint64_t> uint(std::size_t n, std::string_view what) noexcept {
    if (left() < n)
      return error{errc::parse_error} << "truncated at byte " << at << ": " << what << " needs " << n << " bytes, "
                                      << left() << " left";
    const std::uint64_t v = load_le(bytes.data() + at, n);
    at += n;
    return v;
  }

  /// A GGUF string of at most max_bytes bytes; the length is checked against the bytes
  /// left before anything is read (a 2^60-byte length is an error here, not a read).
  result<std::string_view> string(std::uint64_t max_bytes, std::string_view what) noexcept {
    const std::uint64_t start = at;
    auto length = uint(8, what);
    if (!length) return length.error();
    if (*length > left())
      return error{errc::parse_error} << what << " at byte " << start << " claims " << *length << " bytes, "
                                      << left() << " left in the file";
    if (*length > max_bytes)
      return error{errc::parse_error} << what << " at byte " << start << " has " << *length << " bytes, more than "
                                      << max_bytes;
    const std::string_view s{reinterpret_cast<const char*>(bytes.data() + at), static_cast<std::size_t>(*length)};
    at += *length;
    return s;
  }
};

}  // namespace detail

/// One metadata entry.
struct gguf_kv {
  std::string_view key;
  gguf_value value;
};

/// One tensor: its info and its bytes in the file.
struct gguf_tensor {
  std::string_view name;
  quant::gguf_type type = quant::gguf_type::f32;
  std::uint32_t n_dims = 0;
  /// Sizes in ggml order: dims[0] is the row length (contiguous), dims[1] the rows; the
  /// dims past n_dims are 1.
  std::array<std::uint64_t, 4> dims = {1, 1, 1, 1};
  std::uint64_t elements = 0;
  /// Offset of the bytes from the start of the file's data section.
  std::uint64_t offset = 0;
  std::span<const std::byte> bytes;

  /// Rows of the tensor seen as a matrix: the product of dims[1..3].
  [[nodiscard]] std::uint64_t rows() const noexcept { return dims[1] * dims[2] * dims[3]; }

  /// The tensor as a matrix of F's blocks (dims[1] rows of dims[0] / F::block_elements
  /// blocks), for a tensor of F's type with at most 2 dims: the file's bytes, no copy.
  template <quant::BlockFormat F>
  result<matrix_view<const typename F::block>> matrix() const noexcept {
    HEDGE_TRY(check_format<F>());
    if (n_dims > 2) return shape_error() << " has " << n_dims << " dims, a matrix has at most 2";
    return matrix_view<const typename F::block>{reinterpret_cast<const typename F::block*>(bytes.data()),
                                                static_cast<std::size_t>(dims[1]),
                                                static_cast<std::size_t>(dims[0] / F::block_elements)};
  }

  /// A 1-D tensor (dims[1..3] all 1) of F's type as a span of its blocks, no copy.
  template <quant::BlockFormat F>
  result<vector_view<const typename F::block>> vector() const noexcept {
    HEDGE_TRY(check_format<F>());
    if (rows() != 1) return shape_error() << " is " << dims[0] << "x" << rows() << ", not a vector";
    return vector_view<const typename F::block>{reinterpret_cast<const typename F::block*>(bytes.data()),
                                                static_cast<std::size_t>(dims[0] / F::block_elements)};
  }

 private:
  error shape_error() const noexcept {
    error e{errc::shape_mismatch};
    e << "tensor ";
    return detail::append_name(e, name);
  }

  template <quant::BlockFormat F>
  result<void> check_format() const noexcept {
    static_assert(type_traits(F::type_id).block_bytes == sizeof(typename F::block) &&
                      type_traits(F::type_id).block_elements == F::block_elements,
                  "the block struct must be ggml's block of its type id");
    if (type != F::type_id) {
      error e{errc::invalid_argument};
      e << "tensor ";
      detail::append_name(e, name) << " is " << type_traits(type).name << " (type " << static_cast<std::uint32_t>(type)
                                   << "), not " << F::name;
      return e;
    }
    if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(typename F::block) != 0) {
      error e{errc::misaligned};
      e << "tensor ";
      detail::append_name(e, name) << " data is not " << alignof(typename F::block) << "-byte aligned for "
                                   << F::name;
      return e;
    }
    return ok();
  }
};

namespace detail {



/// Decodes and validates one value of type `type` at the cursor, for the key `key` that
/// starts at byte `key_at` (errors about the whole value name the key's offset, errors
/// about one byte that byte's).
inline result<gguf_value> decode_value(gguf_cursor& c, std::string_view key, std::uint64_t key_at,
                                       gguf_value_type type) noexcept {
  const std::uint64_t start = c.at;
  const std::size_t n = fixed_size(type);
  if (n != 0) {
    if (c.left() < n) {
      error e{errc::parse_error};
      e << "truncated at byte " << start << ": value of key ";
      return append_name(e, key) << " needs " << n << " bytes, " << c.left() << " left";
    }
    if (type == gguf_value_type::boolean && c.bytes[c.at] > std::byte{1}) {
      error e{errc::parse_error};
      e << "bool at byte " << start << " of key ";
      return append_name(e, key) << " is " << static_cast<unsigned>(c.bytes[c.at]) << ", not 0 or 1";
    }
    c.at += n;
    return gguf_value_access::make(key, type, c.bytes.data() + start, 0, type);
  }
  if (type == gguf_value_type::string) {
    auto s = c.string(std::numeric_limits<std::uint64_t>::max(), "string value");
    if (!s) return s.error();
    return gguf_value_access::make(key, type, reinterpret_cast<const std::byte*>(s->data()), s->size(), type);
  }
  if (type != gguf_value_type::array) {
    error e{errc::parse_error};
    e << "key ";
    return append_name(e, key) << " at byte " << key_at << " has unknown value type "
                               << static_cast<std::uint32_t>(type);
  }
  auto element_raw = c.uint(4, "array element type");
  if (!element_raw) return element_raw.error();
  const auto element = static_cast<gguf_value_type>(*element_raw);
  auto count = c.uint(8, "array count");
  if (!count) return count.error();
  const std::uint64_t first = c.at;
  const std::size_t element_bytes = fixed_size(element);
  if (element == gguf_value_type::array) {
    error e{errc::unsupported};
    e << "key ";
    return append_name(e, key) << " at byte " << key_at << " is an array of arrays";
  }
  if (element_bytes == 0 && element != gguf_value_type::string) {
    error e{errc::parse_error};
    e << "key ";
    return append_name(e, key) << " at byte " << key_at << " has unknown array element type " << *element_raw;
  }
  // Every element takes at least its fixed size (a string its 8-byte length): a count
  // the remaining bytes cannot hold is rejected before any element is visited.
  const std::size_t least = element_bytes != 0 ? element_bytes : 8;
  if (*count > c.left() / least) {
    error e{errc::parse_error};
    e << "array of key ";
    return append_name(e, key) << " at byte " << key_at << " claims " << *count << " " << to_string(element)
                               << " elements, " << c.left() << " bytes left";
  }
  if (element_bytes != 0) {
    if (element == gguf_value_type::boolean) {
      for (std::uint64_t i = 0; i < *count; ++i) {
        if (c.bytes[first + i] > std::byte{1}) {
          error e{errc::parse_error};
          e << "bool at byte " << first + i << " in array of key ";
          return append_name(e, key) << " is " << static_cast<unsigned>(c.bytes[first + i]) << ", not 0 or 1";
        }
      }
    }
    c.at += *count * element_bytes;
  } else {
    for (std::uint64_t i = 0; i < *count; ++i) {
      auto s = c.string(std::numeric_limits<std::uint64_t>::max(), "string element");
      if (!s) {
        error e = s.error();
        e << " (element " << i << " of key ";
        return append_name(e, key) << ")";
      }
    }
  }
  return gguf_value_access::make(key, gguf_value_type::array, c.bytes.data() + first, *count, element);
}

/// Decodes and validates one metadata entry at the cursor.
inline result<gguf_kv> decode_kv(gguf_cursor& c) noexcept {
  const std::uint64_t start = c.at;
  auto key = c.string(gguf_limits::max_key_bytes, "key");
  if (!key) return key.error();
  if (key->empty()) return error{errc::parse_error} << "empty key at byte " << start;
  auto type = c.uint(4, "value type");
  if (!type) return type.error();
  auto value = decode_value(c, *key, start, static_cast<gguf_value_type>(*type));
  if (!value) return value.error();
  return gguf_kv{*key, *value};
}

/// A tensor info as stored: everything but the data span.
inline result<gguf_tensor> decode_tensor_info(gguf_cursor& c, std::uint64_t index) noexcept {
  const std::uint64_t start = c.at;
  auto name = c.string(gguf_limits::max_tensor_name_bytes, "tensor name");
  if (!name) {
    error e = name.error();
    return e << " (tensor " << index << ")";
  }
  gguf_tensor t;
  t.name = *name;
  auto named = [&](errc code) {
    error e{code};
    e << "tensor ";
    return append_name(e, t.name);
  };
  if (name->empty()) return error{errc::parse_error} << "tensor " << index << " at byte " << start << " has no name";
  auto n_dims = c.uint(4, "tensor dim count");
  if (!n_dims) return n_dims.error();
  if (*n_dims < 1 || *n_dims > gguf_limits::max_dims)
    return named(errc::parse_error) << " at byte " << start << " has " << *n_dims << " dims, not 1 to 4";
  t.n_dims = static_cast<std::uint32_t>(*n_dims);
  constexpr std::uint64_t max_size = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t elements = 1;
  for (std::uint32_t d = 0; d < t.n_dims; ++d) {
    auto dim = c.uint(8, "tensor dim");
    if (!dim) return dim.error();
    if (*dim == 0) return named(errc::parse_error) << " dim " << d << " is 0";
    if (*dim > max_size / elements)
      return named(errc::parse_error) << " has more than 2^63 elements (dim " << d << " is " << *dim << ")";
    t.dims[d] = *dim;
    elements *= *dim;
  }
  t.elements = elements;
  auto type = c.uint(4, "tensor type");
  if (!type) return type.error();
  t.type = static_cast<quant::gguf_type>(*type);
  const gguf_type_traits traits = type_traits(t.type);
  if (traits.name.empty()) return named(errc::unsupported) << " has unknown type " << *type;
  if (t.dims[0] % traits.block_elements != 0)
    return named(errc::parse_error) << " row of " << t.dims[0] << " is not a multiple of " << traits.name
                                    << "'s block of " << traits.block_elements;
  const std::uint64_t blocks = elements / traits.block_elements;
  if (blocks > max_size / traits.block_bytes)
    return named(errc::parse_error) << " of " << blocks << " " << traits.name << " blocks exceeds 2^63 bytes";
  auto offset = c.uint(8, "tensor offset");
  if (!offset) return offset.error();
  t.offset = *offset;
  // `bytes` is set once the data section is located (gguf_file::parse).
  return t;
}

/// Bytes of a validated tensor info's data.
inline std::uint64_t tensor_bytes(const gguf_tensor& t) noexcept {
  const gguf_type_traits traits = type_traits(t.type);
  return t.elements / traits.block_elements * traits.block_bytes;
}

/// The first name that occurs twice among `count` entries starting at `first`, or none.
/// `next(at)` decodes the entry at `at` (already validated), advances `at` past it and
/// returns its name. Without a heap: the entries are taken in chunks of `chunk` names,
/// sorted on the stack, and every earlier name is looked up in each chunk; the work is
/// count^2 / (2 chunk) lookups, bounded by gguf_limits' counts.
template <class Next>
std::optional<std::string_view> find_duplicate(std::uint64_t first, std::uint64_t count, Next next) noexcept {
  constexpr std::size_t chunk = 256;
  std::string_view names[chunk];
  const auto less = [](std::string_view a, std::string_view b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  };
  std::uint64_t chunk_at = first;
  for (std::uint64_t start = 0; start < count; start += chunk) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, count - start));
    for (std::size_t i = 0; i < n; ++i) names[i] = next(chunk_at);
    std::sort(names, names + n, less);
    for (std::size_t i = 1; i < n; ++i)
      if (names[i] == names[i - 1]) return names[i];
    std::uint64_t at = first;
    for (std::uint64_t j = 0; j < start; ++j) {
      const std::string_view name = next(at);
      if (std::binary_search(names, names + n, name, less)) return name;
    }
  }
  return std::nullopt;
}

/// A forward range over `count` consecutive entries of a validated file, each decoded from a
/// cursor by Decode: `value_type operator()(gguf_cursor&, std::uint64_t index) const`. One
/// pass, O(1) per step (the file was validated, so decoding cannot fail).
template <class Decode>
class decoded_range {
 public:
  using value_type = typename Decode::value_type;

  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = typename Decode::value_type;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;

    iterator() noexcept = default;
    iterator(std::span<const std::byte> bytes, std::uint64_t at, std::uint64_t left, Decode decode) noexcept
        : cursor_{bytes, at}, left_(left), decode_(decode) {
      load();
    }
    value_type operator*() const noexcept { return current_; }
    iterator& operator++() noexcept {
      --left_;
      ++index_;
      load();
      return *this;
    }
    iterator operator++(int) noexcept {
      iterator copy = *this;
      ++*this;
      return copy;
    }
    friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.left_ == b.left_; }

   private:
    void load() noexcept {
      if (left_ != 0) current_ = decode_(cursor_, index_);
    }
    gguf_cursor cursor_;
    std::uint64_t left_ = 0;
    std::uint64_t index_ = 0;
    Decode decode_{};
    value_type current_{};
  };

  decoded_range(std::span<const std::byte> bytes, std::uint64_t at, std::uint64_t count, Decode decode = {}) noexcept
      : bytes_(bytes), at_(at), count_(count), decode_(decode) {}
  [[nodiscard]] iterator begin() const noexcept { return {bytes_, at_, count_, decode_}; }
  [[nodiscard]] iterator end() const noexcept { return {}; }
  [[nodiscard]] std::uint64_t size() const noexcept { return count_; }

 private:
  std::span<const std::byte> bytes_;
  std::uint64_t at_;
  std::uint64_t count_;
  Decode decode_;
};

/// Decodes the next metadata entry.
struct kv_decoder {
  using value_type = gguf_kv;
  gguf_kv operator()(gguf_cursor& c, std::uint64_t) const noexcept {
    auto kv = decode_kv(c);
    HEDGE_ASSERT(kv.has_value());
    return *kv;
  }
};

/// Decodes the next tensor info, with its bytes in the data section at `data_offset`.
struct tensor_decoder {
  using value_type = gguf_tensor;
  std::uint64_t data_offset = 0;
  gguf_tensor operator()(gguf_cursor& c, std::uint64_t index) const noexcept {
    auto t = decode_tensor_info(c, index);
    HEDGE_ASSERT(t.has_value());
    gguf_tensor out = *t;
    out.bytes = c.bytes.subspan(static_cast<std::size_t>(data_offset + out.offset),
                                static_cast<std::size_t>(tensor_bytes(out)));
    return out;
  }
};

}  // namespace detail

/// A parsed GGUF file: a view of the caller's bytes (which must outlive it) after one
/// validation of the whole file. Cheap to copy.
class gguf_file {
 public:
  /// Forward range over the metadata entries, in file order.
  using metadata_range = detail::decoded_range<detail::kv_decoder>;
  /// Forward range over the tensors, in file order.
  using tensor_range = detail::decoded_range<detail::tensor_decoder>;

  /// Validates `bytes` as a GGUF v2/v3 file (see the file comment for every check).
  static result<gguf_file> parse(std::span<const std::byte> bytes) noexcept {
    gguf_file f;
    f.bytes_ = bytes;
    detail::gguf_cursor c{bytes, 0};
    if (bytes.size() < 4)
      return error{errc::parse_error} << "not a GGUF file: " << bytes.size() << " bytes, shorter than the magic";
    if (std::memcmp(bytes.data(), "GGUF", 4) != 0) {
      error e{errc::parse_error};
      e << "not a GGUF file: magic is";
      constexpr char hex[] = "0123456789abcdef";
      for (std::size_t i = 0; i < 4; ++i) {
        const auto b = static_cast<unsigned>(bytes[i]);
        e << ' ' << hex[b >> 4] << hex[b & 15];
      }
      return e << ", not 'GGUF' (47 47 55 46)";
    }
    c.at = 4;
    auto version = c.uint(4, "version");
    if (!version) return version.error();
    if (*version == 0x02000000u || *version == 0x03000000u)
      return error{errc::unsupported} << "big-endian GGUF (version " << (*version >> 24) << ") is not supported";
    if (*version != 2 && *version != 3)
      return error{errc::unsupported} << "GGUF version " << *version << " is not supported (2 and 3 are)";
    f.version_ = static_cast<std::uint32_t>(*version);
    auto tensor_count = c.uint(8, "tensor count");
    if (!tensor_count) return tensor_count.error();
    auto metadata_count = c.uint(8, "metadata count");
    if (!metadata_count) return metadata_count.error();
    // The smallest entries (a 1-byte key and a 1-byte value; a 1-byte name, 1 dim) bound
    // what the bytes left could hold: a lying count fails here, before any walk.
    constexpr std::uint64_t min_kv_bytes = 8 + 1 + 4 + 1;
    constexpr std::uint64_t min_tensor_bytes = 8 + 1 + 4 + 8 + 4 + 8;
    if (*metadata_count > c.left() / min_kv_bytes)
      return error{errc::parse_error} << "header claims " << *metadata_count << " metadata entries, the "
                                      << c.left() << " bytes after it hold at most " << c.left() / min_kv_bytes;
    if (*metadata_count > gguf_limits::max_metadata_count)
      return error{errc::unsupported} << "header claims " << *metadata_count << " metadata entries, more than the "
                                      << gguf_limits::max_metadata_count << " supported";
    if (*tensor_count > c.left() / min_tensor_bytes)
      return error{errc::parse_error} << "header claims " << *tensor_count << " tensors, the " << c.left()
                                      << " bytes after it hold at most " << c.left() / min_tensor_bytes;
    if (*tensor_count > gguf_limits::max_tensor_count)
      return error{errc::unsupported} << "header claims " << *tensor_count << " tensors, more than the "
                                      << gguf_limits::max_tensor_count << " supported";
    f.metadata_count_ = *metadata_count;
    f.tensor_count_ = *tensor_count;

    f.metadata_at_ = c.at;
    for (std::uint64_t i = 0; i < f.metadata_count_; ++i) {
      const std::uint64_t start = c.at;
      auto kv = detail::decode_kv(c);
      if (!kv) {
        error e = kv.error();
        return e << " (metadata entry " << i << ")";
      }
      if (kv->key == "general.alignment") {
        if (kv->value.type() != gguf_value_type::uint32)
          return error{errc::parse_error} << "general.alignment at byte " << start << " is "
                                          << to_string(kv->value.type()) << ", not uint32";
        const auto alignment = kv->value.as_u32();
        if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0)
          return error{errc::parse_error} << "general.alignment at byte " << start << " is " << *alignment
                                          << ", not a power of two";
        f.alignment_ = *alignment;
      }
    }

    f.tensors_at_ = c.at;
    for (std::uint64_t i = 0; i < f.tensor_count_; ++i) {
      auto t = detail::decode_tensor_info(c, i);
      if (!t) return t.error();
    }

    // The data section starts at the next multiple of the alignment. A file without
    // tensors may end before it (llama.cpp seeks past its end and reads nothing).
    const std::uint64_t padding = (f.alignment_ - c.at % f.alignment_) % f.alignment_;
    const std::uint64_t data_at = c.at + padding;
    if (padding > c.left() && f.tensor_count_ != 0)
      return error{errc::parse_error} << "data section at byte " << c.at << " + " << padding
                                      << " padding starts past the end of the file (" << bytes.size() << " bytes)";
    f.data_at_ = std::min<std::uint64_t>(data_at, bytes.size());
    const std::uint64_t data_size = bytes.size() - f.data_at_;

    // Tensor data: aligned, inside the data section, in order and without overlap.
    detail::gguf_cursor walk{bytes, f.tensors_at_};
    std::uint64_t end = 0;
    std::string_view previous;
    for (std::uint64_t i = 0; i < f.tensor_count_; ++i) {
      auto t = detail::decode_tensor_info(walk, i);
      HEDGE_ASSERT(t.has_value());
      const std::uint64_t size = detail::tensor_bytes(*t);
      auto named = [&](errc code) {
        error e{code};
        e << "tensor ";
        return detail::append_name(e, t->name);
      };
      if (t->offset % f.alignment_ != 0)
        return named(errc::parse_error) << " data offset " << t->offset << " is not a multiple of the alignment "
                                        << f.alignment_;
      if (t->offset > data_size || size > data_size - t->offset)
        return named(errc::parse_error) << " data [" << t->offset << ", +" << size
                                        << ") runs past the data section's " << data_size << " bytes";
      if (t->offset < end) {
        error e = named(errc::parse_error) << " data offset " << t->offset << " overlaps tensor ";
        return detail::append_name(e, previous) << " ending at " << end;
      }
      end = t->offset + size;
      previous = t->name;
    }

    const auto key_at = [&](std::uint64_t& at) {
      detail::gguf_cursor k{bytes, at};
      auto kv = detail::decode_kv(k);
      HEDGE_ASSERT(kv.has_value());
      at = k.at;
      return kv->key;
    };
    if (auto duplicate = detail::find_duplicate(f.metadata_at_, f.metadata_count_, key_at)) {
      error e{errc::parse_error};
      e << "duplicate key ";
      return detail::append_name(e, *duplicate);
    }
    const auto name_at = [&](std::uint64_t& at) {
      detail::gguf_cursor k{bytes, at};
      auto t = detail::decode_tensor_info(k, 0);
      HEDGE_ASSERT(t.has_value());
      at = k.at;
      return t->name;
    };
    if (auto duplicate = detail::find_duplicate(f.tensors_at_, f.tensor_count_, name_at)) {
      error e{errc::parse_error};
      e << "duplicate tensor name ";
      return detail::append_name(e, *duplicate);
    }
    return f;
  }

  [[nodiscard]] std::uint32_t version() const noexcept { return version_; }
  /// general.alignment, or 32 where the file does not set it.
  [[nodiscard]] std::uint32_t alignment() const noexcept { return alignment_; }
  [[nodiscard]] std::uint64_t metadata_count() const noexcept { return metadata_count_; }
  [[nodiscard]] std::uint64_t tensor_count() const noexcept { return tensor_count_; }
  /// The whole file.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// File offset of the data section (tensor offsets count from here).
  [[nodiscard]] std::uint64_t data_offset() const noexcept { return data_at_; }
  /// File offset of the first tensor info (the end of the metadata).
  [[nodiscard]] std::uint64_t tensor_info_offset() const noexcept { return tensors_at_; }

  [[nodiscard]] metadata_range metadata() const noexcept { return {bytes_, metadata_at_, metadata_count_}; }
  [[nodiscard]] tensor_range tensors() const noexcept {
    return {bytes_, tensors_at_, tensor_count_, detail::tensor_decoder{data_at_}};
  }

  /// Metadata entry i (a walk of the entries before it).
  result<gguf_kv> metadata_at(std::uint64_t i) const noexcept {
    if (i >= metadata_count_)
      return error{errc::out_of_range} << "metadata entry " << i << " >= " << metadata_count_ << " entries";
    auto it = metadata().begin();
    for (std::uint64_t k = 0; k < i; ++k) ++it;
    return *it;
  }

  /// The value of `key`, or none (a walk of the metadata).
  [[nodiscard]] std::optional<gguf_value> find(std::string_view key) const noexcept {
    for (const gguf_kv kv : metadata())
      if (kv.key == key) return kv.value;
    return std::nullopt;
  }

  /// Tensor i (a walk of the tensor infos before it).
  result<gguf_tensor> tensor_at(std::uint64_t i) const noexcept {
    if (i >= tensor_count_) return error{errc::out_of_range} << "tensor " << i << " >= " << tensor_count_ << " tensors";
    auto it = tensors().begin();
    for (std::uint64_t k = 0; k < i; ++k) ++it;
    return *it;
  }

  /// The tensor named `name`, or none (a walk of the tensor infos).
  [[nodiscard]] std::optional<gguf_tensor> find_tensor(std::string_view name) const noexcept {
    for (const gguf_tensor t : tensors())
      if (t.name == name) return t;
    return std::nullopt;
  }

  /// Tensor `name` as a matrix of F's blocks (gguf_tensor::matrix); an error names a
  /// missing tensor, or one of another type or shape.
  template <quant::BlockFormat F>
  result<matrix_view<const typename F::block>> matrix(std::string_view name) const noexcept {
    auto t = find_tensor(name);
    if (!t) return missing(name);
    return t->template matrix<F>();
  }

  /// Tensor `name` as a vector of F's blocks (gguf_tensor::vector).
  template <quant::BlockFormat F>
  result<vector_view<const typename F::block>> vector(std::string_view name) const noexcept {
    auto t = find_tensor(name);
    if (!t) return missing(name);
    return t->template vector<F>();
  }

 private:
  static error missing(std::string_view name) noexcept {
    error e{errc::invalid_argument};
    e << "no tensor named ";
    return detail::append_name(e, name);
  }

  std::span<const std::byte> bytes_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = gguf_limits::default_alignment;
  std::uint64_t metadata_count_ = 0;
  std::uint64_t tensor_count_ = 0;
  std::uint64_t metadata_at_ = 0;
  std::uint64_t tensors_at_ = 0;
  std::uint64_t data_at_ = 0;
};

}  // namespace hedge::model
