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

TEST(ClientOverCurl, CompletesAtDoneWhileTheConnectionStaysOpen) {
  // A keep-alive server: [DONE], then no last chunk and no close for longer than the gap limit.
  fake_http_server server([](connection& c) {
    c.send(sse_head + chunk(delta("Once")) + chunk(finish));
    c.pause(std::chrono::milliseconds(3000));
  });
  const auto start = std::chrono::steady_clock::now();
  const call c = stream_chat(server);
  ASSERT_TRUE(c.outcome.ok()) << c.outcome.status.error().message();
  EXPECT_EQ(c.text, "Once");
  EXPECT_EQ(c.outcome.finish_reason.view(), "stop");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
}

TEST(ClientOverCurl, ServerErrorTextComesWithoutControlBytes) {
  fake_http_server server([](connection& c) {
    const std::string body = R"({"error":{"message":"bad\u001b[2J\u0007\r\nfake prompt$ \u009b","type":"x\u001b"}})";
    c.send("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  const call c = stream_chat(server);
  ASSERT_FALSE(c.outcome.ok());
  const std::string_view message = c.outcome.status.error().message();
  for (const char ch : message) {
    const auto b = static_cast<unsigned char>(ch);
    EXPECT_TRUE(b >= 0x20 && b != 0x7f) << "control byte " << int(b) << " in: " << message;
  }
  EXPECT_NE(message.find("bad\\x1b[2J\\x07\\r\\nfake prompt$"), std::string_view::npos) << message;
}

TEST(ClientOverCurl, ANonHttpReplyIsUnavailableNotABadUrl) {
  fake_http_server server([](connection& c) { c.send("SSH-2.0-OpenSSH_9.2\r\n"); });
  const call c = stream_chat(server);
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.status.error().code(), hedge::errc::unavailable) << c.outcome.status.error().message();
  EXPECT_NE(c.outcome.status.error().message().find("not HTTP"), std::string_view::npos)
      << c.outcome.status.error().message();
}

TEST(ClientOverCurl, AnEndlessHeaderLineNamesTheLimit) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 200 OK\r\nX-Endless: ");
    const std::string filler(64 * 1024, 'a');
    for (int i = 0; i < 64 && c.send(filler); ++i) {
    }
  });
  const call c = stream_chat(server);
  ASSERT_FALSE(c.outcome.ok());
  EXPECT_EQ(c.outcome.status.error().code(), hedge::errc::unavailable) << c.outcome.status.error().message();
  EXPECT_NE(c.outcome.status.error().message().find("header"), std::string_view::npos)
      << c.outcome.status.error().message();
  EXPECT_NE(c.outcome.status.error().message().find("limit"), std::string_view::npos)
      << c.outcome.status.error().message();
}

}  // namespace
