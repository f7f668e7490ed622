// hedge/os/http_transport.hpp: the default cloud::Transport, on libcurl.
//
// Why libcurl (Debian libcurl4-openssl-dev) rather than cpp-httplib: a real cloud endpoint is
// HTTPS, and libcurl verifies it against the system's CA store out of the box (or a CA file);
// it honours the https_proxy / http_proxy / no_proxy environment variables that corporate
// networks rely on; it negotiates HTTP/2 over TLS (ALPN) with HTTP/1.1 fallback; its connect
// timeout covers DNS, TCP and the TLS handshake; and it is among the most widely deployed and
// fuzzed HTTP clients there are. cpp-httplib needs OpenSSL wiring for HTTPS, has no proxy environment
// support and no HTTP/2.
//
// How the limits of cloud::transport_limits are kept (each 0 = no limit):
//   connect        libcurl's CURLOPT_CONNECTTIMEOUT_MS (DNS + TCP + TLS).
//   first_byte     from the moment the request is issued on a connected socket
//                  (CURLOPT_PREREQFUNCTION) to the first body byte.
//   between_chunks the longest silence between two body pieces.
//   total          the whole send(), connect included.
// The transfer runs on libcurl's multi interface: send() waits in curl_multi_poll for at most
// `poll_interval` (50 ms) or until the nearest deadline, then checks the cancel flag and the
// deadlines. So a limit trips within a few ms of its time, a slow drip that keeps sending resets
// the gap every byte, a sink call returning false stops the transfer at once, and the sink's
// cancel flag stops it within one poll interval.
//
// Errors (the message is at most error::max_message bytes and never holds a request header):
//   unavailable      cannot resolve or connect; the server closed without answering; the stream
//                    was cut ("stream cut after N body bytes: ...") after every byte received
//                    was passed to on_body (Content-Length short, chunked body without its last
//                    chunk, connection reset)
//                    or sent something else than HTTP ("the reply is not HTTP"), or a response head
//                    line past libcurl's limit ("a response header line longer than ... 100 KiB")
//   timeout          names the limit ("no byte for 1000 ms between chunks (between_chunks limit)")
//   rejected         "cancelled ..." by the flag or by a sink callback returning false
//   io_error         TLS (certificate, handshake) and other transfer failures, with curl's reason
//   invalid_argument a malformed URL or a scheme other than http(s), a method or header name that
//                    is not a token, a header value with CR or LF (refused before sending)
// An HTTP error status (429, 500) is not an error here: the head and body reach the sink and
// send() succeeds; the client reads the status.
//
// Secrets: no request header is ever logged (CURLOPT_VERBOSE and the debug callback stay off),
// and an error message that would contain an Authorization header's value is replaced.
//
// One curl_transport sends one request at a time (use one per thread). It keeps its libcurl
// handles between requests, so a connection (and its TLS session) is reused when the server
// keeps it alive.
#pragma once

#include <curl/curl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hedge/cloud/transport.hpp"
#include "hedge/core/result.hpp"

namespace hedge::os {

struct curl_transport_options {
  /// Scheme, host, port and any path prefix; request paths are appended as they are. With
  /// cloud_client (whose endpoint.base_path adds "/v1"): "https://api.openai.com",
  /// "http://127.0.0.1:8080".
  std::string base_url;
  std::string ca_file;   ///< PEM file of trusted CAs; empty: the system's CA store
  bool verify_tls = true;  ///< check the server's certificate and host name (off only for tests)
  std::chrono::milliseconds poll_interval{50};  ///< the longest wait before checking cancel/deadlines
};

namespace detail {

/// curl_global_init exactly once per process (C++ guarantees the static's initialisation runs
/// once even with concurrent first calls); libcurl is never cleaned up, as other libraries in the
/// process may use it too.
inline CURLcode curl_global() noexcept {
  static const CURLcode code = curl_global_init(CURL_GLOBAL_DEFAULT);
  return code;
}

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

/// Retry-After as delta-seconds (RFC 9110 §10.2.3); the HTTP-date form gives nullopt.
constexpr std::optional<std::chrono::seconds> parse_retry_after(std::string_view v) noexcept {
  v = trim(v);
  if (v.empty() || v.size() > 9) return std::nullopt;
  long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return std::chrono::seconds{n};
}

/// The state of one send(), shared with libcurl's callbacks.
struct curl_transfer {
  using clock = std::chrono::steady_clock;

