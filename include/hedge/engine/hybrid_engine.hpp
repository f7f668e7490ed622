// hedge/engine/hybrid_engine.hpp: hybrid_engine<Edge, Cloud, Router, Verifier, Clock, Observer>.
//
// One request in, one outcome out:
//
//   admit -> redact (privacy.hpp) -> route (Router on the redacted text and the live tier
//   state) -> run the mode -> verify while streaming -> hand off / fall back -> restore -> emit
//
// Modes. The caller may name one; `automatic` maps the router's decision:
//   reject                          -> no tier answers; the outcome names why
//   edge by a hard verdict          -> edge_only   (privacy, offline, budget, breaker open)
//   edge by preference              -> edge_first  (verified; escalation hands off to the cloud)
//   cloud by a hard verdict         -> cloud_only  (the edge cannot hold the request)
//   cloud by preference             -> cloud_first (the edge takes over when every cloud fails)
// and edge_first / cloud_first become `race` when the request has a TTFT objective, the
// chosen tier's predicted TTFT is above `race_margin` of it, and the cloud backend runs
// concurrently: both start, the first token the caller could be shown wins.
// `speculative` (named by the caller, or chosen for cloud_first once the measured acceptance
// and round trip say it beats the cloud's own decode rate: speculation_pays) runs
// speculative.hpp's loop: the edge drafts, each cloud in order scores, and the text is the
// cloud model's. It needs an edge that is a SpeculativeEdge and a cloud that scores (a
// cloud_tier given a scorer); a cloud that cannot score answers plainly, and the outcome's
// `speculation.unsupported` says so. Failures follow the cloud modes' rules: retries,
// breakers, the next cloud continuing after the emitted tokens, then the edge.
//
// Invariants (each is a test in tests/engine/):
// - Text the caller received is never withdrawn, repeated or lost: every tier continues
//   after the delivered bytes (edge_first's held tokens are dropped on escalation, never
//   shown); the outcome's spans say which tier wrote which bytes.
// - Nothing private reaches a cloud backend: a request with a restricted data class, or
//   with an entity the privacy options keep on the device, never calls one, whatever the
//   router or the caller's mode says; everything else is sent redacted (messages, the
//   edge-written summary and hand-off continuations alike) and restored in the answer.
// - One deadline and one cost cap per request, shared by every attempt at every tier.
//   Past the TTFT objective without a first token, the engine fails over.
// - Every request ends with an outcome: ok, or the error that says why no tier could answer,
//   with whatever text was delivered before it.
//
// The engine is single-threaded and allocation-free after warm-up: its buffers are members
// reserved at construction and reused by every run(). No OS calls: time and waiting come
// from the Clock, I/O from the backends.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/core/function_ref.hpp"
#include "hedge/core/result.hpp"
#include "hedge/engine/backend.hpp"
#include "hedge/engine/budget.hpp"
#include "hedge/engine/circuit_breaker.hpp"
#include "hedge/engine/clock.hpp"
#include "hedge/engine/events.hpp"
#include "hedge/engine/privacy.hpp"
#include "hedge/engine/request.hpp"
#include "hedge/engine/retry.hpp"
#include "hedge/engine/speculative.hpp"
#include "hedge/engine/telemetry.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/router.hpp"
#include "hedge/verify/verifier.hpp"

namespace hedge::engine {

/// A router as the engine uses it: route::router<Policies...> or a type with the same decide().
template <class R>
concept Router = requires(const R& r, const route::route_request& request, const route::route_context& context) {
  { r.decide(request, context).chosen } -> std::convertible_to<route::tier>;
  { r.decide(request, context).why } -> std::convertible_to<route::reason>;
  r.decide(request, context).verdicts;
};

struct engine_options {
  privacy_options privacy{};
  retry_options retry{};
  breaker_options breaker{};
  budget_options budget{};
  tier_prices edge_prices{};
  std::array<tier_prices, max_clouds> cloud_prices{};
  std::chrono::milliseconds default_deadline{120'000};
  cloud::transport_limits cloud_limits{};  ///< per attempt; cut to the request's deadline
  double race_margin = 0.5;                ///< race when a tier's predicted TTFT > margin x SLO
  std::uint64_t jitter_seed = 0x5EED;
  std::string_view summary_instruction =
      "Summarize the conversation so far in a few sentences. Keep every fact needed to answer the next message.";
  std::uint32_t summary_max_tokens = 128;
  std::size_t reserve_bytes = 64 * 1024;   ///< text buffers reserved at construction
  std::size_t speculation_k_max = 8;       ///< the longest draft per round
  std::size_t speculation_alternatives = 8;  ///< target alternatives asked per position
  bool speculate_when_it_pays = true;      ///< automatic cloud_first becomes speculative when measured to pay
};

/// \tparam Edge     an EdgeBackend (engine/edge_tier.hpp over hedge's model, or your own)
/// \tparam Cloud    a CloudBackend (engine/cloud_tier.hpp over cloud_client, os/cloud_worker.hpp, ...)
/// \tparam R        a Router (route::router<Policies...>)
/// \tparam V        a verify::Verifier (verify::logistic_verifier)
/// \tparam C        a Clock (os::steady_clock, or simulated_clock in tests)
/// \tparam O        an Observer (telemetry, null_observer)
template <EdgeBackend Edge, CloudBackend Cloud, Router R, verify::Verifier V, Clock C, Observer O = telemetry>
class hybrid_engine {
 public:
  using clock_type = C;
  using time_point = typename C::time_point;
  using event_callback = function_ref<void(const engine_event&)>;

  /// \param clouds the cloud endpoints in fallback order (at most max_clouds; none: edge only)
  hybrid_engine(Edge& edge, std::span<Cloud* const> clouds, R router, V verifier, C clock, O observer = {},
                engine_options options = {})
      : edge_(edge), router_(std::move(router)), verifier_(std::move(verifier)), clock_(clock),
        observer_(std::move(observer)), options_(options), budget_(clock, options.budget), restorer_(vault_) {
    cloud_count_ = std::min(clouds.size(), max_clouds);
    for (std::size_t i = 0; i < cloud_count_; ++i) {
      clouds_[i] = clouds[i];
      breakers_.emplace_back(clock, options.breaker);
    }
    jitter_.state = options.jitter_seed;
    if constexpr (requires { observer_.all_cloud_prices; }) observer_.all_cloud_prices = options.cloud_prices[0];
    const std::size_t bytes = options.reserve_bytes;
    delivered_.reserve(bytes);
    routed_text_.reserve(bytes);
    cloud_text_.reserve(bytes);
    continuation_.reserve(bytes);
    held_text_.reserve(bytes);
    race_text_.reserve(bytes);
    summary_.reserve(bytes / 4);
    cloud_extra_.reserve(4096);
    held_.reserve(4096);
    cloud_messages_.reserve(256);
    summary_messages_.reserve(256);
    message_ranges_.reserve(256);
    vault_.reserve(64, 4096);
    restorer_.reserve(4096);
    if constexpr (SpeculativeEdge<Edge>) {
      if (edge.ready() && cloud_count_ > 0) {
        auto d = speculative_decoder<C>::make(edge.vocab_size(), options.speculation_k_max, edge.context_tokens(), clock);
        if (d) decoder_.emplace(std::move(*d));
        speculation_ids_.reserve(edge.context_tokens());
      }
    }
  }

