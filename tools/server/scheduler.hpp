// tools/server/scheduler.hpp: the local model's scheduler: one worker thread, `slots`
// sessions of the model, a bounded FIFO.
//
// Generations run on the worker thread, which alone touches the model, its sessions and the
// generations. With one slot they run one at a time, in arrival order. With several
// (--parallel N, as llama.cpp's server's slots), they are batched continuously: every decode
// step runs each running generation's next token in one pass over the weights
// (model::llama::decode_batch), and requests join and leave the batch between steps: a new
// one's prompt is prefilled between two steps, a finished one frees its slot at once. Each
// keeps its own session, sampler and stop state, and the weights are repacked (os::make_llama)
// so that every GEMM row is its GEMV (forward.hpp): a greedy request's tokens are the same
// alone and batched. The queue holds at most `queue_bound` requests waiting besides those
// running (0: none waits); `submit` refuses the next (the HTTP layer answers 429). Once
// submitted, a job is touched by the worker thread only: it fills in the prompt's log-probs
// (echo scoring), one event per generated piece, then `done`, and calls the job's `changed`
// after each step, so the HTTP layer writes the response from the worker thread (a slow reader
// slows the generation: back-pressure). A job whose client left (`cancelled`) is skipped if
// still waiting, and stops at its next token if running. shutdown() ends waiting jobs with 503
// and cancels the running ones, which end with the same 503 error (a stream sends it as an
// error event). Each slot's session keeps the last prompt it decoded: a job goes to the free
// slot whose tokens share the longest prefix with its prompt, rolls back only to that prefix
// and decodes the rest (llama.cpp's server calls this cache_prompt), and echo scoring reuses
// the log-probs of the shared positions. A speculative client that sends the context plus a
// draft each round costs the draft's positions, not the whole context. Echo scoring and draft
// steps (logits_for) run whole between decode steps.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "hedge/os/model_file.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/generate.hpp"
#include "hedge/model/random.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/scoring.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/os/thread_pool.hpp"
#include "metrics.hpp"
#include "request.hpp"

namespace hedge::server {

/// A token as the response reports it: its text, log-prob and the top alternatives.
struct token_report {
  std::string text;
  std::optional<float> logprob;  ///< none for the prompt's first token
  std::vector<std::pair<std::string, float>> top;
};

/// One delivery of the generator: text, and the token it came with (none for held-back text).
struct piece_event {
  std::string text;
  std::optional<token_report> token;
};

struct job {
  parsed_request request;
  std::vector<model::token_id> prompt;
  std::size_t max_tokens = 0;
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  std::atomic<bool> cancelled{false};  ///< set from any thread: the client left
  /// Called on the worker thread after each change below (may be empty).
  std::function<void(job&)> changed;

  // Written by the worker once submitted.
  std::vector<token_report> prompt_logprobs;  ///< echo with logprobs: one per prompt token
  bool scored = false;                        ///< prompt_logprobs is complete
  std::vector<piece_event> events;  ///< the consumer may erase what it has sent
  bool done = false;
  std::optional<api_error> error;
  std::string finish_reason = "length";
  std::size_t completion_tokens = 0;
  /// Instead of a generation: the logits after these ids (a speculative draft step), written
  /// to `logits_out` on the worker thread.
  std::vector<model::token_id> logits_for;
  std::vector<float>* logits_out = nullptr;
};

class scheduler {
 public:
  using llama = model::llama<>;

