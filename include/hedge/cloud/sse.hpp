// hedge/cloud/sse.hpp: an incremental reader of Server-Sent Events (text/event-stream).
//
// Follows the WHATWG HTML Living Standard, section 9.2 "Server-sent events", "Parsing an
// event stream" and "Interpreting an event stream"
// (https://html.spec.whatwg.org/multipage/server-sent-events.html):
// - one leading U+FEFF (UTF-8 BOM) is dropped; lines end with CRLF, LF or CR;
// - a line starting with ':' is a comment; otherwise the field name runs to the first ':'
//   and one space after that colon is dropped from the value (a line without ':' is a field
//   with an empty value);
// - "data" appends its value and a LF to the data buffer, "event" sets the event type,
//   "id", "retry" and unknown fields are ignored (hedge never reconnects, so they do not
//   matter to it);
// - a blank line dispatches the event (data without its last LF, type "message" when none
//   was given) when the data buffer is not empty, and resets both buffers;
// - at the end of the stream a pending event is discarded.
// Bytes may arrive split anywhere, a CRLF included. Each event's data is assembled once in
// a caller-provided buffer; an event larger than the buffer is a capacity_exceeded error, and
// the reader then refuses further input until reset(). Nothing here allocates.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "hedge/core/result.hpp"

namespace hedge::cloud {

/// One dispatched event. `data` is NUL-terminated and writable (the JSON reader unescapes
/// strings in place), and valid until the event callback returns.
struct sse_event {
  std::string_view type;  ///< "message" unless an "event:" field named another
  char* data;
  std::size_t size;
  [[nodiscard]] std::string_view text() const noexcept { return {data, size}; }
};

class sse_reader {
 public:
  static constexpr std::size_t max_type = 32;  ///< the longest "event:" name kept

  /// `buffer` holds one event's data (plus one byte); it must outlive the reader.
  explicit sse_reader(std::span<char> buffer) noexcept : buffer_(buffer) {}
  sse_reader(const sse_reader&) = delete;
  sse_reader& operator=(const sse_reader&) = delete;

  /// Reads the next bytes of the stream, calling on_event(sse_event&) -> bool for every
  /// event completed; a callback returning false stops the reader (stopped() turns true and
  /// later input is ignored).
  template <class F>
  result<void> feed(std::string_view bytes, F&& on_event) noexcept {
    if (failed_) return failure_;
    const char* p = bytes.data();
    const char* const end = p + bytes.size();
    while (p != end && !stopped_) {
      if (bom_ < 3) {
        // Matching U+FEFF's three bytes at the very start of the stream, possibly split.
        static constexpr char bom[3] = {'\xEF', '\xBB', '\xBF'};
        if (*p == bom[bom_]) {
          ++p;
          ++bom_;
          continue;
        }
        const unsigned matched = bom_;
        bom_ = 3;
        if (matched != 0) HEDGE_TRY(feed({bom, matched}, on_event));
        continue;
      }
      const char c = *p;
      if (after_cr_) {
        after_cr_ = false;
        if (c == '\n') {
          ++p;
          continue;
        }
      }
      if (c == '\n' || c == '\r') {
        after_cr_ = c == '\r';
        ++p;
        if (auto r = end_line(on_event); !r) return r;
        continue;
      }
      switch (state_) {
        case state::line_start:
          if (c == ':') {
            state_ = state::ignore;
            ++p;
            continue;
          }
          state_ = state::name;
          name_size_ = 0;
          [[fallthrough]];
        case state::name:
          ++p;
          if (c == ':') {
            field_ = field_named();
            if (field_ == field::event) type_size_ = 0;  // "event:" replaces the type
            state_ = state::space;
          } else if (name_size_ < sizeof(name_)) {
            name_[name_size_++] = c;
          } else {
            name_size_ = sizeof(name_) + 1;  // longer than any field hedge reads
          }
          continue;
        case state::space:
          state_ = state::value;
          if (c == ' ') {
            ++p;
            continue;
          }
          [[fallthrough]];
        case state::value: {
          const char* q = line_end(p, end);
          if (auto r = append(std::string_view(p, static_cast<std::size_t>(q - p))); !r) return r;
          p = q;
          continue;
        }
        case state::ignore:
          p = line_end(p, end);
          continue;
      }
    }
    return ok();
  }