  hybrid_engine(const hybrid_engine&) = delete;
  hybrid_engine& operator=(const hybrid_engine&) = delete;

  /// Runs one request to its end. on_event(const engine_event&) gets tokens, hand-offs,
  /// retries, fallbacks and breaker transitions as they happen.
  template <class OnEvent>
  engine_outcome run(const engine_request& request, OnEvent&& on_event) {
    auto callback = [&](const engine_event& e) { on_event(e); };
    return run_request(request, event_callback(callback));
  }
  engine_outcome run(const engine_request& request) {
    return run(request, [](const engine_event&) {});
  }

  /// The live tier state the router sees (measured speeds, breakers, budget).
  [[nodiscard]] route::route_context context() {
    route::route_context c = context_;
    c.edge_context_tokens = edge_.ready() ? static_cast<std::uint32_t>(edge_.context_tokens()) : 0u;
    c.edge_kv_free_tokens = c.edge_context_tokens;
    c.cloud_circuit = route::circuit::open;
    for (std::size_t i = 0; i < cloud_count_; ++i) {
      const auto s = breakers_[i].state();
      if (s == route::circuit::closed || (s == route::circuit::half_open && c.cloud_circuit == route::circuit::open))
        c.cloud_circuit = s;
    }
    c.offline = cloud_count_ == 0;
    c.budget_remaining = budget_.remaining();
    return c;
  }

  [[nodiscard]] O& observer() noexcept { return observer_; }
  [[nodiscard]] const O& observer() const noexcept { return observer_; }
  [[nodiscard]] R& router() noexcept { return router_; }
  [[nodiscard]] V& verifier() noexcept { return verifier_; }
  [[nodiscard]] std::size_t cloud_count() const noexcept { return cloud_count_; }
  [[nodiscard]] route::circuit breaker_state(std::size_t cloud) const noexcept { return breakers_[cloud].state(); }
  [[nodiscard]] budget<C>& spending() noexcept { return budget_; }
  [[nodiscard]] const engine_options& options() const noexcept { return options_; }
  /// The text delivered by the last run (valid until the next).
  [[nodiscard]] std::string_view delivered() const noexcept { return delivered_; }

 private:
  enum class edge_end : std::uint8_t { accepted, escalated, failed, stopped };

  struct held_token {
    std::uint32_t offset, size;
    std::int32_t id;  ///< -1: text without a token (held-back text at the end)
    float logprob;
    time_point at;
  };

  /// Per-request state that is not a reused buffer.
  struct run_state {
    explicit run_state(event_callback e) : on_event(e) {}
    const engine_request* request = nullptr;
    engine_outcome* outcome = nullptr;
    event_callback on_event;
    time_point start{}, deadline{};
    std::optional<time_point> ttft_deadline;
    bool private_data = false;   ///< nothing may reach a cloud
    bool cloud_messages_ready = false;
    std::uint32_t prompt_tokens = 0;
  };

  // ---- the request, top to bottom -------------------------------------------------------

  engine_outcome run_request(const engine_request& request, event_callback on_event) {
    engine_outcome outcome;
    outcome.requested = request.requested;
    run_state st{on_event};
    st.request = &request;
    st.outcome = &outcome;
    st.start = clock_.now();
    const auto deadline = request.deadline.count() > 0 ? request.deadline : options_.default_deadline;
    st.deadline = st.start + std::chrono::duration_cast<typename C::duration>(deadline);
    if (request.ttft_slo_ms > 0)
      st.ttft_deadline = st.start + std::chrono::duration_cast<typename C::duration>(
                                        std::chrono::duration<double, std::milli>(request.ttft_slo_ms));
    clear_buffers();

    if (request.messages.empty() && request.prompt.empty()) {
      outcome.status = error{errc::invalid_argument} << "a request needs messages or a prompt";
      return finish(st);
    }
    redact_for_routing(st);
    const mode chosen = choose_mode(st);
    outcome.ran = chosen;
    if (!outcome.ok()) return finish(st);
    {
      engine_event e;
      e.kind = event_kind::routed;
      e.ran = chosen;
      e.route_reason = outcome.route_reason;
      e.tier = chosen == mode::edge_only || chosen == mode::edge_first || chosen == mode::race ? tier_id::edge()
                                                                                               : next_cloud();
      emit(st, e);
    }
    switch (chosen) {
      case mode::edge_only: run_edge_mode(st, false); break;
      case mode::edge_first: run_edge_mode(st, true); break;
      case mode::cloud_only: run_cloud_mode(st, false); break;
      case mode::cloud_first: run_cloud_mode(st, request.fallback); break;
      case mode::race: run_race(st); break;
      case mode::speculative: run_speculative(st); break;
      case mode::automatic: break;
    }
    return finish(st);
  }

  void clear_buffers() noexcept {
    delivered_.clear();
    routed_text_.clear();
    cloud_text_.clear();
    continuation_.clear();
    held_text_.clear();
    race_text_.clear();
    summary_.clear();
    held_.clear();
    cloud_messages_.clear();
    message_ranges_.clear();
    vault_.clear();
    restorer_.reset();
  }

  /// The routed text: every message (or the prompt), redacted. The router's privacy policy
  /// then sees only what the privacy options keep on the device.
  void redact_for_routing(run_state& st) {
    const engine_request& r = *st.request;
    std::size_t replaced = 0;
    if (r.messages.empty()) {
      replaced += redact(r.prompt, options_.privacy, vault_, routed_text_);
    } else {
      for (const cloud::chat_message& m : r.messages) {
        if (!routed_text_.empty()) routed_text_.push_back('\n');
        replaced += redact(m.content, options_.privacy, vault_, routed_text_);
      }
    }
    st.outcome->redactions = replaced;
    st.prompt_tokens = static_cast<std::uint32_t>((routed_text_.size() + 3) / 4);
    // The engine's own hard line, whatever the router says.
    const bool restricted = route::any(r.classes & options_.privacy.restricted);
    const bool kept = options_.privacy.keep_on_device != route::pii_entity::none &&
                      route::pii_detector(options_.privacy.keep_on_device).first(routed_text_).has_value();
    st.private_data = restricted || kept;
  }

