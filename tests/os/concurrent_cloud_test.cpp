// The engine's race over a real HTTP cloud: cloud_tier over libcurl made concurrent by
// os::concurrent_cloud, against the fault-injecting loopback server, with an edge that takes
// real time. Whichever tier's first token comes first is the answer; the other is stopped.
#include "hedge/os/concurrent_cloud.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "hedge/engine/cloud_tier.hpp"
#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/verify/deferral.hpp"
#include "os/fake_http_server.hpp"

namespace {

using namespace hedge;
using namespace std::chrono_literals;

/// An edge that waits `first` before its first token, then answers two tokens.
struct sleeping_edge {
  std::chrono::milliseconds first{0};
  bool ready() const { return true; }
  std::uint32_t context_tokens() const { return 4096; }
  result<engine::edge_summary> generate(const engine::edge_call&, function_ref<bool(const engine::edge_token&)> on_token) {
    std::this_thread::sleep_for(first);
    for (std::string_view t : {"edge", " answer"})
      if (!on_token({t, 1, -0.01f, 0.1f})) break;
    return engine::edge_summary{4, 2, false};
  }
};

using curl_client = cloud::cloud_client<os::curl_transport>;
using blocking = engine::cloud_tier<curl_client>;
using racing = os::concurrent_cloud<blocking>;
using race_engine = engine::hybrid_engine<sleeping_edge, racing, route::router<route::health_policy>,
                                          verify::logistic_verifier, os::steady_clock>;

const std::string sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
std::string delta(std::string_view text) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + std::string(text) + "\"}}]}\n\n";
}
const std::string finish = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

struct race_result {
  std::string text;
  engine::engine_outcome outcome;
  std::chrono::milliseconds took;
};

race_result race(std::chrono::milliseconds edge_first, std::chrono::milliseconds cloud_first) {
  test::fake_http_server server([&](test::fake_http_server::connection& c) {
    if (!c.pause(cloud_first)) return;
    c.send(sse_head + delta("cloud") + delta(" answer") + finish);
  });
  os::curl_transport transport("http://127.0.0.1:" + std::to_string(server.port()));
  auto client = std::make_unique<curl_client>(transport, cloud::endpoint{});
  blocking tier(*client);
  racing cloud(tier);
  racing* clouds[] = {&cloud};
  sleeping_edge edge{edge_first};
  race_engine hybrid(edge, std::span<racing* const>(clouds), {}, verify::logistic_verifier{{}}, os::steady_clock{});
  engine::engine_request r;
  r.prompt = "q";
  r.requested = engine::mode::race;
  race_result out;
  const auto start = std::chrono::steady_clock::now();
  out.outcome = hybrid.run(r, [&](const engine::engine_event& e) { out.text.append(e.text); });
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return out;
}

TEST(ConcurrentCloud, TheCloudWinsARaceItsFirstTokenReachesFirst) {
  const auto r = race(600ms, 0ms);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.status.error().c_str();
  EXPECT_EQ(r.text, "cloud answer");
  EXPECT_EQ(r.outcome.spans[0].tier, engine::tier_id::cloud_at(0));
}

TEST(ConcurrentCloud, TheEdgeWinsAndTheCloudCallIsCancelledPromptly) {
  const auto r = race(0ms, 1500ms);
  ASSERT_TRUE(r.outcome.ok()) << r.outcome.status.error().c_str();
  EXPECT_EQ(r.text, "edge answer");
  EXPECT_TRUE(r.outcome.report(engine::tier_id::cloud_at(0)).used);
  EXPECT_LT(r.took, 1000ms);  // the cloud's call was cut, not waited for
}

}  // namespace