  explicit curl_transfer(cloud::response_sink s) noexcept : sink(s) {}

  cloud::response_sink sink;
  clock::time_point request_issued{};  ///< set by the pre-request callback
  clock::time_point last_body_byte{};
  bool issued = false;
  bool head_sent = false;
  bool body_started = false;
  bool stopped_by_sink = false;
  bool cancelled = false;
  std::size_t body_bytes = 0;

  // The response head being read; reset by every status line (1xx interim responses).
  int status = 0;
  char content_type[128] = {};
  std::size_t content_type_length = 0;
  std::optional<std::chrono::seconds> retry_after;

  bool cancel_requested() const noexcept {
    return sink.cancel != nullptr && sink.cancel->load(std::memory_order_acquire);
  }

  /// Hands the head to the sink once; false stops the transfer.
  bool deliver_head() noexcept {
    if (head_sent) return true;
    head_sent = true;
    const cloud::http_response_head head{status, std::string_view{content_type, content_type_length}, retry_after};
    if (!sink.on_head(head)) {
      stopped_by_sink = true;
      return false;
    }
    return true;
  }

  static int on_prereq(void* self, char*, char*, int, int) noexcept {
    auto& t = *static_cast<curl_transfer*>(self);
    t.request_issued = clock::now();
    t.issued = true;
    return CURL_PREREQFUNC_OK;
  }

  // One header line per call, CRLF included (libcurl's CURLOPT_HEADERFUNCTION contract).
  static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* self) noexcept {
    auto& t = *static_cast<curl_transfer*>(self);
    const std::size_t n = size * count;
    if (t.head_sent) return n;  // trailers of a chunked body
    const std::string_view line = trim({data, n});
    if (line.substr(0, 5) == "HTTP/") {
      // "HTTP/1.1 200 OK", "HTTP/2 429": the code follows the first space.
      t.status = 0;
      t.content_type_length = 0;
      t.retry_after.reset();
      const std::size_t space = line.find(' ');
      if (space != std::string_view::npos) {
        for (std::size_t i = space + 1; i < line.size() && i < space + 4; ++i) {
          if (line[i] < '0' || line[i] > '9') break;
          t.status = t.status * 10 + (line[i] - '0');
        }
      }
      return n;
    }
    if (line.empty()) {  // the end of a head: deliver it unless it was an interim 1xx one
      if (t.status >= 200 && !t.deliver_head()) return 0;
      return n;
    }
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;
    const std::string_view name = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "content-type")) {
      t.content_type_length = std::min(value.size(), sizeof t.content_type);
      std::memcpy(t.content_type, value.data(), t.content_type_length);
    } else if (iequals(name, "retry-after")) {
      t.retry_after = parse_retry_after(value);
    }
    return n;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* self) noexcept {
    auto& t = *static_cast<curl_transfer*>(self);
    const std::size_t n = size * count;
    if (n == 0) return 0;
    if (t.cancel_requested()) {
      t.cancelled = true;
      return 0;
    }
    if (!t.deliver_head()) return 0;
    t.body_started = true;
    t.last_body_byte = clock::now();
    t.body_bytes += n;
    if (!t.sink.on_body({data, n})) {
      t.stopped_by_sink = true;
      return 0;
    }
    return n;
  }
};

/// A curl_slist freed on scope exit.
struct curl_headers {
  curl_slist* list = nullptr;
  curl_headers() noexcept = default;
  curl_headers(const curl_headers&) = delete;
  curl_headers& operator=(const curl_headers&) = delete;
  ~curl_headers() { curl_slist_free_all(list); }
  bool append(const std::string& line) noexcept {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) return false;
    list = next;
    return true;
  }
};

}  // namespace detail

class curl_transport {
 public:
  explicit curl_transport(curl_transport_options options) noexcept : options_(std::move(options)) {}
  explicit curl_transport(std::string base_url) noexcept { options_.base_url = std::move(base_url); }