  mode choose_mode(run_state& st) {
    const engine_request& r = *st.request;
    engine_outcome& out = *st.outcome;
    route::route_request rr;
    rr.prompt = routed_text_;
    rr.classes = r.classes;
    rr.ttft_slo_ms = r.ttft_slo_ms;
    rr.max_cost = r.max_cost;
    rr.expected_output_tokens = r.expected_output_tokens ? r.expected_output_tokens : r.sampling.max_tokens;
    rr.prompt_tokens = st.prompt_tokens;
    const route::route_context ctx = context();
    const auto d = router_.decide(rr, ctx);
    out.routed = d.chosen;
    out.route_reason = d.why;
    route::explain(d, out.route_explanation);

    if (r.requested != mode::automatic) {
      // The caller's mode never overrides the privacy rule.
      if (st.private_data && r.requested != mode::edge_only) return mode::edge_only;
      return r.requested;
    }
    if (d.chosen == route::tier::reject) {
      out.status = error{errc::rejected} << "no tier may answer: " << route::to_string(d.why);
      if (d.why == route::reason::no_tier_available && st.private_data) out.status = error{errc::rejected}
                                                                                      << "no tier may answer: private data, "
                                                                                      << (edge_.ready() ? "edge cannot hold it"
                                                                                                        : "edge down");
      return mode::automatic;
    }
    bool hard = false;
    for (const auto& v : d.verdicts)
      hard = hard || (d.chosen == route::tier::edge && v.kind == route::verdict_kind::edge_only) ||
             (d.chosen == route::tier::cloud && v.kind == route::verdict_kind::cloud_only);
    if (st.private_data) return mode::edge_only;
    mode m = d.chosen == route::tier::edge ? (hard ? mode::edge_only : mode::edge_first)
                                           : (hard ? mode::cloud_only : mode::cloud_first);
    if (m == mode::cloud_first && speculation_pays_now()) m = mode::speculative;
    if (!hard && Cloud::concurrent && r.ttft_slo_ms > 0 && cloud_count_ > 0 && edge_.ready()) {
      const double predicted = d.chosen == route::tier::edge ? route::latency_policy::edge_ttft_ms(rr, ctx)
                                                             : route::latency_policy::cloud_ttft_ms(rr, ctx);
      if (predicted > options_.race_margin * r.ttft_slo_ms) m = mode::race;
    }
    return m;
  }

  engine_outcome finish(run_state& st) {
    engine_outcome& out = *st.outcome;
    out.total = elapsed(st);
    out.cost = out_cost(out);
    if (out.cost > 0) budget_.charge(out.cost);
    if (!out.ok()) out.finish_reason = "error";
    observer_.on_outcome(out);
    return out;
  }

  // ---- the edge --------------------------------------------------------------------------

  /// edge_first (escalate = true) and edge_only. A failed or escalated edge hands the
  /// request to the cloud where that is allowed.
  void run_edge_mode(run_state& st, bool escalate) {
    engine_outcome& out = *st.outcome;
    const bool cloud_allowed = !st.private_data && cloud_count_ > 0 && st.request->fallback;
    if (!edge_.ready()) {
      if (cloud_allowed) {
        emit_fallback(st, tier_id::edge(), next_cloud(), errc::unavailable);
        run_clouds(st, false);
      } else {
        out.status = error{errc::unavailable} << (st.private_data ? "no tier may answer: private data, edge down"
                                                                  : "no tier may answer: edge down, no cloud fallback");
      }
      return;
    }
    const auto end = run_edge(st, true, escalate && cloud_allowed, st.request->hold, st.request->sampling.max_tokens);
    if (end == edge_end::escalated) {
      out.escalated = true;
      emit_handoff(st, tier_id::edge(), next_cloud(), handoff_reason::escalated);
      run_clouds(st, true);
    } else if (end == edge_end::failed && cloud_allowed) {
      emit_handoff(st, tier_id::edge(), next_cloud(), handoff_reason::edge_failed);
      run_clouds(st, false);
    }
  }

  /// Generates at the edge after the delivered text, through the commit buffer. `verifying`:
  /// the verifier judges this answer (not when the edge is the last resort after the cloud).
  /// `before_token` (a race) runs before each token and stops the edge by returning false.
  edge_end run_edge(run_state& st, bool verifying, bool may_escalate, delivery hold, std::uint32_t max_tokens,
                    const function_ref<bool()>* before_token = nullptr) {
    engine_outcome& out = *st.outcome;
    tier_report& rep = out.tiers[0];
    rep.used = true;
    ++rep.attempts;
    if (verifying) verifier_.begin(routed_text_);
    held_.clear();
    held_text_.clear();
    edge_call call;
    call.messages = st.request->messages;
    call.prompt = st.request->prompt;
    call.continuation = delivered_;
    call.sampling = st.request->sampling;
    const std::size_t used = out.tokens;
    call.max_tokens = max_tokens > used ? static_cast<std::uint32_t>(max_tokens - used) : 0u;
    bool escalated = false, timed_out = false, stopped = false;
    const time_point began = clock_.now();
    auto on_token = [&](const edge_token& t) -> bool {
      if ((before_token != nullptr && !(*before_token)()) || cancelled(st)) {
        stopped = true;
        return false;
      }
      const bool token = t.id >= 0;
      if (token) ++rep.output_tokens;
      if (verifying && token) {
        const auto v = verifier_.observe(verify::token_observation{t.id, t.logprob, t.entropy});
        if (v.action == verify::verify_action::escalate) {
          out.verified = true;
          out.verdict = v;
          if (may_escalate) {
            escalated = true;
            return false;
          }
        }
      }
      // One clock reading per token: the commit buffer's times and the deadline share it.
      const time_point now = clock_.now();
      hold_token(t, now);
      release_held(st, hold, false, now);
      if (now >= st.deadline) {
        timed_out = true;
        return false;
      }
      return true;
    };
    auto summary = edge_.generate(call, function_ref<bool(const edge_token&)>(on_token));
    const time_point ended = clock_.now();
    rep.busy += std::chrono::duration_cast<std::chrono::nanoseconds>(ended - began);
    if (summary) {
      rep.input_tokens += summary->prompt_tokens;
      measure_edge(*summary, began, ended);
      if (summary->length_limited) out.finish_reason = "length";
    }
    if (escalated) {
      held_.clear();  // never shown: the escalation is invisible
      held_text_.clear();
      return edge_end::escalated;
    }
    if (!summary) {
      out.status = summary.error();
      if (!may_escalate) release_held(st, hold, true);  // the edge's best; nothing produced is lost
      else held_.clear(), held_text_.clear();
      return edge_end::failed;
    }
    if (timed_out) {
      release_held(st, hold, true);
      out.status = error{errc::timeout} << "the request's deadline passed at the edge after " << out.tokens << " tokens";
      return edge_end::stopped;
    }
    if (cancelled(st)) {
      release_held(st, hold, true);  // tokens already produced are not lost
      out.status = error{errc::rejected, "cancelled"};
      return edge_end::stopped;
    }
    if (stopped) return edge_end::stopped;
    if (verifying && !out.verified) {
      out.verified = true;
      out.verdict = verifier_.finish();
      // An answer cut at max_tokens and already shown whole has nothing left to continue.
      const bool all_shown = summary->length_limited && held_.empty();
      if (out.verdict.action == verify::verify_action::escalate && may_escalate && !all_shown) {
        held_.clear();
        held_text_.clear();
        return edge_end::escalated;
      }
    }
    release_held(st, hold, true);
    return edge_end::accepted;
  }

