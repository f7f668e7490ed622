// hedge/engine/backend.hpp: what the engine needs of its tiers (EdgeBackend, CloudBackend).
//
// The edge is pushed: generate() runs the model and hands each token to a callback that may
// stop it (the engine stops it to escalate, or when the cloud won a race). The edge must be
// able to continue after given text: a hand-off from the cloud gives it the text already
// delivered, and it continues from exactly those bytes (hedge's edge_tier tokenizes them
// after the prompt; the first token it generates follows them).
//
// The cloud is polled: begin() starts a call, poll() hands over what has arrived (waiting at
// most `max_wait`) and says whether the call is still running, finished or failed, and
// cancel() abandons it. A backend whose calls run concurrently with the engine (a thread,
// an event loop) says `concurrent = true` and can race the edge; a blocking one (hedge's
// cloud_tier over a blocking Transport) runs its whole call inside one poll() and is never
// raced. The continuation text of a hand-off is given redacted; the backend chooses how its
// endpoint continues it (a completion, an assistant prefill, or a restart with the overlap
// trimmed), and reports which.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>

#include "hedge/cloud/request.hpp"
#include "hedge/cloud/transport.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"
#include "hedge/engine/request.hpp"

namespace hedge::engine {

/// One generation at the edge.
struct edge_call {
  std::span<const cloud::chat_message> messages;  ///< or, when empty, `prompt`
  std::string_view prompt;
  std::string_view continuation;  ///< text already delivered that the answer continues
  sampling_options sampling{};
  std::uint32_t max_tokens = 256;  ///< tokens to generate after the continuation
};

/// One token from the edge, as the engine and the verifier see it.
struct edge_token {
  std::string_view text;  ///< the text it completes (may be empty: part of a character)
  std::int32_t id = -1;
  float logprob = 0.0f;
  float entropy = 0.0f;
};

struct edge_summary {
  std::size_t prompt_tokens = 0;  ///< tokens prefilled (continuation included)
  std::size_t generated = 0;
  bool length_limited = false;    ///< stopped at max_tokens, not at a natural end
};

/// An edge tier. `ready()` is false when no model is loaded; `context_tokens()` and
/// `free_tokens()` feed the router's context-fit policy.
template <class E>
concept EdgeBackend = requires(E& e, const E& ce, const edge_call& call, function_ref<bool(const edge_token&)> on_token) {
  { ce.ready() } -> std::convertible_to<bool>;
  { ce.context_tokens() } -> std::convertible_to<std::uint32_t>;
  { e.generate(call, on_token) } -> std::same_as<result<edge_summary>>;
};

/// How a cloud endpoint continues delivered text.
enum class continuation_style : std::uint8_t {
  completion,         ///< POST /completions with the rendered prompt + the text
  assistant_prefill,  ///< chat with the text as a last, open assistant message
  restart_trim,       ///< ask again; drop what repeats the delivered text
};

/// One call at a cloud endpoint.
struct cloud_call {
  std::span<const cloud::chat_message> messages;  ///< redacted; or, when empty, `prompt`
  std::string_view prompt;
  std::string_view continuation;  ///< redacted delivered text to continue, or empty
  std::string_view extra;         ///< redacted JSON object whose members the request carries too
  sampling_options sampling{};
  std::uint32_t max_tokens = 256;
  cloud::transport_limits limits{};  ///< cut to the request's deadline and TTFT objective
};

struct cloud_piece {
  std::string_view text;
  float logprob = std::numeric_limits<float>::quiet_NaN();
  std::uint32_t tokens = 1;  ///< tokens this piece carries
};

enum class cloud_state : std::uint8_t { running, finished, failed };

struct cloud_poll {
  cloud_state state = cloud_state::running;
  result<void> status;  ///< the error, when failed
  int http_status = 0;
  std::optional<std::chrono::seconds> retry_after;
  std::string_view finish_reason;
  std::int64_t prompt_tokens = -1, completion_tokens = -1;  ///< the endpoint's usage, when it sent one
};

template <class C>
concept CloudBackend = requires(C& c, const cloud_call& call, function_ref<bool(const cloud_piece&)> on_piece,
                                std::chrono::milliseconds wait) {
  { C::concurrent } -> std::convertible_to<bool>;
  { c.begin(call) } -> std::same_as<result<void>>;
  { c.poll(on_piece, wait) } -> std::same_as<cloud_poll>;
  { c.cancel() };
};

}  // namespace hedge::engine
