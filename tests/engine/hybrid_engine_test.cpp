// The hybrid engine under every mode, fault and privacy rule, on simulated time: a fake
// edge, the real cloud client and cloud_tier over a fault-injecting, recording transport.
#include "hedge/engine/hybrid_engine.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/engine_support.hpp"
#include "hedge/engine/cloud_tier.hpp"
#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/cost_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/latency_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"

namespace hedge::engine::test {
namespace {

using client_type = cloud::cloud_client<fault_transport, sim_clock>;
using tier_type = cloud_tier<client_type>;
using router_type = route::router<route::privacy_policy, route::health_policy, route::context_fit_policy,
                                  route::latency_policy, route::cost_policy>;
using engine_type = hybrid_engine<fake_edge, tier_type, router_type, verify::logistic_verifier, sim_clock, telemetry>;

/// Escalates an answer whose mean log-prob is below about -0.75, or at once after two tokens
/// on a token below -5.
verify::logistic_verifier test_verifier() {
  verify::deferral_rule rule;
  rule.bias = -3.0f;
  rule.weights[static_cast<std::size_t>(verify::signal::mean_logprob)] = -4.0f;
  rule.threshold = 0.5;
  return verify::logistic_verifier(rule, verify::early_exit{2, -5.0f, 2.0});
}

/// One cloud endpoint (transport, client, tier) on the shared simulated clock.
struct cloud_endpoint {
  fault_transport transport;
  std::unique_ptr<client_type> client;
  tier_type tier;
  cloud_endpoint(sim_clock clock, cloud_tier_options options = {})
      : transport(clock), client(std::make_unique<client_type>(transport, cloud::endpoint{}, clock)),
        tier(*client, options) {}
};

struct recorder {
  std::vector<engine_event> events;
  std::string text;
  std::vector<std::string> texts;
  void operator()(const engine_event& e) {
    events.push_back(e);
    if (e.kind == event_kind::token) text.append(e.text), texts.emplace_back(e.text);
  }
  std::size_t count(event_kind k) const {
    std::size_t n = 0;
    for (const auto& e : events) n += e.kind == k;
    return n;
  }
};

class engine_test : public ::testing::Test {
 protected:
  sim_clock::state time;
  sim_clock clock{time};
  fake_edge edge{clock};
  std::vector<std::unique_ptr<cloud_endpoint>> clouds;
  std::vector<tier_type*> tiers;
  std::unique_ptr<engine_type> engine;
  engine_options options;

  void SetUp() override {
    edge.answer = tokens_of({"The", " edge", " answer", "."});
    edge.continued = tokens_of({" and", " the", " edge", " ends", "."});
    edge.summary = tokens_of({"They", " talked", " about", " cats", "."});
    options.summary_instruction = "Summarize the conversation";
    edge.summary_instruction = "Summarize the conversation";
    options.cloud_prices[0] = {1.0, 2.0};
    options.cloud_prices[1] = {1.0, 2.0};
    options.edge_prices = {0.0, 0.0};
    options.retry.base_delay = 100ms;
  }

  void make(std::size_t cloud_count = 1, cloud_tier_options tier_options = {}) {
    for (std::size_t i = 0; i < cloud_count; ++i) {
      clouds.push_back(std::make_unique<cloud_endpoint>(clock, tier_options));
      tiers.push_back(&clouds.back()->tier);
    }
    engine = std::make_unique<engine_type>(edge, std::span<tier_type* const>(tiers), router_type{}, test_verifier(), clock,
                                           telemetry{}, options);
  }

  fault_transport& transport(std::size_t i = 0) { return clouds[i]->transport; }

  engine_request ask(std::string_view prompt, mode m = mode::automatic) {
    engine_request r;
    messages_.assign(1, cloud::chat_message{"user", prompt});
    r.messages = messages_;
    r.requested = m;
    r.sampling.max_tokens = 64;
    return r;
  }

  /// Every byte every transport was sent, for the privacy checks.
  std::string everything_sent() const {
    std::string all;
    for (const auto& c : clouds)
      for (const auto& s : c->transport.sent) all.append(s).append("\n---\n");
    return all;
  }

