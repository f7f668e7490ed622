// hedge/engine/events.hpp: what the caller's callback sees while a request runs, and the
// outcome it gets at the end.
//
// Events arrive in order on the calling thread: tokens (text the caller may show: it is
// never withdrawn), hand-offs between tiers (which token the receiving tier continues
// after, and why), retries and fallbacks. Token texts are views valid during the callback.
// The outcome says how the request was decided and served: the route and its reason,
// which tier produced which bytes of the text, the verifier's verdict, and per tier the
// tokens, cost, time to first token and total time.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "hedge/core/result.hpp"
#include "hedge/engine/circuit_breaker.hpp"
#include "hedge/engine/request.hpp"
#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"
#include "hedge/verify/verifier.hpp"

namespace hedge::engine {

/// The most cloud endpoints one engine falls back through, in order.
inline constexpr std::size_t max_clouds = 4;

/// A tier: the edge, or one of the cloud endpoints.
struct tier_id {
  route::tier kind = route::tier::edge;
  std::uint8_t cloud = 0;  ///< which cloud endpoint, for kind == cloud

  static constexpr tier_id edge() noexcept { return {route::tier::edge, 0}; }
  static constexpr tier_id cloud_at(std::size_t i) noexcept { return {route::tier::cloud, static_cast<std::uint8_t>(i)}; }
  /// 0 for the edge, 1 + i for cloud i: the index of per-tier tables.
  [[nodiscard]] constexpr std::size_t slot() const noexcept { return kind == route::tier::cloud ? 1u + cloud : 0u; }
  constexpr bool operator==(const tier_id&) const noexcept = default;
};
inline constexpr std::size_t tier_slots = 1 + max_clouds;

enum class handoff_reason : std::uint8_t {
  escalated,          ///< the verifier was not confident in the edge's answer
  edge_failed,        ///< the edge stopped with an error (context or KV full, a fault)
  cloud_failed,       ///< the cloud failed mid-answer; the next tier continues
  race_won,           ///< the other tier's first token came first
};

constexpr std::string_view to_string(handoff_reason r) noexcept {
  switch (r) {
    case handoff_reason::escalated: return "escalated";
    case handoff_reason::edge_failed: return "edge_failed";
    case handoff_reason::cloud_failed: return "cloud_failed";
    case handoff_reason::race_won: return "race_won";
  }
  return "unknown";
}

/// `routed` comes first, once the mode is known (a gateway sends its response head then).
enum class event_kind : std::uint8_t { routed, token, handoff, retry, fallback, breaker };

struct engine_event {
  event_kind kind = event_kind::token;
  tier_id tier{};              ///< token: who produced it; handoff/fallback: to whom; retry/breaker: which
  tier_id from{};              ///< handoff/fallback: from whom
  std::string_view text;       ///< token: the text delivered
  std::int32_t token = -1;     ///< token: the edge's token id (-1 for cloud text)
  float logprob = std::numeric_limits<float>::quiet_NaN();  ///< token: when the tier reported it
  std::size_t at_token = 0;    ///< tokens delivered before this event
  std::size_t at_byte = 0;     ///< bytes delivered before this event
  handoff_reason why = handoff_reason::escalated;  ///< handoff
  errc failure = errc::ok;     ///< retry / fallback: the error that caused it
  std::uint32_t attempt = 0;   ///< retry: the attempt about to be made (2, 3, ...)
  std::chrono::milliseconds delay{0};  ///< retry: the back-off before it
  breaker_transition transition = breaker_transition::none;  ///< breaker
  mode ran = mode::automatic;                    ///< routed: the mode chosen
  route::reason route_reason = route::reason::none;  ///< routed: the router's reason
};

/// Bytes [begin, end) of the delivered text came from `tier`.
struct text_span {
  tier_id tier{};
  std::size_t begin = 0, end = 0;
};

struct tier_report {
  bool used = false;             ///< the tier was called (a cancelled race loser too)
  std::uint32_t attempts = 0;
  std::uint64_t input_tokens = 0, output_tokens = 0;  ///< billed: sent and generated
  std::uint64_t delivered_tokens = 0;                 ///< of which reached the caller
  double cost = 0.0;
  std::optional<std::chrono::nanoseconds> time_to_first_token;  ///< from the request's start
  std::chrono::nanoseconds busy{0};  ///< time spent in this tier's calls
};

/// What a speculative run did (speculative.hpp's figures, summed over its clouds).
struct speculation_report {
  bool unsupported = false;     ///< no cloud could score: it generated plainly
  std::size_t rounds = 0, drafted = 0, accepted = 0;
  std::size_t cloud_tokens = 0;  ///< tokens the target chose itself (one per round)
  std::size_t scored = 0;        ///< positions scored (the context is sent again each round)
  std::size_t approximated = 0;  ///< rounds whose accept rule used a partial distribution
  std::size_t draft_length = 0;  ///< k after the run
  [[nodiscard]] double acceptance() const noexcept {
    return drafted ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
};

struct engine_outcome {
  static constexpr std::size_t max_spans = 8;

  result<void> status;                 ///< ok, or why the request could not be answered
  mode requested = mode::automatic;
  mode ran = mode::automatic;          ///< the mode chosen (by the router, or the caller)
  route::tier routed = route::tier::edge;
  route::reason route_reason = route::reason::none;
  std::array<char, 320> route_explanation{};  ///< route::explain's line (NUL-terminated)

  std::array<text_span, max_spans> spans{};
  std::size_t span_count = 0;
  std::size_t text_bytes = 0, tokens = 0;

  bool verified = false;               ///< the verifier judged an edge answer
  verify::verify_verdict verdict{};
  bool escalated = false, fell_back = false;
  std::uint32_t handoffs = 0, retries = 0;
  std::optional<std::size_t> handoff_at_token;  ///< the first hand-off's token index
  std::size_t redactions = 0;          ///< spans replaced by placeholders before sending
  std::size_t model_pii = 0;           ///< PII the cloud produced itself (reported, not masked)
  bool summarized = false;             ///< the cloud got an edge summary of earlier turns
  speculation_report speculation{};    ///< mode speculative

  std::array<tier_report, tier_slots> tiers{};
  double cost = 0.0;
  std::optional<std::chrono::nanoseconds> time_to_first_token;
  std::chrono::nanoseconds total{0};
  std::string_view finish_reason = "stop";  ///< "stop", "length", or "error"

  [[nodiscard]] bool ok() const noexcept { return status.ok(); }
  [[nodiscard]] std::string_view explanation() const noexcept {
    std::size_t n = 0;
    while (n < route_explanation.size() && route_explanation[n] != '\0') ++n;
    return {route_explanation.data(), n};
  }
  [[nodiscard]] const tier_report& report(tier_id t) const noexcept { return tiers[t.slot()]; }
};

}  // namespace hedge::engine
