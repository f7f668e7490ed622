// tools/server/json.hpp: a request body as a small tree of values, read by rapidjson's SAX
// reader (reader.h).
//
// Not rapidjson's Document: Debian's rapidjson 1.1.0 document.h does not compile with
// clang 22 (GenericStringRef assigns its const members), and reader.h is what hedge's
// cloud client uses too. The reader parses the body in place (kParseInsituFlag:
// strings are unescaped where they lie, so the reader's own stack is never used; rapidjson
// 1.1.0's stack does pointer arithmetic on its null start, which UBSan reports) and checks
// that strings are UTF-8 (kParseValidateEncodingFlag). The handler bounds the nesting
// (max_depth: a hostile "[[[[..." stops there, so the reader's recursion is bounded too) and
// the values (max_values), so an 8 MB body of tiny values cannot make a tree of hundreds of
// megabytes.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "hedge/cloud/json_writer.hpp"

namespace hedge::server::json {

inline constexpr std::size_t max_depth = 64;
inline constexpr std::size_t max_values = 1u << 18;

class value {
 public:
  enum class kind { null, boolean, number, string, array, object };

  [[nodiscard]] kind type() const noexcept { return type_; }
  [[nodiscard]] bool is_null() const noexcept { return type_ == kind::null; }
  [[nodiscard]] bool is_bool() const noexcept { return type_ == kind::boolean; }
  [[nodiscard]] bool is_number() const noexcept { return type_ == kind::number; }
  [[nodiscard]] bool is_string() const noexcept { return type_ == kind::string; }
  [[nodiscard]] bool is_array() const noexcept { return type_ == kind::array; }
  [[nodiscard]] bool is_object() const noexcept { return type_ == kind::object; }
  /// A number written as an integer that fits an int64 (or a uint64).
  [[nodiscard]] bool is_int64() const noexcept { return is_number() && integer_ && signed_ok_; }
  [[nodiscard]] bool is_uint64() const noexcept { return is_number() && integer_ && unsigned_ok_; }

  [[nodiscard]] bool as_bool() const noexcept { return boolean_; }
  [[nodiscard]] std::int64_t as_int64() const noexcept { return i_; }
  [[nodiscard]] std::uint64_t as_uint64() const noexcept { return u_; }
  [[nodiscard]] double as_double() const noexcept { return d_; }
  [[nodiscard]] const std::string& as_string() const noexcept { return text_; }
  [[nodiscard]] const std::vector<value>& items() const noexcept { return items_; }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] const value& operator[](std::size_t i) const noexcept { return items_[i]; }

  /// A string's literal in the parsed text: the offset of its opening quote (literal_end finds
  /// its end in the unparsed text), for editing one string and leaving every other byte as it was.
  [[nodiscard]] std::size_t literal_offset() const noexcept { return literal_; }
  /// The members of an object, in the order of the text.
  [[nodiscard]] const std::vector<std::pair<std::string, value>>& members() const noexcept { return members_; }

  /// The member `key` of an object (the first of that name), or null when absent.
  [[nodiscard]] const value* find(std::string_view key) const noexcept {
    for (const auto& [k, v] : members_)
      if (k == key) return &v;
    return nullptr;
  }

 private:
  friend class tree_builder;
  kind type_ = kind::null;
  bool boolean_ = false, integer_ = false, signed_ok_ = false, unsigned_ok_ = false;
  std::int64_t i_ = 0;
  std::uint64_t u_ = 0;
  double d_ = 0;
  std::size_t literal_ = 0;
  std::string text_;
  std::vector<value> items_;
  std::vector<std::pair<std::string, value>> members_;
};

/// Writes `v` with hedge's JSON writer (cloud/json_writer.hpp; not rapidjson's Writer, whose
/// 1.1.0 stack does arithmetic on a null pointer, which clang's UBSan reports).
inline void write(cloud::json_writer& w, const value& v) {
  switch (v.type()) {
    case value::kind::null: w.null(); break;
    case value::kind::boolean: w.boolean(v.as_bool()); break;
    case value::kind::number: {
      // The shortest text that reads back as the same number (the writer's number() keeps
      // six decimals: a field's 1e-9 must not become 0).
      char digits[32];
      const auto end = v.is_int64()    ? std::to_chars(digits, digits + sizeof digits, v.as_int64()).ptr
                       : v.is_uint64() ? std::to_chars(digits, digits + sizeof digits, v.as_uint64()).ptr
                                       : std::to_chars(digits, digits + sizeof digits, v.as_double()).ptr;
      w.raw_value({digits, static_cast<std::size_t>(end - digits)});
      break;
    }
    case value::kind::string: w.string(v.as_string()); break;
    case value::kind::array:
      w.begin_array();
      for (const auto& item : v.items()) write(w, item);
      w.end_array();
      break;
    case value::kind::object:
      w.begin_object();
      for (const auto& [k, m] : v.members()) {
        w.key(k);
        write(w, m);
      }
      w.end_object();
      break;
  }
}

/// rapidjson's SAX handler that builds the tree.
class tree_builder {
 public:
  /// `text`: the start of the buffer parsed in place (a string's literal offset is from it).
  tree_builder(value& root, const char* text) : root_(&root), text_(text) {}