  /// The end of the stream: drops a pending (undispatched) event, as the standard says.
  /// Returns true when one was pending, so the caller can tell a cut stream.
  bool finish() noexcept {
    const bool pending = data_size_ != 0 || state_ != state::line_start;
    clear_event();
    state_ = state::line_start;
    return pending;
  }

  /// Ready for a new stream (also after an error or a stop).
  void reset() noexcept {
    clear_event();
    state_ = state::line_start;
    after_cr_ = false;
    bom_ = 0;
    stopped_ = false;
    failed_ = false;
  }

  [[nodiscard]] bool stopped() const noexcept { return stopped_; }
  [[nodiscard]] std::size_t capacity() const noexcept { return buffer_.size(); }

 private:
  enum class state : unsigned char { line_start, name, space, value, ignore };
  enum class field : unsigned char { data, event, other };

  // The first CR or LF in [p, end), or end. memchr is vectorized in every libc that
  // matters; CR is rare, so it is looked for only before the LF.
  static const char* line_end(const char* p, const char* end) noexcept {
    const auto* lf = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    if (lf == nullptr) lf = end;
    const auto* cr = static_cast<const char*>(std::memchr(p, '\r', static_cast<std::size_t>(lf - p)));
    return cr != nullptr ? cr : lf;
  }

  field field_named() const noexcept {
    const std::string_view name(name_, name_size_ <= sizeof(name_) ? name_size_ : 0);
    if (name == "data") return field::data;
    if (name == "event") return field::event;
    return field::other;
  }

  result<void> append(std::string_view v) noexcept {
    if (field_ == field::data) {
      // One byte stays free for the LF (the NUL at dispatch) that ends every data line.
      if (buffer_.size() - data_size_ < v.size() + 1) return fail();
      std::memcpy(buffer_.data() + data_size_, v.data(), v.size());
      data_size_ += v.size();
    } else if (field_ == field::event) {
      if (max_type - type_size_ < v.size()) return fail_type();
      std::memcpy(type_ + type_size_, v.data(), v.size());
      type_size_ += v.size();
    }
    return ok();
  }

  template <class F>
  result<void> end_line(F& on_event) noexcept {
    const state s = state_;
    state_ = state::line_start;
    if (s == state::line_start) return dispatch(on_event);
    if (s == state::name) {
      field_ = field_named();
    } else if (s == state::ignore) {
      return ok();
    }
    if (field_ == field::data) {
      if (buffer_.size() - data_size_ < 1) return fail();
      buffer_[data_size_++] = '\n';
    } else if (field_ == field::event && s == state::name) {
      type_size_ = 0;
    }
    field_ = field::other;
    return ok();
  }

  template <class F>
  result<void> dispatch(F& on_event) noexcept {
    if (data_size_ == 0) {
      clear_event();
      return ok();
    }
    buffer_[data_size_ - 1] = '\0';  // the last LF goes, per the standard
    sse_event e{type_size_ != 0 ? std::string_view(type_, type_size_) : std::string_view("message"), buffer_.data(),
                data_size_ - 1};
    const bool go_on = on_event(e);
    clear_event();
    if (!go_on) stopped_ = true;
    return ok();
  }

  void clear_event() noexcept {
    data_size_ = 0;
    type_size_ = 0;
    field_ = field::other;
  }

  error fail() noexcept {
    failed_ = true;
    failure_ = error{errc::capacity_exceeded} << "an SSE event larger than the " << buffer_.size() << "-byte event buffer";
    return failure_;
  }
  error fail_type() noexcept {
    failed_ = true;
    failure_ = error{errc::capacity_exceeded} << "an SSE event name longer than " << max_type << " bytes";
    return failure_;
  }

  std::span<char> buffer_;
  std::size_t data_size_ = 0;
  char type_[max_type] = {};
  std::size_t type_size_ = 0;
  char name_[8] = {};
  std::size_t name_size_ = 0;
  state state_ = state::line_start;
  field field_ = field::other;
  unsigned bom_ = 0;
  bool after_cr_ = false;
  bool stopped_ = false;
  bool failed_ = false;
  error failure_{};
};

}  // namespace hedge::cloud
