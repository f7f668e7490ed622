// hedge/cloud/json_reader.hpp: how hedge runs rapidjson's SAX reader.
//
// rapidjson (Debian's rapidjson-dev 1.1.0, header-only) reads JSON as events into a
// handler, without a DOM. hedge runs it so that reading never allocates and never
// recurses without bound:
// - in situ (kParseInsituFlag): strings are unescaped inside the caller's buffer and handed
//   over as views into it, so the reader's internal stack, the only thing it would allocate,
//   is never used (numbers are parsed at normal precision, which pushes nothing either);
//   the stack still gets an allocator that refuses every request, so a path we missed fails
//   as a parse error in testing rather than reaching the heap;
// - the handler bounds the nesting depth (max_depth): rapidjson's recursive descent adds
//   two stack frames per level and stops as soon as a handler call returns false, so a
//   hostile "[[[[..." costs max_depth levels, not a stack overflow;
// - RAPIDJSON_ASSERT is left at its default: the asserts reachable from reader.h check
//   rapidjson's own invariants, not the input, and the fuzz targets (built without NDEBUG)
//   run with them enabled.
// The alternatives on Debian 12: jsmn only tokenizes (no unescaping, no numbers), nlohmann
// builds a DOM on the heap and reports errors by throwing, simdjson needs a padded copy
// and a heap-allocated parser.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>

#include "hedge/core/result.hpp"

namespace hedge::cloud::json {

/// rapidjson's Allocator concept, refusing every request (see above).
struct no_allocator {
  static constexpr bool kNeedFree = false;
  void* Malloc(std::size_t) noexcept { return nullptr; }
  void* Realloc(void*, std::size_t, std::size_t) noexcept { return nullptr; }
  static void Free(void*) noexcept {}
};

inline constexpr unsigned parse_flags = rapidjson::kParseInsituFlag;
inline constexpr std::size_t max_depth = 32;

/// Parses the NUL-terminated JSON text in json[0..size) in place (its strings are unescaped
/// where they lie) into `handler`. A handler that returns false stops the parse; its own
/// error, if it set one, is returned by the caller, so this reports rapidjson's errors only.
/// Bytes after an embedded NUL are refused too: rapidjson would stop reading there.
template <class Handler>
result<void> parse_in_situ(char* json, std::size_t size, Handler& handler, bool& stopped_by_handler) noexcept {
  stopped_by_handler = false;
  using reader_type = rapidjson::GenericReader<rapidjson::UTF8<>, rapidjson::UTF8<>, no_allocator>;
  // The reader is never destroyed: its stack never holds memory (see above), and its
  // destructor's `delete` of an allocator it would own is what links operator delete into
  // a firmware image.
  union holder {
    explicit holder(no_allocator* a) noexcept : reader(a, 0) {}
    ~holder() {}
    reader_type reader;
  };
  no_allocator allocator;
  holder h(&allocator);
  rapidjson::InsituStringStream stream(json);
  const rapidjson::ParseResult r = h.reader.template Parse<parse_flags>(stream, handler);
  if (r.IsError()) {
    if (r.Code() == rapidjson::kParseErrorTermination) {
      stopped_by_handler = true;
      return error{errc::parse_error};
    }
    return error{errc::parse_error} << "JSON at byte " << r.Offset() << ": " << rapidjson::GetParseError_En(r.Code());
  }
  if (stream.Tell() != size) return error{errc::parse_error} << "JSON: a NUL byte at " << stream.Tell();
  return ok();
}

/// Checks that `text` is one JSON object, using the spare bytes in `scratch` (at least
/// text.size() + 1) for the in-situ parse, since rapidjson would otherwise copy its strings
/// to the heap.
inline result<void> check_object(std::string_view text, std::span<char> scratch) noexcept {
  struct handler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, handler> {
    std::size_t depth = 0;
    bool root_is_object = false;
    bool too_deep = false;
    bool seen = false;
    bool open(bool object) {
      if (!seen) root_is_object = object, seen = true;
      if (++depth > max_depth) return !(too_deep = true);
      return true;
    }
    bool Default() { return seen = true; }
    bool StartObject() { return open(true); }
    bool StartArray() { return open(false); }
    bool EndObject(rapidjson::SizeType) { return --depth, true; }
    bool EndArray(rapidjson::SizeType) { return --depth, true; }
  } h;
  if (scratch.size() < text.size() + 1)
    return error{errc::capacity_exceeded} << "no room to check " << text.size() << " bytes of extra JSON";
  for (std::size_t i = 0; i < text.size(); ++i) scratch[i] = text[i];
  scratch[text.size()] = '\0';
  bool stopped = false;
  if (auto r = parse_in_situ(scratch.data(), text.size(), h, stopped); !r) {
    if (h.too_deep) return error{errc::parse_error} << "extra JSON nests deeper than " << max_depth;
    return error{errc::parse_error} << "extra fields: " << r.error().message();
  }
  if (!h.root_is_object) return error{errc::invalid_argument} << "extra fields must be one JSON object";
  return ok();
}

}  // namespace hedge::cloud::json
