// hedge/cloud/client.hpp: cloud_client<Transport, Clock>, an OpenAI-compatible client.
//
// It writes the request (request.hpp), sends it through a Transport (transport.hpp) and
// reads the answer as it streams (stream.hpp) or once complete (response.hpp), handing
// every choice delta (text piece, log-probs, top alternatives: fixed-size, views into its
// buffers) to a callback. All buffers are members sized by client_buffers, so a call
// allocates nothing; the object is large (about request + event + error_body bytes plus
// two token arrays) and belongs in static storage or on the heap, not on a small stack.
//
// Every call returns a call_outcome, success or not. Text is never held back: each piece
// went to the callback as it arrived, so after an error the caller has all text received
// so far, and the outcome says how much (tokens, text_bytes) and why it stopped:
// - HTTP 4xx/5xx: the server's error message and status (429 and 503 with retry_after);
//   400/404/413/422 are invalid_argument, 401/403 rejected, 408/504 timeout, 429 and other
//   5xx unavailable;
// - a stream that ends without `[DONE]` or a finish reason: errc::unavailable
//   "stream cut after N tokens" (at `[DONE]` the call completes and the transfer stops, so a
//   keep-alive server that leaves the connection open does not hold it);
// - the transport's own errors (timeout, cancelled, connection lost), with the token count;
// - a malformed chunk: parse_error; an event larger than the event buffer: capacity_exceeded.
// The API key is sent as "Authorization: Bearer <key>" and appears nowhere else. Text from the
// server in an error message has its control characters escaped (escape_control), so printing
// the message cannot drive a terminal.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "hedge/cloud/request.hpp"
#include "hedge/cloud/response.hpp"
#include "hedge/cloud/stream.hpp"
#include "hedge/cloud/transport.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"

namespace hedge::cloud {

/// Hands `text` to out(std::string_view) piece by piece with its control characters escaped:
/// C0 and DEL as \n, \r, \t or \xHH, C1 (U+0080..U+009F, which some terminals obey as ESC
/// sequences) as \u00HH; `keep_line_breaks` passes \n and \t as they are (text meant to be
/// read as text). Server text goes through this before it reaches a terminal or a log.
template <class Out>
constexpr void escape_control(std::string_view text, bool keep_line_breaks, Out&& out) noexcept {
  constexpr char hex[] = "0123456789abcdef";
  std::size_t plain = 0;  // start of the run not yet handed out
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    const bool c1 = b == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (!c1 && ((b >= 0x20 && b != 0x7f) || (keep_line_breaks && (b == '\n' || b == '\t')))) continue;
    out(text.substr(plain, i - plain));
    if (c1) {
      const auto c = static_cast<unsigned char>(text[++i]);
      const char escaped[] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      out(std::string_view(escaped, sizeof escaped));
    } else if (b == '\n' || b == '\r' || b == '\t') {
      const char escaped[] = {'\\', b == '\n' ? 'n' : b == '\r' ? 'r' : 't'};
      out(std::string_view(escaped, sizeof escaped));
    } else {
      const char escaped[] = {'\\', 'x', hex[b >> 4], hex[b & 15]};
      out(std::string_view(escaped, sizeof escaped));
    }
    plain = i + 1;
  }
  out(text.substr(plain));
}

/// A source of time for call timings; std::chrono::steady_clock models it, tests use a fake.
template <class C>
concept Clock = requires(C& clock) {
  typename C::time_point;
  { clock.now() } -> std::same_as<typename C::time_point>;
  { std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now() - clock.now()) };
};

/// Where and as what the client calls. The views must outlive the client (the key is
/// copied into the client's Authorization header once, at construction).
struct endpoint {
  std::string_view base_path = "/v1";  ///< prefixed to /chat/completions and /completions
  std::string_view model;              ///< sent as "model" when not empty
  std::string_view api_key;            ///< loaded by the caller (os/ reads env or file); empty: no header
  transport_limits limits{};
};

/// Sizes of a client's fixed buffers.
struct client_buffers {
  std::size_t request = 32 * 1024;     ///< the request body
  std::size_t event = 64 * 1024;       ///< one SSE event's data
  std::size_t error_body = 4 * 1024;   ///< a non-2xx body (cut beyond this)
  std::size_t tokens = 16;             ///< token log-probs held per choice and chunk
};

