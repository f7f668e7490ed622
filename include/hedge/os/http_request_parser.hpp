// hedge/os/http_request_parser.hpp: an incremental HTTP/1.1 request reader (RFC 9112) with
// every limit checked as the bytes arrive, for os/http_server.hpp.
//
// Bytes go in as they come off the socket, in pieces of any size; out comes a request (method,
// target, headers, body), or a refusal with its status the moment a limit is crossed:
//   431  the request line and headers exceed max_header_bytes, or more than max_header_count
//        header lines (trailers of a chunked body count too)
//   413  a Content-Length above max_body_bytes, or a chunked body whose chunks add up past it
//        (refused at the chunk-size line that would cross it, before its data is read)
//   400  a malformed request line or header line, obsolete line folding, Content-Length that is
//        not a decimal number or differs between two headers, Content-Length together with
//        Transfer-Encoding (RFC 9112 §6.3: the framing is ambiguous, a smuggling vector), a
//        malformed chunk
//   501  a transfer coding other than chunked;  505  an HTTP version other than 1.0 and 1.1
// Line ends are CRLF; a bare LF is accepted as one (RFC 9112 §2.2). Nothing is allocated beyond
// what the limits allow: the head is at most max_header_bytes, the body at most max_body_bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hedge::os {

/// The limits a request is read under (a part of http_server_options).
struct http_request_limits {
  std::size_t max_header_bytes = 16 * 1024;  ///< request line + header lines, CRLFs included -> 431
  std::size_t max_header_count = 100;        ///< header lines (and chunked trailers) -> 431
  std::size_t max_body_bytes = 8u << 20;     ///< Content-Length or the sum of chunks -> 413
};

struct http_header {
  std::string name, value;
};

/// ASCII case-insensitive equality (header names, tokens).
constexpr bool http_iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

/// One request as read: the handler's view of it.
struct http_request {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< the request target as sent: "/v1/models?x=1"
  int minor_version = 1;  ///< HTTP/1.minor_version
  std::vector<http_header> headers;
  std::string body;  ///< decoded (chunked framing removed)

  /// The target up to '?'.
  [[nodiscard]] std::string_view path() const noexcept {
    const std::string_view t = target;
    return t.substr(0, t.find('?'));
  }
  /// The first header of this name (case-insensitive), or none.
  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const noexcept {
    for (const auto& h : headers)
      if (http_iequals(h.name, name)) return std::string_view(h.value);
    return std::nullopt;
  }
  /// Whether the connection may carry another request after this one (RFC 9112 §9.3).
  [[nodiscard]] bool keep_alive() const noexcept {
    bool close = false, keep = false;
    for (const auto& h : headers) {
      if (!http_iequals(h.name, "connection")) continue;
      std::string_view v = h.value;
      while (!v.empty()) {
        const std::size_t comma = v.find(',');
        std::string_view token = v.substr(0, comma);
        while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
        while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
        if (http_iequals(token, "close")) close = true;
        if (http_iequals(token, "keep-alive")) keep = true;
        v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
      }
    }
    return !close && (minor_version >= 1 || keep);
  }
};

class http_request_parser {
 public:
  enum class step {
    need_more,  ///< every byte given was consumed; the request is not complete
    head_done,  ///< the head is complete and a body follows (answer "100 Continue" now if asked)
    complete,   ///< take() the request; bytes after it were not consumed (pipelining)
    failed,     ///< status() and message() say why; the connection must close
  };

  explicit http_request_parser(http_request_limits limits = {}) noexcept : limits_(limits) {}