  std::vector<cloud::chat_message> messages_;
};

// ---- modes -------------------------------------------------------------------------------

TEST_F(engine_test, edge_first_confident_answer_stays_on_the_edge) {
  make();
  recorder rec;
  const auto out = engine->run(ask("hello", mode::edge_first), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer.");
  EXPECT_EQ(engine->delivered(), "The edge answer.");
  EXPECT_TRUE(out.verified);
  EXPECT_EQ(out.verdict.action, verify::verify_action::accept);
  EXPECT_FALSE(out.escalated);
  ASSERT_EQ(out.span_count, 1u);
  EXPECT_EQ(out.spans[0].tier, tier_id::edge());
  EXPECT_EQ(out.tokens, 4u);
  EXPECT_TRUE(transport().sent.empty());
  ASSERT_TRUE(out.report(tier_id::edge()).time_to_first_token.has_value());
  EXPECT_EQ(*out.report(tier_id::edge()).time_to_first_token, 30ms);  // 20 ms prefill + 10 ms
}

TEST_F(engine_test, verified_delivery_hides_an_escalated_edge_answer) {
  edge.answer = tokens_of({"Maybe", " this", " or", " that"}, -3.0f);
  make();
  transport().script.push_back({200, sse_chat({"The cloud", " answer."})});
  engine_request r = ask("a hard question", mode::edge_first);
  r.hold = delivery::verified();
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The cloud answer.");
  EXPECT_TRUE(out.escalated);
  EXPECT_EQ(out.verdict.action, verify::verify_action::escalate);
  ASSERT_EQ(out.span_count, 1u);
  EXPECT_EQ(out.spans[0].tier, tier_id::cloud_at(0));
  ASSERT_TRUE(out.handoff_at_token.has_value());
  EXPECT_EQ(*out.handoff_at_token, 0u);
  ASSERT_EQ(transport().sent.size(), 1u);
  EXPECT_EQ(transport().sent[0].find("Maybe"), std::string::npos);  // the held text never went anywhere
}

TEST_F(engine_test, immediate_delivery_hands_off_mid_answer_and_the_cloud_continues) {
  // Two confident tokens, then an unsure one: early escalation after the first two.
  edge.answer = {{"The", -0.01f}, {" sky", -0.01f}, {" is", -9.0f}, {" green", -0.01f}};
  make();
  transport().script.push_back({200, sse_chat({" is", " blue."})});
  engine_request r = ask("what colour is the sky", mode::edge_first);
  r.hold = delivery::immediate();
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The sky is blue.");
  EXPECT_EQ(engine->delivered(), rec.text);
  ASSERT_EQ(out.span_count, 2u);
  EXPECT_EQ(out.spans[0].tier, tier_id::edge());
  EXPECT_EQ(out.spans[0].end, 7u);
  EXPECT_EQ(out.spans[1].tier, tier_id::cloud_at(0));
  EXPECT_EQ(*out.handoff_at_token, 2u);
  // The cloud was asked to continue the delivered text as an open assistant message.
  ASSERT_EQ(transport().sent.size(), 1u);
  EXPECT_NE(transport().sent[0].find("{\"role\":\"assistant\",\"content\":\"The sky\"}"), std::string::npos)
      << transport().sent[0];
  EXPECT_EQ(rec.count(event_kind::handoff), 1u);
}

TEST_F(engine_test, an_escalation_inside_the_commit_buffer_is_invisible) {
  edge.answer = {{"A", -0.01f}, {" B", -0.01f}, {" C", -0.01f}, {" D", -9.0f}};
  make();
  transport().script.push_back({200, sse_chat({" cloud", " end"})});
  engine_request r = ask("q", mode::edge_first);
  r.hold = delivery::buffer(2);
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok());
  // With two held, "A" was released when " C" arrived; " B" and " C" were held and dropped.
  EXPECT_EQ(rec.text, "A cloud end");
  EXPECT_EQ(*out.handoff_at_token, 1u);
  EXPECT_NE(transport().sent[0].find("\"content\":\"A\"}"), std::string::npos);
}

TEST_F(engine_test, the_commit_buffer_releases_by_time) {
  edge.per_token = 100ms;
  make();
  engine_request r = ask("q", mode::edge_first);
  r.hold = delivery::buffer(1000, 150ms);
  std::vector<std::chrono::nanoseconds> at;
  const auto out = engine->run(r, [&](const engine_event& e) {
    if (e.kind == event_kind::token) at.push_back(time.elapsed);
  });
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(at.size(), 4u);
  EXPECT_EQ(at[0], 320ms);  // "The" arrived at 120 ms and was held 200 ms (checked at each token)
}

TEST_F(engine_test, cloud_only_streams_the_cloud_answer) {
  make();
  transport().script.push_back({200, sse_chat({"Hello", " from", " the cloud"})});
  recorder rec;
  const auto out = engine->run(ask("hi", mode::cloud_only), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "Hello from the cloud");
  EXPECT_EQ(edge.calls, 0);
  EXPECT_EQ(out.tokens, 3u);
  EXPECT_GT(out.cost, 0.0);
}

// ---- cloud faults ------------------------------------------------------------------------

TEST_F(engine_test, a_5xx_is_retried_with_backoff) {
  make();
  transport().script.push_back({500, "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}",
                                fault_transport::fault::none});
  transport().script.push_back({200, sse_chat({"ok"})});
  recorder rec;
  const auto out = engine->run(ask("hi", mode::cloud_only), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "ok");
  EXPECT_EQ(out.retries, 1u);
  EXPECT_EQ(rec.count(event_kind::retry), 1u);
  EXPECT_EQ(transport().sent.size(), 2u);
  EXPECT_EQ(out.report(tier_id::cloud_at(0)).attempts, 2u);
}

TEST_F(engine_test, a_429_waits_at_least_its_retry_after) {
  make();
  fault_transport::response limited{429, "{\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit\"}}"};
  limited.retry_after = std::chrono::seconds(2);
  transport().script.push_back(limited);
  transport().script.push_back({200, sse_chat({"ok"})});
  recorder rec;
  const auto out = engine->run(ask("hi", mode::cloud_only), rec);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(rec.count(event_kind::retry), 1u);
  for (const auto& e : rec.events) {
    if (e.kind == event_kind::retry) {
      EXPECT_GE(e.delay, 2000ms);
    }
  }
  EXPECT_GE(out.total, 2000ms);
}

TEST_F(engine_test, a_retry_after_past_the_deadline_falls_back_to_the_edge_at_once) {
  make();
  fault_transport::response limited{429, "{\"error\":{\"message\":\"slow down\",\"type\":\"rate_limit\"}}"};
  limited.retry_after = std::chrono::seconds(600);
  transport().script.push_back(limited);
  engine_request r = ask("hi", mode::cloud_first);
  r.deadline = 10s;
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer.");
  EXPECT_TRUE(out.fell_back);
  EXPECT_LT(out.total, 1s);
}

TEST_F(engine_test, a_stream_cut_mid_answer_continues_at_the_cloud_without_repeating) {
  make();
  fault_transport::response cut{200, sse_chat({"One", " two", " three"})};
  cut.what = fault_transport::fault::cut;
  cut.cut_after = sse_chat({"One", " two"}, false).size();
  transport().script.push_back(cut);
  transport().script.push_back({200, sse_chat({" three", " four."})});
  recorder rec;
  const auto out = engine->run(ask("count", mode::cloud_only), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "One two three four.");
  ASSERT_EQ(transport().sent.size(), 2u);
  EXPECT_NE(transport().sent[1].find("{\"role\":\"assistant\",\"content\":\"One two\"}"), std::string::npos);
}

TEST_F(engine_test, a_cloud_cut_mid_answer_is_continued_by_the_edge_byte_for_byte) {
  options.retry.max_attempts = 1;
  make();
  fault_transport::response cut{200, sse_chat({"The cloud", " began"})};
  cut.what = fault_transport::fault::cut;
  cut.cut_after = sse_chat({"The cloud", " began"}, false).size();
  transport().script.push_back(cut);
  recorder rec;
  const auto out = engine->run(ask("go", mode::cloud_first), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The cloud began and the edge ends.");
  ASSERT_EQ(edge.continuations.size(), 1u);
  EXPECT_EQ(edge.continuations[0], "The cloud began");
  ASSERT_EQ(out.span_count, 2u);
  EXPECT_EQ(out.spans[0].tier, tier_id::cloud_at(0));
  EXPECT_EQ(out.spans[1].tier, tier_id::edge());
  EXPECT_EQ(out.spans[1].begin, std::string_view("The cloud began").size());
  EXPECT_TRUE(out.fell_back);
}

TEST_F(engine_test, malformed_json_and_broken_sse_are_faults_not_text) {
  options.retry.max_attempts = 2;
  make();
  transport().script.push_back({200, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}\n\n"});
  transport().script.push_back({200, "data: not json at all\n\n"});
  recorder rec;
  const auto out = engine->run(ask("q", mode::cloud_first), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer.");
  EXPECT_TRUE(out.fell_back);
  EXPECT_EQ(transport().sent.size(), 2u);
}

TEST_F(engine_test, connection_refused_falls_back_through_the_next_cloud) {
  options.retry.max_attempts = 1;
  make(2);
  transport(0).script.push_back({0, "", fault_transport::fault::refused});
  transport(1).script.push_back({200, sse_chat({"second cloud"})});
  recorder rec;
  const auto out = engine->run(ask("q", mode::cloud_only), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "second cloud");
  EXPECT_EQ(rec.count(event_kind::fallback), 1u);
  EXPECT_EQ(out.spans[0].tier, tier_id::cloud_at(1));
}

TEST_F(engine_test, a_late_first_token_fails_over_at_the_ttft_objective) {
  make();
  fault_transport::response slow{200, sse_chat({"late"})};
  slow.first_byte = 5000ms;
  transport().script.push_back(slow);
  engine_request r = ask("q", mode::cloud_first);
  r.ttft_slo_ms = 800;
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer.");
  ASSERT_EQ(transport().limits_seen.size(), 1u);  // no retry past the objective
  EXPECT_LE(transport().limits_seen[0].first_byte, 800ms);
  EXPECT_LT(out.total, 1000ms);
}

TEST_F(engine_test, a_stalled_stream_times_out_between_chunks) {
  options.retry.max_attempts = 1;
  options.cloud_limits.between_chunks = 2000ms;
  make();
  fault_transport::response stall{200, sse_chat({"A", " B"})};
  stall.what = fault_transport::fault::stall;
  stall.cut_after = sse_chat({"A"}, false).size();
  transport().script.push_back(stall);
  recorder rec;
  const auto out = engine->run(ask("q", mode::cloud_first), rec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(rec.text, "A and the edge ends.");
}

TEST_F(engine_test, every_request_ends_within_its_deadline_when_the_cloud_never_answers) {
  options.retry.max_attempts = 100;
  make();
  transport().otherwise = {503, "{\"error\":{\"message\":\"down\",\"type\":\"server_error\"}}"};
  engine_request r = ask("q", mode::cloud_only);
  r.deadline = 3s;
  const auto out = engine->run(r);
  EXPECT_FALSE(out.ok());
  EXPECT_LE(out.total, 3s);
  EXPECT_EQ(out.finish_reason, "error");
}

// ---- circuit breaker ---------------------------------------------------------------------

TEST_F(engine_test, the_breaker_opens_after_three_failures_and_the_router_goes_to_the_edge) {
  options.retry.max_attempts = 1;
  make();
  transport().otherwise = {503, "{\"error\":{\"message\":\"down\",\"type\":\"server_error\"}}"};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(engine->run(ask("q", mode::cloud_first)).ok());
  EXPECT_EQ(engine->breaker_state(0), route::circuit::open);
  EXPECT_EQ(engine->observer().tiers[1].breaker_opened, 1u);
  const std::size_t calls = transport().sent.size();
  const auto out = engine->run(ask("hello there"));
  EXPECT_EQ(out.route_reason, route::reason::circuit_open);
  EXPECT_EQ(out.ran, mode::edge_only);
  EXPECT_EQ(transport().sent.size(), calls);
  // After the cooldown one probe goes; it succeeds and closes the breaker.
  clock.advance(6s);
  EXPECT_EQ(engine->breaker_state(0), route::circuit::half_open);
  transport().script.push_back({200, sse_chat({"back"})});
  const auto probe = engine->run(ask("q", mode::cloud_first));
  EXPECT_TRUE(probe.ok());
  EXPECT_EQ(engine->breaker_state(0), route::circuit::closed);
}

TEST_F(engine_test, a_failed_probe_reopens_with_a_longer_cooldown) {
  options.retry.max_attempts = 1;
  make();
  transport().otherwise = {503, "{\"error\":{\"message\":\"down\",\"type\":\"server_error\"}}"};
  for (int i = 0; i < 3; ++i) engine->run(ask("q", mode::cloud_first));
  clock.advance(6s);
  engine->run(ask("q", mode::cloud_first));  // the probe fails
  EXPECT_EQ(engine->breaker_state(0), route::circuit::open);
  clock.advance(6s);
  EXPECT_EQ(engine->breaker_state(0), route::circuit::open);  // 10 s now
  clock.advance(5s);
  EXPECT_EQ(engine->breaker_state(0), route::circuit::half_open);
}

TEST(circuit_breaker, client_errors_do_not_count) {
  sim_clock::state t;
  circuit_breaker<sim_clock> b(sim_clock{t});
  EXPECT_TRUE(b.allow());
  b.record_failure();
  b.record_failure();
  b.record_success();
  b.record_failure();
  b.record_failure();
  EXPECT_EQ(b.state(), route::circuit::closed);
  EXPECT_EQ(b.record_failure(), breaker_transition::opened);
  EXPECT_FALSE(b.allow());
}

// ---- edge faults -------------------------------------------------------------------------

TEST_F(engine_test, no_edge_model_falls_back_to_the_cloud) {
  edge.loaded = false;
  make();
  transport().script.push_back({200, sse_chat({"cloud"})});
  recorder rec;
  const auto out = engine->run(ask("q"), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "cloud");
  EXPECT_EQ(edge.calls, 0);
}

TEST_F(engine_test, a_full_kv_cache_hands_off_to_the_cloud_after_the_delivered_text) {
  edge.fail_at = 2;
  make();
  transport().script.push_back({200, sse_chat({" answer", " from the cloud."})});
  recorder rec;
  const auto out = engine->run(ask("q", mode::edge_first), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer from the cloud.");
  EXPECT_NE(transport().sent[0].find("\"content\":\"The edge\"}"), std::string::npos);
  ASSERT_EQ(rec.events[3].kind, event_kind::handoff);  // routed, "The", " edge", then the hand-off
  EXPECT_EQ(rec.events[3].why, handoff_reason::edge_failed);
  EXPECT_EQ(rec.events[3].at_token, 2u);
}

TEST_F(engine_test, a_full_kv_cache_on_a_private_request_is_an_error_that_keeps_the_text) {
  edge.fail_at = 2;
  make();
  engine_request r = ask("q", mode::edge_first);
  r.classes = route::data_class::regulated;
  recorder rec;
  const auto out = engine->run(r, rec);
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().code(), errc::capacity_exceeded);
  EXPECT_EQ(rec.text, "The edge");
  EXPECT_TRUE(transport().sent.empty());
}

TEST_F(engine_test, private_data_with_the_edge_down_is_refused_by_name) {
  edge.loaded = false;
  make();
  engine_request r = ask("my records");
  r.classes = route::data_class::personal;
  const auto out = engine->run(r);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status.error().message().find("private data, edge down"), std::string_view::npos)
      << out.status.error().c_str();
  EXPECT_TRUE(transport().sent.empty());
}

TEST_F(engine_test, a_slow_edge_moves_traffic_with_an_slo) {
  edge.per_token = 400ms;  // 2.5 tokens/s: thermal throttling
  make();
  transport().otherwise = {200, sse_chat({"fast"})};
  route::route_context before = engine->context();
  for (int i = 0; i < 5; ++i) engine->run(ask("warm", mode::edge_only));
  EXPECT_LT(engine->context().edge_decode_tokens_per_s.value, before.edge_decode_tokens_per_s.value);
}

// ---- privacy -----------------------------------------------------------------------------

constexpr std::string_view pii_prompt = "Mail jane.doe@example.com or call +1 415 555 0100 about card 4111 1111 1111 1111.";

void expect_no_pii(const std::string& sent) {
  EXPECT_EQ(sent.find("jane.doe@example.com"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("555 0100"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("4111 1111"), std::string::npos) << sent;
}

TEST_F(engine_test, pii_is_redacted_before_sending_and_restored_in_the_answer) {
  make();
  // The placeholder arrives split across chunks.
  transport().script.push_back({200, sse_chat({"I will write to <EMA", "IL_1> today."})});
  recorder rec;
  const auto out = engine->run(ask(pii_prompt, mode::cloud_only), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "I will write to jane.doe@example.com today.");
  EXPECT_EQ(out.redactions, 3u);
  expect_no_pii(everything_sent());
  EXPECT_NE(transport().sent[0].find("<EMAIL_1>"), std::string::npos);
  EXPECT_NE(transport().sent[0].find("<PHONE_1>"), std::string::npos);
  EXPECT_NE(transport().sent[0].find("<CARD_1>"), std::string::npos);
  // The first chunk went out at once, less the held-back placeholder start.
  ASSERT_GE(rec.texts.size(), 2u);
  EXPECT_EQ(rec.texts[0], "I will write to ");
}

TEST_F(engine_test, no_pii_reaches_a_transport_on_any_path) {
  // Every mode and fault that calls a cloud, with PII in the prompt and in the edge's text
  // that a hand-off continues.
  edge.answer = {{"Reply", -0.01f}, {" to jane.doe@example.com", -0.01f}, {" now", -9.0f}};
  options.retry.max_attempts = 3;
  make(2);
  fault_transport::response cut{200, sse_chat({"Sure, <EMAIL_1>", " and"})};
  cut.what = fault_transport::fault::cut;
  cut.cut_after = sse_chat({"Sure, <EMAIL_1>"}, false).size();
  for (auto m : {mode::cloud_only, mode::cloud_first, mode::edge_first, mode::automatic}) {
    for (auto& c : clouds) {
      c->transport.script.clear();
      c->transport.script.push_back({500, "{\"error\":{\"message\":\"x\"}}"});
      c->transport.script.push_back(cut);
      c->transport.otherwise = {200, sse_chat({" done"})};
    }
    engine_request r = ask(pii_prompt, m);
    r.summarize_history = true;
    const auto out = engine->run(r);
    EXPECT_TRUE(out.ok()) << to_string(m) << ": " << out.status.error().c_str();
    expect_no_pii(everything_sent());
  }
  EXPECT_GT(transport(0).sent.size(), 3u);
}

TEST_F(engine_test, restricted_data_never_reaches_a_transport_in_any_mode) {
  make();
  transport().otherwise = {200, sse_chat({"leak"})};
  for (auto m : {mode::automatic, mode::cloud_only, mode::cloud_first, mode::edge_first, mode::race, mode::edge_only}) {
    engine_request r = ask("quarterly numbers", m);
    r.classes = route::data_class::contractual;
    edge.answer = tokens_of({"unsure"}, -9.0f);  // an escalation would be the leak
    const auto out = engine->run(r);
    EXPECT_TRUE(out.ok()) << to_string(m);
    EXPECT_EQ(out.ran, mode::edge_only) << to_string(m);
  }
  EXPECT_TRUE(transport().sent.empty());
}

TEST_F(engine_test, entities_kept_on_the_device_keep_the_request_there) {
  options.privacy.keep_on_device = route::pii_entity::ssn;
  make();
  transport().otherwise = {200, sse_chat({"leak"})};
  const auto out = engine->run(ask("my SSN is 123-45-6789", mode::cloud_only));
  EXPECT_EQ(out.ran, mode::edge_only);
  EXPECT_TRUE(transport().sent.empty());
}

TEST_F(engine_test, a_summary_replaces_the_earlier_turns) {
  make();
  transport().script.push_back({200, sse_chat({"ok"})});
  const std::vector<cloud::chat_message> conversation{{"user", "I like cats, write to jane.doe@example.com"},
                                                      {"assistant", "Cats are great."},
                                                      {"user", "Tell me more"}};
  engine_request r;
  r.messages = conversation;
  r.requested = mode::cloud_only;
  r.summarize_history = true;
  const auto out = engine->run(r);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out.summarized);
  const std::string& sent = transport().sent[0];
  EXPECT_NE(sent.find("They talked about cats."), std::string::npos) << sent;
  EXPECT_EQ(sent.find("Cats are great"), std::string::npos);
  EXPECT_NE(sent.find("Tell me more"), std::string::npos);
  expect_no_pii(sent);
}

TEST(privacy, the_restorer_leaves_unknown_placeholders_and_reports_model_pii) {
  privacy_vault vault;
  std::string out;
  EXPECT_EQ(redact("mail bob@example.org please", {}, vault, out), 1u);
  EXPECT_EQ(out, "mail <EMAIL_1> please");
  restorer r(vault);
  std::string seen;
  auto emit = [&](std::string_view s) { seen.append(s); };
  r.feed("<EMAIL_2> <EMAIL_1", emit);
  r.feed("> call +44 20 7946 0958", emit);
  r.finish(emit);
  EXPECT_EQ(seen, "<EMAIL_2> bob@example.org call +44 20 7946 0958");
  EXPECT_EQ(r.model_pii(), 1u);
}

TEST(privacy, the_same_value_gets_the_same_placeholder) {
  privacy_vault vault;
  std::string out;
  redact("a@example.com b@example.com a@example.com", {}, vault, out);
  EXPECT_EQ(out, "<EMAIL_1> <EMAIL_2> <EMAIL_1>");
  EXPECT_EQ(vault.size(), 2u);
}

// ---- budgets -----------------------------------------------------------------------------

TEST_F(engine_test, a_cost_cap_below_the_cloud_call_keeps_the_request_on_the_edge) {
  make();
  transport().otherwise = {200, sse_chat({"cloud"})};
  engine_request r = ask("q", mode::cloud_first);
  r.max_cost = 1e-9;
  recorder rec;
  const auto out = engine->run(r, rec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(rec.text, "The edge answer.");
  EXPECT_TRUE(transport().sent.empty());
}

TEST_F(engine_test, an_exhausted_period_budget_routes_to_the_edge_until_it_resets) {
  options.budget.per_period = 1e-4;
  options.budget.period = std::chrono::seconds(3600);
  make();
  transport().otherwise = {200, sse_chat({"cloud"})};
  engine->spending().charge(1e-4);
  const auto out = engine->run(ask("a question"));
  EXPECT_EQ(out.route_reason, route::reason::budget_exhausted);
  EXPECT_EQ(out.ran, mode::edge_only);
  clock.advance(3601s);
  EXPECT_GT(engine->spending().remaining(), 0.0);
}

// ---- race --------------------------------------------------------------------------------

using race_engine = hybrid_engine<fake_edge, scripted_cloud, router_type, verify::logistic_verifier, sim_clock, telemetry>;

struct race_setup {
  sim_clock::state time;
  sim_clock clock{time};
  fake_edge edge{clock};
  scripted_cloud cloud{clock};
  std::vector<scripted_cloud*> clouds{&cloud};
  std::unique_ptr<race_engine> engine;
  race_setup() {
    edge.answer = tokens_of({"edge", " text"});
    engine_options o;
    o.cloud_prices[0] = {1.0, 2.0};
    engine = std::make_unique<race_engine>(edge, std::span<scripted_cloud* const>(clouds), router_type{}, test_verifier(),
                                           clock, telemetry{}, o);
  }
};

TEST(engine_race, the_cloud_wins_when_its_first_token_comes_first) {
  race_setup s;
  s.edge.prefill = 500ms;
  s.cloud.pieces = {{100ms, "cloud"}, {150ms, " text"}};
  engine_request r;
  r.prompt = "q";
  r.requested = mode::race;
  recorder rec;
  const auto out = s.engine->run(r, rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "cloud text");
  EXPECT_EQ(out.spans[0].tier, tier_id::cloud_at(0));
  EXPECT_EQ(rec.count(event_kind::handoff), 1u);
  EXPECT_EQ(s.edge.calls, 1);
}

TEST(engine_race, the_edge_wins_and_the_cloud_is_cancelled_and_paid_for) {
  race_setup s;
  s.edge.prefill = 10ms;
  s.cloud.pieces = {{900ms, "cloud"}};
  engine_request r;
  r.prompt = "q";
  r.requested = mode::race;
  recorder rec;
  const auto out = s.engine->run(r, rec);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(rec.text, "edge text");
  EXPECT_EQ(s.cloud.cancels, 1);
  EXPECT_TRUE(out.report(tier_id::cloud_at(0)).used);
  EXPECT_GT(out.report(tier_id::cloud_at(0)).cost, 0.0);
}

TEST(engine_race, the_router_races_when_the_slo_is_at_risk) {
  race_setup s;
  s.cloud.pieces = {{50ms, "cloud"}};
  engine_request r;
  r.prompt = std::string_view("a long enough prompt to be slow on the edge; ").data();
  r.ttft_slo_ms = 100;  // edge TTFT estimate 1000 * 12 / 200 = 60 ms > 0.5 x 100
  const auto out = s.engine->run(r);
  EXPECT_EQ(out.ran, mode::race);
}

// ---- telemetry ---------------------------------------------------------------------------

TEST_F(engine_test, telemetry_counts_and_exports) {
  edge.answer = tokens_of({"unsure"}, -9.0f);
  make();
  transport().script.push_back({500, "{\"error\":{\"message\":\"x\"}}"});
  transport().script.push_back({200, sse_chat({"cloud"})});
  engine_request r = ask("q", mode::edge_first);
  r.hold = delivery::verified();
  ASSERT_TRUE(engine->run(r).ok());
  const telemetry& t = engine->observer();
  EXPECT_EQ(t.requests, 1u);
  EXPECT_EQ(t.tiers[0].escalations, 1u);
  EXPECT_EQ(t.tiers[0].handoffs_out, 1u);
  EXPECT_EQ(t.tiers[1].retries, 1u);
  EXPECT_EQ(t.tiers[1].requests, 1u);
  std::string json, prom;
  t.write_json(json);
  t.write_prometheus(prom);
  EXPECT_NE(json.find("\"escalations\":1"), std::string::npos) << json;
  EXPECT_NE(prom.find("hedge_engine_tier_retries_total{tier=\"cloud0\"} 1"), std::string::npos) << prom;
  EXPECT_NE(prom.find("hedge_engine_tier_ttft_seconds_bucket{tier=\"cloud0\",le=\"+Inf\"} 1"), std::string::npos);
  EXPECT_NE(prom.find("hedge_engine_tier_ttft_seconds_bucket{tier=\"cloud0\",le=\"0.005\"}"), std::string::npos);
}

}  // namespace
}  // namespace hedge::engine::test

namespace hedge::engine::test {
namespace {

TEST_F(engine_test, a_cancelled_request_stops_every_tier_and_keeps_what_was_delivered) {
  make(2);
  transport(0).script.push_back({200, sse_chat({"one", " two", " three"})});
  std::atomic<bool> cancel{false};
  engine_request r = ask("q", mode::cloud_first);
  r.cancel = &cancel;
  recorder rec;
  const auto out = engine->run(r, [&](const engine_event& e) {
    rec(e);
    if (e.kind == event_kind::token) cancel = true;
  });
  EXPECT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().message(), "cancelled");
  EXPECT_EQ(rec.text, "one");
  EXPECT_TRUE(transport(1).sent.empty());
  EXPECT_EQ(edge.calls, 0);
}

TEST_F(engine_test, the_routed_event_comes_first_with_the_mode_and_reason) {
  make();
  recorder rec;
  engine->run(ask("hello", mode::edge_first), rec);
  ASSERT_FALSE(rec.events.empty());
  EXPECT_EQ(rec.events[0].kind, event_kind::routed);
  EXPECT_EQ(rec.events[0].ran, mode::edge_first);
  EXPECT_EQ(rec.events[0].tier, tier_id::edge());
}

}  // namespace
}  // namespace hedge::engine::test

namespace hedge::engine::test {
namespace {

TEST_F(engine_test, the_period_budget_holds_when_the_caller_names_the_cloud) {
  options.budget.per_period = 1e-4;
  make();
  transport().otherwise = {200, sse_chat({"cloud"})};
  engine->spending().charge(1e-4);
  recorder rec;
  const auto out = engine->run(ask("q", mode::cloud_first), rec);
  ASSERT_TRUE(out.ok()) << out.status.error().c_str();
  EXPECT_EQ(rec.text, "The edge answer.");
  EXPECT_TRUE(transport().sent.empty());
  const auto refused = engine->run(ask("q", mode::cloud_only));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status.error().message().find("over the period budget"), std::string_view::npos);
}

}  // namespace
}  // namespace hedge::engine::test
