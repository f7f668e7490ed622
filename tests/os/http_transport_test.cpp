// os::curl_transport against a fault-injecting server on loopback (fake_http_server.hpp) and,
// for HTTPS, `openssl s_server` with a self-signed certificate made at test time.
#include "hedge/os/http_transport.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "os/fake_http_server.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using hedge::errc;
using hedge::cloud::http_header;
using hedge::cloud::http_request;
using hedge::cloud::http_response_head;
using hedge::cloud::transport_limits;
using hedge::os::curl_transport;
using hedge::test::fake_http_server;
using clock_type = std::chrono::steady_clock;
using connection = fake_http_server::connection;

constexpr std::string_view secret = "sk-test-9f8e7d6c5b4a-DO-NOT-LOG";
const std::string bearer = "Bearer " + std::string(secret);
const http_header headers[] = {{"Authorization", bearer}, {"Content-Type", "application/json"}, {"X-Trace", "t1"}};
constexpr std::string_view body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";

http_request chat() { return {"POST", "/chat/completions", headers, body}; }

/// Loopback must not go through a proxy set in the environment.
struct no_proxy_environment : ::testing::Environment {
  void SetUp() override {
    for (const char* name : {"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"})
      ::unsetenv(name);
  }
};
const auto* const proxy_env = ::testing::AddGlobalTestEnvironment(new no_proxy_environment);

/// Records what the transport delivers, with the time of the last body piece.
struct recorder {
  int heads = 0;
  int pieces = 0;
  http_response_head head;
  std::string content_type;
  std::string body;
  clock_type::time_point last_piece{};
  std::function<bool(std::string_view)> on_piece = [](std::string_view) { return true; };
  bool head_answer = true;

  std::function<bool(const http_response_head&)> head_fn = [this](const http_response_head& h) {
    ++heads;
    head = h;
    content_type = std::string(h.content_type);
    head.content_type = {};
    return head_answer;
  };
  std::function<bool(std::string_view)> body_fn = [this](std::string_view piece) {
    ++pieces;
    body += piece;
    last_piece = clock_type::now();
    return on_piece(piece);
  };

  hedge::cloud::response_sink sink(const std::atomic<bool>* cancel = nullptr) { return {head_fn, body_fn, cancel}; }
};

void expect_no_secret(const hedge::result<void>& r) {
  if (!r) {
    EXPECT_EQ(r.error().message().find(secret), std::string_view::npos) << r.error().message();
    EXPECT_EQ(r.error().message().find("Bearer"), std::string_view::npos) << r.error().message();
  }
}

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

std::string chunk(std::string_view data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + std::string(data) + "\r\n";
}

const std::string sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

