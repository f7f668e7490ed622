// The engine with a real cloud: hedge-server on loopback, reached by cloud_client over
// libcurl, killed mid-stream. The caller's text must be the cloud's prefix followed by the
// edge's continuation of exactly that prefix, byte for byte, and, as both tiers run the same
// checkpoint greedily, the cloud's prefix is the start of the edge's own answer.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "hedge/engine/cloud_tier.hpp"
#include "hedge/engine/edge_tier.hpp"
#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/weights.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"
#include "support/alloc_counter.hpp"
#include "support/server_process.hpp"

namespace {

using namespace hedge;
using test::server_process;

using curl_client = cloud::cloud_client<os::curl_transport>;
using cloud_backend = engine::cloud_tier<curl_client>;
using edge_backend = engine::edge_tier<model::llama<>, exec::serial>;
using loopback_engine = engine::hybrid_engine<edge_backend, cloud_backend,
                                              route::router<route::privacy_policy, route::health_policy>,
                                              verify::logistic_verifier, os::steady_clock>;

TEST(EngineLoopback, killed_mid_stream_the_edge_continues_byte_for_byte) {
  const std::string model_path = std::string(test::shared_dir()) + "/models/stories260K.gguf";
  auto file = os::mapped_file::open(model_path);
  if (!file) GTEST_SKIP() << model_path << " is absent (../shared)";
  auto gguf = model::gguf_file::parse(file->bytes());
  ASSERT_TRUE(gguf);
  auto weights = model::gguf_weights(*gguf);
  ASSERT_TRUE(weights);
  auto vocab = model::read_gguf_vocabulary(*gguf);
  ASSERT_TRUE(vocab);
  const model::tokenizer tok{std::move(*vocab)};
  auto llama = model::llama<>::make(*weights, {.max_sessions = 1, .context = 512, .max_threads = 1});
  ASSERT_TRUE(llama);
  exec::serial serial;
  auto render = [&](std::span<const cloud::chat_message>, std::vector<model::token_id>&) -> result<void> {
    return error{errc::unsupported} << "no chat template";
  };
  auto edge = edge_backend::make(*llama, tok, serial, render);
  ASSERT_TRUE(edge);

  engine::engine_request request;
  request.prompt = "Once upon a time";
  request.requested = engine::mode::cloud_first;
  request.sampling.max_tokens = 400;
  request.sampling.temperature = 0.0;

  // The edge's own answer, and the cloud's text is checked against it.
  std::string edge_answer;
  {
    engine::edge_call call;
    call.prompt = request.prompt;
    call.max_tokens = request.sampling.max_tokens;
    ASSERT_TRUE(edge->generate(call, [&](const engine::edge_token& t) {
      edge_answer.append(t.text);
      return true;
    }));
  }

  // The server streams fast: a run where its whole answer was in the socket before the kill
  // is not a cut; try again (bounded).
  for (int attempt = 0; attempt < 5; ++attempt) {
    server_process server(HEDGE_SERVER_BINARY, model_path);
    ASSERT_FALSE(server.url().empty()) << "hedge-server did not start";
    os::curl_transport transport(server.url());
    cloud::endpoint endpoint;
    endpoint.limits.connect = std::chrono::milliseconds(1000);
    auto client = std::make_unique<curl_client>(transport, endpoint);
    cloud_backend cloud(*client);
    cloud_backend* clouds[] = {&cloud};
    engine::engine_options options;
    options.retry.max_attempts = 2;
    options.retry.base_delay = std::chrono::milliseconds(10);
    loopback_engine hybrid(*edge, std::span<cloud_backend* const>(clouds), {}, verify::logistic_verifier{{}},
                           os::steady_clock{}, engine::telemetry{}, options);
    std::string text;
    bool killed = false;
    const auto out = hybrid.run(request, [&](const engine::engine_event& e) {
      if (e.kind != engine::event_kind::token) return;
      text.append(e.text);
      if (!killed && e.tier.kind == route::tier::cloud) server.kill(), killed = true;
    });
    ASSERT_TRUE(out.ok()) << out.status.error().c_str();
    ASSERT_EQ(text, hybrid.delivered());
    if (!out.fell_back) continue;
    ASSERT_EQ(out.span_count, 2u);
    ASSERT_EQ(out.spans[0].tier, engine::tier_id::cloud_at(0));
    ASSERT_EQ(out.spans[1].tier, engine::tier_id::edge());
    const std::string cloud_prefix = text.substr(0, out.spans[0].end);
    EXPECT_EQ(edge_answer.compare(0, cloud_prefix.size(), cloud_prefix), 0)
        << "cloud: [" << cloud_prefix << "]\nedge:  [" << edge_answer << "]";
    // The edge's continuation of exactly the cloud's prefix, generated again directly.
    std::string continued;
    engine::edge_call call;
    call.prompt = request.prompt;
    call.continuation = cloud_prefix;
    call.max_tokens = static_cast<std::uint32_t>(out.report(engine::tier_id::edge()).output_tokens);
    ASSERT_TRUE(edge->generate(call, [&](const engine::edge_token& t) {
      continued.append(t.text);
      return true;
    }));
    EXPECT_EQ(text.substr(cloud_prefix.size()), continued);
    EXPECT_GT(text.size(), cloud_prefix.size());
    return;
  }
  FAIL() << "in 5 runs the server's whole answer arrived before it was killed";
}

}  // namespace