/// How a call went. status is ok or the error; the rest is filled either way.
struct call_outcome {
  result<void> status;
  int http_status = 0;                                ///< 0 when no response head arrived
  std::optional<std::chrono::seconds> retry_after;    ///< from a 429 or 503
  std::size_t tokens = 0;                             ///< as completion_stream::tokens() counts them
  std::size_t text_bytes = 0;                         ///< bytes of text handed to the callback
  short_text<24> finish_reason;
  token_usage usage;
  std::optional<std::chrono::nanoseconds> time_to_first_token;  ///< from the call to the first text or token
  std::chrono::nanoseconds duration{0};                         ///< the whole call
  /// Tokens after the first per second of the time after it (the decode rate); 0 below 2 tokens.
  double tokens_per_second = 0;
  [[nodiscard]] bool ok() const noexcept { return status.ok(); }
};

template <Transport T, Clock C = std::chrono::steady_clock, client_buffers Sizes = client_buffers{}>
class cloud_client {
 public:
  using delta_callback = function_ref<bool(const choice_delta&)>;

  cloud_client(T& transport, const endpoint& config, C clock = C{}) noexcept
      : transport_(transport), config_(config), clock_(clock) {
    auth_size_ = 0;
    if (!config.api_key.empty()) {
      constexpr std::string_view bearer = "Bearer ";
      if (bearer.size() + config.api_key.size() <= sizeof(auth_)) {
        for (char c : bearer) auth_[auth_size_++] = c;
        for (char c : config.api_key) auth_[auth_size_++] = c;
      } else {
        key_too_long_ = true;
      }
    }
  }
  cloud_client(const cloud_client&) = delete;
  cloud_client& operator=(const cloud_client&) = delete;

  /// Every streamed event's data, and a non-streamed answer's whole body, before it is parsed,
  /// goes to `observer` too (null: none), for fields the client does not read: a gateway's
  /// `hedge` object, a server's extensions, tool calls a gateway passes on.
  void observe_events(const function_ref<void(std::string_view)>* observer) noexcept {
    observer_ = observer;
    stream_.observe_events(observer);
  }

  /// The time limits of the calls that follow (the engine cuts them to a request's deadline).
  void set_limits(const transport_limits& limits) noexcept { config_.limits = limits; }

  /// POST {base}/chat/completions with stream: true; on_delta gets every delta as it arrives.
  call_outcome stream_chat(std::span<const chat_message> messages, request_options options,
                           delta_callback on_delta, const std::atomic<bool>* cancel = nullptr) noexcept {
    options.stream = true;
    auto body = write_chat_request(request_, config_.model, messages, options);
    if (!body) return refused(body.error());
    return send_stream("/chat/completions", *body, on_delta, cancel);
  }

  /// POST {base}/completions with stream: true.
  call_outcome stream_completion(std::string_view prompt, request_options options, delta_callback on_delta,
                                 bool echo = false, const std::atomic<bool>* cancel = nullptr) noexcept {
    options.stream = true;
    auto body = write_completion_request(request_, config_.model, prompt, options, echo);
    if (!body) return refused(body.error());
    return send_stream("/completions", *body, on_delta, cancel);
  }

  /// POST {base}/chat/completions without streaming. The whole body is kept in
  /// `body_buffer` (one byte more than the body) and read in place once complete.
  call_outcome chat(std::span<const chat_message> messages, request_options options, std::span<char> body_buffer,
                    delta_callback on_delta, const std::atomic<bool>* cancel = nullptr) noexcept {
    options.stream = false;
    auto body = write_chat_request(request_, config_.model, messages, options);
    if (!body) return refused(body.error());
    return send_once("/chat/completions", *body, body_buffer, on_delta, cancel);
  }

  /// POST {base}/completions without streaming (echo + logprobs scores the prompt).
  call_outcome completion(std::string_view prompt, request_options options, std::span<char> body_buffer,
                          delta_callback on_delta, bool echo = false,
                          const std::atomic<bool>* cancel = nullptr) noexcept {
    options.stream = false;
    auto body = write_completion_request(request_, config_.model, prompt, options, echo);
    if (!body) return refused(body.error());
    return send_once("/completions", *body, body_buffer, on_delta, cancel);
  }