TEST(CurlTransport, StreamsAnSseResponseAndSendsTheRequestAsGiven) {
  const std::vector<std::string> events = {"data: {\"choices\":[{\"delta\":{\"content\":\"Once\"}}]}\n\n",
                                           "data: {\"choices\":[{\"delta\":{\"content\":\" upon\"}}]}\n\n",
                                           "data: [DONE]\n\n"};
  fake_http_server server([&](connection& c) {
    c.send(sse_head);
    for (const auto& e : events) {
      c.send(chunk(e));
      c.pause(20ms);
    }
    c.send("0\r\n\r\n");
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_EQ(r.heads, 1);
  EXPECT_EQ(r.head.status, 200);
  EXPECT_EQ(r.content_type, "text/event-stream");
  EXPECT_FALSE(r.head.retry_after.has_value());
  EXPECT_EQ(r.body, events[0] + events[1] + events[2]);
  EXPECT_GE(r.pieces, 3);

  const std::string request = server.last_request();
  EXPECT_EQ(request.rfind("POST /v1/chat/completions HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_NE(request.find("\r\nAuthorization: " + bearer + "\r\n"), std::string::npos);
  EXPECT_NE(request.find("\r\nX-Trace: t1\r\n"), std::string::npos);
  EXPECT_EQ(request.find("Expect:"), std::string::npos);
  EXPECT_EQ(request.substr(request.size() - body.size()), body);
}

TEST(CurlTransport, GetWithoutBodyAndInterimContinueHead) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 100 Continue\r\n\r\n");
    c.send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"data\":[]}");
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send({"GET", "/models", {}, {}}, {}, r.sink());
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_EQ(r.heads, 1);
  EXPECT_EQ(r.head.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(r.body, "{\"data\":[]}");
  EXPECT_EQ(server.last_request().rfind("GET /v1/models HTTP/1.1\r\n", 0), 0u);
}

TEST(CurlTransport, TooManyRequestsCarriesRetryAfter) {
  const std::string error_body = R"({"error":{"message":"queue full","type":"server_busy","code":429}})";
  fake_http_server server([&](connection& c) {
    c.send("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 7\r\nContent-Length: " +
           std::to_string(error_body.size()) + "\r\n\r\n" + error_body);
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_TRUE(outcome) << outcome.error().message();  // an HTTP error is the client's to read
  EXPECT_EQ(r.head.status, 429);
  ASSERT_TRUE(r.head.retry_after.has_value());
  EXPECT_EQ(*r.head.retry_after, 7s);
  EXPECT_EQ(r.body, error_body);
}

TEST(CurlTransport, ServerErrorWithJsonBodyAndDateRetryAfter) {
  const std::string error_body = R"({"error":{"message":"boom","type":"server_error","code":null}})";
  fake_http_server server([&](connection& c) {
    c.send("HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
           "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\nContent-Length: " +
           std::to_string(error_body.size()) + "\r\n\r\n" + error_body);
  });
  curl_transport transport(server.base_url());
  recorder r;
  ASSERT_TRUE(transport.send(chat(), {}, r.sink()));
  EXPECT_EQ(r.head.status, 500);
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_FALSE(r.head.retry_after.has_value());
  EXPECT_EQ(r.body, error_body);
}

TEST(CurlTransport, RefusedConnectionIsUnavailable) {
  // A port that was free a moment ago and has no listener now.
  std::uint16_t port;
  {
    fake_http_server probe([](connection&) {});
    port = probe.port();
  }
  curl_transport transport("http://127.0.0.1:" + std::to_string(port) + "/v1");
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("cannot connect"), std::string_view::npos) << outcome.error().message();
  EXPECT_EQ(r.heads, 0);
  expect_no_secret(outcome);
}

TEST(CurlTransport, ConnectLimit) {
  // A listener with a backlog of 0 that never accepts: once its queue holds a connection, the
  // kernel drops further SYNs, so a connect hangs until the client gives up.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 0), 0);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    const int f = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ::connect(f, reinterpret_cast<sockaddr*>(&address), sizeof address);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(50ms);
  curl_transport transport("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/v1");
  recorder r;
  transport_limits limits;
  limits.connect = 300ms;
  const auto start = clock_type::now();
  const auto outcome = transport.send(chat(), limits, r.sink());
  const double elapsed = ms_since(start);
  for (int f : fillers) ::close(f);
  ::close(fd);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::timeout) << outcome.error().message();
  EXPECT_NE(outcome.error().message().find("connect limit"), std::string_view::npos) << outcome.error().message();
  EXPECT_GE(elapsed, 290.0);
  EXPECT_LT(elapsed, 500.0);
  expect_no_secret(outcome);
}

TEST(CurlTransport, FirstByteLimit) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.pause(5s);
  });
  curl_transport transport(server.base_url());
  recorder r;
  transport_limits limits;
  limits.first_byte = 500ms;
  const auto start = clock_type::now();
  const auto outcome = transport.send(chat(), limits, r.sink());
  const double elapsed = ms_since(start);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::timeout);
  EXPECT_NE(outcome.error().message().find("first_byte limit"), std::string_view::npos) << outcome.error().message();
  EXPECT_EQ(r.heads, 1);  // the head came; its body did not
  EXPECT_EQ(r.pieces, 0);
  EXPECT_GE(elapsed, 500.0);
  EXPECT_LT(elapsed, 650.0);
  expect_no_secret(outcome);
}

TEST(CurlTransport, GapLimitTripsOnSilenceWithinAPollInterval) {
  fake_http_server server([](connection& c) {
    c.send(sse_head + chunk("data: {}\n\n"));
    c.pause(5s);
  });
  curl_transport transport(server.base_url());
  recorder r;
  transport_limits limits;
  limits.between_chunks = 1000ms;
  const auto outcome = transport.send(chat(), limits, r.sink());
  const double silence = ms_since(r.last_piece);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::timeout);
  EXPECT_NE(outcome.error().message().find("no byte for 1000 ms between chunks"), std::string_view::npos)
      << outcome.error().message();
  EXPECT_EQ(r.body, "data: {}\n\n");
  EXPECT_GE(silence, 1000.0);
  EXPECT_LT(silence, 1100.0);
  std::printf("gap limit 1000 ms tripped after %.1f ms of silence\n", silence);
  expect_no_secret(outcome);
}

