#include "hedge/cloud/request.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace hedge::cloud;

std::string text(const hedge::result<std::string_view>& r) {
  return r ? std::string(*r) : "ERROR " + std::string(r.error().message());
}

TEST(Request, ChatWithEveryOption) {
  char buffer[1024];
  const chat_message messages[] = {{"system", "Be brief."}, {"user", "Say \"hi\"\n"}};
  const std::string_view stop[] = {"\n\n", "END"};
  request_options o;
  o.max_tokens = 64;
  o.temperature = 0.7;
  o.top_p = 0.95;
  o.seed = 42;
  o.stop = stop;
  o.stream = true;
  o.include_usage = true;
  o.top_logprobs = 5;
  o.extra = R"( {"repetition_penalty": 1.1, "response_format": {"type": "json_object"}} )";
  EXPECT_EQ(text(write_chat_request(buffer, "gpt-4o-mini", messages, o)),
            R"({"model":"gpt-4o-mini","max_tokens":64,"temperature":0.7,"top_p":0.95,"seed":42,)"
            R"("stop":["\n\n","END"],"stream":true,"stream_options":{"include_usage":true},)"
            R"("messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say \"hi\"\n"}],)"
            R"("logprobs":true,"top_logprobs":5,"repetition_penalty": 1.1, "response_format": {"type": "json_object"}})");
}

TEST(Request, ChatMinimalLeavesServerDefaults) {
  char buffer[256];
  const chat_message messages[] = {{"user", "Hi"}};
  EXPECT_EQ(text(write_chat_request(buffer, "", messages, {})), R"({"messages":[{"role":"user","content":"Hi"}]})");
  request_options o;
  o.top_logprobs = 0;  // the chosen token's log-prob only
  const std::string_view stop[] = {"."};
  o.stop = stop;
  o.extra = "{}";
  EXPECT_EQ(text(write_chat_request(buffer, "m", messages, o)),
            R"({"model":"m","stop":".","messages":[{"role":"user","content":"Hi"}],"logprobs":true})");
}

TEST(Request, CompletionWithEchoAndLogprobs) {
  char buffer[256];
  request_options o;
  o.max_tokens = 1;
  o.top_logprobs = 2;
  o.temperature = 0;
  EXPECT_EQ(text(write_completion_request(buffer, "llama", "Once upon a", o, true)),
            R"({"model":"llama","max_tokens":1,"temperature":0,"prompt":"Once upon a","logprobs":2,"echo":true})");
}

TEST(Request, RefusesBadInput) {
  char buffer[256];
  const chat_message bad_utf8[] = {{"user", "\xC3"}};
  auto r = write_chat_request(buffer, "m", bad_utf8, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  const chat_message ok_messages[] = {{"user", "x"}};
  EXPECT_FALSE(write_chat_request(buffer, "m", {}, {}));
  request_options o;
  o.top_logprobs = 21;
  EXPECT_EQ(write_chat_request(buffer, "m", ok_messages, o).error().code(), hedge::errc::invalid_argument);
  for (std::string_view extra : {"[1]", "{\"a\":", "{\"a\":1} x", "{\"a\":1}{}", "\"s\""}) {
    request_options e;
    e.extra = extra;
    auto w = write_chat_request(buffer, "m", ok_messages, e);
    EXPECT_FALSE(w) << extra;
  }
  std::string deep(100, '[');
  request_options d;
  std::string deep_extra = "{\"a\":" + deep + std::string(100, ']') + "}";
  d.extra = deep_extra;
  char big[1024];
  EXPECT_EQ(write_chat_request(big, "m", ok_messages, d).error().code(), hedge::errc::parse_error);
}

TEST(Request, ReportsASmallBuffer) {
  char buffer[40];
  const chat_message messages[] = {{"user", "a message longer than the buffer"}};
  EXPECT_EQ(write_chat_request(buffer, "m", messages, {}).error().code(), hedge::errc::capacity_exceeded);
  // The extra fields' check needs their size again in spare room.
  char small[64];
  request_options o;
  o.extra = R"({"min_p": 0.05, "top_k": 40})";
  EXPECT_EQ(write_chat_request(small, "m", messages, o).error().code(), hedge::errc::capacity_exceeded);
}

}  // namespace