  /// Consumes a prefix of `in` (advancing it) and says where the request stands.
  step feed(std::string_view& in) {
    while (true) {
      switch (state_) {
        case state::head:
        case state::trailers: {
          if (in.empty()) return step::need_more;
          const std::size_t nl = in.find('\n');
          const std::size_t take = nl == std::string_view::npos ? in.size() : nl + 1;
          head_bytes_ += take;
          if (head_bytes_ > limits_.max_header_bytes)
            return fail(431, "the request header fields exceed " + std::to_string(limits_.max_header_bytes) + " bytes");
          line_.append(in.substr(0, take));
          in.remove_prefix(take);
          if (nl == std::string_view::npos) return step::need_more;
          std::string_view line = line_;
          line.remove_suffix(1);
          if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
          const step s = state_ == state::head ? head_line(line) : trailer_line(line);
          line_.clear();
          if (s != step::need_more) return s;
          break;
        }
        case state::body: {
          const std::size_t take = std::min(in.size(), remaining_);
          request_.body.append(in.substr(0, take));
          in.remove_prefix(take);
          remaining_ -= take;
          if (remaining_ != 0) return step::need_more;
          if (!chunked_) return finish();
          state_ = state::chunk_end;
          break;
        }
        case state::chunk_size:
        case state::chunk_end: {
          if (in.empty()) return step::need_more;
          const std::size_t nl = in.find('\n');
          const std::size_t take = nl == std::string_view::npos ? in.size() : nl + 1;
          if (line_.size() + take > max_chunk_line)
            return fail(400, "a chunk-size line longer than " + std::to_string(max_chunk_line) + " bytes");
          line_.append(in.substr(0, take));
          in.remove_prefix(take);
          if (nl == std::string_view::npos) return step::need_more;
          std::string_view line = line_;
          line.remove_suffix(1);
          if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
          const step s = state_ == state::chunk_size ? chunk_size_line(line) : chunk_end_line(line);
          line_.clear();
          if (s != step::need_more) return s;
          break;
        }
        case state::done: return step::complete;
        case state::failed: return step::failed;
      }
    }
  }

  /// The request read (after step::complete); the parser is ready for the next one.
  http_request take() {
    http_request r = std::move(request_);
    *this = http_request_parser(limits_);
    return r;
  }