TEST(CurlTransport, SlowDripWithinTheGapLimitSucceeds) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n");
    for (char ch : std::string_view{"abcde"}) {
      if (!c.pause(500ms)) return;
      c.send({&ch, 1});
    }
  });
  curl_transport transport(server.base_url());
  recorder r;
  transport_limits limits;
  limits.first_byte = 1000ms;
  limits.between_chunks = 1000ms;
  const auto outcome = transport.send(chat(), limits, r.sink());
  ASSERT_TRUE(outcome) << outcome.error().message();
  EXPECT_EQ(r.body, "abcde");
  EXPECT_EQ(r.pieces, 5);
}

TEST(CurlTransport, TotalLimit) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    for (int i = 0; i < 100 && c.pause(50ms); ++i) c.send(chunk("data: x\n\n"));
  });
  curl_transport transport(server.base_url());
  recorder r;
  transport_limits limits;
  limits.total = 700ms;
  const auto start = clock_type::now();
  const auto outcome = transport.send(chat(), limits, r.sink());
  const double elapsed = ms_since(start);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::timeout);
  EXPECT_NE(outcome.error().message().find("total limit"), std::string_view::npos) << outcome.error().message();
  EXPECT_GT(r.pieces, 3);
  EXPECT_GE(elapsed, 700.0);
  EXPECT_LT(elapsed, 800.0);
}

/// A send whose cancel flag another thread sets 325 ms in (mid-way between two of the
/// transport's 50 ms wake-ups, not on one): its outcome, the pieces delivered, and how long
/// after the flag was set the send returned.
struct cancelled_send {
  hedge::result<void> outcome;
  int pieces = 0;
  double latency_ms = 0;
};

cancelled_send send_cancelled_after_325ms(const fake_http_server& server) {
  curl_transport transport(server.base_url());
  recorder r;
  std::atomic<bool> cancel{false};
  std::atomic<clock_type::time_point> set_at{};
  std::thread canceller([&] {
    std::this_thread::sleep_for(325ms);
    set_at = clock_type::now();
    cancel = true;
  });
  auto outcome = transport.send(chat(), {}, r.sink(&cancel));
  const auto returned = clock_type::now();
  canceller.join();
  return {outcome, r.pieces, std::chrono::duration<double, std::milli>(returned - set_at.load()).count()};
}

TEST(CurlTransport, CancelFlagStopsADripWithinAPollInterval) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    for (int i = 0; i < 100 && c.pause(30ms); ++i) c.send(chunk("data: x\n\n"));
  });
  const auto sent = send_cancelled_after_325ms(server);
  ASSERT_FALSE(sent.outcome);
  EXPECT_EQ(sent.outcome.error().code(), errc::rejected);
  EXPECT_NE(sent.outcome.error().message().find("cancelled"), std::string_view::npos);
  EXPECT_GT(sent.pieces, 0);
  EXPECT_LT(sent.latency_ms, 100.0);
}

TEST(CurlTransport, CancelFlagStopsASilentServerWithinAPollInterval) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    c.pause(5s);
  });
  const auto sent = send_cancelled_after_325ms(server);
  ASSERT_FALSE(sent.outcome);
  EXPECT_EQ(sent.outcome.error().code(), errc::rejected);
  EXPECT_LT(sent.latency_ms, 100.0);
  std::printf("cancel flag honoured %.1f ms after it was set\n", sent.latency_ms);
}

TEST(CurlTransport, CancelledBeforeSendingSendsNothing) {
  fake_http_server server([](connection& c) { c.send(sse_head + "0\r\n\r\n"); });
  curl_transport transport(server.base_url());
  recorder r;
  const std::atomic<bool> cancel{true};
  const auto outcome = transport.send(chat(), {}, r.sink(&cancel));
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::rejected);
  EXPECT_EQ(server.connections(), 0);
}

