// tools/server/gateway.hpp: hedge-server as a hybrid gateway (`--cloud URL`): every chat or
// completion request runs through the hybrid engine (include/hedge/engine/), with the local
// model as the edge tier and the --cloud endpoints, in order, as the cloud tiers.
//
//   HTTP handler thread --submit--> bounded queue --> gateway worker (one engine each)
//       engine.run(request): routed -> response head (x-hedge-tier, x-hedge-route)
//                            tokens -> SSE chunks (or the whole answer), one [DONE]
//       the edge tier is the local model's scheduler (scheduler_edge: one job per call)
//       the cloud tiers are cloud_client over libcurl, made concurrent (os::concurrent_cloud)
//
// What is shared and what is per worker: the local model is one scheduler (bounded FIFO);
// telemetry is one (locked); each worker has its own engine, cloud clients, circuit breakers
// and an equal share of the period budget (so the budget is never overspent, and a failing
// cloud opens each worker's breaker after that worker's own failures).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hedge/engine/cloud_scorer.hpp"
#include "hedge/engine/cloud_tier.hpp"
#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/os/concurrent_cloud.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/cost_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"
#include "scheduler.hpp"

namespace hedge::server {

/// The edge's refusal when the local model's queue is full: the engine spills the request to
/// the cloud where the policy allows; where it does not, the gateway answers 429.
inline constexpr std::string_view edge_queue_full = "the local model's queue is full";

/// The local model's scheduler as the engine's edge tier: each generate() is one job in the
/// scheduler's queue (thread-safe: the gateway's workers share one). A full queue is an
/// `unavailable` error, so the engine spills the request to the cloud where the policy allows.
class scheduler_edge {
 public:
  explicit scheduler_edge(scheduler& s) noexcept : scheduler_(&s) {}

  [[nodiscard]] bool ready() const { return !scheduler_->stopping(); }
  [[nodiscard]] std::uint32_t context_tokens() const { return static_cast<std::uint32_t>(scheduler_->context()); }

  // ---- a Drafter for cross-tier speculation (engine/speculative.hpp). Each step is a job on
  // the scheduler's thread, in turn with the other requests; the session keeps the longest
  // prefix it shares with the draft's ids, so a request run in between costs a re-decode,
  // never a wrong draft. One scheduler_edge per gateway worker: the ids and logits are its own.
  [[nodiscard]] std::size_t vocab_size() const { return scheduler_->vocab_size(); }
  result<std::span<const float>> reset(std::span<const std::int32_t> ids) {
    sequence_.assign(ids.begin(), ids.end());
    return step();
  }
  result<std::span<const float>> extend(std::int32_t id) {
    sequence_.push_back(id);
    return step();
  }
  result<void> truncate(std::size_t n) {
    if (n > sequence_.size()) return error{errc::out_of_range} << "truncate to " << n << " of " << sequence_.size() << " tokens";
    sequence_.resize(n);
    return ok();
  }
  result<std::span<const std::int32_t>> prompt_ids(const engine::edge_call& call) {
    if (auto r = build_prompt(call, prompt_); !r) return r.error();
    return std::span<const std::int32_t>(prompt_);
  }
  [[nodiscard]] std::span<const std::int32_t> stop_ids() const { return scheduler_->renderer().stop_tokens(); }
  /// The text follows the prompt's (model::stream_decoder::follow), as model::generator's does.
  void begin_text(std::span<const std::int32_t> prompt) { (void)text_.emplace(scheduler_->tokenizer()).follow(prompt); }
  result<void> text_of(std::int32_t id, function_ref<void(std::string_view)> sink) {
    if (!text_) begin_text({});
    return text_->push(id, [&](std::string_view piece) { sink(piece); });
  }
  void end_text(function_ref<void(std::string_view)> sink) {
    if (text_) text_->finish([&](std::string_view piece) { sink(piece); });
    text_.reset();
  }

