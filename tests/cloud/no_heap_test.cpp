// The streaming path (SSE reader, chunk reader, client callbacks) allocates nothing.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cloud_support.hpp"
#include "hedge/cloud/client.hpp"
#include "hedge/cloud/stream.hpp"

namespace {

using namespace hedge::cloud;
using hedge::cloud::test::fake_clock;
using hedge::cloud::test::fake_transport;
using hedge::cloud::test::fixture;

TEST(NoHeap, StreamParsingAllocatesNothing) {
  auto stream = std::make_unique<completion_stream<>>();
  for (const char* file : {"openai_chat_stream.sse", "openai_chat_stream_logprobs.sse", "vllm_chat_stream.sse",
                           "llamacpp_completion_stream.sse", "tgi_stream_error.sse"}) {
    const std::string body = fixture(file);
    stream->reset();
    std::size_t bytes = 0;
    hedge::test::alloc_scope scope;
    for (std::size_t at = 0; at < body.size(); at += 5) {
      (void)stream->feed(std::string_view(body).substr(at, 5), [&](const choice_delta& d) {
        bytes += d.text.size();
        return true;
      });
    }
    EXPECT_EQ(scope.count(), 0u) << file;
    EXPECT_GT(bytes, 0u) << file;
  }
}

TEST(NoHeap, ClientCallsAllocateNothing) {
  fake_transport transport;
  transport.record = false;
  std::chrono::milliseconds now{0};
  auto client = std::make_unique<cloud_client<fake_transport, fake_clock>>(
      transport, endpoint{.base_path = "/v1", .model = "m", .api_key = "k", .limits = {}}, fake_clock{&now});
  const chat_message messages[] = {{"user", "Hi"}};
  request_options o;
  o.top_logprobs = 5;
  o.extra = R"({"min_p":0.1})";
  for (const char* file : {"openai_chat_stream_logprobs.sse", "vllm_chat_stream.sse", "openai_error_429.json"}) {
    transport.body = fixture(file);
    transport.status = std::string_view(file).ends_with(".json") ? 429 : 200;
    std::size_t bytes = 0;
    hedge::test::alloc_scope scope;
    const call_outcome out = client->stream_chat(messages, o, [&](const choice_delta& d) {
      bytes += d.text.size();
      return true;
    });
    EXPECT_EQ(scope.count(), 0u) << file;
    EXPECT_EQ(out.ok(), transport.status == 200) << file;
  }
}

}  // namespace