TEST(CurlTransport, BodyCallbackReturningFalseCancels) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    for (int i = 0; i < 100 && c.pause(30ms); ++i) c.send(chunk("data: x\n\n"));
  });
  curl_transport transport(server.base_url());
  recorder r;
  r.on_piece = [&](std::string_view) { return r.pieces < 2; };
  const auto start = clock_type::now();
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::rejected);
  EXPECT_NE(outcome.error().message().find("sink callback returned false"), std::string_view::npos);
  EXPECT_EQ(r.pieces, 2);
  EXPECT_LT(ms_since(start), 1000.0);
}

TEST(CurlTransport, HeadCallbackReturningFalseCancels) {
  fake_http_server server([](connection& c) {
    c.send(sse_head);
    for (int i = 0; i < 100 && c.pause(30ms); ++i) c.send(chunk("data: x\n\n"));
  });
  curl_transport transport(server.base_url());
  recorder r;
  r.head_answer = false;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::rejected);
  EXPECT_EQ(r.heads, 1);
  EXPECT_EQ(r.pieces, 0);
}

TEST(CurlTransport, ChunkedStreamCutMidChunkDeliversEveryByteFirst) {
  fake_http_server server([](connection& c) {
    c.send(sse_head + chunk("data: {\"n\":1}\n\n") + "20\r\ndata: {\"n\"");  // declares 32 bytes, sends 10
    c.pause(100ms);
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("stream cut after 25 body bytes"), std::string_view::npos)
      << outcome.error().message();
  EXPECT_EQ(r.body, "data: {\"n\":1}\n\ndata: {\"n\"");
  expect_no_secret(outcome);
}

TEST(CurlTransport, ChunkedStreamWithoutLastChunkIsCut) {
  fake_http_server server([](connection& c) { c.send(sse_head + chunk("data: {\"n\":1}\n\n")); });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("stream cut"), std::string_view::npos) << outcome.error().message();
  EXPECT_EQ(r.body, "data: {\"n\":1}\n\n");
}

TEST(CurlTransport, ContentLengthBodyCutShortDeliversEveryByteFirst) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"choices\":[{\"message\":");
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("stream cut after 23 body bytes"), std::string_view::npos)
      << outcome.error().message();
  EXPECT_EQ(r.body, "{\"choices\":[{\"message\":");
}

TEST(CurlTransport, ConnectionResetMidStreamIsCut) {
  fake_http_server server([](connection& c) {
    c.send(sse_head + chunk("data: {\"n\":1}\n\n"));
    c.pause(200ms);
    c.reset();
  });
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("stream cut"), std::string_view::npos) << outcome.error().message();
  EXPECT_EQ(r.body, "data: {\"n\":1}\n\n");
}

TEST(CurlTransport, ServerClosingWithoutAResponseIsUnavailable) {
  fake_http_server server([](connection&) {});
  curl_transport transport(server.base_url());
  recorder r;
  const auto outcome = transport.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::unavailable);
  EXPECT_NE(outcome.error().message().find("without a response"), std::string_view::npos) << outcome.error().message();
  EXPECT_EQ(r.heads, 0);
}

