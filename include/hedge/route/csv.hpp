// hedge/route/csv.hpp: a zero-copy reader for RFC 4180 CSV (quoted fields may hold commas,
// doubled quotes and newlines), used for labelled routing data and traffic logs.
//
// The cursor hands out raw field views; a quoted field's text is recovered with
// csv_unescape, which writes characters to a sink, so nothing is allocated here.
#pragma once

#include <cstddef>
#include <string_view>

#include "hedge/core/result.hpp"

namespace hedge::route {

/// One field as it appears in the input.
struct csv_field {
  std::string_view raw;         ///< without the surrounding quotes; doubled quotes not yet undone
  bool quoted = false;
  bool ends_record = false;     ///< the last field of its record
};

class csv_cursor {
 public:
  constexpr explicit csv_cursor(std::string_view text) noexcept : text_(text) {}

  /// True when no field is left (a final newline does not start a new record).
  [[nodiscard]] constexpr bool done() const noexcept { return pos_ >= text_.size() && !after_comma_; }
  /// 1-based line of the next field, for error messages.
  [[nodiscard]] constexpr std::size_t line() const noexcept { return line_; }

  /// Reads the next field; fails on an unterminated quote or text after a closing quote.
  constexpr result<csv_field> next() noexcept {
    csv_field f;
    after_comma_ = false;
    if (pos_ >= text_.size()) {  // "a," at the very end: one empty last field
      f.ends_record = true;
      return f;
    }
    if (text_[pos_] == '"') {
      const std::size_t start = ++pos_, first_line = line_;
      while (true) {
        if (pos_ >= text_.size())
          return error{errc::parse_error} << "csv line " << first_line << ": unterminated quoted field";
        const char c = text_[pos_];
        if (c == '"') {
          if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
            pos_ += 2;
            continue;
          }
          break;
        }
        if (c == '\n') ++line_;
        ++pos_;
      }
      f.raw = text_.substr(start, pos_ - start);
      f.quoted = true;
      ++pos_;  // closing quote
    } else {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '\n' && text_[pos_] != '\r') {
        if (text_[pos_] == '"') return error{errc::parse_error} << "csv line " << line_ << ": quote inside unquoted field";
        ++pos_;
      }
      f.raw = text_.substr(start, pos_ - start);
    }
    if (pos_ >= text_.size()) {
      f.ends_record = true;
    } else if (text_[pos_] == ',') {
      ++pos_;
      after_comma_ = true;
    } else if (text_[pos_] == '\n' || text_[pos_] == '\r') {
      if (text_[pos_] == '\r') ++pos_;
      if (pos_ < text_.size() && text_[pos_] == '\n') ++pos_;
      ++line_;
      f.ends_record = true;
    } else {
      return error{errc::parse_error} << "csv line " << line_ << ": text after a closing quote";
    }
    return f;
  }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  bool after_comma_ = false;
};

/// Writes the text of a field to put(char), undoing doubled quotes.
/// \tparam Put callable as put(char)
template <class Put>
constexpr void csv_unescape(const csv_field& f, Put&& put) noexcept {
  for (std::size_t k = 0; k < f.raw.size(); ++k) {
    put(f.raw[k]);
    if (f.quoted && f.raw[k] == '"') ++k;  // skip the second quote of a pair
  }
}

}  // namespace hedge::route