  bool Null() { return add(value{}) != nullptr; }
  bool Bool(bool b) {
    value v;
    v.type_ = value::kind::boolean;
    v.boolean_ = b;
    return add(std::move(v)) != nullptr;
  }
  bool Int(int i) { return Int64(i); }
  bool Uint(unsigned u) { return Uint64(u); }
  bool Int64(std::int64_t i) {
    value v = number(static_cast<double>(i));
    v.integer_ = v.signed_ok_ = true;
    v.i_ = i;
    v.unsigned_ok_ = i >= 0;
    v.u_ = static_cast<std::uint64_t>(i);
    return add(std::move(v)) != nullptr;
  }
  bool Uint64(std::uint64_t u) {
    value v = number(static_cast<double>(u));
    v.integer_ = v.unsigned_ok_ = true;
    v.u_ = u;
    v.signed_ok_ = u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    v.i_ = static_cast<std::int64_t>(u);
    return add(std::move(v)) != nullptr;
  }
  bool Double(double d) { return add(number(d)) != nullptr; }
  bool RawNumber(const char*, rapidjson::SizeType, bool) { return false; }  // not asked for
  bool String(const char* s, rapidjson::SizeType n, bool) {
    value v;
    v.type_ = value::kind::string;
    v.text_.assign(s, n);
    // In place, a string is unescaped where it lies: its first byte follows the opening quote.
    v.literal_ = static_cast<std::size_t>(s - text_) - 1;
    return add(std::move(v)) != nullptr;
  }
  bool StartObject() { return open(value::kind::object); }
  bool Key(const char* s, rapidjson::SizeType n, bool) {
    key_.assign(s, n);
    return true;
  }
  bool EndObject(rapidjson::SizeType) { return close(); }
  bool StartArray() { return open(value::kind::array); }
  bool EndArray(rapidjson::SizeType) { return close(); }

  /// Why the handler stopped the parse, when it did.
  [[nodiscard]] const std::string& stop_reason() const noexcept { return stop_reason_; }

 private:
  static value number(double d) {
    value v;
    v.type_ = value::kind::number;
    v.d_ = d;
    return v;
  }

  value* add(value v) {
    if (++count_ > max_values) {
      stop_reason_ = "more than " + std::to_string(max_values) + " JSON values";
      return nullptr;
    }
    if (open_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    value& parent = *open_.back();
    if (parent.type_ == value::kind::array) {
      parent.items_.push_back(std::move(v));
      return &parent.items_.back();
    }
    parent.members_.emplace_back(std::move(key_), std::move(v));
    key_.clear();
    return &parent.members_.back().second;
  }

  bool open(value::kind k) {
    if (open_.size() >= max_depth) {
      stop_reason_ = "JSON nested deeper than " + std::to_string(max_depth) + " levels";
      return false;
    }
    value v;
    v.type_ = k;
    // Only the innermost open container grows, so pointers to the outer ones stay valid.
    value* at = add(std::move(v));
    if (!at) return false;
    open_.push_back(at);
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  value* root_;
  const char* text_;
  std::vector<value*> open_;
  std::string key_;
  std::size_t count_ = 0;
  std::string stop_reason_;
};

/// Why a body is not JSON.
struct parse_failure {
  std::string message;
  bool invalid_utf8 = false;
};

/// Parses `text` (NUL-terminated: a std::string's data) into `root`.
/// Parses `buffer` in place: a caller done with the body moves it in, so an 8 MB body is held
/// once, not twice.
inline std::optional<parse_failure> parse(std::string buffer, value& root) {
  rapidjson::Reader reader;
  // Three NULs past the terminator: rapidjson's UTF-8 check reads a sequence's continuation
  // bytes without looking for the end, so a body cut inside a character reads up to three
  // bytes past its last one (and finds NULs: invalid UTF-8).
  const std::size_t size = buffer.size();
  buffer.append(3, '\0');
  rapidjson::InsituStringStream stream(buffer.data());
  tree_builder builder(root, buffer.data());
  const auto r = reader.Parse<rapidjson::kParseInsituFlag | rapidjson::kParseValidateEncodingFlag>(stream, builder);
  const std::string at = " at byte " + std::to_string(r.Offset());
  if (r.IsError()) {
    if (r.Code() == rapidjson::kParseErrorTermination) return parse_failure{builder.stop_reason() + at};
    if (r.Code() == rapidjson::kParseErrorStringInvalidEncoding || r.Code() == rapidjson::kParseErrorStringUnicodeSurrogateInvalid)
      return parse_failure{"the body is not valid UTF-8" + at, true};
    return parse_failure{std::string("malformed JSON: ") + rapidjson::GetParseError_En(r.Code()) + at};
  }
  if (stream.Tell() != size)
    return parse_failure{"malformed JSON: a NUL byte at byte " + std::to_string(stream.Tell())};
  return std::nullopt;
}

/// The end (one past the closing quote) of the string literal whose opening quote is at
/// `begin` in `text`, a JSON text that parsed (so the literal is closed).
inline std::size_t literal_end(std::string_view text, std::size_t begin) noexcept {
  std::size_t i = begin + 1;
  while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
  return i + 1;
}

}  // namespace hedge::server::json
