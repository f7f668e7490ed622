// hedge/route/request.hpp: what the router sees about one request and about
// the tiers at the moment it decides.
//
// A request is described by the caller (prompt view, data-class tags, SLO,
// cost cap, expected output length). The context is the engine's live view of
// the tiers (measured speeds as EWMAs, cloud health, budget, edge KV space).
// Both are plain values: the router reads them and never keeps a reference.
#pragma once

#include <cstdint>
#include <string_view>

namespace hedge::route {

/// Which tier answers a request.
enum class tier : std::uint8_t { edge, cloud, reject };

constexpr std::string_view to_string(tier t) noexcept {
  switch (t) {
    case tier::edge: return "edge";
    case tier::cloud: return "cloud";
    case tier::reject: return "reject";
  }
  return "unknown";
}

/// Caller-set data-class tags, a bit set. Classes the privacy policy is told to
/// keep on the device (by default: personal, regulated, contractual) never leave it.
enum class data_class : std::uint32_t {
  none = 0,
  public_data = 1u << 0,
  internal = 1u << 1,
  contractual = 1u << 2,
  regulated = 1u << 3,  ///< e.g. health or financial records under a regulation
  personal = 1u << 4,   ///< the caller already knows the prompt holds personal data
};
constexpr data_class operator|(data_class a, data_class b) noexcept {
  return static_cast<data_class>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}
constexpr data_class operator&(data_class a, data_class b) noexcept {
  return static_cast<data_class>(static_cast<std::uint32_t>(a) & static_cast<std::uint32_t>(b));
}
constexpr bool any(data_class c) noexcept { return c != data_class::none; }

/// One request as the caller describes it. `prompt` is a view: the caller keeps
/// the text alive for the duration of the routing call.
struct route_request {
  std::string_view prompt;
  data_class classes = data_class::none;
  /// Time-to-first-token objective in milliseconds; 0 means no SLO.
  double ttft_slo_ms = 0.0;
  /// Most the caller will pay for this request (same unit as the cost policy's prices); 0 means no cap.
  double max_cost = 0.0;
  std::uint32_t expected_output_tokens = 256;
  /// Prompt length in tokens if the caller tokenized it; 0 means estimate from bytes.
  std::uint32_t prompt_tokens = 0;
};

/// Prompt tokens: the caller's count, or ~4 bytes per token (the usual ratio of
/// BPE tokenizers on English text) when the prompt was not tokenized.
constexpr std::uint32_t prompt_token_estimate(const route_request& r) noexcept {
  if (r.prompt_tokens != 0) return r.prompt_tokens;
  return static_cast<std::uint32_t>((r.prompt.size() + 3) / 4);
}

/// Exponentially weighted moving average: the context's speed figures are
/// smoothed this way so one slow response does not flip every decision.
struct ewma {
  double value = 0.0;
  double alpha = 0.2;  ///< weight of the newest sample
  bool primed = false;

  constexpr void update(double sample) noexcept {
    value = primed ? alpha * sample + (1.0 - alpha) * value : sample;
    primed = true;
  }
};

/// Circuit-breaker state of the cloud endpoint.
enum class circuit : std::uint8_t { closed, half_open, open };

/// Live state of both tiers when the router decides.
struct route_context {
  // Edge tier, measured.
  ewma edge_prefill_tokens_per_s{200.0, 0.2, true};
  ewma edge_decode_tokens_per_s{20.0, 0.2, true};
  std::uint32_t edge_context_tokens = 4096;  ///< the edge model's context window
  std::uint32_t edge_kv_free_tokens = 4096;  ///< free KV cache slots now
  // Cloud tier, measured.
  ewma cloud_rtt_ms{150.0, 0.2, true};
  ewma cloud_prefill_tokens_per_s{5000.0, 0.2, true};
  ewma cloud_decode_tokens_per_s{80.0, 0.2, true};
  circuit cloud_circuit = circuit::closed;
  /// Fraction of the cloud rate limit still available in the current window, in [0, 1].
  double cloud_rate_headroom = 1.0;
  /// Money left for cloud calls (same unit as prices); negative means unlimited.
  double budget_remaining = -1.0;
  bool offline = false;
};

}  // namespace hedge::route
