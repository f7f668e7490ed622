// hedge/engine/request.hpp: one request to the hybrid engine.
//
// A request is the conversation (chat messages) or a raw prompt, the routing fields the
// router reads (data classes, time-to-first-token SLO, cost cap), a deadline shared by
// every attempt at every tier, how edge text is delivered (the commit buffer), and the
// sampling options. Every view must stay valid until the engine's run() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>

#include "hedge/cloud/request.hpp"
#include "hedge/route/request.hpp"

namespace hedge::engine {

/// How the tiers serve a request. `automatic` lets the router choose (hybrid_engine.hpp
/// states the mapping); the others are the caller's choice.
enum class mode : std::uint8_t {
  automatic,
  edge_only,    ///< the edge answers; nothing goes to the cloud
  cloud_only,   ///< the cloud answers; no edge fallback
  cloud_first,  ///< the cloud answers; the edge takes over when every cloud fails
  edge_first,   ///< the edge answers, verified; on escalation the cloud continues
  race,         ///< both start; the first accepted token wins, the other is cancelled
  speculative,  ///< the edge drafts, the cloud scores; the text is the cloud model's (speculative.hpp)
};

constexpr std::string_view to_string(mode m) noexcept {
  switch (m) {
    case mode::automatic: return "auto";
    case mode::edge_only: return "edge_only";
    case mode::cloud_only: return "cloud_only";
    case mode::cloud_first: return "cloud_first";
    case mode::edge_first: return "edge_first";
    case mode::race: return "race";
    case mode::speculative: return "speculative";
  }
  return "unknown";
}

/// The commit buffer: edge tokens are held until the verifier could still escalate them
/// invisibly. A token is released once more than `hold_tokens` are held after it, or once
/// it has been held `hold_time` (0: no time limit); at the end of an accepted answer all are
/// released. `immediate` is K = 0: the caller sees each token at once and an escalation
/// continues after it. `verified` holds everything: an escalation is invisible, and the
/// cloud answers whole.
struct delivery {
  std::uint32_t hold_tokens = 0;
  std::chrono::milliseconds hold_time{0};

  static constexpr delivery immediate() noexcept { return {0, std::chrono::milliseconds{0}}; }
  static constexpr delivery verified() noexcept {
    return {std::numeric_limits<std::uint32_t>::max(), std::chrono::milliseconds{0}};
  }
  static constexpr delivery buffer(std::uint32_t tokens, std::chrono::milliseconds time = {}) noexcept {
    return {tokens, time};
  }
  [[nodiscard]] constexpr bool holds_everything() const noexcept {
    return hold_tokens == std::numeric_limits<std::uint32_t>::max() && hold_time.count() == 0;
  }
};

/// Sampling, the same for every tier (mapped to model:: and cloud:: options).
struct sampling_options {
  std::uint32_t max_tokens = 256;
  std::optional<double> temperature;  ///< unset: the tier's default; 0: greedy
  std::optional<double> top_p;
  std::optional<std::int64_t> seed;
  std::span<const std::string_view> stop;
};

struct engine_request {
  /// The conversation; when empty, `prompt` is the whole input (completion style).
  std::span<const cloud::chat_message> messages;
  std::string_view prompt;
  /// A JSON object whose members go with every cloud call as they are (fields a gateway does
  /// not read, never dropped), redacted as the messages are; empty: none.
  std::string_view extra;
  route::data_class classes = route::data_class::none;
  double ttft_slo_ms = 0.0;  ///< 0: no time-to-first-token objective
  double max_cost = 0.0;     ///< 0: no cap; every attempt at every tier counts against it
  /// The whole request, every attempt included; 0: the engine's default.
  std::chrono::milliseconds deadline{0};
  mode requested = mode::automatic;
  bool fallback = true;  ///< may the other tier take over when the chosen one fails
  delivery hold = delivery::immediate();
  sampling_options sampling{};
  /// Send the cloud an edge-written summary of the earlier turns instead of the turns
  /// ("context summarization at the routing boundary"); the last message goes as it is.
  bool summarize_history = false;
  std::uint32_t expected_output_tokens = 0;  ///< for the router; 0: sampling.max_tokens
  /// Set from any thread to stop the request (its client left): every tier stops at its next
  /// token, and the outcome is errc::rejected "cancelled" with the text delivered before.
  const std::atomic<bool>* cancel = nullptr;
};

}  // namespace hedge::engine
