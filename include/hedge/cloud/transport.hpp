// hedge/cloud/transport.hpp: the concept a cloud client sends its HTTP requests through.
//
// The client (cloud/client.hpp) knows OpenAI's JSON and SSE; a Transport knows how bytes reach a
// server. Keeping the two apart lets a firmware integrator plug in their own HTTP stack, lets
// tests plug in a recording or fault-injecting fake, and keeps sockets out of the portable
// layers (the default transport, os/http_transport.hpp, sits on libcurl).
//
// The contract, for a type T modelling Transport:
//   t.send(request, limits, sink) -> result<void>
//   - sends `request` (method, path below the endpoint's base URL, headers, body) and calls
//     sink.on_head once with the status line's code and the headers the client reads, then
//     sink.on_body with each piece of the body as it arrives (any split: an SSE event may span
//     pieces), and returns when the body ended, failed or was cancelled;
//   - honours every limit in `limits` (connect, first byte, gap between pieces, total) and
//     returns errc::timeout naming which one passed;
//   - stops within one gap of `cancel` becoming true, or of a sink call returning false, and
//     returns errc::rejected ("cancelled") then;
//   - a connection that closes before the body's declared end (or, chunked, before its last
//     chunk) is errc::unavailable with a message that says the stream was cut, after every
//     byte received was passed to on_body;
//   - never throws, and never writes a header whose name is "authorization" to a log.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <optional>
#include <span>
#include <string_view>

#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"

namespace hedge::cloud {

struct http_header {
  std::string_view name;
  std::string_view value;
};

/// One HTTP request. Every view must stay valid until send() returns.
struct http_request {
  std::string_view method = "POST";
  std::string_view path;  ///< below the endpoint's base URL, e.g. "/chat/completions"
  std::span<const http_header> headers;
  std::string_view body;
};

/// Time limits of one request. Zero means no limit for that phase.
struct transport_limits {
  std::chrono::milliseconds connect{10'000};        ///< until the connection (TLS included) is up
  std::chrono::milliseconds first_byte{120'000};    ///< from sending the request to the first body byte
  std::chrono::milliseconds between_chunks{30'000}; ///< the longest silence while the body streams
  std::chrono::milliseconds total{600'000};         ///< the whole request: the deadline
};

/// What the client needs of the response head.
struct http_response_head {
  int status = 0;
  std::string_view content_type;                     ///< "text/event-stream" for SSE
  std::optional<std::chrono::seconds> retry_after;   ///< from a 429 or 503's Retry-After (delta-seconds)
};

/// Where a transport delivers the response. A callback returning false cancels the request.
struct response_sink {
  function_ref<bool(const http_response_head&)> on_head;
  function_ref<bool(std::string_view)> on_body;
  const std::atomic<bool>* cancel = nullptr;  ///< polled by the transport; may be set from any thread
};

template <class T>
concept Transport = requires(T& transport, const http_request& request, const transport_limits& limits,
                             response_sink sink) {
  { transport.send(request, limits, sink) } -> std::same_as<result<void>>;
};

}  // namespace hedge::cloud
