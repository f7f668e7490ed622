#include "hedge/cloud/client.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "cloud_support.hpp"

namespace {

using namespace hedge::cloud;
using hedge::cloud::test::fake_clock;
using hedge::cloud::test::fake_transport;
using hedge::cloud::test::fixture;
using fault = fake_transport::fault;
using namespace std::chrono_literals;

constexpr client_buffers small_buffers{.request = 4096, .event = 4096, .error_body = 1024, .tokens = 4};
using client_type = cloud_client<fake_transport, fake_clock, small_buffers>;

static_assert(Transport<fake_transport>);
static_assert(Clock<fake_clock>);
static_assert(Clock<std::chrono::steady_clock>);

struct harness {
  fake_transport transport;
  std::chrono::milliseconds now{0};
  endpoint config{.base_path = "/v1/", .model = "gpt-4o-mini", .api_key = "sk-test-123", .limits = {}};
  std::unique_ptr<client_type> client;
  std::string text;
  int deltas = 0;

  harness() {
    config.limits.first_byte = 5s;
    client = std::make_unique<client_type>(transport, config, fake_clock{&now});
  }
  call_outcome stream(request_options o = {}, const std::atomic<bool>* cancel = nullptr) {
    const chat_message messages[] = {{"user", "Tell me a story."}};
    return client->stream_chat(messages, o, [&](const choice_delta& d) {
      text += d.text;
      ++deltas;
      return true;
    }, cancel);
  }
};

TEST(Client, StreamsAChatAndRecordsTheRequest) {
  harness h;
  h.transport.body = fixture("openai_chat_stream.sse");
  request_options o;
  o.max_tokens = 16;
  o.include_usage = true;
  const call_outcome out = h.stream(o);
  ASSERT_TRUE(out.ok()) << out.status.error().message();
  EXPECT_EQ(h.text, "Once upon a time, \"Lily\"\ncaf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(out.text_bytes, h.text.size());
  EXPECT_EQ(out.http_status, 200);
  EXPECT_EQ(out.tokens, 4u);
  EXPECT_EQ(out.finish_reason.view(), "stop");
  EXPECT_EQ(out.usage.total_tokens, 17);
  ASSERT_TRUE(out.time_to_first_token);
  EXPECT_GT(*out.time_to_first_token, 0ns);
  EXPECT_GE(out.duration, *out.time_to_first_token);
  EXPECT_GT(out.tokens_per_second, 0);

  EXPECT_EQ(h.transport.method, "POST");
  EXPECT_EQ(h.transport.path, "/v1/chat/completions");
  EXPECT_EQ(h.transport.limits_seen.first_byte, 5s);
  EXPECT_EQ(h.transport.request_body,
            R"({"model":"gpt-4o-mini","max_tokens":16,"stream":true,"stream_options":{"include_usage":true},)"
            R"("messages":[{"role":"user","content":"Tell me a story."}]})");
  ASSERT_EQ(h.transport.headers.size(), 3u);
  EXPECT_EQ(h.transport.headers[1].second, "text/event-stream");
  EXPECT_EQ(h.transport.headers[2].first, "Authorization");
  EXPECT_EQ(h.transport.headers[2].second, "Bearer sk-test-123");
}

TEST(Client, NoKeyNoAuthorizationHeader) {
  harness h;
  h.config.api_key = "";
  h.client = std::make_unique<client_type>(h.transport, h.config, fake_clock{&h.now});
  h.transport.body = fixture("ollama_chat_stream.sse");
  ASSERT_TRUE(h.stream().ok());
  EXPECT_EQ(h.transport.headers.size(), 2u);
  EXPECT_EQ(h.text, "Hi there!");
}

TEST(Client, RateLimitedWithRetryAfter) {
  harness h;
  h.transport.status = 429;
  h.transport.content_type = "application/json";
  h.transport.retry_after = 20s;
  h.transport.body = fixture("openai_error_429.json");
  const call_outcome out = h.stream();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(out.http_status, 429);
  EXPECT_EQ(out.retry_after, 20s);
  EXPECT_EQ(out.status.error().message().substr(0, 50), "HTTP 429 requests: Rate limit reached for gpt-4o-m");
  EXPECT_EQ(h.deltas, 0);
}

TEST(Client, ServerErrorsMapToCodes) {
  struct c {
    int status;
    const char* file;
    hedge::errc code;
    const char* message;
  } cases[] = {
      {500, "openai_error_429.json", hedge::errc::unavailable, "HTTP 500 requests: Rate limit"},
      {400, "vllm_error.json", hedge::errc::invalid_argument, "HTTP 400 BadRequestError: This model's"},
      {404, "vllm_error_nested.json", hedge::errc::invalid_argument, "HTTP 404 NotFoundError: The model"},
      {422, "tgi_error.json", hedge::errc::invalid_argument, "HTTP 422 validation: Input validation"},
      {401, "ollama_error.json", hedge::errc::rejected, "HTTP 401 api_error: model"},
      {504, "llamacpp_error.json", hedge::errc::timeout, "HTTP 504 exceed_context_size_error: the request"},
  };
  for (const c& k : cases) {
    harness h;
    h.transport.status = k.status;
    h.transport.content_type = "application/json";
    h.transport.body = fixture(k.file);
    const call_outcome out = h.stream();
    ASSERT_FALSE(out.ok()) << k.file;
    EXPECT_EQ(out.status.error().code(), k.code) << k.file;
    EXPECT_EQ(out.status.error().message().substr(0, std::string_view(k.message).size()), k.message) << k.file;
  }
}

TEST(Client, AnHtmlErrorPageShowsItsStart) {
  harness h;
  h.transport.status = 502;
  h.transport.content_type = "text/html";
  h.transport.body = "<html>\r\n<head><title>502 Bad Gateway</title></head></html>";
  const call_outcome out = h.stream();
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(out.status.error().message(), "HTTP 502: <html>  <head><title>502 Bad Gateway</title></head></html>");
}

TEST(Client, BrokenJsonMidStreamKeepsTheTextBefore) {
  harness h;
  const std::string body = fixture("openai_chat_stream.sse");
  const std::size_t third = body.find("data:", body.find("\"Once\""));
  h.transport.body = body.substr(0, third) + "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}\n\n" + body.substr(third);
  const call_outcome out = h.stream();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().code(), hedge::errc::parse_error);
  EXPECT_EQ(h.text, "Once");
  EXPECT_EQ(out.tokens, 1u);
  EXPECT_EQ(out.text_bytes, 4u);
}

TEST(Client, ACutStreamKeepsTheTextAndSaysSo) {
  harness h;
  const std::string body = fixture("openai_chat_stream.sse");
  h.transport.body = body;
  h.transport.deliver = body.find("caf");  // the connection drops inside the fourth token's event
  h.transport.after_body = fault::cut;
  const call_outcome out = h.stream();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(out.status.error().message(), "stream cut after 3 tokens: the connection closed before the last chunk");
  EXPECT_EQ(h.text, "Once upon a time, \"Lily\"\n");
  EXPECT_EQ(out.tokens, 3u);
}

TEST(Client, AStreamThatJustEndsIsCut) {
  harness h;
  const std::string body = fixture("openai_chat_stream.sse");
  h.transport.body = body;
  h.transport.deliver = body.find("data: {", body.find("caf"));
  h.transport.after_body = fault::end;
  const call_outcome out = h.stream();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(out.status.error().message(), "stream cut after 4 tokens (no [DONE] or finish reason)");
}

TEST(Client, ACutAfterTheFinishReasonIsComplete) {
  harness h;
  const std::string body = fixture("openai_chat_stream.sse");
  h.transport.body = body;
  h.transport.deliver = body.find("data: [DONE]");
  h.transport.after_body = fault::cut;
  EXPECT_TRUE(h.stream().ok());
}

TEST(Client, TransportTimeouts) {
  harness h;
  const std::string body = fixture("openai_chat_stream.sse");
  h.transport.body = body;
  h.transport.deliver = body.find("data: {", body.find("\"Once\""));
  h.transport.after_body = fault::timeout;
  const call_outcome out = h.stream();
  EXPECT_EQ(out.status.error().code(), hedge::errc::timeout);
  EXPECT_EQ(out.status.error().message(), "no data for 30000 ms (between_chunks) (after 1 tokens)");
  EXPECT_EQ(h.text, "Once");

  harness c;
  c.transport.no_head = true;
  const call_outcome connect = c.stream();
  EXPECT_EQ(connect.status.error().code(), hedge::errc::timeout);
  EXPECT_EQ(connect.http_status, 0);
}

TEST(Client, CancelFromAnotherThreadsFlag) {
  harness h;
  h.transport.body = fixture("openai_chat_stream.sse");
  h.transport.piece = 64;
  std::atomic<bool> cancel{false};
  const chat_message messages[] = {{"user", "x"}};
  const call_outcome out = h.client->stream_chat(messages, {}, [&](const choice_delta& d) {
    h.text += d.text;
    if (!d.text.empty()) cancel = true;
    return true;
  }, &cancel);
  EXPECT_EQ(out.status.error().code(), hedge::errc::rejected);
  EXPECT_EQ(h.text, "Once");
}

TEST(Client, ACallbackReturningFalseStops) {
  harness h;
  h.transport.body = fixture("openai_chat_stream.sse");
  const chat_message messages[] = {{"user", "x"}};
  const call_outcome out = h.client->stream_chat(messages, {}, [&](const choice_delta& d) {
    h.text += d.text;
    return d.text.empty();
  });
  EXPECT_EQ(out.status.error().code(), hedge::errc::rejected);
  EXPECT_EQ(h.text, "Once");
}

TEST(Client, AStreamedErrorEventKeepsTheTextBefore) {
  harness h;
  h.transport.body = fixture("tgi_stream_error.sse");
  const call_outcome out = h.stream();
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(h.text, "Deep");
}

TEST(Client, AJsonErrorAnsweredWith200ToAStream) {
  harness h;
  h.transport.content_type = "application/json";
  h.transport.body = fixture("ollama_error.json");
  const call_outcome out = h.stream();
  EXPECT_EQ(out.status.error().code(), hedge::errc::unavailable);
  EXPECT_EQ(out.status.error().message(), "HTTP 200 api_error: model \"llama9\" not found, try pulling it first");
}

TEST(Client, AStreamWithoutContentTypeIsReadAsEvents) {
  harness h;
  h.transport.content_type = "";
  h.transport.body = fixture("tgi_chat_stream.sse");
  ASSERT_TRUE(h.stream().ok());
  EXPECT_EQ(h.text, "Deep learning.");
}

TEST(Client, NonStreamedChat) {
  harness h;
  h.transport.content_type = "application/json";
  h.transport.body = fixture("openai_chat.json");
  std::string body(1024, '\0');
  const chat_message messages[] = {{"user", "Hi"}};
  request_options o;
  o.top_logprobs = 1;
  std::size_t tokens = 0;
  const call_outcome out = h.client->chat(messages, o, body, [&](const choice_delta& d) {
    h.text += d.text;
    tokens += d.tokens.size();
    return true;
  });
  ASSERT_TRUE(out.ok()) << out.status.error().message();
  EXPECT_EQ(h.text, "Hello there");
  EXPECT_EQ(tokens, 2u);
  EXPECT_EQ(out.tokens, 2u);
  EXPECT_EQ(out.usage.prompt_tokens, 9);
  EXPECT_EQ(out.finish_reason.view(), "stop");
  EXPECT_EQ(h.transport.headers[1].second, "application/json");
  EXPECT_NE(h.transport.request_body.find(R"("logprobs":true,"top_logprobs":1)"), std::string::npos);
  EXPECT_EQ(h.transport.request_body.find("stream"), std::string::npos);

  EXPECT_EQ(h.client->chat(messages, o, {}, [](const choice_delta&) { return true; }).status.error().code(),
            hedge::errc::invalid_argument);
  std::string tiny(64, '\0');
  const call_outcome small = h.client->chat(messages, o, tiny, [](const choice_delta&) { return true; });
  EXPECT_EQ(small.status.error().code(), hedge::errc::capacity_exceeded);
}

TEST(Client, CompletionEndpointWithEcho) {
  harness h;
  h.transport.content_type = "application/json";
  h.transport.body = fixture("vllm_completion_echo.json");
  std::string body(2048, '\0');
  request_options o;
  o.max_tokens = 1;
  o.top_logprobs = 2;
  std::string tokens;
  const call_outcome out = h.client->completion("Once upon", o, body, [&](const choice_delta& d) {
    for (const auto& t : d.tokens) tokens += std::string(t.token) + "|";
    return true;
  }, true);
  ASSERT_TRUE(out.ok()) << out.status.error().message();
  EXPECT_EQ(tokens, "Once| upon| a|");
  EXPECT_EQ(h.transport.path, "/v1/completions");
  EXPECT_NE(h.transport.request_body.find(R"("prompt":"Once upon","logprobs":2,"echo":true)"), std::string::npos);
}

TEST(Client, StreamedCompletionFromLlamaCppNative) {
  harness h;
  h.config.base_path = "";
  h.client = std::make_unique<client_type>(h.transport, h.config, fake_clock{&h.now});
  h.transport.body = fixture("llamacpp_completion_stream.sse");
  std::string text;
  const call_outcome out = h.client->stream_completion("Once upon a time", {}, [&](const choice_delta& d) {
    text += d.text;
    return true;
  });
  ASSERT_TRUE(out.ok()) << out.status.error().message();
  EXPECT_EQ(text, " Lily ran");
  EXPECT_EQ(out.finish_reason.view(), "length");
  EXPECT_EQ(h.transport.path, "/completions");
}

TEST(Client, RefusesARequestItCannotWrite) {
  harness h;
  const chat_message messages[] = {{"user", "\xFF"}};
  const call_outcome out = h.client->stream_chat(messages, {}, [](const choice_delta&) { return true; });
  EXPECT_EQ(out.status.error().code(), hedge::errc::invalid_argument);
  EXPECT_EQ(h.transport.calls, 0);
}

}  // namespace