  /// Runs `loaded`'s model (os::make_llama), which must outlive the scheduler, with `slots`
  /// sessions batched (1: one generation at a time).
  static result<std::unique_ptr<scheduler>> make(os::loaded_model& loaded, model::chat_format format, std::size_t context,
                                              std::size_t threads, std::size_t queue_bound,
                                              server::metrics& metrics, std::size_t slots = 1) {
    if (slots == 0) return error{errc::invalid_argument} << "no slots";
    const model::tokenizer& tok = loaded.tok;
    auto e = std::unique_ptr<scheduler>(new scheduler(tok, format, threads, queue_bound, metrics));
    // os::make_llama repacks every matrix: its GEMM rows are then its GEMVs bit for bit, so a
    // request's tokens do not depend on what it is batched with (forward.hpp).
    auto m = os::make_llama(loaded, {.max_sessions = slots, .context = context, .max_threads = threads, .max_batch = slots});
    if (!m) return m.error();
    e->runnable_ = std::make_unique<os::runnable_llama>(std::move(*m));
    llama& model = e->runnable_->model;
    for (std::size_t i = 0; i < slots; ++i) {
      auto g = model::generation::make(tok, model.config().vocab_size, model.context(), 256);
      if (!g) return g.error();
      auto s = model.create_session();
      if (!s) return s.error();
      e->slots_.push_back(std::make_unique<slot>(*s, std::move(*g)));
    }
    e->worker_ = std::thread([p = e.get()] { p->work(); });
    return e;
  }

  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;
  ~scheduler() { shutdown(); }