  void hold_token(const edge_token& t, time_point now) {
    held_token h{static_cast<std::uint32_t>(held_text_.size()), static_cast<std::uint32_t>(t.text.size()), t.id,
                 t.logprob, now};
    held_text_.append(t.text);
    held_.push_back(h);
  }

  /// Releases held tokens past the commit buffer (all of them with `all`).
  void release_held(run_state& st, delivery hold, bool all, std::optional<time_point> at = std::nullopt) {
    std::size_t n = 0;
    const auto now = at ? *at : clock_.now();
    const auto hold_time = std::chrono::duration_cast<typename C::duration>(hold.hold_time);
    while (n < held_.size()) {
      const std::size_t remaining = held_.size() - n;
      const bool by_count = remaining > hold.hold_tokens;
      const bool by_time = hold.hold_time.count() > 0 && now - held_[n].at >= hold_time;
      if (!all && !by_count && !by_time) break;
      const held_token& h = held_[n];
      deliver(st, tier_id::edge(), std::string_view(held_text_).substr(h.offset, h.size), h.id, h.logprob,
              h.id >= 0 ? 1u : 0u);
      ++n;
    }
    if (n == 0) return;
    if (n == held_.size()) {
      held_.clear();
      held_text_.clear();
      return;
    }
    // Rare (a time-released prefix of a long buffer): shift what stays.
    const std::uint32_t cut = held_[n].offset;
    held_text_.erase(0, cut);
    held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(n));
    for (held_token& h : held_) h.offset -= cut;
  }

  void measure_edge(const edge_summary& s, time_point began, time_point ended) {
    const double seconds = std::chrono::duration<double>(ended - began).count();
    if (seconds <= 0 || s.generated + s.prompt_tokens == 0) return;
    // One figure per run: tokens generated per second of the run (prefill included, which is
    // what a caller waits for); the prefill rate from the same run when it generated little.
    if (s.generated > 1) context_.edge_decode_tokens_per_s.update(static_cast<double>(s.generated) / seconds);
    if (s.prompt_tokens > 0 && s.generated <= 1)
      context_.edge_prefill_tokens_per_s.update(static_cast<double>(s.prompt_tokens) / seconds);
  }

  // ---- the cloud -------------------------------------------------------------------------

  void run_cloud_mode(run_state& st, bool edge_fallback) {
    if (st.private_data) {  // unreachable through choose_mode; kept as the last line of defence
      st.outcome->status = error{errc::rejected} << "private data may not leave the device";
      return;
    }
    run_clouds(st, edge_fallback && edge_.ready());
  }

  /// Tries each cloud in order (retries with back-off at each), continuing after the
  /// delivered text; when all fail, the edge continues where allowed.
  void run_clouds(run_state& st, bool edge_fallback, std::size_t first = 0, bool first_begun = false) {
    engine_outcome& out = *st.outcome;
    out.status = ok();
    if (st.private_data) {
      out.status = error{errc::rejected} << "private data may not leave the device";
      return;
    }
    error last{errc::unavailable, "no cloud endpoint configured"};
    std::size_t tried = first;
    for (std::size_t i = first; i < cloud_count_; ++i) {
      if (cancelled(st)) {
        out.status = error{errc::rejected, "cancelled"};
        return;
      }
      const bool begun = first_begun && i == first;
      breaker_transition t = breaker_transition::none;
      if (!begun && !breakers_[i].allow(&t)) {
        last = error{errc::unavailable} << "cloud " << i << ": circuit breaker open";
        continue;
      }
      if (t != breaker_transition::none) emit_breaker(st, i, t);
      tried = i;
      auto r = run_cloud(st, i, begun);
      if (r) return;
      last = r.error();
      if (r.error().code() == errc::rejected && r.error().message().starts_with("over")) break;
      if (i + 1 < cloud_count_) emit_fallback(st, tier_id::cloud_at(i), tier_id::cloud_at(i + 1), last.code());
    }
    if (cancelled(st)) {
      out.status = error{errc::rejected, "cancelled"};
      return;
    }
    if (edge_fallback && edge_.ready() && clock_.now() < st.deadline) {
      out.fell_back = true;
      if (out.tokens > 0) emit_handoff(st, tier_id::cloud_at(tried), tier_id::edge(), handoff_reason::cloud_failed);
      else emit_fallback(st, tier_id::cloud_at(tried), tier_id::edge(), last.code());
      const auto end = run_edge(st, false, false, delivery::immediate(), st.request->sampling.max_tokens);
      if (end == edge_end::accepted) out.status = ok();
      return;
    }
    out.status = last;
  }

  /// Attempts at cloud i until it answers, its retries are spent, or the deadline passes.
  result<void> run_cloud(run_state& st, std::size_t i, bool begun) {
    engine_outcome& out = *st.outcome;
    tier_report& rep = out.tiers[1 + i];
    rep.used = true;
    if (auto r = prepare_cloud_messages(st); !r) return r;
    for (std::uint32_t attempt = 1;; ++attempt) {
      const auto now = clock_.now();
      if (now >= st.deadline) return error{errc::timeout} << "the request's deadline passed before cloud " << i << " answered";
      const double estimate = options_.cloud_prices[i].cost(st.prompt_tokens + continuation_.size() / 4, 0);
      if (st.request->max_cost > 0 && out_cost(out) + estimate > st.request->max_cost)
        return error{errc::rejected} << "over the request's cost cap (" << st.request->max_cost << ") at cloud " << i;
      // The period budget holds whatever mode the caller named (the router reads it too).
      if (const double left = budget_.remaining(); left >= 0 && out_cost(out) + estimate > left)
        return error{errc::rejected} << "over the period budget (" << left << " left) at cloud " << i;
      cloud_poll result = attempt_cloud(st, i, begun && attempt == 1);
      ++rep.attempts;
      if (cancelled(st)) return error{errc::rejected, "cancelled"};
      if (result.state == cloud_state::finished) {
        if (auto t = breakers_[i].record_success(); t != breaker_transition::none) emit_breaker(st, i, t);
        if (result.finish_reason == "length") out.finish_reason = "length";
        return ok();
      }
      if (!wait_to_retry(st, i, attempt, result.status.error().code(), result.retry_after)) return result.status;
    }
  }