  curl_transport(const curl_transport&) = delete;
  curl_transport& operator=(const curl_transport&) = delete;
  curl_transport(curl_transport&& other) noexcept
      : options_(std::move(other.options_)),
        easy_(std::exchange(other.easy_, nullptr)),
        multi_(std::exchange(other.multi_, nullptr)) {}
  curl_transport& operator=(curl_transport&& other) noexcept {
    if (this != &other) {
      release();
      options_ = std::move(other.options_);
      easy_ = std::exchange(other.easy_, nullptr);
      multi_ = std::exchange(other.multi_, nullptr);
    }
    return *this;
  }
  ~curl_transport() { release(); }

  [[nodiscard]] const curl_transport_options& options() const noexcept { return options_; }

  /// Sends `request` to base_url + request.path and streams the response into `sink`
  /// (cloud::Transport's contract; see the top of this file for limits and errors).
  result<void> send(const cloud::http_request& request, const cloud::transport_limits& limits,
                    cloud::response_sink sink) noexcept {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    if (sink.cancel != nullptr && sink.cancel->load(std::memory_order_acquire))
      return error{errc::rejected} << "cancelled before the request was sent";
    HEDGE_TRY(open());

    detail::curl_transfer transfer{sink};
    detail::curl_headers headers;
    HEDGE_TRY(configure(request, limits, transfer, headers));

    if (curl_multi_add_handle(multi_, easy_) != CURLM_OK) return error{errc::io_error} << "curl_multi_add_handle failed";
    const result<void> outcome = run(limits, transfer, start);
    curl_multi_remove_handle(multi_, easy_);  // mid-transfer, this closes the connection
    secret_ = {};
    return outcome;
  }

 private:
  static constexpr long no_connect_limit_ms = 0x7fffffff;  // curl reads 0 as "300 s"; ~24 days instead

  result<void> open() noexcept {
    if (const CURLcode code = detail::curl_global(); code != CURLE_OK)
      return error{errc::io_error} << "curl_global_init: " << curl_easy_strerror(code);
    if (easy_ == nullptr && (easy_ = curl_easy_init()) == nullptr)
      return error{errc::out_of_memory} << "curl_easy_init failed";
    if (multi_ == nullptr && (multi_ = curl_multi_init()) == nullptr)
      return error{errc::out_of_memory} << "curl_multi_init failed";
    return ok();
  }

  void release() noexcept {
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
    multi_ = nullptr;
    easy_ = nullptr;
  }

  static bool is_token(std::string_view s) noexcept {
    if (s.empty()) return false;
    for (char c : s)
      if (c <= ' ' || c >= 127 || c == ':') return false;
    return true;
  }

