// hedge/engine/cloud_tier.hpp: a CloudBackend over cloud::cloud_client and any Transport.
//
// Blocking: the whole call runs inside poll() (the client's transport blocks), so this
// backend is not `concurrent` and the engine never races it (os/ has a threaded one that
// is). The per-call limits the engine computes (the request's deadline and TTFT objective)
// are set on the client for each call. How a hand-off's continuation reaches the endpoint:
// - completion: POST /completions with the prompt (a raw prompt, or the messages rendered by
//   the caller's `render`) followed by the continuation; hedge-server, vLLM, llama.cpp's
//   server and TGI accept it. Without a renderer, chat requests use assistant_prefill.
// - assistant_prefill: the chat messages plus an assistant message holding the continuation
//   (servers that continue a final assistant message: vLLM's continue_final_message,
//   Anthropic's prefill; `prefill_extra` carries the flag a server needs, as JSON members).
// - restart_trim: the request again, without the continuation; the answer's first
//   continuation-length bytes are dropped (the overlap), so text is never repeated. When
//   they differ from the continuation, `overlap_mismatch()` says so: the endpoint answered
//   differently and the joined text may not read on.
// A tier given a scorer (set_scorer: engine/cloud_scorer.hpp over a client with room for an
// echo) also scores speculative drafts; without one, score() says unsupported and the engine
// generates plainly at this tier.
#pragma once

#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/cloud/client.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/engine/backend.hpp"
#include "hedge/engine/speculative.hpp"

namespace hedge::engine {

struct cloud_tier_options {
  continuation_style style = continuation_style::assistant_prefill;
  std::string_view prefill_extra;  ///< JSON object sent with an assistant prefill, e.g. {"continue_final_message":true}
  std::string_view extra;          ///< JSON object sent with every call
};

/// \tparam Client a cloud::cloud_client<Transport, Clock, Sizes>
template <class Client>
class cloud_tier {
 public:
  static constexpr bool concurrent = false;
  using renderer = function_ref<void(std::span<const cloud::chat_message>, std::string&)>;

  explicit cloud_tier(Client& client, cloud_tier_options options = {}) : client_(client), options_(options) {
    prompt_.reserve(16 * 1024);
    messages_.reserve(64);
  }
  /// With a chat renderer: continuations of chat requests can go to /completions.
  cloud_tier(Client& client, cloud_tier_options options, renderer render)
      : client_(client), options_(options), render_(render) {
    prompt_.reserve(16 * 1024);
    messages_.reserve(64);
  }

  result<void> begin(const cloud_call& call) {
    call_ = call;
    pending_ = true;
    cancel_ = false;
    return ok();
  }

  void cancel() noexcept { cancel_ = true; }

  /// One JSON object with the members of both (the tier's first); either may be empty or {}.
  std::string_view joined_extra(std::string_view a, std::string_view b) {
    const auto members = [](std::string_view o) {
      const auto open = o.find('{'), close = o.rfind('}');
      if (open == std::string_view::npos || close == std::string_view::npos || close <= open) return std::string_view{};
      o = o.substr(open + 1, close - open - 1);
      while (!o.empty() && (o.front() == ' ' || o.front() == '\n' || o.front() == '\t' || o.front() == '\r')) o.remove_prefix(1);
      return o;
    };
    extra_.assign("{");
    extra_.append(members(a));
    if (!members(a).empty() && !members(b).empty()) extra_.push_back(',');
    extra_.append(members(b));
    extra_.push_back('}');
    return extra_;
  }

  [[nodiscard]] bool overlap_mismatch() const noexcept { return mismatch_; }

  /// Speculative scoring at this endpoint (the scorer must outlive the tier).
  void set_scorer(scorer_ref scorer) noexcept { scorer_ = scorer; }
  result<std::span<const position_score>> score(const score_call& call) {
    if (!scorer_) return error{errc::unsupported} << "this cloud tier does not score drafts";
    return (*scorer_)(call);
  }