  /// After a failed attempt at cloud i: the breaker learns of it, and, when the retry policy,
  /// the deadline (and, before a first token, the TTFT objective) and the breaker allow
  /// another attempt, the retry event is emitted and its back-off waited. False: give up.
  bool wait_to_retry(run_state& st, std::size_t i, std::uint32_t attempt, errc code,
                     std::optional<std::chrono::seconds> retry_after) {
    engine_outcome& out = *st.outcome;
    if (is_transient(code)) {
      if (auto t = breakers_[i].record_failure(); t != breaker_transition::none) emit_breaker(st, i, t);
    } else {
      breakers_[i].release_probe();
    }
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(st.deadline - clock_.now());
    if (out.tokens == 0 && st.ttft_deadline && clock_.now() >= *st.ttft_deadline) remaining = std::chrono::milliseconds(0);
    const auto delay = retry_.next_delay(attempt, code, retry_after, remaining, jitter_);
    if (!delay || breakers_[i].state() == route::circuit::open) return false;
    engine_event e = event_at(st, event_kind::retry, tier_id::cloud_at(i));
    e.failure = code;
    e.attempt = attempt + 1;
    e.delay = *delay;
    ++out.retries;
    emit(st, e);
    clock_.sleep_for(std::chrono::duration_cast<typename C::duration>(*delay));
    return true;
  }

