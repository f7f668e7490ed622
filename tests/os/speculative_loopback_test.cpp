// Cross-tier speculation against a real hedge-server on loopback: stories260K quantized to
// Q4_0 at load drafts on the edge, the F32 checkpoint served by hedge-server is the target.
// Greedy on both tiers, the output is token for token the server's own greedy answer; the
// engine's speculative mode delivers exactly that text; a server killed mid-answer hands the
// answer to the edge after the delivered bytes, none repeated or lost.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hedge/cloud/json_writer.hpp"
#include "hedge/engine/cloud_scorer.hpp"
#include "hedge/engine/cloud_tier.hpp"
#include "hedge/engine/edge_tier.hpp"
#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/model_file.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"
#include "support/model_files.hpp"
#include "support/server_process.hpp"

namespace {

using namespace hedge;
using test::server_process;

using curl_client = cloud::cloud_client<os::curl_transport>;
/// Room for an echo of a whole 512-token context.
using scoring_client = cloud::cloud_client<os::curl_transport, std::chrono::steady_clock, cloud::client_buffers{.tokens = 640}>;
using cloud_backend = engine::cloud_tier<curl_client>;
using edge_backend = engine::edge_tier<model::llama<>, exec::serial>;
using loopback_engine = engine::hybrid_engine<edge_backend, cloud_backend,
                                              route::router<route::privacy_policy, route::health_policy>,
                                              verify::logistic_verifier, os::steady_clock>;

struct edge_model {
  os::loaded_model loaded;
  std::unique_ptr<os::runnable_llama> runnable;
  exec::serial serial;
  std::optional<edge_backend> tier;
};

std::string model_path() { return std::string(test::shared_dir()) + "/models/stories260K.gguf"; }

/// stories260K quantized to Q4_0 as it loads: the draft.
std::unique_ptr<edge_model> load_edge() {
  auto e = std::make_unique<edge_model>();
  auto loaded = os::load_model({.model = model_path(), .tokenizer = {}, .quantize = model::load_quantization::q4_0});
  if (!loaded) return nullptr;
  e->loaded = std::move(*loaded);
  auto runnable = os::make_llama(e->loaded, {.max_sessions = 1, .context = 512, .max_threads = 1});
  if (!runnable) return nullptr;
  e->runnable = std::make_unique<os::runnable_llama>(std::move(*runnable));
  auto render = [](std::span<const cloud::chat_message>, std::vector<model::token_id>&) -> result<void> {
    return error{errc::unsupported} << "no chat template";
  };
  auto tier = edge_backend::make(e->runnable->model, e->loaded.tok, e->serial, render);
  if (!tier) return nullptr;
  e->tier.emplace(std::move(*tier));
  return e;
}

/// The server's own greedy answer to `ids`, as ids (return_tokens_as_token_ids).
std::vector<std::int32_t> server_greedy(scoring_client& client, std::span<const std::int32_t> ids, int n) {
  std::vector<char> request(64 * 1024), response(1 << 20);
  cloud::json_writer w(request);
  w.begin_object().key("prompt").begin_array();
  for (const auto id : ids) w.integer(id);
  w.end_array().key("max_tokens").integer(n).key("temperature").number(0).key("logprobs").integer(1);
  w.key("return_tokens_as_token_ids").boolean(true).key("ignore_eos").boolean(true).end_object();
  std::vector<std::int32_t> out;
  const auto outcome = client.send_once("/completions", *w.finish(), response, [&](const cloud::choice_delta& d) {
    for (const auto& t : d.tokens) out.push_back(engine::token_id_of(t.token));
    return true;
  });
  EXPECT_TRUE(outcome.ok()) << outcome.status.error().c_str();
  return out;
}

/// The server's echo of `ids` with 8 alternatives: per position, the token, its log-prob and
/// the alternatives' ids and log-probs, flattened.
std::vector<double> server_echo(scoring_client& client, std::span<const std::int32_t> ids) {
  std::vector<char> request(64 * 1024), response(1 << 20);
  cloud::json_writer w(request);
  w.begin_object().key("prompt").begin_array();
  for (const auto id : ids) w.integer(id);
  w.end_array().key("max_tokens").integer(0).key("echo").boolean(true).key("logprobs").integer(8);
  w.key("return_tokens_as_token_ids").boolean(true).end_object();
  std::vector<double> out;
  const auto outcome = client.send_once("/completions", *w.finish(), response, [&](const cloud::choice_delta& d) {
    for (const auto& t : d.tokens) {
      out.push_back(engine::token_id_of(t.token));
      out.push_back(t.logprob);
      for (const auto& a : t.top_logprobs()) out.push_back(engine::token_id_of(a.token)), out.push_back(a.logprob);
    }
    return true;
  });
  EXPECT_TRUE(outcome.ok()) << outcome.status.error().c_str();
  return out;
}

// The server keeps the last prompt's positions and scores: a prompt that shares a prefix with
// the last one is answered as a fresh server answers it.
TEST(SpeculativeLoopback, a_shared_prefix_scores_as_a_fresh_server_scores_it) {
  if (!std::filesystem::exists(model_path())) GTEST_SKIP() << model_path() << " is absent (../shared)";
  const std::vector<std::int32_t> first{1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  const std::vector<std::int32_t> second{1, 403, 407, 261, 378, 432, 383, 500, 300, 42, 7};
  std::vector<double> fresh;
  {
    server_process server(HEDGE_SERVER_BINARY, model_path());
    ASSERT_FALSE(server.url().empty());
    os::curl_transport transport(server.url());
    auto client = std::make_unique<scoring_client>(transport, cloud::endpoint{});
    fresh = server_echo(*client, second);
  }
  server_process server(HEDGE_SERVER_BINARY, model_path());
  ASSERT_FALSE(server.url().empty());
  os::curl_transport transport(server.url());
  auto client = std::make_unique<scoring_client>(transport, cloud::endpoint{});
  server_echo(*client, first);
  const auto reused = server_echo(*client, second);
  ASSERT_EQ(reused.size(), fresh.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    if (std::isnan(fresh[i]) && std::isnan(reused[i])) continue;
    EXPECT_EQ(reused[i], fresh[i]) << "at " << i;
  }
  // And the same prompt again, whole from the cache.
  EXPECT_EQ(server_echo(*client, second).size(), fresh.size());
}

TEST(SpeculativeLoopback, greedy_output_is_the_servers_own_greedy_output) {
  if (!std::filesystem::exists(model_path())) GTEST_SKIP() << model_path() << " is absent (../shared)";
  auto edge = load_edge();
  ASSERT_NE(edge, nullptr);
  server_process server(HEDGE_SERVER_BINARY, model_path());
  ASSERT_FALSE(server.url().empty()) << "hedge-server did not start";
  os::curl_transport transport(server.url());
  cloud::endpoint endpoint;
  auto scoring = std::make_unique<scoring_client>(transport, endpoint);
  engine::cloud_scorer<scoring_client> scorer(*scoring, 512);

  for (const char* prompt : {"Once upon a time", "Lily and Ben went to the park", "The cat"}) {
    engine::edge_call call;
    call.prompt = prompt;
    auto ids = edge->tier->prompt_ids(call);
    ASSERT_TRUE(ids);
    const std::vector<std::int32_t> prompt_ids(ids->begin(), ids->end());
    const auto expected = server_greedy(*scoring, prompt_ids, 120);
    ASSERT_EQ(expected.size(), 120u);
    auto decoder = engine::speculative_decoder<os::steady_clock>::make(edge->tier->vocab_size(), 8, 512, {});
    ASSERT_TRUE(decoder);
    std::vector<std::int32_t> got;
    auto summary = decoder->run(*edge->tier, scorer, prompt_ids, {.max_tokens = 120, .alternatives = 1},
                                [&](const engine::speculative_token& t) {
                                  got.push_back(t.id);
                                  return true;
                                });
    ASSERT_TRUE(summary) << summary.error().c_str();
    EXPECT_EQ(got, expected) << prompt;
    // The Q4_0 draft (of a 260K-parameter model: quantization costs it much) agrees with the
    // F32 target often enough that a round trip yields two tokens or more on average.
    EXPECT_GT(summary->stats.acceptance(), 0.3) << prompt;
    EXPECT_LT(summary->stats.rounds, 60u) << prompt;
    EXPECT_EQ(summary->stats.approximated, 0u);
  }
}

TEST(SpeculativeLoopback, the_engines_mode_delivers_the_targets_text_and_survives_a_kill) {
  if (!std::filesystem::exists(model_path())) GTEST_SKIP() << model_path() << " is absent (../shared)";
  auto edge = load_edge();
  ASSERT_NE(edge, nullptr);
  engine::engine_request request;
  request.prompt = "Once upon a time";
  request.requested = engine::mode::speculative;
  request.sampling.max_tokens = 150;
  request.sampling.temperature = 0.0;
  std::string expected_text;
  {
    server_process server(HEDGE_SERVER_BINARY, model_path());
    ASSERT_FALSE(server.url().empty());
    os::curl_transport transport(server.url());
    cloud::endpoint endpoint;
    auto scoring = std::make_unique<scoring_client>(transport, endpoint);
    engine::edge_call call;
    call.prompt = request.prompt;
    const auto ids = *edge->tier->prompt_ids(call);
    const std::vector<std::int32_t> prompt_ids(ids.begin(), ids.end());
    const auto greedy = server_greedy(*scoring, prompt_ids, 150);
    // The answer's text follows the prompt's (a first piece keeps its leading space).
    std::vector<std::int32_t> whole = prompt_ids;
    whole.insert(whole.end(), greedy.begin(), greedy.end());
    auto prompt_text = edge->loaded.tok.decode(prompt_ids);
    auto whole_text = edge->loaded.tok.decode(whole);
    ASSERT_TRUE(prompt_text && whole_text);
    expected_text = whole_text->substr(prompt_text->size());
  }
  for (const bool kill_mid_answer : {false, true}) {
    server_process server(HEDGE_SERVER_BINARY, model_path());
    ASSERT_FALSE(server.url().empty());
    os::curl_transport transport(server.url());
    cloud::endpoint endpoint;
    endpoint.limits.connect = std::chrono::milliseconds(1000);
    auto client = std::make_unique<curl_client>(transport, endpoint);
    auto scoring = std::make_unique<scoring_client>(transport, endpoint);
    engine::cloud_scorer<scoring_client> scorer(*scoring, 512);
    cloud_backend cloud(*client);
    cloud.set_scorer(scorer);
    cloud_backend* clouds[] = {&cloud};
    engine::engine_options options;
    options.retry.max_attempts = 2;
    options.retry.base_delay = std::chrono::milliseconds(10);
    loopback_engine hybrid(*edge->tier, std::span<cloud_backend* const>(clouds), {}, verify::logistic_verifier{{}},
                           os::steady_clock{}, engine::telemetry{}, options);
    std::string text;
    const auto out = hybrid.run(request, [&](const engine::engine_event& e) {
      if (e.kind != engine::event_kind::token) return;
      text.append(e.text);
      if (kill_mid_answer && text.size() >= 60) server.kill();
    });
    ASSERT_TRUE(out.ok()) << out.status.error().c_str();
    EXPECT_EQ(out.ran, engine::mode::speculative);
    EXPECT_EQ(text, hybrid.delivered());
    EXPECT_GT(out.speculation.rounds, 0u);
    EXPECT_GT(out.speculation.acceptance(), 0.3);
    if (!kill_mid_answer) {
      EXPECT_EQ(text, expected_text);
      EXPECT_FALSE(out.fell_back);
      continue;
    }
    // The cloud's part is a prefix of the target's text; the edge continued exactly after it.
    ASSERT_TRUE(out.fell_back);
    ASSERT_EQ(out.span_count, 2u);
    ASSERT_EQ(out.spans[1].tier, engine::tier_id::edge());
    const std::string cloud_part = text.substr(0, out.spans[0].end);
    EXPECT_GE(cloud_part.size(), 60u);
    EXPECT_EQ(expected_text.compare(0, cloud_part.size(), cloud_part), 0) << cloud_part;
    std::string continued;
    engine::edge_call call;
    call.prompt = request.prompt;
    call.continuation = cloud_part;
    call.max_tokens = static_cast<std::uint32_t>(out.report(engine::tier_id::edge()).output_tokens -
                                                 out.speculation.drafted);
    ASSERT_TRUE(edge->tier->generate(call, [&](const engine::edge_token& t) {
      continued.append(t.text);
      return true;
    }));
    EXPECT_EQ(text.substr(cloud_part.size()), continued);
  }
}

}  // namespace