  result<void> configure(const cloud::http_request& request, const cloud::transport_limits& limits,
                         detail::curl_transfer& transfer, detail::curl_headers& headers) noexcept {
    if (!is_token(request.method)) return error{errc::invalid_argument} << "invalid HTTP method";
    bool has_expect = false;
    secret_ = {};
    for (const cloud::http_header& h : request.headers) {
      if (!is_token(h.name)) return error{errc::invalid_argument} << "invalid header name '" << h.name << "'";
      if (h.value.find_first_of("\r\n") != std::string_view::npos)
        return error{errc::invalid_argument} << "header " << h.name << " contains CR or LF";
      if (detail::iequals(h.name, "authorization")) {
        // "Bearer sk-...": the credential is what follows the scheme, alone or not.
        secret_ = detail::trim(h.value);
        if (const std::size_t space = secret_.rfind(' '); space != std::string_view::npos) secret_.remove_prefix(space + 1);
      }
      if (detail::iequals(h.name, "expect")) has_expect = true;
      // "Name;" is how libcurl sends a header with an empty value ("Name:" would remove it).
      std::string line(h.name);
      line += h.value.empty() ? ";" : ": ";
      line += h.value;
      if (!headers.append(line)) return error{errc::out_of_memory} << "curl_slist_append failed";
    }
    // libcurl waits up to 1 s for "100 Continue" before sending a large POST body; servers of
    // this API answer without it.
    if (!has_expect && !headers.append("Expect:")) return error{errc::out_of_memory} << "curl_slist_append failed";

    url_ = options_.base_url;
    url_ += request.path;
    method_ = request.method;
    error_buffer_[0] = '\0';

    CURL* e = easy_;
    curl_easy_reset(e);  // keeps the connection cache, drops the previous request's options
    bool ok = true;
    auto set = [&](CURLoption option, auto value) { ok = ok && curl_easy_setopt(e, option, value) == CURLE_OK; };
    set(CURLOPT_URL, url_.c_str());
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: safe in threaded programs
    set(CURLOPT_ERRORBUFFER, error_buffer_);
    set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);  // a proxy's CONNECT reply is not the response head
    set(CURLOPT_SSL_VERIFYPEER, options_.verify_tls ? 1L : 0L);
    set(CURLOPT_SSL_VERIFYHOST, options_.verify_tls ? 2L : 0L);
    if (!options_.ca_file.empty()) set(CURLOPT_CAINFO, options_.ca_file.c_str());
    set(CURLOPT_CONNECTTIMEOUT_MS, limits.connect.count() > 0 ? static_cast<long>(std::min<long long>(limits.connect.count(), no_connect_limit_ms)) : no_connect_limit_ms);
    set(CURLOPT_HTTPHEADER, headers.list);
    set(CURLOPT_WRITEFUNCTION, &detail::curl_transfer::on_body);
    set(CURLOPT_WRITEDATA, static_cast<void*>(&transfer));
    set(CURLOPT_HEADERFUNCTION, &detail::curl_transfer::on_header);
    set(CURLOPT_HEADERDATA, static_cast<void*>(&transfer));
    set(CURLOPT_PREREQFUNCTION, &detail::curl_transfer::on_prereq);
    set(CURLOPT_PREREQDATA, static_cast<void*>(&transfer));
    if (method_ == "GET" && request.body.empty()) {
      set(CURLOPT_HTTPGET, 1L);
    } else if (method_ == "HEAD") {
      set(CURLOPT_NOBODY, 1L);
    } else {
      // POSTFIELDS with a null pointer would make libcurl read the body from stdin.
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
      set(CURLOPT_POSTFIELDS, request.body.empty() ? "" : request.body.data());
      if (method_ != "POST") set(CURLOPT_CUSTOMREQUEST, method_.c_str());
    }
    if (!ok) return error{errc::io_error} << "curl_easy_setopt failed (libcurl older than 7.85?)";
    return hedge::ok();
  }

  result<void> run(const cloud::transport_limits& limits, detail::curl_transfer& transfer,
                   std::chrono::steady_clock::time_point start) noexcept {
    using clock = std::chrono::steady_clock;
    using std::chrono::milliseconds;
    constexpr auto zero = milliseconds::zero();
    for (;;) {
      int running = 0;
      if (const CURLMcode mc = curl_multi_perform(multi_, &running); mc != CURLM_OK)
        return error{errc::io_error} << "curl_multi_perform: " << curl_multi_strerror(mc);
      if (running == 0) break;
      if (transfer.cancelled || transfer.cancel_requested())
        return error{errc::rejected} << "cancelled after " << transfer.body_bytes << " body bytes";

      // The nearest deadline; past it, the limit's error.
      const auto now = clock::now();
      auto wait = options_.poll_interval;
      auto consider = [&](clock::time_point deadline) {
        wait = std::min(wait, std::chrono::ceil<milliseconds>(deadline - now));
      };
      if (limits.total > zero) {
        if (now - start >= limits.total)
          return error{errc::timeout} << "no complete response within " << limits.total.count() << " ms (total limit)";
        consider(start + limits.total);
      }
      if (!transfer.body_started && transfer.issued && limits.first_byte > zero) {
        if (now - transfer.request_issued >= limits.first_byte)
          return error{errc::timeout} << "no body byte within " << limits.first_byte.count()
                                      << " ms of sending the request (first_byte limit)";
        consider(transfer.request_issued + limits.first_byte);
      }
      if (transfer.body_started && limits.between_chunks > zero) {
        if (now - transfer.last_body_byte >= limits.between_chunks)
          return error{errc::timeout} << "no byte for " << limits.between_chunks.count()
                                      << " ms between chunks (between_chunks limit) after " << transfer.body_bytes
                                      << " body bytes";
        consider(transfer.last_body_byte + limits.between_chunks);
      }
      const int wait_ms = static_cast<int>(std::max<long long>(1, wait.count()));
      if (const CURLMcode mc = curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr); mc != CURLM_OK)
        return error{errc::io_error} << "curl_multi_poll: " << curl_multi_strerror(mc);
    }

    CURLcode code = CURLE_OK;
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &queued))
      if (message->msg == CURLMSG_DONE && message->easy_handle == easy_) code = message->data.result;
    if (code == CURLE_OK) {
      if (transfer.status == 0) {  // no head seen by the header callback: take libcurl's code
        long status = 0;
        curl_easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &status);
        transfer.status = static_cast<int>(status);
      }
      if (!transfer.deliver_head()) return error{errc::rejected} << "cancelled: on_head returned false";
      return hedge::ok();
    }
    return map_error(code, transfer, limits);
  }

  result<void> map_error(CURLcode code, const detail::curl_transfer& transfer,
                         const cloud::transport_limits& limits) const noexcept {
    const char* reason = error_buffer_[0] != '\0' ? error_buffer_ : curl_easy_strerror(code);
    // libcurl does not echo request headers in its messages; should one ever, it is withheld.
    if (!secret_.empty() && std::string_view{reason}.find(secret_) != std::string_view::npos)
      reason = "(libcurl's message withheld: it contained the Authorization credential)";
    if (transfer.cancelled) return error{errc::rejected} << "cancelled after " << transfer.body_bytes << " body bytes";
    if (transfer.stopped_by_sink)
      return error{errc::rejected} << "cancelled: a sink callback returned false after " << transfer.body_bytes
                                   << " body bytes";
    switch (code) {
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
      case CURLE_COULDNT_CONNECT:
        return error{errc::unavailable} << "cannot connect: " << reason;
      case CURLE_OPERATION_TIMEDOUT:  // the only libcurl timeout set: connect (send() keeps the others)
        return error{errc::timeout} << "no connection within " << limits.connect.count() << " ms (connect limit): "
                                    << reason;
      case CURLE_PARTIAL_FILE:
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
      case CURLE_WEIRD_SERVER_REPLY:
        if (!transfer.head_sent && code == CURLE_GOT_NOTHING)
          return error{errc::unavailable} << "the server closed the connection without a response";
        if (!transfer.head_sent) return error{errc::unavailable} << "connection failed before the response: " << reason;
        return error{errc::unavailable} << "stream cut after " << transfer.body_bytes << " body bytes: " << reason;
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_SSL_CERTPROBLEM:
      case CURLE_SSL_CIPHER:
      case CURLE_SSL_ISSUER_ERROR:
      case CURLE_SSL_CRL_BADFILE:
      case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
      case CURLE_SSL_ENGINE_NOTFOUND:
      case CURLE_SSL_ENGINE_SETFAILED:
      case CURLE_SSL_ENGINE_INITFAILED:
      case CURLE_SSL_SHUTDOWN_FAILED:
        return error{errc::io_error} << "TLS: " << reason;
      case CURLE_URL_MALFORMAT:
      case CURLE_UNSUPPORTED_PROTOCOL:
        // Once the request is on the wire, this is the reply's fault ("Received HTTP/0.9").
        if (transfer.issued) return error{errc::unavailable} << "the reply is not HTTP: " << reason;
        return error{errc::invalid_argument} << "bad URL: " << reason;
      case CURLE_OUT_OF_MEMORY:
        // libcurl reports a head line longer than its buffer as out of memory.
        if (transfer.issued && !transfer.head_sent)
          return error{errc::unavailable} << "a response header line longer than libcurl's limit "
                                             "(CURL_MAX_HTTP_HEADER, 100 KiB)";
        return error{errc::out_of_memory} << reason;
      default:
        return error{errc::io_error} << reason;
    }
  }

  curl_transport_options options_;
  CURL* easy_ = nullptr;
  CURLM* multi_ = nullptr;
  std::string url_;
  std::string method_;
  std::string_view secret_;  ///< during send(): the Authorization credential, to keep out of messages
  char error_buffer_[CURL_ERROR_SIZE] = {};
};

static_assert(cloud::Transport<curl_transport>);

}  // namespace hedge::os