  result<engine::edge_summary> generate(const engine::edge_call& call,
                                        function_ref<bool(const engine::edge_token&)> on_token) {
    auto j = std::make_shared<job>();
    const std::size_t context = scheduler_->context();
    if (auto r = build_prompt(call, j->prompt); !r) return r.error();

    j->max_tokens = std::min<std::size_t>(call.max_tokens, context - j->prompt.size() + 1);
    parsed_request& r = j->request;
    r.temperature = static_cast<float>(call.sampling.temperature.value_or(1.0));
    r.top_p = static_cast<float>(call.sampling.top_p.value_or(1.0));
    if (call.sampling.seed) r.seed = static_cast<std::uint64_t>(*call.sampling.seed);
    for (auto s : call.sampling.stop) r.stop.emplace_back(s);
    r.logprobs = true;  // the verifier reads each token's log-prob
    auto state = std::make_shared<exchange>();
    j->changed = [state](job& changed) {
      {
        std::lock_guard lock(state->mutex);
        for (auto& e : changed.events) state->events.push_back(std::move(e));
        changed.events.clear();
        if (changed.done) {
          state->done = true;
          state->error = changed.error;
          state->finish_reason = changed.finish_reason;
          state->generated = changed.completion_tokens;
        }
      }
      state->wake.notify_all();
    };
    switch (scheduler_->submit(j)) {
      case scheduler::admission::queued: break;
      case scheduler::admission::busy: return error{errc::unavailable} << edge_queue_full;
      case scheduler::admission::stopping: return error{errc::unavailable} << "the server is shutting down";
    }
    engine::edge_summary summary;
    summary.prompt_tokens = j->prompt.size();
    for (;;) {
      std::deque<piece_event> ready;
      bool done = false;
      {
        std::unique_lock lock(state->mutex);
        state->wake.wait(lock, [&] { return state->done || !state->events.empty(); });
        ready.swap(state->events);
        done = state->done;
      }
      for (const piece_event& e : ready) {
        engine::edge_token t;
        t.text = e.text;
        t.id = e.token ? 0 : -1;
        t.logprob = e.token && e.token->logprob ? *e.token->logprob : 0.0f;
        if (!on_token(t)) {
          j->cancelled = true;  // the scheduler stops it at its next token
          return summary;
        }
      }
      if (!done) continue;
      std::lock_guard lock(state->mutex);
      if (state->error) {
        const bool full = state->error->code == "context_length_exceeded";
        return error{full ? errc::capacity_exceeded : errc::unavailable} << state->error->message;
      }
      summary.generated = state->generated;
      summary.length_limited = state->finish_reason == "length";
      return summary;
    }
  }

 private:
  struct exchange {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<piece_event> events;
    bool done = false;
    std::optional<api_error> error;
    std::string finish_reason;
    std::size_t generated = 0;
  };

  /// The call's prompt as ids: messages rendered, or the raw prompt encoded, then the continuation.
  result<void> build_prompt(const engine::edge_call& call, std::vector<model::token_id>& out) const {
    const auto& tok = scheduler_->tokenizer();
    const std::size_t context = scheduler_->context();
    if (!call.messages.empty()) {
      auto ids = scheduler_->renderer().render(call.messages);
      if (!ids) return ids.error();
      out = std::move(*ids);
    } else {
      auto ids = tok.encode_at_most(call.prompt, context);
      if (!ids) return ids.error();
      out = std::move(*ids);
    }
    if (!call.continuation.empty()) {
      auto more = tok.encode(call.continuation, {.add_special = false});
      if (!more) return more.error();
      out.insert(out.end(), more->begin(), more->end());
    }
    if (out.empty()) out.push_back(tok.vocab().settings().bos);
    if (out.size() >= context)
      return error{errc::capacity_exceeded} << "the prompt has " << out.size() << " tokens, the context " << context;
    return ok();
  }

  /// One draft step on the scheduler's thread: the logits after sequence_.
  result<std::span<const float>> step() {
    if (sequence_.empty()) return error{errc::invalid_argument} << "a draft step of no tokens";
    auto j = std::make_shared<job>();
    j->logits_for = sequence_;
    j->logits_out = &logits_;
    auto state = std::make_shared<exchange>();
    j->changed = [state](job& changed) {
      if (!changed.done) return;
      {
        std::lock_guard lock(state->mutex);
        state->done = true;
        state->error = changed.error;
      }
      state->wake.notify_all();
    };
    switch (scheduler_->submit(j)) {
      case scheduler::admission::queued: break;
      case scheduler::admission::busy: return error{errc::unavailable} << edge_queue_full;
      case scheduler::admission::stopping: return error{errc::unavailable} << "the server is shutting down";
    }
    std::unique_lock lock(state->mutex);
    state->wake.wait(lock, [&] { return state->done; });
    if (state->error) return error{errc::unavailable} << "a draft step failed: " << state->error->message;
    return std::span<const float>(logits_);
  }