  /// One call at cloud i, polled to its end; its text is restored and delivered as it comes.
  cloud_poll attempt_cloud(run_state& st, std::size_t i, bool begun) {
    engine_outcome& out = *st.outcome;
    tier_report& rep = out.tiers[1 + i];
    Cloud& cloud = *clouds_[i];
    const time_point began = clock_.now();
    continuation_.clear();
    if (!delivered_.empty()) out.redactions += redact(delivered_, options_.privacy, vault_, continuation_);
    cloud_call call;
    call.messages = cloud_messages_;
    call.prompt = cloud_messages_.empty() ? std::string_view(cloud_text_) : std::string_view{};
    call.continuation = continuation_;
    call.extra = cloud_extra_;
    call.sampling = st.request->sampling;
    const std::size_t used = out.tokens;
    call.max_tokens = st.request->sampling.max_tokens > used ? static_cast<std::uint32_t>(st.request->sampling.max_tokens - used) : 1u;
    call.limits = limits_for(st);
    restorer_.reset();
    std::uint64_t tokens = 0;
    auto on_piece = [&](const cloud_piece& p) -> bool {
      tokens += p.tokens;
      restorer_.feed(p.text, [&](std::string_view text) { deliver(st, tier_id::cloud_at(i), text, -1, p.logprob, 0); });
      count_cloud_tokens(st, i, p.tokens);
      return !cancelled(st);
    };
    cloud_poll result;
    if (!begun) {
      if (auto r = cloud.begin(call); !r) {
        result.state = cloud_state::failed;
        result.status = r.error();
        rep.busy += std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now() - began);
        return result;
      }
    } else {
      // A race's winner: its first pieces were kept aside while the edge ran.
      on_piece(cloud_piece{race_text_, std::numeric_limits<float>::quiet_NaN(), race_tokens_});
      race_text_.clear();
    }
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(st.deadline - clock_.now());
      if (left.count() < 0) left = std::chrono::milliseconds(0);
      // A request that can be cancelled is looked at between short waits.
      if (st.request->cancel != nullptr && left > cancel_check) left = cancel_check;
      result = cloud.poll(function_ref<bool(const cloud_piece&)>(on_piece), left);
      if (result.state != cloud_state::running) break;
      if (cancelled(st)) {
        cloud.cancel();
        result.state = cloud_state::failed;
        result.status = error{errc::rejected, "cancelled"};
        break;
      }
      if (clock_.now() >= st.deadline) {
        cloud.cancel();
        result.state = cloud_state::failed;
        result.status = error{errc::timeout} << "the request's deadline passed while cloud " << i << " streamed";
        break;
      }
    }
    if (result.state == cloud_state::finished) restorer_.finish([&](std::string_view text) {
      deliver(st, tier_id::cloud_at(i), text, -1, std::numeric_limits<float>::quiet_NaN(), 0);
    });
    out.model_pii += restorer_.model_pii();
    restorer_.reset();  // a failed call's held-back bytes were never shown: the next tier continues before them
    const std::uint64_t sent = result.prompt_tokens >= 0 ? static_cast<std::uint64_t>(result.prompt_tokens)
                                                         : st.prompt_tokens + continuation_.size() / 4;
    const std::uint64_t got = result.completion_tokens >= 0 ? static_cast<std::uint64_t>(result.completion_tokens) : tokens;
    rep.input_tokens += sent;
    rep.output_tokens += got;
    rep.cost += options_.cloud_prices[i].cost(sent, got);
    const time_point ended = clock_.now();
    rep.busy += std::chrono::duration_cast<std::chrono::nanoseconds>(ended - began);
    if (result.state == cloud_state::finished && rep.time_to_first_token)
      context_.cloud_rtt_ms.update(std::chrono::duration<double, std::milli>(*rep.time_to_first_token).count());
    if (result.state == cloud_state::finished && got > 1) {
      const double s = std::chrono::duration<double>(ended - began).count();
      if (s > 0) context_.cloud_decode_tokens_per_s.update(static_cast<double>(got) / s);
    }
    return result;
  }

  void count_cloud_tokens(run_state& st, std::size_t i, std::uint32_t tokens) {
    st.outcome->tokens += tokens;
    st.outcome->tiers[1 + i].delivered_tokens += tokens;
  }

  /// Per-attempt limits cut to what is left of the request's deadline, and, before the first
  /// token, to what is left of its TTFT objective.
  cloud::transport_limits limits_for(const run_state& st) const {
    cloud::transport_limits l = options_.cloud_limits;
    const auto now = clock_.now();
    auto cut = [](std::chrono::milliseconds& limit, std::chrono::milliseconds left) {
      if (left.count() < 1) left = std::chrono::milliseconds(1);
      if (limit.count() == 0 || limit > left) limit = left;
    };
    cut(l.total, std::chrono::duration_cast<std::chrono::milliseconds>(st.deadline - now));
    if (st.outcome->tokens == 0 && st.ttft_deadline)
      cut(l.first_byte, std::chrono::duration_cast<std::chrono::milliseconds>(*st.ttft_deadline - now));
    return l;
  }

  /// The messages a cloud gets: each redacted, or an edge-written summary of the earlier
  /// turns plus the last message. Built once per request, at its first cloud call.
  result<void> prepare_cloud_messages(run_state& st) {
    if (st.cloud_messages_ready) return ok();
    st.cloud_messages_ready = true;
    const engine_request& r = *st.request;
    engine_outcome& out = *st.outcome;
    cloud_extra_.clear();
    if (!r.extra.empty()) out.redactions += redact(r.extra, options_.privacy, vault_, cloud_extra_);
    cloud_text_.clear();
    if (r.messages.empty()) {
      redact(r.prompt, options_.privacy, vault_, cloud_text_);
      return ok();
    }
    std::size_t from = 0;
    if (r.summarize_history && r.messages.size() >= 3 && edge_.ready()) {
      summary_.clear();
      std::string_view instruction = options_.summary_instruction;
      // The earlier turns, then the instruction as the last user turn.
      summary_messages_.assign(r.messages.begin(), r.messages.end() - 1);
      summary_messages_.push_back(cloud::chat_message{"user", instruction});
      edge_call call;
      call.messages = summary_messages_;
      call.sampling = r.sampling;
      call.max_tokens = options_.summary_max_tokens;
      const time_point began = clock_.now();
      auto summarized = edge_.generate(call, [&](const edge_token& t) {
        summary_.append(t.text);
        return true;
      });
      out.tiers[0].used = true;
      out.tiers[0].busy += std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now() - began);
      if (summarized && !summary_.empty()) {
        out.tiers[0].input_tokens += summarized->prompt_tokens;
        out.tiers[0].output_tokens += summarized->generated;
        message_ranges_.push_back({"system", cloud_text_.size(), 0});
        cloud_text_.append("Summary of the earlier conversation: ");
        out.redactions += redact(summary_, options_.privacy, vault_, cloud_text_);
        message_ranges_.back().size = cloud_text_.size() - message_ranges_.back().offset;
        from = r.messages.size() - 1;
        out.summarized = true;
      }
    }
    for (std::size_t m = from; m < r.messages.size(); ++m) {
      message_ranges_.push_back({r.messages[m].role, cloud_text_.size(), 0});
      redact(r.messages[m].content, options_.privacy, vault_, cloud_text_);
      message_ranges_.back().size = cloud_text_.size() - message_ranges_.back().offset;
    }
    // Views last: cloud_text_ no longer grows.
    for (const auto& range : message_ranges_)
      cloud_messages_.push_back(cloud::chat_message{range.role, std::string_view(cloud_text_).substr(range.offset, range.size)});
    return ok();
  }

  // ---- race ------------------------------------------------------------------------------

  /// Both tiers start; the first token the caller could be shown wins. The cloud's pieces
  /// are polled before each edge token (the race's resolution is one edge token).
  void run_race(run_state& st) {
    engine_outcome& out = *st.outcome;
    std::size_t i = cloud_count_;
    for (std::size_t c = 0; c < cloud_count_; ++c) {
      breaker_transition t = breaker_transition::none;
      if (breakers_[c].allow(&t)) {
        if (t != breaker_transition::none) emit_breaker(st, c, t);
        i = c;
        break;
      }
    }
    if (i == cloud_count_ || !prepare_cloud_messages(st)) return run_edge_mode(st, true);
    cloud_call call;
    call.messages = cloud_messages_;
    call.prompt = cloud_messages_.empty() ? std::string_view(cloud_text_) : std::string_view{};
    call.sampling = st.request->sampling;
    call.max_tokens = st.request->sampling.max_tokens;
    call.limits = limits_for(st);
    Cloud& cloud = *clouds_[i];
    tier_report& rep = out.tiers[1 + i];
    rep.used = true;
    if (!cloud.begin(call)) {
      ++rep.attempts;
      breakers_[i].record_failure();
      return run_edge_mode(st, true);
    }
    race_text_.clear();
    race_tokens_ = 0;
    bool cloud_won = false, cloud_failed = false, cloud_cancelled = false;
    auto collect = [&](const cloud_piece& p) {
      race_text_.append(p.text);
      race_tokens_ += p.tokens;
      return true;
    };
    // Before each edge token: once the edge has shown a token the cloud is abandoned; until
    // then, a cloud piece that has arrived wins.
    auto poll_cloud = [&]() -> bool {
      if (cloud_failed || cloud_cancelled) return true;
      if (out.tokens > 0) {
        cloud.cancel();
        cloud_cancelled = true;
        return true;
      }
      const auto p = cloud.poll(function_ref<bool(const cloud_piece&)>(collect), std::chrono::milliseconds(0));
      if (!race_text_.empty() || p.state == cloud_state::finished) {
        cloud_won = true;
        return false;
      }
      if (p.state == cloud_state::failed) cloud_failed = true;
      return true;
    };
    const bool cloud_allowed = st.request->fallback;
    const function_ref<bool()> before_token(poll_cloud);
    const auto end = run_edge(st, true, cloud_allowed, st.request->hold, st.request->sampling.max_tokens, &before_token);
    const bool cloud_running = !cloud_failed && !cloud_cancelled;
    if (cloud_won || (end == edge_end::escalated && cloud_running)) {
      // The running call continues: the cloud's first token came first, or the edge escalated.
      held_.clear();
      held_text_.clear();
      out.escalated = end == edge_end::escalated;
      emit_handoff(st, tier_id::edge(), tier_id::cloud_at(i), cloud_won ? handoff_reason::race_won : handoff_reason::escalated);
      auto r = run_cloud(st, i, true);
      if (!r) run_clouds(st, true, i + 1);
      return;
    }
    // The edge won (or the cloud failed): the cloud's call is abandoned, its prompt paid for.
    if (!cloud_cancelled && !cloud_failed) cloud.cancel();
    ++rep.attempts;
    rep.input_tokens += st.prompt_tokens;
    rep.cost += options_.cloud_prices[i].cost(st.prompt_tokens, race_tokens_);
    if (cloud_failed) {
      if (auto t = breakers_[i].record_failure(); t != breaker_transition::none) emit_breaker(st, i, t);
    } else {
      breakers_[i].release_probe();
    }
    race_text_.clear();
    if (end == edge_end::escalated) {
      out.escalated = true;
      emit_handoff(st, tier_id::edge(), next_cloud(), handoff_reason::escalated);
      run_clouds(st, true);
    } else if (end == edge_end::failed && cloud_allowed) {
      emit_handoff(st, tier_id::edge(), next_cloud(), handoff_reason::edge_failed);
      run_clouds(st, false);
    }
  }

  // ---- speculation -----------------------------------------------------------------------

  static constexpr bool can_speculate =
      SpeculativeEdge<Edge> && requires(Cloud& c, const score_call& call) {
        { c.score(call) } -> std::same_as<result<std::span<const position_score>>>;
      };

  /// Whether the measured figures say speculation beats the cloud's own decode rate.
  bool speculation_pays_now() const {
    if constexpr (can_speculate) {
      if (!options_.speculate_when_it_pays || !decoder_ || !edge_.ready()) return false;
      const speculative_stats& t = decoder_->total();
      const double cloud_rate = context_.cloud_decode_tokens_per_s.value;
      if (t.rounds < 4 || t.drafted == 0 || cloud_rate <= 0) return false;
      return speculation_pays(t.acceptance(), t.draft_seconds / static_cast<double>(t.drafted),
                              t.score_seconds / static_cast<double>(t.rounds), 1.0 / cloud_rate, options_.speculation_k_max);
    } else {
      return false;
    }
  }

  /// The edge drafts, each cloud in order scores (with retries); the emitted tokens stand
  /// across clouds, and the edge continues when every cloud failed.
  void run_speculative(run_state& st) {
    engine_outcome& out = *st.outcome;
    if (st.private_data) {  // unreachable through choose_mode; kept as the last line of defence
      out.status = error{errc::rejected} << "private data may not leave the device";
      return;
    }
    if constexpr (!can_speculate) {
      out.speculation.unsupported = true;
      run_clouds(st, st.request->fallback && edge_.ready());
    } else {
      if (!decoder_ || !edge_.ready()) {
        out.speculation.unsupported = true;
        return run_clouds(st, st.request->fallback && edge_.ready());
      }
      if (auto r = prepare_cloud_messages(st); !r) {
        out.status = r.error();
        return;
      }
      edge_call call;
      call.messages = cloud_messages_;
      call.prompt = cloud_messages_.empty() ? std::string_view(cloud_text_) : std::string_view{};
      auto ids = edge_.prompt_ids(call);
      if (!ids) {
        out.status = ids.error();
        return;
      }
      speculation_ids_.assign(ids->begin(), ids->end());
      const std::size_t prompt_size = speculation_ids_.size();
      restorer_.reset();
      edge_.begin_text(speculation_ids_);
      auto show = [&](std::size_t i) {
        return [this, &st, i](std::string_view text) {
          restorer_.feed(text, [&](std::string_view shown) {
            deliver(st, tier_id::cloud_at(i), shown, -1, std::numeric_limits<float>::quiet_NaN(), 0);
          });
        };
      };
      error last{errc::unavailable, "no cloud endpoint configured"};
      std::size_t tried = 0;
      for (std::size_t i = 0; i < cloud_count_; ++i) {
        breaker_transition t = breaker_transition::none;
        if (!breakers_[i].allow(&t)) {
          last = error{errc::unavailable} << "cloud " << i << ": circuit breaker open";
          continue;
        }
        if (t != breaker_transition::none) emit_breaker(st, i, t);
        tried = i;
        auto r = speculate_at(st, i, prompt_size, show(i));
        if (r) {
          edge_.end_text(show(i));
          restorer_.finish([&](std::string_view text) {
            deliver(st, tier_id::cloud_at(i), text, -1, std::numeric_limits<float>::quiet_NaN(), 0);
          });
          out.model_pii += restorer_.model_pii();
          out.status = ok();
          return;
        }
        last = r.error();
        if (last.code() == errc::unsupported) {  // this tier cannot score: it answers plainly
          edge_.end_text(show(i));
          restorer_.finish([&](std::string_view text) {
            deliver(st, tier_id::cloud_at(i), text, -1, std::numeric_limits<float>::quiet_NaN(), 0);
          });
          out.speculation.unsupported = true;
          return run_clouds(st, st.request->fallback && edge_.ready(), i);
        }
        if (cancelled(st) || (last.code() == errc::rejected && last.message().starts_with("over"))) break;
        if (i + 1 < cloud_count_) emit_fallback(st, tier_id::cloud_at(i), tier_id::cloud_at(i + 1), last.code());
      }
      edge_.end_text(show(tried));
      restorer_.finish([&](std::string_view text) {
        deliver(st, tier_id::cloud_at(tried), text, -1, std::numeric_limits<float>::quiet_NaN(), 0);
      });
      if (cancelled(st)) {
        out.status = error{errc::rejected, "cancelled"};
        return;
      }
      if (st.request->fallback && edge_.ready() && clock_.now() < st.deadline && !last.message().starts_with("over")) {
        out.fell_back = true;
        if (out.tokens > 0) emit_handoff(st, tier_id::cloud_at(tried), tier_id::edge(), handoff_reason::cloud_failed);
        else emit_fallback(st, tier_id::cloud_at(tried), tier_id::edge(), last.code());
        if (run_edge(st, false, false, delivery::immediate(), st.request->sampling.max_tokens) == edge_end::accepted)
          out.status = ok();
        return;
      }
      out.status = last;
    }
  }

  /// Speculation at cloud i from the tokens emitted so far, retried as run_cloud retries.
  template <class Show>
  result<void> speculate_at(run_state& st, std::size_t i, std::size_t prompt_size, Show show) {
    engine_outcome& out = *st.outcome;
    tier_report& rep = out.tiers[1 + i];
    tier_report& edge_rep = out.tiers[0];
    rep.used = true;
    edge_rep.used = true;
    for (std::uint32_t attempt = 1;; ++attempt) {
      if (clock_.now() >= st.deadline) return error{errc::timeout} << "the request's deadline passed at cloud " << i;
      // One round's estimate: the context in, one token out.
      const double estimate = options_.cloud_prices[i].cost(speculation_ids_.size(), 1);
      if (st.request->max_cost > 0 && out_cost(out) + estimate > st.request->max_cost)
        return error{errc::rejected} << "over the request's cost cap (" << st.request->max_cost << ") at cloud " << i;
      if (const double left = budget_.remaining(); left >= 0 && out_cost(out) + estimate > left)
        return error{errc::rejected} << "over the period budget (" << left << " left) at cloud " << i;
      ++rep.attempts;
      Cloud& cloud = *clouds_[i];
      std::uint64_t sent = 0;
      struct tier_scorer {
        Cloud* cloud;
        std::uint64_t* sent;
        result<std::span<const position_score>> score(const score_call& c) {
          *sent += c.context.size() + c.draft.size();
          return cloud->score(c);
        }
      } scorer{&cloud, &sent};
      const std::size_t emitted = speculation_ids_.size() - prompt_size;
      const auto& sampling = st.request->sampling;
      speculative_options o;
      o.max_tokens = sampling.max_tokens > out.tokens ? sampling.max_tokens - out.tokens : 0;
      o.temperature = sampling.temperature.value_or(0.0);
      o.seed = static_cast<std::uint64_t>(sampling.seed.value_or(0)) + emitted;
      o.k_max = options_.speculation_k_max;
      o.alternatives = options_.speculation_alternatives;
      o.stop_tokens = edge_.stop_ids();
      const time_point began = clock_.now();
      result<void> text_status = ok();
      auto summary = decoder_->run(edge_, scorer, speculation_ids_, o, [&](const speculative_token& t) {
        speculation_ids_.push_back(t.id);
        count_cloud_tokens(st, i, 1);
        if (auto r = edge_.text_of(t.id, show); !r) text_status = r;
        return !cancelled(st) && clock_.now() < st.deadline && text_status.ok();
      });
      const time_point ended = clock_.now();
      rep.busy += std::chrono::duration_cast<std::chrono::nanoseconds>(ended - began);
      rep.input_tokens += sent;
      // The rounds that completed count whether or not the run ended with an error: their
      // tokens were emitted and stand.
      const speculative_stats& s = decoder_->last_run();
      rep.output_tokens += s.rounds;
      rep.cost += options_.cloud_prices[i].cost(sent, s.rounds);
      edge_rep.output_tokens += s.drafted;
      edge_rep.busy += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s.draft_seconds));
      speculation_report& sr = out.speculation;
      sr.rounds += s.rounds, sr.drafted += s.drafted, sr.accepted += s.accepted, sr.cloud_tokens += s.cloud_tokens;
      sr.scored += s.scored, sr.approximated += s.approximated, sr.draft_length = decoder_->draft_length();
      if (summary) {
        if (!text_status) return text_status;
        if (auto tr = breakers_[i].record_success(); tr != breaker_transition::none) emit_breaker(st, i, tr);
        if (cancelled(st)) return error{errc::rejected, "cancelled"};
        if (summary->end == speculative_end::length) out.finish_reason = "length";
        return ok();
      }
      if (summary.error().code() == errc::unsupported) return summary.error();
      if (!wait_to_retry(st, i, attempt, summary.error().code(), std::nullopt)) return summary.error();
    }
  }

  // ---- delivery and events ---------------------------------------------------------------

  void deliver(run_state& st, tier_id tier, std::string_view text, std::int32_t id, float logprob, std::uint32_t tokens) {
    engine_outcome& out = *st.outcome;
    const std::size_t begin = delivered_.size();
    if (!text.empty()) {
      delivered_.append(text);
      if (out.span_count > 0 && out.spans[out.span_count - 1].tier == tier) {
        out.spans[out.span_count - 1].end = delivered_.size();
      } else if (out.span_count < engine_outcome::max_spans) {
        out.spans[out.span_count++] = text_span{tier, begin, delivered_.size()};
      } else {
        out.spans[engine_outcome::max_spans - 1].end = delivered_.size();
      }
    }
    out.text_bytes = delivered_.size();
    if (tokens > 0) {
      out.tokens += tokens;
      out.tiers[tier.slot()].delivered_tokens += tokens;
    }
    tier_report& rep = out.tiers[tier.slot()];
    if ((!text.empty() || tokens > 0) && !rep.time_to_first_token) {
      const auto since = elapsed(st);
      rep.time_to_first_token = since;
      if (!out.time_to_first_token) out.time_to_first_token = since;
    }
    engine_event e;
    e.kind = event_kind::token;
    e.tier = tier;
    e.text = text;
    e.token = id;
    e.logprob = logprob;
    e.at_token = out.tokens;
    e.at_byte = begin;
    emit(st, e);
  }

  /// An event of `kind` about `tier`, placed at what has been delivered so far.
  engine_event event_at(const run_state& st, event_kind kind, tier_id tier) const noexcept {
    engine_event e;
    e.kind = kind;
    e.tier = tier;
    e.at_token = st.outcome->tokens;
    e.at_byte = delivered_.size();
    return e;
  }

  void emit_handoff(run_state& st, tier_id from, tier_id to, handoff_reason why) {
    engine_outcome& out = *st.outcome;
    ++out.handoffs;
    if (!out.handoff_at_token) out.handoff_at_token = out.tokens;
    engine_event e = event_at(st, event_kind::handoff, to);
    e.from = from;
    e.why = why;
    emit(st, e);
  }

  void emit_fallback(run_state& st, tier_id from, tier_id to, errc failure) {
    st.outcome->fell_back = true;
    engine_event e = event_at(st, event_kind::fallback, to);
    e.from = from;
    e.failure = failure;
    emit(st, e);
  }

  void emit_breaker(run_state& st, std::size_t cloud, breaker_transition t) {
    engine_event e = event_at(st, event_kind::breaker, tier_id::cloud_at(cloud));
    e.transition = t;
    emit(st, e);
  }

  void emit(run_state& st, const engine_event& e) {
    observer_.on_event(e);
    st.on_event(e);
  }

  static constexpr std::chrono::milliseconds cancel_check{50};

  static bool cancelled(const run_state& st) noexcept {
    return st.request->cancel != nullptr && st.request->cancel->load(std::memory_order_relaxed);
  }

  /// The cloud a hand-off goes to: the first whose breaker is not open.
  tier_id next_cloud() const noexcept {
    for (std::size_t i = 0; i < cloud_count_; ++i)
      if (breakers_[i].state() != route::circuit::open) return tier_id::cloud_at(i);
    return tier_id::cloud_at(0);
  }

  std::chrono::nanoseconds elapsed(const run_state& st) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now() - st.start);
  }
  static double out_cost(const engine_outcome& out) noexcept {
    double c = 0.0;
    for (const tier_report& t : out.tiers) c += t.cost;
    return c;
  }

  struct message_range {
    std::string_view role;
    std::size_t offset, size;
  };

  Edge& edge_;
  std::array<Cloud*, max_clouds> clouds_{};
  std::size_t cloud_count_ = 0;
  R router_;
  V verifier_;
  C clock_;
  O observer_;
  engine_options options_;
  retry_policy retry_{options_.retry};
  jitter_source jitter_{};
  std::vector<circuit_breaker<C>> breakers_;
  budget<C> budget_;
  route::route_context context_{};

  // Reused per request (reserved at construction).
  std::string delivered_, routed_text_, cloud_text_, continuation_, held_text_, race_text_, summary_, cloud_extra_;
  std::uint32_t race_tokens_ = 0;
  std::vector<held_token> held_;
  std::vector<cloud::chat_message> cloud_messages_, summary_messages_;
  std::vector<message_range> message_ranges_;
  privacy_vault vault_;
  restorer restorer_;
  std::optional<speculative_decoder<C>> decoder_;  // with a SpeculativeEdge and a cloud
  std::vector<std::int32_t> speculation_ids_;      // the prompt's ids and the tokens emitted
};

}  // namespace hedge::engine