  cloud_poll poll(function_ref<bool(const cloud_piece&)> on_piece, std::chrono::milliseconds) {
    cloud_poll out;
    if (!pending_) {
      out.state = cloud_state::failed;
      out.status = error{errc::invalid_argument} << "cloud_tier: poll without begin";
      return out;
    }
    pending_ = false;
    client_.set_limits(call_.limits);
    cloud::request_options o;
    o.max_tokens = call_.max_tokens;
    o.temperature = call_.sampling.temperature;
    o.top_p = call_.sampling.top_p;
    o.seed = call_.sampling.seed;
    o.stop = call_.sampling.stop;
    o.include_usage = true;
    o.extra = options_.extra;
    if (!call_.extra.empty()) o.extra = joined_extra(options_.extra, call_.extra);
    mismatch_ = false;
    std::size_t skip = 0;
    std::string_view expected;
    auto on_delta = [&](const cloud::choice_delta& d) {
      std::string_view text = d.text;
      if (skip > 0) {  // restart_trim: the overlap with the delivered text
        const std::size_t n = text.size() < skip ? text.size() : skip;
        if (text.substr(0, n) != expected.substr(expected.size() - skip, n)) mismatch_ = true;
        text.remove_prefix(n);
        skip -= n;
      }
      cloud_piece p;
      p.text = text;
      p.tokens = d.tokens.empty() ? (d.text.empty() ? 0u : 1u) : static_cast<std::uint32_t>(d.tokens.size());
      if (!d.tokens.empty() && !std::isnan(d.tokens[0].logprob)) p.logprob = static_cast<float>(d.tokens[0].logprob);
      if (text.empty() && p.tokens == 0) return true;
      return on_piece(p);
    };
    cloud::call_outcome outcome;
    const bool chat = !call_.messages.empty();
    const bool continuing = !call_.continuation.empty();
    continuation_style style = options_.style;
    if (style == continuation_style::completion && chat && !render_.has_value()) style = continuation_style::assistant_prefill;
    if (!continuing || style == continuation_style::restart_trim) {
      if (continuing) skip = call_.continuation.size(), expected = call_.continuation;
      outcome = chat ? client_.stream_chat(call_.messages, o, on_delta, &cancel_)
                     : client_.stream_completion(call_.prompt, o, on_delta, false, &cancel_);
    } else if (style == continuation_style::completion || !chat) {
      prompt_.clear();
      if (chat) (*render_)(call_.messages, prompt_);
      else prompt_.append(call_.prompt);
      prompt_.append(call_.continuation);
      outcome = client_.stream_completion(prompt_, o, on_delta, false, &cancel_);
    } else {
      messages_.assign(call_.messages.begin(), call_.messages.end());
      messages_.push_back(cloud::chat_message{"assistant", call_.continuation});
      if (!options_.prefill_extra.empty()) o.extra = options_.prefill_extra;
      outcome = client_.stream_chat(messages_, o, on_delta, &cancel_);
    }
    out.http_status = outcome.http_status;
    out.retry_after = outcome.retry_after;
    finish_reason_.assign(outcome.finish_reason.view());
    out.finish_reason = finish_reason_;
    out.prompt_tokens = outcome.usage.prompt_tokens;
    out.completion_tokens = outcome.usage.completion_tokens;
    if (outcome.ok()) {
      out.state = cloud_state::finished;
    } else {
      out.state = cloud_state::failed;
      out.status = outcome.status;
    }
    return out;
  }

 private:
  Client& client_;
  cloud_tier_options options_;
  std::optional<renderer> render_;
  std::optional<scorer_ref> scorer_;
  cloud_call call_{};
  bool pending_ = false;
  bool mismatch_ = false;
  std::atomic<bool> cancel_{false};
  std::string prompt_;
  std::string finish_reason_;
  std::string extra_;
  std::vector<cloud::chat_message> messages_;
};

}  // namespace hedge::engine
