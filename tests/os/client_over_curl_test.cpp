// cloud::cloud_client on the default transport (os::curl_transport) against the fault-injecting
// loopback server: the client's streaming, cut-stream and key handling over real HTTP.
#include <gtest/gtest.h>

#include <string>

#include "hedge/cloud/client.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/steady_clock.hpp"
#include "os/fake_http_server.hpp"

namespace {

using hedge::cloud::chat_message;
using hedge::cloud::choice_delta;
using hedge::test::fake_http_server;
using connection = fake_http_server::connection;

static_assert(hedge::cloud::Clock<hedge::os::steady_clock>);

constexpr std::string_view key = "sk-client-test-TOPSECRET";

std::string chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + std::string(data) + "\r\n";
}

std::string delta(std::string_view text) {
  return "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
         "\"delta\":{\"content\":\"" + std::string(text) + "\"},\"finish_reason\":null}]}\n\n";
}

const std::string sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
const std::string finish =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

struct call {
  std::string text;
  hedge::cloud::call_outcome outcome;
};

call stream_chat(const fake_http_server& server) {
  hedge::os::curl_transport transport("http://127.0.0.1:" + std::to_string(server.port()));
  hedge::cloud::endpoint endpoint;  // base_path "/v1"
  endpoint.model = "m";
  endpoint.api_key = key;
  endpoint.limits.between_chunks = std::chrono::milliseconds(2000);
  hedge::cloud::cloud_client<hedge::os::curl_transport, hedge::os::steady_clock> client(transport, endpoint);
  const chat_message messages[] = {{"user", "Tell me a story"}};
  call c;
  auto on_delta = [&](const choice_delta& d) {
    c.text += d.text;
    return true;
  };
  c.outcome = client.stream_chat(messages, {}, on_delta);
  return c;
}

TEST(ClientOverCurl, StreamsAChatCompletion) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    for (std::string_view piece : {"Once", " upon", " a time"}) {
      c.send(chunk(delta(piece)));
      c.pause(std::chrono::milliseconds(10));
    }
    c.send(chunk(finish) + "0\r\n\r\n");
  });
  const call c = stream_chat(server);
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status.error().message();
  EXPECT_EQ(c.text, "Once upon a time");
  EXPECT_EQ(c.outcome.http_status, 200);
  EXPECT_EQ(c.outcome.finish_reason.view(), "stop");
  const std::string request = server.last_request();
  EXPECT_EQ(request.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nAuthorization: Bearer " + std::string(key) + "\r\n"), std::string::npos);
}

TEST(ClientOverCurl, CutStreamKeepsTheTextAndSaysSo) {
  fake_http_server server([](connection& c) {
    c.send(sse_head + chunk(delta("Once")) + chunk(delta(" upon")) + "40\r\ndata: {\"id\"");
  });
  const call c = stream_chat(server);
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.status.error().code(), hedge::errc::unavailable);
  EXPECT_NE(c.outcome.status.error().message().find("stream cut"), std::string_view::npos)
      << c.outcome.status.error().message();
  EXPECT_EQ(c.text, "Once upon");
  EXPECT_EQ(c.outcome.status.error().message().find("TOPSECRET"), std::string_view::npos);
}

TEST(ClientOverCurl, TooManyRequestsReachesTheClient) {
  fake_http_server server([](connection& c) {
    const std::string body = R"({"error":{"message":"queue full","type":"server_busy","code":429}})";
    c.send("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 3\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  const call c = stream_chat(server);
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.http_status, 429);
  ASSERT_TRUE(c.outcome.retry_after.has_value());
  EXPECT_EQ(*c.outcome.retry_after, std::chrono::seconds(3));
  EXPECT_NE(c.outcome.status.error().message().find("queue full"), std::string_view::npos);
}

}  // namespace