  scheduler* scheduler_;
  std::vector<model::token_id> sequence_, prompt_;  // the draft's ids; prompt_ids' result
  std::vector<float> logits_;                       // the last step's
  std::optional<model::stream_decoder> text_;
};

/// One telemetry for every worker's engine (an Observer that locks).
struct locked_telemetry {
  engine::telemetry* sink = nullptr;
  std::mutex* mutex = nullptr;
  void on_event(const engine::engine_event& e) {
    std::lock_guard lock(*mutex);
    sink->on_event(e);
  }
  void on_outcome(const engine::engine_outcome& o) {
    std::lock_guard lock(*mutex);
    sink->on_outcome(o);
  }
};

/// The demo's illustrative deferral weights; fit yours (docs/routing.md).
inline verify::deferral_rule default_deferral() {
  verify::deferral_rule rule;
  rule.bias = -2.0f;
  rule.weights = {-1.5f, 0.0f, -2.0f, 0.5f, 0.0f};
  return rule;
}

struct gateway_options {
  std::vector<std::string> clouds;  ///< base URLs in fallback order, e.g. http://10.0.0.2:8000
  std::string cloud_model;          ///< sent as "model" to every cloud (empty: none)
  std::vector<std::string> cloud_models;  ///< per cloud, in the order of `clouds` (empty: cloud_model)
  double router_threshold = 0.0;          ///< the router's soft-score threshold (route/router.hpp)
  verify::deferral_rule deferral = default_deferral();
  std::string delivery = "immediate";     ///< a request's default: immediate, verified, or a count
  std::string api_key;              ///< sent to every cloud (from the environment or a file, never a flag)
  engine::engine_options engine{};  ///< prices, the budget, retries, breakers, privacy
  std::size_t workers = 8;          ///< requests the gateway runs at once
  std::size_t queue = 64;           ///< requests waiting for a worker before 429
};

class gateway {
 public:
  using curl_client = cloud::cloud_client<os::curl_transport>;
  using blocking_cloud = engine::cloud_tier<curl_client>;
  /// Room for the echo of a speculative round's context (scoring_positions tokens).
  static constexpr std::size_t scoring_positions = 1024;
  using scoring_client =
      cloud::cloud_client<os::curl_transport, std::chrono::steady_clock, cloud::client_buffers{.tokens = scoring_positions}>;
  using cloud_backend = os::concurrent_cloud<blocking_cloud>;
  using router_type = route::router<route::privacy_policy, route::health_policy, route::context_fit_policy,
                                    route::latency_policy, route::cost_policy>;
  using engine_type = engine::hybrid_engine<scheduler_edge, cloud_backend, router_type, verify::logistic_verifier,
                                            os::steady_clock, locked_telemetry>;
  using task = std::function<void(engine_type&)>;
  /// A request passed through to the clouds (passthrough.hpp): each worker's clients, in
  /// fallback order, and its engine (the clouds' breakers, the worker's share of the budget).
  using pass_task = std::function<void(std::span<curl_client* const>, engine_type&)>;

  gateway(scheduler& s, gateway_options options) : options_(std::move(options)), edge_(s) {
    telemetry_.all_cloud_prices = options_.engine.cloud_prices[0];
    engine::engine_options per_worker = options_.engine;
    if (per_worker.budget.per_period > 0)
      per_worker.budget.per_period /= static_cast<double>(options_.workers ? options_.workers : 1);
    for (std::size_t w = 0; w < std::max<std::size_t>(options_.workers, 1); ++w) {
      auto wk = std::make_unique<worker>();
      for (std::size_t n = 0; n < options_.clouds.size(); ++n) {
        auto c = std::make_unique<cloud_slot>(options_.clouds[n]);
        cloud::endpoint e;
        e.model = cloud_model(n);
        e.api_key = options_.api_key;
        c->client = std::make_unique<curl_client>(c->transport, e);
        c->blocking = std::make_unique<blocking_cloud>(*c->client);
        c->scoring = std::make_unique<scoring_client>(c->transport, e);
        c->scorer = std::make_unique<engine::cloud_scorer<scoring_client>>(*c->scoring, scoring_positions);
        c->blocking->set_scorer(*c->scorer);
        c->concurrent = std::make_unique<cloud_backend>(*c->blocking);
        wk->tiers.push_back(c->concurrent.get());
        wk->clients.push_back(c->client.get());
        wk->clouds.push_back(std::move(c));
      }
      router_type router(route::privacy_policy{}, route::health_policy{}, route::context_fit_policy{},
                         route::latency_policy{}, route::cost_policy{}, options_.router_threshold);
      wk->edge = std::make_unique<scheduler_edge>(s);
      wk->engine = std::make_unique<engine_type>(*wk->edge, std::span<cloud_backend* const>(wk->tiers), router,
                                                 verify::logistic_verifier{options_.deferral}, os::steady_clock{},
                                                 locked_telemetry{&telemetry_, &telemetry_mutex_}, per_worker);
      workers_.push_back(std::move(wk));
    }
    for (auto& wk : workers_) wk->thread = std::thread([this, w = wk.get()] { work(*w); });
  }

  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;
  ~gateway() { stop(); }

