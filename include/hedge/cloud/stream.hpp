// hedge/cloud/stream.hpp: a streamed completion, from body bytes to choice deltas.
//
// OpenAI streams a completion as SSE events whose data is one JSON chunk each, ended by
// an event whose data is `[DONE]` (API reference, "Streaming"). completion_stream joins
// sse.hpp and response.hpp: it feeds body pieces through the SSE reader, parses each
// event's chunk in place in the event buffer and hands every choice delta to a callback,
// keeping what a caller needs after the stream: whether it completed, the last finish
// reason, usage, and how many tokens arrived. Nothing here allocates: the event buffer and
// the token arrays are members (EventBytes + TokenCapacity * sizeof(token_logprob)).
//
// A streamed error is an event whose data holds an error body (vLLM, OpenAI and TGI send
// `data: {"error": ...}`; some servers name the event "error"): it ends the stream with
// errc::unavailable and the server's message. A server that ends its stream without
// `[DONE]` but after a finish reason (llama.cpp's native /completion, whose last chunk says
// "stop": true) completed it too; anything else is a cut stream (see completed()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "hedge/cloud/response.hpp"
#include "hedge/cloud/sse.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"

namespace hedge::cloud {

/// A short string copied out of an event buffer (finish reasons, error types).
template <std::size_t N>
struct short_text {
  char data[N] = {};
  std::uint8_t size = 0;
  void assign(std::string_view s) noexcept {
    size = static_cast<std::uint8_t>(s.size() < N ? s.size() : N);
    for (std::size_t i = 0; i < size; ++i) data[i] = s[i];
  }
  [[nodiscard]] std::string_view view() const noexcept { return {data, size}; }
};

template <std::size_t EventBytes = 64 * 1024, std::size_t TokenCapacity = 16>
class completion_stream {
 public:
  completion_stream() noexcept : sse_(std::span<char>(buffer_, EventBytes)) {}
  completion_stream(const completion_stream&) = delete;
  completion_stream& operator=(const completion_stream&) = delete;

  /// Reads the next piece of the body; on_delta(const choice_delta&) -> bool gets every
  /// choice delta (false cancels: errc::rejected). Bytes after `[DONE]` are ignored.
  template <class F>
  result<void> feed(std::string_view bytes, F&& on_delta) noexcept {
    if (failed_) return failure_;
    if (done_) return ok();
    auto r = sse_.feed(bytes, [&](sse_event& e) { return on_event(e, on_delta); });
    if (!r) return remember(r.error());
    if (failed_) return failure_;
    return ok();
  }

  /// True when the stream ended as a complete stream does: `[DONE]`, or a finish reason.
  [[nodiscard]] bool completed() const noexcept { return done_ || !finish_reason_.view().empty(); }
  [[nodiscard]] bool done() const noexcept { return done_; }
  [[nodiscard]] std::string_view finish_reason() const noexcept { return finish_reason_.view(); }
  [[nodiscard]] const token_usage& usage() const noexcept { return usage_; }
  /// Tokens received: a chunk's log-prob entries when it has them, else one per non-empty
  /// text piece (servers send one token per chunk unless they fall behind).
  [[nodiscard]] std::size_t tokens() const noexcept { return tokens_; }
  [[nodiscard]] std::size_t events() const noexcept { return events_; }

  /// Sees every event's data before it is parsed: fields a reader does not know (a gateway's
  /// `hedge` object, a server's own extensions). Null: none.
  void observe_events(const function_ref<void(std::string_view)>* observer) noexcept { observer_ = observer; }

  void reset() noexcept {
    sse_.reset();
    done_ = failed_ = false;
    finish_reason_ = {};
    usage_ = {};
    tokens_ = events_ = 0;
  }

 private:
  template <class F>
  bool on_event(sse_event& e, F& on_delta) noexcept {
    if (e.text() == "[DONE]") {
      done_ = true;
      return false;
    }
    ++events_;
    if (observer_ != nullptr) (*observer_)(e.text());  // before the in-place parse changes the bytes
    auto r = reader_.parse(e.data, e.size, [&](const choice_delta& d) {
      if (!d.finish_reason.empty()) finish_reason_.assign(d.finish_reason);
      tokens_ += !d.tokens.empty() ? d.tokens.size() : (d.text.empty() ? 0u : 1u);
      return on_delta(d);
    });
    if (!r) {
      remember(r.error());
      return false;
    }
    if (r->error.present || e.type == "error") {
      error err{errc::unavailable};
      err << "the server sent an error";
      if (!r->error.type.empty()) err << " (" << r->error.type << ")";
      err << ": " << (r->error.message.empty() ? std::string_view("no message") : r->error.message);
      remember(err);
      return false;
    }
    if (r->usage.present()) usage_ = r->usage;
    return true;
  }

  error remember(const error& e) noexcept {
    if (!failed_) failed_ = true, failure_ = e;
    return failure_;
  }

  char buffer_[EventBytes];
  sse_reader sse_;
  response_reader<TokenCapacity> reader_;
  bool done_ = false;
  bool failed_ = false;
  error failure_{};
  short_text<24> finish_reason_;
  token_usage usage_;
  std::size_t tokens_ = 0;
  std::size_t events_ = 0;
  const function_ref<void(std::string_view)>* observer_ = nullptr;
};

}  // namespace hedge::cloud