  /// Whether any byte of a request has been read (an idle keep-alive connection has none).
  [[nodiscard]] bool started() const noexcept { return head_bytes_ > 0 || state_ != state::head; }
  /// The bytes of this request held so far (head and body).
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return head_bytes_ + request_.body.size(); }
  /// Whether the head is still being read (the header deadline applies).
  [[nodiscard]] bool in_head() const noexcept { return state_ == state::head; }
  /// Whether the head asked for "100 Continue" (valid after step::head_done).
  [[nodiscard]] bool expects_continue() const noexcept { return expect_continue_; }
  [[nodiscard]] int status() const noexcept { return status_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// The target of the request being read (empty before its request line).
  [[nodiscard]] const std::string& target() const noexcept { return request_.target; }
  [[nodiscard]] int minor_version() const noexcept { return request_.minor_version; }

 private:
  static constexpr std::size_t max_chunk_line = 4096;  // chunk size, extensions, CRLF

  enum class state { head, body, chunk_size, chunk_end, trailers, done, failed };

  step fail(int status, std::string message) {
    state_ = state::failed;
    status_ = status;
    message_ = std::move(message);
    return step::failed;
  }

  step finish() {
    state_ = state::done;
    return step::complete;
  }

  static bool is_tchar(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  }
  static bool is_token(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar);
  }
  static std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  }

  step head_line(std::string_view line) {
    if (request_.method.empty()) {
      // RFC 9112 §2.2: empty lines before the request line are ignored.
      if (line.empty()) return step::need_more;
      return request_line(line);
    }
    if (!line.empty()) return header_line(line, request_.headers);
    return end_of_head();
  }

  step request_line(std::string_view line) {
    const std::size_t a = line.find(' ');
    const std::size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
      return fail(400, "a malformed request line");
    const std::string_view method = line.substr(0, a), target = line.substr(a + 1, b - a - 1),
                           version = line.substr(b + 1);
    if (!is_token(method)) return fail(400, "a malformed method");
    if (target.empty()) return fail(400, "an empty request target");
    for (const char c : target)
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return fail(400, "a control byte in the request target");
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
        version[5] > '9' || version[7] < '0' || version[7] > '9')
      return fail(400, "a malformed HTTP version");
    if (version[5] != '1' || (version[7] != '0' && version[7] != '1'))
      return fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported (1.0 and 1.1 are)");
    request_.method = method;
    request_.target = target;
    request_.minor_version = version[7] - '0';
    return step::need_more;
  }

  step header_line(std::string_view line, std::vector<http_header>& into) {
    if (++header_count_ > limits_.max_header_count)
      return fail(431, "more than " + std::to_string(limits_.max_header_count) + " header fields");
    if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete line folding in a header");
    const std::size_t colon = line.find(':');
    // No whitespace between the name and the colon (RFC 9112 §5.1).
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return fail(400, "a malformed header line");
    const std::string_view value = trim(line.substr(colon + 1));
    for (const char c : value)
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return fail(400, "a control byte in a header value");
    into.push_back({std::string(line.substr(0, colon)), std::string(value)});
    return step::need_more;
  }

  step end_of_head() {
    std::optional<std::uint64_t> length;
    bool transfer_encoding = false;
    for (const auto& h : request_.headers) {
      if (http_iequals(h.name, "content-length")) {
        // A list of equal values ("3, 3") is one value; anything else is an error (RFC 9112 §6.3).
        std::string_view v = h.value;
        while (true) {
          const std::size_t comma = v.find(',');
          const std::string_view item = trim(v.substr(0, comma));
          if (item.empty() || item.size() > 19 || !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            if (!item.empty() && item.size() > 19 && std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }))
              return fail(413, "Content-Length " + std::string(item.substr(0, 24)) + " exceeds the limit of " +
                                   std::to_string(limits_.max_body_bytes) + " bytes");
            return fail(400, "Content-Length is not a decimal number");
          }
          std::uint64_t n = 0;
          for (const char c : item) n = n * 10 + static_cast<std::uint64_t>(c - '0');
          if (length && *length != n) return fail(400, "conflicting Content-Length values");
          length = n;
          if (comma == std::string_view::npos) break;
          v = v.substr(comma + 1);
        }
      } else if (http_iequals(h.name, "transfer-encoding")) {
        if (transfer_encoding || !http_iequals(trim(h.value), "chunked"))
          return fail(501, "the transfer coding '" + h.value.substr(0, 64) + "' is not supported (chunked is)");
        transfer_encoding = true;
      } else if (http_iequals(h.name, "expect")) {
        expect_continue_ = http_iequals(trim(h.value), "100-continue");
      }
    }
    if (transfer_encoding && length) return fail(400, "both Content-Length and Transfer-Encoding");
    if (transfer_encoding && request_.minor_version == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (length && *length > limits_.max_body_bytes)
      return fail(413, "the request body of " + std::to_string(*length) + " bytes exceeds the limit of " +
                           std::to_string(limits_.max_body_bytes) + " bytes");
    if (transfer_encoding) {
      chunked_ = true;
      state_ = state::chunk_size;
      return step::head_done;
    }
    if (!length || *length == 0) return finish();
    remaining_ = static_cast<std::size_t>(*length);  // no reserve: memory follows the bytes that came
    state_ = state::body;
    return step::head_done;
  }

  step chunk_size_line(std::string_view line) {
    const std::string_view digits = trim(line.substr(0, line.find(';')));
    if (digits.empty()) return fail(400, "a malformed chunk size");
    std::uint64_t size = 0;
    for (const char c : digits) {
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return fail(400, "a malformed chunk size");
      if (size > (limits_.max_body_bytes >> 4) + 1) break;  // already past any limit: no overflow
      size = size * 16 + static_cast<std::uint64_t>(d);
    }
    if (size > limits_.max_body_bytes - request_.body.size())
      return fail(413, "the chunked request body exceeds the limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
    if (size == 0) {
      state_ = state::trailers;
      return step::need_more;
    }
    remaining_ = static_cast<std::size_t>(size);
    state_ = state::body;
    return step::need_more;
  }

  step chunk_end_line(std::string_view line) {
    if (!line.empty()) return fail(400, "chunk data longer than its size");
    state_ = state::chunk_size;
    return step::need_more;
  }

  step trailer_line(std::string_view line) {
    if (line.empty()) return finish();
    std::vector<http_header> ignored;  // trailers are read and dropped
    return header_line(line, ignored);
  }

  http_request_limits limits_;
  state state_ = state::head;
  http_request request_;
  std::string line_;
  std::size_t head_bytes_ = 0;
  std::size_t header_count_ = 0;
  std::size_t remaining_ = 0;
  bool chunked_ = false;
  bool expect_continue_ = false;
  int status_ = 0;
  std::string message_;
};

}  // namespace hedge::os
