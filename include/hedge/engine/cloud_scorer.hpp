// hedge/engine/cloud_scorer.hpp: a Scorer (speculative.hpp) over cloud::cloud_client: one
// POST /completions per round scores a context and a draft and draws the target's next token.
//
// The request (OpenAI's legacy completions, as vLLM and hedge-server serve it):
//   {"prompt": [ids...], "echo": true, "logprobs": N, "max_tokens": 1,
//    "temperature": T, "seed": S, "return_tokens_as_token_ids": true}
// The prompt is token ids (the tiers share a vocabulary: the draft is the edge model's ids);
// echo returns each prompt token's log-prob and top alternatives given the ones before it,
// and max_tokens 1 the target's own next token after the draft, so one round trip yields at
// least one token. return_tokens_as_token_ids (vLLM's field) names every token "token_id:N",
// so no id is guessed back from text. An endpoint that ignores it, or answers with another
// number of positions, is an error naming what came back: the engine's failure semantics
// take over (speculation is dropped for plain cloud generation, or the edge continues).
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/cloud/client.hpp"
#include "hedge/cloud/json_writer.hpp"
#include "hedge/engine/speculative.hpp"

namespace hedge::engine {

/// "token_id:N" -> N; -1 for anything else.
[[nodiscard]] inline std::int32_t token_id_of(std::string_view name) noexcept {
  constexpr std::string_view prefix = "token_id:";
  if (name.substr(0, prefix.size()) != prefix) return -1;
  name.remove_prefix(prefix.size());
  std::int32_t id = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), id);
  return ec == std::errc{} && end == name.data() + name.size() && id >= 0 ? id : -1;
}

/// \tparam Client a cloud::cloud_client whose client_buffers::tokens holds a whole echo
///                (context + draft + 1 token log-probs)
template <class Client>
class cloud_scorer {
 public:
  /// `context_tokens`: the longest context + draft + 1 it scores (its buffers; the client's
  /// client_buffers::tokens must hold as many). A longer one is `unsupported`: the engine
  /// then generates plainly at this tier.
  cloud_scorer(Client& client, std::size_t context_tokens, std::string_view extra = {})
      : client_(client), extra_(extra), max_positions_(context_tokens) {
    request_.resize(1024 + context_tokens * 12);
    response_.resize(4096 + context_tokens * (cloud::max_top_logprobs * 32 + 96));
    rows_.reserve(context_tokens + 1);
    tops_.reserve(context_tokens + 1);
  }

  /// As a callable: what cloud_tier::set_scorer holds (a scorer_ref).
  result<std::span<const position_score>> operator()(const score_call& call) { return score(call); }

  result<std::span<const position_score>> score(const score_call& call) {
    if (call.context.empty()) return error{errc::invalid_argument} << "cloud_scorer: an empty context";
    if (call.context.size() + call.draft.size() + 1 > max_positions_)
      return error{errc::unsupported} << "cloud_scorer: " << call.context.size() + call.draft.size() + 1
                                      << " positions, more than the " << max_positions_ << " it holds";
    cloud::json_writer w(request_);
    w.begin_object();
    w.key("prompt").begin_array();
    for (const std::int32_t id : call.context) w.integer(id);
    for (const std::int32_t id : call.draft) w.integer(id);
    w.end_array();
    w.key("echo").boolean(true);
    w.key("logprobs").integer(static_cast<std::int64_t>(std::min<std::size_t>(std::max<std::size_t>(call.alternatives, 1),
                                                                                cloud::max_top_logprobs)));
    w.key("max_tokens").integer(1);
    w.key("temperature").number(call.temperature);
    w.key("seed").integer(static_cast<std::int64_t>(call.seed >> 1));
    w.key("return_tokens_as_token_ids").boolean(true);
    cloud::detail::write_extra(w, extra_);
    w.end_object();
    auto body = w.finish();
    if (!body) return body.error();
    const std::size_t first = call.context.size(), k = call.draft.size();
    rows_.assign(k + 1, {});
    tops_.assign(k + 1, {});
    std::size_t position = 0, filled = 0;
    result<void> bad = ok();
    auto on_delta = [&](const cloud::choice_delta& d) {
      for (const cloud::token_logprob& t : d.tokens) {
        const std::size_t at = position++;
        if (at < first) continue;
        const std::size_t row = at - first;
        if (row > k) {
          bad = error{errc::parse_error} << "the scoring endpoint returned more than " << first + k + 1 << " tokens";
          return false;
        }
        const std::int32_t id = token_id_of(t.token);
        if (id < 0) {
          bad = error{errc::parse_error} << "the scoring endpoint named a token '" << t.token
                                         << "', not token_id:N (return_tokens_as_token_ids unsupported?)";
          return false;
        }
        auto& top = tops_[row];
        std::size_t n = 0;
        for (const cloud::top_logprob& a : t.top_logprobs()) {
          const std::int32_t alt = token_id_of(a.token);
          if (alt < 0) continue;
          top[n++] = {alt, static_cast<float>(a.logprob)};
        }
        // Best first, as the Scorer contract says, whatever order the object's keys came in.
        std::stable_sort(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(n),
                         [](const model::id_logprob& a, const model::id_logprob& b) { return a.logprob > b.logprob; });
        rows_[row] = {id, static_cast<float>(t.logprob), {top.data(), n}};
        ++filled;
      }
      return true;
    };
    const auto outcome = client_.send_once("/completions", *body, response_, on_delta);
    if (!outcome.ok()) return outcome.status.error();
    if (!bad) return bad.error();
    if (filled != k + 1 || position != first + k + 1)
      return error{errc::parse_error} << "the scoring endpoint returned " << position << " tokens for a prompt of "
                                      << first + k << " and one new token (echo unsupported?)";
    for (std::size_t i = 0; i < k; ++i)
      if (rows_[i].token != call.draft[i])
        return error{errc::parse_error} << "the scoring endpoint echoed token " << rows_[i].token << " at draft position "
                                        << i << ", not " << call.draft[i];
    return std::span<const position_score>(rows_);
  }

 private:
  Client& client_;
  std::string_view extra_;
  std::size_t max_positions_;
  std::vector<char> request_;
  std::vector<char> response_;
  std::vector<position_score> rows_;
  std::vector<std::array<model::id_logprob, cloud::max_top_logprobs>> tops_;
};

}  // namespace hedge::engine