  /// Waiting jobs end with 503, the running ones are cancelled and end with 503 (on the
  /// worker, soon after this returns). Later submits are refused.
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      stopping_flag_ = true;
    }
    wake_.notify_all();
  }

  /// stop(), then waits for the worker to end.
  void shutdown() {
    stop();
    if (worker_.joinable()) worker_.join();
  }

  /// An emulated slower model, for demonstrations and benchmarks: a delay per forward pass,
  /// that is before each decode step (one for the whole batch) and once per prompt pass,
  /// which also yields the first generated token (an accelerator bound by memory reads the
  /// weights once for a batch of positions, as for one).
  void set_token_delay(std::chrono::milliseconds d) noexcept { token_delay_ = d; }
  /// An emulated network round trip: a delay before a job's first output.
  void set_round_trip(std::chrono::milliseconds d) noexcept { round_trip_ = d; }

  [[nodiscard]] bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  [[nodiscard]] std::size_t context() const noexcept { return runnable_->model.context(); }
  [[nodiscard]] std::size_t vocab_size() const noexcept { return runnable_->model.config().vocab_size; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_.size(); }
  [[nodiscard]] const model::chat_renderer& renderer() const noexcept { return renderer_; }
  [[nodiscard]] const model::tokenizer& tokenizer() const noexcept { return *tok_; }

  enum class admission { queued, busy, stopping };

  /// Queues a job; busy when every slot runs one and `queue_bound` already wait.
  admission submit(std::shared_ptr<job> j) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return admission::stopping;
      if (waiting_.size() + running_.load() >= queue_bound_ + slots_.size()) return admission::busy;
      waiting_.push_back(std::move(j));
    }
    wake_.notify_one();
    return admission::queued;
  }

  [[nodiscard]] std::size_t queue_depth() const {
    std::lock_guard lock(mutex_);
    return waiting_.size();
  }
  [[nodiscard]] std::size_t running() const { return running_.load(); }

  /// The text a token adds, as the detokenizer renders it (`strip`: the first piece of a
  /// text loses its leading space).
  [[nodiscard]] std::string piece(model::token_id id, bool strip = false) const {
    std::string s;
    if (!tok_->visit_piece(id, [&](std::string_view p) { s.append(p); }, {.strip_leading_space = strip})) s.clear();
    return s;
  }

 private:
  /// One session of the model, what it holds, and the generation running on it.
  struct slot {
    slot(kv::kv_seq s, model::generation g) : session(s), state(std::move(g)) {}
    kv::kv_seq session;
    std::vector<model::token_id> decoded;  ///< the tokens the session holds, in order
    std::vector<token_report> scored;      ///< their echo reports (position i: token i given the ones before)
    std::size_t scored_top = 0;            ///< the alternatives per report in scored
    bool scored_as_ids = false;            ///< whether scored names tokens by id
    // The running generation (job is null when the slot is free).
    std::shared_ptr<job> running;
    model::generation state;
    std::optional<model::sampler<model::seeded_random>> chooser;
    std::vector<std::string_view> stops;
    model::generation_options options;
    std::chrono::steady_clock::time_point decode_start;
    double ttft = -1;
  };

  scheduler(const model::tokenizer& tok, model::chat_format format, std::size_t threads, std::size_t queue_bound,
            server::metrics& metrics)
      : tok_(&tok), renderer_(tok, format), threads_(threads), queue_bound_(queue_bound), metrics_(&metrics),
        pool_(threads) {}

  void work() {
    if (threads_ == 1) return work(serial_);
    work(pool_);
  }

  template <class Executor>
  void work(Executor& executor) {
    for (;;) {
      std::vector<std::shared_ptr<job>> taken;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !waiting_.empty() || active() > 0; });
        if (stopping_) {
          for (const auto& w : waiting_) finish(*w, shutting_down());
          waiting_.clear();
          for (auto& s : slots_)
            if (s->running) finish(*std::exchange(s->running, nullptr), shutting_down());
          running_ = 0;
          return;
        }
        for (std::size_t free = slots_.size() - active(); free > 0 && !waiting_.empty(); --free) {
          taken.push_back(std::move(waiting_.front()));
          waiting_.pop_front();
        }
        running_ = active() + taken.size();
      }
      for (auto& j : taken) begin(j, executor);
      if (active() > 0) step(executor);
      std::lock_guard lock(mutex_);
      running_ = active();
    }
  }

  /// Generations running (slots taken).
  [[nodiscard]] std::size_t active() const noexcept {
    return static_cast<std::size_t>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->running != nullptr; }));
  }

  static api_error shutting_down() { return api_error{503, "the server is shutting down", {}, {}, "server_error"}; }

  bool halted(const job& j) const { return j.cancelled.load() || stopping_flag_.load(); }

  static void changed(job& j) {
    if (j.changed) j.changed(j);
  }

  void finish(job& j, std::optional<api_error> e) {
    j.error = std::move(e);
    j.scored = true;
    j.done = true;
    changed(j);
  }

  /// A job's end by `result`: the error it names (capacity: 400 context_length_exceeded;
  /// shutdown: 503), or success.
  void finish(job& j, const result<void>& result) {
    if (stopping_flag_.load()) return finish(j, shutting_down());
    if (result) return finish(j, std::nullopt);
    const bool capacity = result.error().code() == errc::capacity_exceeded;
    finish(j, api_error{capacity ? 400 : 500, std::string(result.error().message()), {},
                        capacity ? "context_length_exceeded" : "", capacity ? "invalid_request_error" : "server_error"});
  }

  /// A token as the response names it: its text, or "token_id:N" when the request asked
  /// for ids (vLLM's return_tokens_as_token_ids: unambiguous where texts collide).
  [[nodiscard]] std::string name(model::token_id id, bool as_id, bool strip = false) const {
    return as_id ? "token_id:" + std::to_string(id) : piece(id, strip);
  }

  /// The log-prob of `target` under `logits`, and the `top` most probable tokens (model/scoring.hpp).
  token_report score(std::span<const float> logits, model::token_id target, std::size_t top, bool as_id,
                     bool strip) const {
    const double log_sum = model::log_sum_exp(logits);
    token_report r{name(target, as_id, strip), model::log_probability(logits, target, log_sum), {}};
    std::array<model::id_logprob, max_top_logprobs> best{};
    const std::size_t n = model::most_probable(logits, log_sum, std::span(best).first(std::min(top, best.size())));
    for (std::size_t k = 0; k < n; ++k) r.top.emplace_back(name(best[k].id, as_id), best[k].logprob);
    return r;
  }

  /// The free slot whose tokens share the longest prefix with `prompt`.
  slot& free_slot(std::span<const model::token_id> prompt) {
    slot* best = nullptr;
    std::size_t best_shared = 0;
    for (auto& s : slots_) {
      if (s->running) continue;
      std::size_t shared = 0;
      const std::size_t most = std::min(prompt.size(), s->decoded.size());
      while (shared < most && s->decoded[shared] == prompt[shared]) ++shared;
      if (best == nullptr || shared > best_shared) best = s.get(), best_shared = shared;
    }
    return *best;
  }

  /// Rolls the slot's session back to the longest prefix of `prompt` it holds (at most
  /// `limit` tokens) and returns its length.
  result<std::size_t> reuse_prefix(slot& s, std::span<const model::token_id> prompt, std::size_t limit) {
    // decoded may name more than the session holds (a job cancelled before its last prompt
    // token was decoded): the session's length bounds it.
    auto held = runnable_->model.length(s.session);
    if (!held) return held.error();
    std::size_t shared = 0;
    const std::size_t most = std::min({limit, prompt.size(), s.decoded.size(), static_cast<std::size_t>(*held)});
    while (shared < most && s.decoded[shared] == prompt[shared]) ++shared;
    HEDGE_TRY(runnable_->model.rollback(s.session, shared));
    s.decoded.resize(shared);
    return shared;
  }

  /// Starts a job on a free slot: a draft step or an echo without generation runs whole; a
  /// generation prefills its prompt, delivers its first token and joins the batch.
  template <class Executor>
  void begin(const std::shared_ptr<job>& jp, Executor& executor) {
    job& j = *jp;
    if (j.cancelled) {
      metrics_->cancelled();
      return finish(j, std::nullopt);
    }
    slot& s = free_slot(!j.logits_for.empty() ? std::span<const model::token_id>(j.logits_for) : j.prompt);
    s.running = jp;
    auto started = !j.logits_for.empty() ? logits_after(s, j) : start(s, j, executor);
    if (started && *started) return;  // in the batch
    s.running = nullptr;
    finish(j, started ? result<void>(ok()) : result<void>(started.error()));
  }

  /// A draft step: the session keeps the longest prefix of the ids it holds and decodes the
  /// rest one by one (a draft extends by one token: one decode), the last one's logits out.
  /// False: done.
  result<bool> logits_after(slot& s, job& j) {
    const std::span<const model::token_id> ids = j.logits_for;
    auto shared = reuse_prefix(s, ids, ids.size() - 1);
    if (!shared) return shared.error();
    s.scored.clear();
    std::span<const float> logits;
    for (std::size_t i = *shared; i < ids.size(); ++i) {
      auto l = runnable_->model.decode(s.session, ids[i], serial_);
      if (!l) return l.error();
      s.decoded.push_back(ids[i]);
      logits = *l;
    }
    j.logits_out->assign(logits.begin(), logits.end());
    return false;
  }

  /// The generated token `t` of slot s's job as an event for its client; false when the
  /// client left or the server stops.
  bool deliver(slot& s, const model::generated_token& t) {
    job& j = *s.running;
    const parsed_request& r = j.request;
    if (s.ttft < 0) s.ttft = std::chrono::duration<double>(std::chrono::steady_clock::now() - j.arrived).count();
    piece_event e{std::string(t.text), std::nullopt};
    if (t.id != model::no_token && r.logprobs) {
      token_report report{name(t.id, r.return_tokens_as_token_ids), t.choice.logprob, {}};
      for (std::size_t k = 0; k < t.choice.alternative_count && k < r.top_logprobs; ++k)
        report.top.emplace_back(name(t.choice.alternatives[k].id, r.return_tokens_as_token_ids),
                                t.choice.alternatives[k].logprob);
      e.token = std::move(report);
    }
    j.events.push_back(std::move(e));
    changed(j);
    return !halted(j);
  }

  /// Echo scoring (if asked), the prompt's prefill and the generation's first token. True:
  /// the generation goes on in the batch.
  template <class Executor>
  result<bool> start(slot& s, job& j, Executor& executor) {
    const parsed_request& r = j.request;
    if (round_trip_.count() > 0) std::this_thread::sleep_for(round_trip_);
    const auto& settings = tok_->vocab().settings();
    std::span<const model::token_id> prompt = j.prompt;
    bool pass_paid = false;  // the first generated token's emulated pass was the scoring pass
    // The last prompt token is always decoded here: its logits start the generation.
    auto shared = reuse_prefix(s, prompt, prompt.size() - 1);
    if (!shared) return shared.error();
    // Echo scoring: each prompt token's log-prob given the ones before, from decoding them
    // one by one (prefill keeps only the last row's logits), the shared prefix's from the
    // last job's. The last prompt token is then the generation's prompt, so the prompt runs once.
    if (r.echo && r.logprobs) {
      const bool as_ids = r.return_tokens_as_token_ids;
      const bool reuse = s.scored_top == r.top_logprobs && s.scored_as_ids == as_ids;
      std::vector<token_report> reports;
      reports.push_back({name(prompt[0], as_ids, prompt[0] != settings.bos && settings.add_space_prefix), std::nullopt, {}});
      // Reports 1..keep stand; the token after the shared prefix needs the logits after its
      // last token again, so that token is decoded again (keep = shared - 1).
      std::size_t keep = *shared > 0 ? *shared - 1 : 0;
      if (!reuse || s.scored.size() <= keep) keep = 0;
      HEDGE_TRY(runnable_->model.rollback(s.session, keep));
      s.decoded.resize(keep);
      for (std::size_t i = 1; i <= keep; ++i) reports.push_back(s.scored[i]);
      // One emulated forward pass covers every new position and the last prompt token's, which
      // gives the first generated token: a batched pass, as an accelerator runs it.
      if (token_delay_.count() > 0) std::this_thread::sleep_for(token_delay_), pass_paid = true;
      for (std::size_t i = s.decoded.size(); i + 1 < prompt.size(); ++i) {
        if (halted(j)) break;
        auto logits = runnable_->model.decode(s.session, prompt[i], executor);
        if (!logits) return logits.error();
        s.decoded.push_back(prompt[i]);
        const bool first_text = i == 0 && prompt[0] == settings.bos && settings.add_space_prefix;
        reports.push_back(score(*logits, prompt[i + 1], r.top_logprobs, as_ids, first_text));
      }
      if (halted(j)) return false;
      s.scored = reports;
      s.scored_top = r.top_logprobs;
      s.scored_as_ids = as_ids;
      j.prompt_logprobs = std::move(reports);
      j.scored = true;
      changed(j);
      prompt = prompt.subspan(prompt.size() - 1);
      if (j.max_tokens == 0) {
        metrics_->generation(j.prompt.size(), 0, -1, 0);
        return false;
      }
    } else if (j.max_tokens == 0) {
      metrics_->generation(0, 0, -1, 0);
      return false;
    } else {
      prompt = prompt.subspan(*shared);
    }
    if (!r.echo || !r.logprobs) s.scored.clear();
    const std::uint64_t seed = r.seed ? *r.seed
                                      : static_cast<std::uint64_t>(
                                            std::chrono::system_clock::now().time_since_epoch().count());
    s.chooser.emplace(model::sampler_config{.temperature = r.temperature, .top_p = r.top_p}, model::seeded_random{seed});
    s.stops.assign(r.stop.begin(), r.stop.end());
    s.options = {.max_tokens = j.max_tokens,
                 .stop = s.stops,
                 .stop_tokens = renderer_.stop_tokens(),
                 .ignore_eos = r.ignore_eos,
                 .alternatives = r.logprobs ? r.top_logprobs : 0};
    s.ttft = -1;
    // The generation follows the whole prompt's text; the session decodes what it lacks.
    HEDGE_TRY(s.state.start(j.prompt, s.options));
    auto logits = runnable_->model.prefill(s.session, prompt, executor);
    if (!logits) return logits.error();
    // What the session holds once the prompt is in (generated tokens are not kept: the next
    // job rolls back to the prompt at most).
    s.decoded.assign(j.prompt.begin(), j.prompt.end());
    s.decode_start = std::chrono::steady_clock::now();
    if (token_delay_.count() > 0 && !pass_paid) std::this_thread::sleep_for(token_delay_);
    auto more = s.state.next(*logits, *s.chooser, j.prompt.size(),
                             [&](const model::generated_token& t) { return deliver(s, t); });
    if (!more) return more.error();
    if (!*more) done(s);
    return *more;
  }

  /// One decode step of every running generation, in one batch; a generation that has no
  /// room left ends with its capacity error, one that ends frees its slot.
  template <class Executor>
  void step(Executor& executor) {
    llama& model = runnable_->model;
    batch_sessions_.clear();
    batch_tokens_.clear();
    batch_slots_.clear();
    for (auto& s : slots_) {
      if (!s->running) continue;
      const auto held = model.length(s->session);
      if (!held || *held >= model.context()) {
        // As generator::run: what is held back is delivered before the error.
        s->state.end(model::stop_reason::max_tokens, held ? *held : 0,
                     [&](const model::generated_token& t) { return deliver(*s, t); });
        finish(*std::exchange(s->running, nullptr),
               held ? result<void>(error{errc::capacity_exceeded} << "the generation has filled the context of "
                                                                   << model.context() << " tokens")
                    : result<void>(held.error()));
        continue;
      }
      batch_sessions_.push_back(s->session);
      batch_tokens_.push_back(s->state.last());
      batch_slots_.push_back(s.get());
    }
    if (batch_slots_.empty()) return;
    if (token_delay_.count() > 0) std::this_thread::sleep_for(token_delay_);
    auto rows = model.decode_batch(batch_sessions_, batch_tokens_, executor);
    for (std::size_t i = 0; i < batch_slots_.size(); ++i) {
      slot& s = *batch_slots_[i];
      if (!rows) {
        finish(*std::exchange(s.running, nullptr), result<void>(rows.error()));
        continue;
      }
      auto more = s.state.next(rows->row(i).span(), *s.chooser, *model.length(s.session),
                               [&](const model::generated_token& t) { return deliver(s, t); });
      if (more && *more) continue;
      if (more) done(s);
      finish(*std::exchange(s.running, nullptr), more ? result<void>(ok()) : result<void>(more.error()));
    }
  }

  /// The job's figures once its generation has ended.
  void done(slot& s) {
    job& j = *s.running;
    const std::size_t generated = s.state.generated();
    j.completion_tokens = generated;
    j.finish_reason = s.state.reason() == model::stop_reason::max_tokens ? "length" : "stop";
    if (s.state.reason() == model::stop_reason::cancelled) metrics_->cancelled();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.decode_start).count();
    const std::size_t decoded = generated > 0 ? generated - 1 : 0;
    metrics_->generation(j.prompt.size(), generated, s.ttft, seconds > 0 ? static_cast<double>(decoded) / seconds : 0.0);
  }

  const model::tokenizer* tok_;
  model::chat_renderer renderer_;
  std::size_t threads_;
  std::size_t queue_bound_;
  std::chrono::milliseconds token_delay_{0};
  std::chrono::milliseconds round_trip_{0};
  server::metrics* metrics_;
  exec::serial serial_;
  exec::thread_pool pool_;
  std::unique_ptr<os::runnable_llama> runnable_;
  std::vector<std::unique_ptr<slot>> slots_;
  // One decode step's batch (worker thread only; reserved once).
  std::vector<kv::kv_seq> batch_sessions_;
  std::vector<model::token_id> batch_tokens_;
  std::vector<slot*> batch_slots_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<job>> waiting_;
  bool stopping_ = false;
  std::atomic<std::size_t> running_{0};  ///< written under mutex_
  std::atomic<bool> stopping_flag_{false};  ///< stopping_, read by the worker without the lock
  std::thread worker_;
};

}  // namespace hedge::server