  /// Queues a request; false when `queue` already wait (the caller answers 429).
  bool submit(task t) {
    return enqueue([t = std::move(t)](worker& w) { t(*w.engine); });
  }
  bool submit(pass_task t) {
    return enqueue([t = std::move(t)](worker& w) { t(w.clients, *w.engine); });
  }

  /// Waiting requests are dropped (their handlers answer 503 as the tasks are destroyed);
  /// running ones finish (their clients' streams are ended by the HTTP server's stop).
  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      waiting_.clear();
    }
    wake_.notify_all();
    for (auto& wk : workers_)
      if (wk->thread.joinable()) wk->thread.join();
  }

  [[nodiscard]] const gateway_options& options() const noexcept { return options_; }
  /// The model name sent to cloud `n`.
  [[nodiscard]] const std::string& cloud_model(std::size_t n) const noexcept {
    return n < options_.cloud_models.size() && !options_.cloud_models[n].empty() ? options_.cloud_models[n]
                                                                                 : options_.cloud_model;
  }

  /// The engine's telemetry in Prometheus text.
  std::string metrics() const {
    std::string out;
    std::lock_guard lock(telemetry_mutex_);
    telemetry_.write_prometheus(out);
    return out;
  }

  /// Each tier's state: the edge's, and each cloud's breaker as the workers see it (the worst).
  std::string health() const {
    std::string out = "{\"status\":\"ok\",\"tiers\":[{\"tier\":\"edge\",\"state\":\"";
    out.append(edge_.ready() ? "ready" : "down");
    out.append("\"}");
    for (std::size_t c = 0; c < options_.clouds.size(); ++c) {
      std::size_t open = 0, half = 0;
      for (const auto& wk : workers_) {
        const auto s = wk->engine->breaker_state(c);
        open += s == route::circuit::open;
        half += s == route::circuit::half_open;
      }
      out.append(",{\"tier\":\"cloud").append(std::to_string(c)).append("\",\"breaker\":\"");
      out.append(open == workers_.size() ? "open" : open + half > 0 ? "partly_open" : "closed");
      out.append("\",\"workers_open\":").append(std::to_string(open)).append("}");
    }
    out.append("]}");
    return out;
  }

 private:
  struct cloud_slot {
    explicit cloud_slot(const std::string& url) : transport(url) {}
    os::curl_transport transport;
    std::unique_ptr<curl_client> client;
    std::unique_ptr<blocking_cloud> blocking;
    std::unique_ptr<scoring_client> scoring;  ///< the same endpoint, scoring speculative drafts
    std::unique_ptr<engine::cloud_scorer<scoring_client>> scorer;
    std::unique_ptr<cloud_backend> concurrent;
  };
  struct worker {
    std::unique_ptr<scheduler_edge> edge;  ///< its own: a speculative draft's ids and logits
    std::vector<std::unique_ptr<cloud_slot>> clouds;
    std::vector<cloud_backend*> tiers;
    std::vector<curl_client*> clients;  ///< the same clouds' clients, for passthrough requests
    std::unique_ptr<engine_type> engine;
    std::thread thread;
  };

  bool enqueue(std::function<void(worker&)> t) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || waiting_.size() >= options_.queue) return false;
      waiting_.push_back(std::move(t));
    }
    wake_.notify_one();
    return true;
  }

  void work(worker& w) {
    for (;;) {
      std::function<void(worker&)> t;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
        if (stopping_) return;
        t = std::move(waiting_.front());
        waiting_.pop_front();
      }
      t(w);
    }
  }

  gateway_options options_;
  scheduler_edge edge_;
  engine::telemetry telemetry_;
  mutable std::mutex telemetry_mutex_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void(worker&)>> waiting_;
  bool stopping_ = false;
};

}  // namespace hedge::server