  /// Sends a prepared streaming body to {base}{path}.
  call_outcome send_stream(std::string_view path, std::string_view body, delta_callback on_delta,
                           const std::atomic<bool>* cancel = nullptr) noexcept {
    call_outcome out;
    const auto start = clock_.now();
    stream_.reset();
    error_size_ = 0;
    failed_ = false;
    stopped_at_done_ = false;
    bool event_stream = true;
    auto count = [&](const choice_delta& d) {
      if (!out.time_to_first_token && (!d.text.empty() || !d.tokens.empty())) {
        first_token_ = clock_.now();
        out.time_to_first_token = std::chrono::duration_cast<std::chrono::nanoseconds>(first_token_ - start);
      }
      out.text_bytes += d.text.size();
      return on_delta(d);
    };
    auto on_head = [&](const http_response_head& head) {
      out.http_status = head.status;
      out.retry_after = head.retry_after;
      // A transport that reports no content type (a firmware HTTP stack) gets the benefit of the doubt.
      event_stream = head.content_type.empty() || head.content_type.substr(0, 17) == "text/event-stream";
      return true;
    };
    auto on_body = [&](std::string_view piece) {
      if (!success(out.http_status) || !event_stream) {
        keep_error_body(piece);
        return true;
      }
      if (auto r = stream_.feed(piece, count); !r) return fail(r.error());
      // [DONE] is the end, whether or not the server closes or ends the chunked body.
      if (stream_.done()) {
        stopped_at_done_ = true;
        return false;
      }
      return true;
    };
    auto sent = send(path, body, true, on_head, on_body, cancel);
    out.tokens = stream_.tokens();
    out.finish_reason.assign(stream_.finish_reason());
    out.usage = stream_.usage();
    out.status = conclude(out, sent, true);
    finish_timing(out, start);
    return out;
  }

  /// Sends a prepared non-streaming body to {base}{path}, reading the body in body_buffer.
  call_outcome send_once(std::string_view path, std::string_view body, std::span<char> body_buffer,
                         delta_callback on_delta, const std::atomic<bool>* cancel = nullptr) noexcept {
    if (body_buffer.empty()) return refused(error{errc::invalid_argument} << "an empty response body buffer");
    call_outcome out;
    const auto start = clock_.now();
    error_size_ = 0;
    failed_ = false;
    stopped_at_done_ = false;
    std::size_t size = 0;
    auto on_head = [&](const http_response_head& head) {
      out.http_status = head.status;
      out.retry_after = head.retry_after;
      return true;
    };
    auto on_body = [&](std::string_view piece) {
      if (!success(out.http_status)) {
        keep_error_body(piece);
        return true;
      }
      if (body_buffer.size() - size < piece.size() + 1)
        return fail(error{errc::capacity_exceeded} << "a response body larger than its " << body_buffer.size()
                                                   << "-byte buffer");
      for (char c : piece) body_buffer[size++] = c;
      return true;
    };
    auto sent = send(path, body, false, on_head, on_body, cancel);
    out.status = conclude(out, sent, false);
    if (out.status.ok()) {
      body_buffer[size] = '\0';
      if (observer_ != nullptr) (*observer_)(std::string_view(body_buffer.data(), size));  // before the in-place parse
      std::size_t tokens = 0;
      auto parsed = reader_.parse(body_buffer.data(), size, [&](const choice_delta& d) {
        if (!out.time_to_first_token && (!d.text.empty() || !d.tokens.empty())) {
          first_token_ = clock_.now();
          out.time_to_first_token = std::chrono::duration_cast<std::chrono::nanoseconds>(first_token_ - start);
        }
        out.text_bytes += d.text.size();
        tokens += !d.tokens.empty() ? d.tokens.size() : 0;
        if (!d.finish_reason.empty()) out.finish_reason.assign(d.finish_reason);
        return on_delta(d);
      });
      if (!parsed) {
        out.status = parsed.error();
      } else if (parsed->error.present) {
        out.status = server_error(errc::unavailable, out.http_status, parsed->error);
      } else {
        out.usage = parsed->usage;
        out.tokens = parsed->usage.completion_tokens >= 0 ? static_cast<std::size_t>(parsed->usage.completion_tokens)
                                                          : tokens;
      }
    }
    finish_timing(out, start);
    return out;
  }

 private:
  static bool success(int status) noexcept { return status >= 200 && status < 300; }

  call_outcome refused(const error& e) noexcept {
    call_outcome out;
    out.status = e;
    return out;
  }

  template <class Head, class Body>
  result<void> send(std::string_view path, std::string_view body, bool streaming, Head& on_head, Body& on_body,
                    const std::atomic<bool>* cancel) noexcept {
    if (key_too_long_) return error{errc::invalid_argument} << "the API key is longer than " << sizeof(auth_) - 7 << " bytes";
    if (config_.base_path.size() + path.size() > sizeof(path_))
      return error{errc::invalid_argument} << "the endpoint's base path is longer than " << sizeof(path_) - path.size()
                                           << " bytes";
    std::size_t n = 0;
    for (char c : config_.base_path) path_[n++] = c;
    if (n > 0 && path_[n - 1] == '/') --n;
    for (char c : path) path_[n++] = c;
    http_header headers[3] = {{"Content-Type", "application/json"},
                              {"Accept", streaming ? "text/event-stream" : "application/json"},
                              {"Authorization", {auth_, auth_size_}}};
    http_request request;
    request.method = "POST";
    request.path = {path_, n};
    request.headers = {headers, auth_size_ != 0 ? 3u : 2u};
    request.body = body;
    response_sink sink{on_head, on_body, cancel};
    return transport_.send(request, config_.limits, sink);
  }

