// hedge/verify/verifier.hpp: the Verifier concept.
//
// A verifier watches the edge model's generation token by token (token id, log-prob of
// the chosen token, entropy of the distribution it was sampled from) and decides whether
// the answer is good enough or must be escalated to the cloud, with a confidence and a
// reason. It may escalate early, before the generation ends, to save edge time.
// Streaming: a verifier keeps running statistics, never the sequence.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

namespace hedge::verify {

/// One generated token as the edge model reports it.
struct token_observation {
  std::int32_t token = 0;
  float logprob = 0.0f;  ///< natural log of the chosen token's probability
  float entropy = 0.0f;  ///< entropy (nats) of the next-token distribution
};

enum class verify_action : std::uint8_t {
  keep_going,  ///< observe more tokens (only from observe)
  accept,      ///< the edge answer stands (only from finish)
  escalate,    ///< send the request to the cloud
};

enum class verify_reason : std::uint8_t {
  none,
  confident,              ///< the deferral rule's failure probability is at or below threshold
  low_confidence,         ///< the failure probability is above the threshold
  early_low_confidence,   ///< the running failure probability crossed the early-exit bound
  very_unlikely_token,    ///< a token's log-prob fell below the hard floor
  empty_generation,       ///< nothing was generated
};

constexpr std::string_view to_string(verify_reason r) noexcept {
  switch (r) {
    case verify_reason::none: return "none";
    case verify_reason::confident: return "confident";
    case verify_reason::low_confidence: return "low_confidence";
    case verify_reason::early_low_confidence: return "early_low_confidence";
    case verify_reason::very_unlikely_token: return "very_unlikely_token";
    case verify_reason::empty_generation: return "empty_generation";
  }
  return "unknown";
}

struct verify_verdict {
  verify_action action = verify_action::keep_going;
  double confidence = 0.0;  ///< estimated probability that the edge answer is good
  verify_reason why = verify_reason::none;
};

/// A verifier: `begin(prompt)` starts a generation, `observe(token)` returns keep_going or
/// escalate (early exit), `finish()` returns accept or escalate. All noexcept, no allocation.
template <class V>
concept Verifier = requires(V& v, const V& cv, std::string_view prompt, const token_observation& t) {
  { v.begin(prompt) } noexcept;
  { v.observe(t) } noexcept -> std::same_as<verify_verdict>;
  { cv.finish() } noexcept -> std::same_as<verify_verdict>;
};

/// Runs a verifier over a whole generation; stops at an early escalation.
/// \tparam V a Verifier
template <Verifier V>
verify_verdict verify_generation(V& verifier, std::string_view prompt, std::span<const token_observation> tokens) noexcept {
  verifier.begin(prompt);
  for (const auto& t : tokens)
    if (auto v = verifier.observe(t); v.action == verify_action::escalate) return v;
  return verifier.finish();
}

}  // namespace hedge::verify
