// hedge/engine/edge_tier.hpp: an EdgeBackend over hedge's own model, tokenizer and generator.
//
// Each call rolls its session back to empty and prefills the prompt (chat messages rendered
// by the caller's renderer to token ids, or a raw prompt encoded with BOS) followed by the
// continuation text, then generates through model::generator. The continuation is encoded
// after the prompt's tokens, so the edge continues exactly after the delivered bytes: the
// first token it samples is the one that follows them. Each token reaches the engine with
// its log-prob and entropy (the verifier's signals); held-back text at the end (a stop
// string's possible start that was not one, an incomplete character) arrives with id -1.
//
// It is also a Drafter for cross-tier speculation (speculative.hpp): reset / extend /
// truncate run its session token by token, prompt_ids gives a call's prompt as ids (the
// cloud scores ids: the tiers share a vocabulary), and a text stream turns emitted ids into
// whole UTF-8 characters.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/cloud/request.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/engine/backend.hpp"
#include "hedge/model/generate.hpp"
#include "hedge/model/random.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/tokenizer.hpp"

namespace hedge::engine {

/// \tparam Model a model::llama<...> (forward.hpp): prefill, decode, sessions, rollback
/// \tparam E     an Executor (exec::serial, exec::thread_pool)
template <class Model, Executor E>
class edge_tier {
 public:
  /// Renders chat messages to prompt token ids (a chat template), appending to `ids`.
  using renderer = function_ref<result<void>(std::span<const cloud::chat_message>, std::vector<model::token_id>&)>;

  static result<edge_tier> make(Model& model, const model::tokenizer& tok, E& executor, renderer render,
                                std::span<const model::token_id> stop_tokens = {}) {
    auto g = model::generator<Model>::make(model, tok, 256);
    if (!g) return g.error();
    auto session = model.create_session();
    if (!session) return session.error();
    edge_tier t(model, tok, executor, render, std::move(*g), *session);
    t.stop_tokens_.assign(stop_tokens.begin(), stop_tokens.end());
    t.ids_.reserve(model.context());
    return t;
  }

  [[nodiscard]] bool ready() const noexcept { return model_ != nullptr; }
  [[nodiscard]] std::uint32_t context_tokens() const noexcept { return static_cast<std::uint32_t>(model_->context()); }

  /// The call's prompt (messages rendered, or the raw prompt with BOS) and continuation, as ids.
  result<std::span<const model::token_id>> prompt_ids(const edge_call& call) {
    ids_.clear();
    if (!call.messages.empty()) {
      if (auto r = render_(call.messages, ids_); !r) return r.error();
    } else {
      auto prompt = tokenizer_->encode(call.prompt);
      if (!prompt) return prompt.error();
      ids_.insert(ids_.end(), prompt->begin(), prompt->end());
    }
    if (!call.continuation.empty()) {
      auto more = tokenizer_->encode(call.continuation, {.add_special = false});
      if (!more) return more.error();
      ids_.insert(ids_.end(), more->begin(), more->end());
    }
    if (ids_.empty()) return error{errc::invalid_argument} << "edge_tier: an empty prompt";
    return std::span<const model::token_id>(ids_);
  }

  // ---- Drafter (speculative.hpp) ----
  [[nodiscard]] std::size_t vocab_size() const noexcept { return model_->config().vocab_size; }
  result<std::span<const float>> reset(std::span<const std::int32_t> ids) {
    if (auto r = model_->rollback(session_, 0); !r) return r.error();
    auto logits = model_->prefill(session_, ids, *executor_);
    if (!logits) return logits.error();
    return std::span<const float>(*logits);
  }
  result<std::span<const float>> extend(std::int32_t id) {
    auto logits = model_->decode(session_, id, *executor_);
    if (!logits) return logits.error();
    return std::span<const float>(*logits);
  }
  result<void> truncate(std::size_t n) { return model_->rollback(session_, n); }
  [[nodiscard]] std::span<const model::token_id> stop_ids() const noexcept { return stop_tokens_; }
  /// Emitted ids to text: whole characters only (model::stream_decoder).
  /// The text follows the prompt's (model::stream_decoder::follow), as model::generator's does.
  void begin_text(std::span<const std::int32_t> prompt) { (void)text_.emplace(*tokenizer_).follow(prompt); }
  result<void> text_of(std::int32_t id, function_ref<void(std::string_view)> sink) {
    if (!text_) begin_text({});
    return text_->push(id, [&](std::string_view piece) { sink(piece); });
  }
  void end_text(function_ref<void(std::string_view)> sink) {
    if (text_) text_->finish([&](std::string_view piece) { sink(piece); });
    text_.reset();
  }

  result<edge_summary> generate(const edge_call& call, function_ref<bool(const edge_token&)> on_token) {
    if (auto ids = prompt_ids(call); !ids) return ids.error();
    if (auto r = model_->rollback(session_, 0); !r) return r.error();
    model::sampler<model::seeded_random> chooser{
        {.temperature = static_cast<float>(call.sampling.temperature.value_or(0.0)),
         .top_p = static_cast<float>(call.sampling.top_p.value_or(1.0))},
        model::seeded_random{static_cast<std::uint64_t>(call.sampling.seed.value_or(0))}};
    model::generation_options options{.max_tokens = call.max_tokens, .stop = call.sampling.stop,
                                      .stop_tokens = stop_tokens_};
    auto summary = generator_.run(session_, ids_, chooser, options, *executor_, [&](const model::generated_token& t) {
      edge_token e;
      e.text = t.text;
      e.id = t.id == model::no_token ? -1 : t.id;
      e.logprob = t.choice.logprob;
      e.entropy = t.choice.entropy;
      return on_token(e);
    });
    if (!summary) return summary.error();
    edge_summary s;
    s.prompt_tokens = summary->prompt_tokens;
    s.generated = summary->generated;
    s.length_limited = summary->reason == model::stop_reason::max_tokens;
    return s;
  }

 private:
  edge_tier(Model& model, const model::tokenizer& tok, E& executor, renderer render, model::generator<Model> g,
            kv::kv_seq session)
      : model_(&model), tokenizer_(&tok), executor_(&executor), render_(render), generator_(std::move(g)),
        session_(session) {}

  Model* model_;
  const model::tokenizer* tokenizer_;
  E* executor_;
  renderer render_;
  model::generator<Model> generator_;
  kv::kv_seq session_;
  std::vector<model::token_id> ids_;
  std::vector<model::token_id> stop_tokens_;
  std::optional<model::stream_decoder> text_;
};

}  // namespace hedge::engine