  bool fail(const error& e) noexcept {
    if (!failed_) failed_ = true, failure_ = e;
    return false;  // cancels the transfer
  }

  void keep_error_body(std::string_view piece) noexcept {
    for (char c : piece) {
      if (error_size_ + 1 >= sizeof(error_body_)) return;
      error_body_[error_size_++] = c;
    }
  }

  // The call's status from the transport's result, the head and what the body held.
  result<void> conclude(call_outcome& out, const result<void>& sent, bool streaming) noexcept {
    if (failed_) return failure_;  // the client stopped the transfer itself
    if (out.http_status != 0 && !success(out.http_status)) return http_error(out.http_status);
    if (streaming && out.http_status != 0 && error_size_ != 0) {
      // A 2xx answer to a streamed request that was not an event stream.
      error_body_[error_size_] = '\0';
      auto parsed = reader_.parse(error_body_, error_size_, [](const choice_delta&) { return true; });
      if (parsed && parsed->error.present) return server_error(errc::unavailable, out.http_status, parsed->error);
      return error{errc::unsupported} << "HTTP " << out.http_status << " without text/event-stream to a streamed request";
    }
    if (!sent) {
      if (streaming && stream_.completed() && (sent.error().code() == errc::unavailable || stopped_at_done_))
        return ok();
      error e{sent.error().code()};
      if (sent.error().code() == errc::unavailable && streaming && out.http_status != 0)
        e << "stream cut after " << stream_.tokens() << " tokens: ";
      e << sent.error().message();
      if (sent.error().code() != errc::unavailable && streaming) e << " (after " << stream_.tokens() << " tokens)";
      return e;
    }
    if (streaming && !stream_.completed())
      return error{errc::unavailable} << "stream cut after " << stream_.tokens() << " tokens (no [DONE] or finish reason)";
    return ok();
  }

  error http_error(int status) noexcept {
    errc code = errc::unavailable;
    if (status == 400 || status == 404 || status == 413 || status == 422) code = errc::invalid_argument;
    else if (status == 401 || status == 403) code = errc::rejected;
    else if (status == 408 || status == 504) code = errc::timeout;
    error_body_[error_size_] = '\0';
    auto parsed = reader_.parse(error_body_, error_size_, [](const choice_delta&) { return true; });
    if (parsed && parsed->error.present) return server_error(code, status, parsed->error);
    error e{code};
    e << "HTTP " << status;
    if (error_size_ != 0) {
      // Not an error body we know (an HTML page from a proxy, a cut body): its first bytes.
      e << ": ";
      for (std::size_t i = 0; i < error_size_ && i < 120; ++i) {
        const char c = error_body_[i];
        e << (c >= 0x20 && c < 0x7f ? c : ' ');
      }
    }
    return e;
  }

  static error server_error(errc code, int status, const error_body& body) noexcept {
    error e{code};
    e << "HTTP " << status;
    const auto append = [&e](std::string_view piece) { e << piece; };
    if (!body.type.empty()) {
      e << " ";
      escape_control(body.type, false, append);
    }
    e << ": ";
    escape_control(body.message.empty() ? std::string_view("no message") : body.message, false, append);
    return e;
  }

  void finish_timing(call_outcome& out, typename C::time_point start) noexcept {
    const auto end = clock_.now();
    out.duration = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start);
    if (out.time_to_first_token && out.tokens > 1) {
      const auto decode = std::chrono::duration<double>(end - first_token_).count();
      if (decode > 0) out.tokens_per_second = static_cast<double>(out.tokens - 1) / decode;
    }
  }

  T& transport_;
  endpoint config_;
  C clock_;
  typename C::time_point first_token_{};
  char auth_[1024] = {};
  std::size_t auth_size_ = 0;
  bool key_too_long_ = false;
  char path_[256] = {};
  char request_[Sizes.request];
  char error_body_[Sizes.error_body];
  std::size_t error_size_ = 0;
  bool failed_ = false;
  bool stopped_at_done_ = false;  ///< the transfer was stopped by the client at [DONE]
  error failure_{};
  completion_stream<Sizes.event, Sizes.tokens> stream_;
  response_reader<Sizes.tokens> reader_;
  const function_ref<void(std::string_view)>* observer_ = nullptr;
};

}  // namespace hedge::cloud