TEST(CurlTransport, BadRequestsAreRefusedBeforeSending) {
  fake_http_server server([](connection& c) { c.send(sse_head + "0\r\n\r\n"); });
  curl_transport transport(server.base_url());
  recorder r;
  const http_header injected[] = {{"X-Evil", "a\r\nHost: elsewhere"}};
  auto outcome = transport.send({"POST", "/chat/completions", injected, body}, {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::invalid_argument);
  outcome = transport.send({"PO ST", "/chat/completions", {}, body}, {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::invalid_argument);
  EXPECT_EQ(server.connections(), 0);

  curl_transport no_scheme("ftp://127.0.0.1:1/v1");
  outcome = no_scheme.send(chat(), {}, r.sink());
  ASSERT_FALSE(outcome);
  EXPECT_EQ(outcome.error().code(), errc::invalid_argument) << outcome.error().message();
}

TEST(CurlTransport, OneTransportSendsManyRequests) {
  fake_http_server server([](connection& c) {
    c.send("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
  });
  curl_transport transport(server.base_url());
  for (int i = 0; i < 5; ++i) {
    recorder r;
    const auto outcome = transport.send(chat(), {}, r.sink());
    ASSERT_TRUE(outcome) << outcome.error().message();
    EXPECT_EQ(r.body, "{}");
  }
  curl_transport moved = std::move(transport);
  recorder r;
  ASSERT_TRUE(moved.send(chat(), {}, r.sink()));
  EXPECT_EQ(r.body, "{}");
}

// HTTPS on loopback: `openssl s_server -www` with a self-signed certificate for 127.0.0.1.
class tls_server {
 public:
  explicit tls_server(const std::filesystem::path& dir) {
    cert_ = (dir / "cert.pem").string();
    const std::string key = (dir / "key.pem").string();
    const std::string make = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 "
                             "-addext subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " + cert_ + " >/dev/null 2>&1";
    if (std::system(make.c_str()) != 0) return;
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
    std::vector<std::string> args = {"openssl", "s_server", "-www", "-accept", "127.0.0.1:0", "-cert", cert_, "-key", key};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int spawned = posix_spawnp(&pid_, "openssl", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    out_ = pipe_fds[0];
    if (spawned != 0) {
      pid_ = -1;
      return;
    }
    // "ACCEPT 127.0.0.1:PORT" once it listens; 5 s at most.
    std::string text;
    const auto end = clock_type::now() + 5s;
    while (clock_type::now() < end && port_ == 0) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buffer[256];
      const ssize_t n = ::read(out_, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
      if (const auto at = text.find("ACCEPT 127.0.0.1:"); at != std::string::npos && text.find('\n', at) != std::string::npos)
        port_ = std::atoi(text.c_str() + at + 17);
    }
  }
  tls_server(const tls_server&) = delete;
  tls_server& operator=(const tls_server&) = delete;
  ~tls_server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] const std::string& cert() const { return cert_; }

 private:
  std::string cert_;
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
};

std::filesystem::path temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "hedge-tls-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

TEST(CurlTransport, HttpsVerifiesTheCertificate) {
  const auto dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  int port = 0;
  {
    tls_server server(dir);
    if (server.port() == 0) {
      std::filesystem::remove_all(dir);
      GTEST_SKIP() << "openssl s_server did not start (is the openssl CLI installed?)";
    }
    port = server.port();
    const std::string url = "https://127.0.0.1:" + std::to_string(port);
    const http_header auth[] = {{"Authorization", bearer}};
    const http_request get{"GET", "/", auth, {}};
    transport_limits limits;
    limits.total = 5s;

    // Verification on (the default) against the system CAs: a self-signed certificate fails.
    curl_transport strict(url);
    recorder r;
    auto outcome = strict.send(get, limits, r.sink());
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code(), errc::io_error);
    EXPECT_EQ(outcome.error().message().rfind("TLS: ", 0), 0u) << outcome.error().message();
    EXPECT_NE(outcome.error().message().find("certificate"), std::string_view::npos) << outcome.error().message();
    EXPECT_EQ(r.heads, 0);
    expect_no_secret(outcome);

    // The same server with its certificate as the CA file.
    hedge::os::curl_transport_options options;
    options.base_url = url;
    options.ca_file = server.cert();
    curl_transport trusting(options);
    recorder ok;
    outcome = trusting.send(get, limits, ok.sink());
    ASSERT_TRUE(outcome) << outcome.error().message();
    EXPECT_EQ(ok.head.status, 200);
    EXPECT_EQ(ok.content_type, "text/html");
    EXPECT_NE(ok.body.find("s_server"), std::string::npos) << ok.body.substr(0, 200);

    // Verification off (tests only) accepts it without a CA.
    hedge::os::curl_transport_options unchecked_options;
    unchecked_options.base_url = url;
    unchecked_options.verify_tls = false;
    curl_transport unchecked(unchecked_options);
    recorder accepted;
    outcome = unchecked.send(get, limits, accepted.sink());
    ASSERT_TRUE(outcome) << outcome.error().message();
    EXPECT_EQ(accepted.head.status, 200);

    // A CA file that does not exist is a clear error too.
    options.ca_file = (dir / "missing.pem").string();
    curl_transport missing(options);
    recorder none;
    outcome = missing.send(get, limits, none.sink());
    ASSERT_FALSE(outcome);
    EXPECT_EQ(outcome.error().code(), errc::io_error) << outcome.error().message();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
