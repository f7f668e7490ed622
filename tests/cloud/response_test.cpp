#include "hedge/cloud/response.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cloud_support.hpp"

namespace {

using namespace hedge::cloud;
using hedge::cloud::test::describe;
using hedge::cloud::test::fixture;

struct parsed {
  hedge::result<response_info> info = hedge::error{hedge::errc::ok};
  std::string deltas;
  std::string copy;  // the parsed buffer: views point into it
};

template <std::size_t N = 16>
parsed parse(std::string json, response_reader<N>& reader) {
  parsed p;
  p.copy = std::move(json);
  p.info = reader.parse(p.copy.data(), p.copy.size(), [&](const choice_delta& d) {
    p.deltas += describe(d);
    return true;
  });
  return p;
}
template <std::size_t N = 16>
parsed parse(std::string json) {
  static response_reader<N> reader;
  return parse<N>(std::move(json), reader);
}

TEST(Response, OpenAiChatCompletionWithLogprobs) {
  const parsed p = parse(fixture("openai_chat.json"));
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.info->object, "chat.completion");
  EXPECT_EQ(p.info->model, "gpt-4o-mini-2024-07-18");
  EXPECT_EQ(p.info->usage.prompt_tokens, 9);
  EXPECT_EQ(p.info->usage.completion_tokens, 2);
  EXPECT_EQ(p.info->usage.total_tokens, 11);
  EXPECT_FALSE(p.info->error.present);
  EXPECT_EQ(p.deltas,
            "choice 0 role=assistant text=[Hello there] finish=stop {Hello:-0.0009 bytes 72 101 108 108 111 |Hello:-0.0009}"
            " { there:-0.25 bytes 32 116 104 101 114 101 | there:-0.25}\n");
}

TEST(Response, LegacyCompletionParallelArrays) {
  const parsed p = parse(fixture("openai_completion.json"));
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.info->object, "text_completion");
  EXPECT_EQ(p.deltas, "choice 0 text=[ a time] finish=length { a:-0.05 | a:-0.05 | the:-3.2} { time:-0.001 | time:-0.001 | day:-7.5}\n");
}

TEST(Response, VllmEchoWithNullFirstLogprob) {
  const parsed p = parse(fixture("vllm_completion_echo.json"));
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.deltas, "choice 0 text=[Once upon a] finish=length {Once:nan} { upon:-3.5 | upon:-3.5 | more:-1.2} { a:-0.01 | a:-0.01}\n");
  EXPECT_EQ(p.info->usage.completion_tokens, 1);
}

TEST(Response, LegacyArraysBeyondCapacityAreAnError) {
  static response_reader<2> small;
  const parsed p = parse<2>(fixture("vllm_completion_echo.json"), small);
  ASSERT_FALSE(p.info);
  EXPECT_EQ(p.info.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_NE(p.info.error().message().find("logprobs.t"), std::string_view::npos) << p.info.error().message();
}

TEST(Response, ChatTokensBeyondCapacityArriveInParts) {
  static response_reader<1> one;
  const parsed p = parse<1>(fixture("openai_chat.json"), one);
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.deltas,
            "choice 0 role=assistant text=[] (part) {Hello:-0.0009 bytes 72 101 108 108 111 |Hello:-0.0009}\n"
            "choice 0 role=assistant text=[] (part) { there:-0.25 bytes 32 116 104 101 114 101 | there:-0.25}\n"
            "choice 0 role=assistant text=[Hello there] finish=stop\n");
}

TEST(Response, LlamaCppNativeCompletionOldProbabilities) {
  const parsed p = parse(fixture("llamacpp_completion_old.json"));
  ASSERT_TRUE(p.info) << p.info.error().message();
  char lp[64];
  std::snprintf(lp, sizeof lp, "| Lily:%.9g | Tom:%.9g", std::log(0.5), std::log(0.25));
  EXPECT_EQ(p.deltas, std::string("choice 0 text=[ Lily] finish=stop { Lily:nan ") + lp + "}\n");
}

struct error_case {
  const char* file;
  const char* message_start;
  const char* type;
  const char* code;
};

TEST(Response, ErrorBodiesOfEveryServer) {
  const error_case cases[] = {
      {"openai_error_429.json", "Rate limit reached for gpt-4o-mini", "requests", "rate_limit_exceeded"},
      {"vllm_error.json", "This model's maximum context length is 8192", "BadRequestError", "400"},
      {"vllm_error_nested.json", "The model `llama-3` does not exist.", "NotFoundError", "404"},
      {"llamacpp_error.json", "the request exceeds the available context size", "exceed_context_size_error", "400"},
      {"tgi_error.json", "Input validation error: `inputs` tokens", "validation", ""},
      {"ollama_error.json", "model \"llama9\" not found", "api_error", ""},
  };
  for (const error_case& c : cases) {
    const parsed p = parse(fixture(c.file));
    ASSERT_TRUE(p.info) << c.file << ": " << p.info.error().message();
    EXPECT_TRUE(p.info->error.present) << c.file;
    EXPECT_EQ(p.info->error.message.substr(0, std::string_view(c.message_start).size()), c.message_start) << c.file;
    EXPECT_EQ(p.info->error.type, c.type) << c.file;
    EXPECT_EQ(p.info->error.code, c.code) << c.file;
    EXPECT_EQ(p.deltas, "") << c.file;
  }
}

TEST(Response, WrongTypesOfKnownFieldsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"choices":[{"delta":{"content":5}}]})", "choices[].delta.content: expected a string"},
      {R"({"choices":{}})", "choices: expected an array"},
      {R"({"choices":[{"index":-1}]})", "choices[].index: expected a non-negative integer"},
      {R"({"choices":[{"index":0.5}]})", "choices[].index: expected a non-negative integer"},
      {R"({"choices":[{"finish_reason":true}]})", "choices[].finish_reason: expected a string"},
      {R"({"choices":[{"logprobs":{"content":[{"token":"a","logprob":"x"}]}}]})", "logprobs.content[].logprob: expected a number"},
      {R"({"choices":[{"logprobs":{"content":[{"bytes":[256]}]}}]})", "logprobs.content[].bytes[]: expected an integer in 0..255"},
      {R"({"usage":{"prompt_tokens":"3"}})", "usage.prompt_tokens: expected a non-negative integer"},
      {R"({"error":{"message":7}})", "error.message: expected a string"},
      {R"({"error":[1]})", "error: expected an object"},
      {R"({"choices":[3]})", "choices[]: expected an object"},
      {R"([1])", "response: expected a JSON object"},
      {R"("text")", "response: expected a JSON object"},
  };
  for (const auto& [json, message] : cases) {
    const parsed p = parse(json);
    ASSERT_FALSE(p.info) << json;
    EXPECT_EQ(p.info.error().code(), hedge::errc::parse_error) << json;
    EXPECT_EQ(p.info.error().message(), message) << json;
  }
}

TEST(Response, NullsAndUnknownFieldsAreSkipped) {
  const parsed p = parse(
      R"({"x":[{"y":[[{}]]}],"choices":[{"index":1,"delta":{"role":null,"content":null,"tool_calls":[{"id":"t"}],)"
      R"("reasoning_content":"hmm"},"logprobs":null,"finish_reason":null,"stop_reason":"\n"}],"usage":null,"error":null})");
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.deltas, "choice 1 text=[]\n");
  EXPECT_FALSE(p.info->usage.present());
}

TEST(Response, MalformedJsonIsAParseError) {
  for (const char* json : {"", "{", "{\"choices\":[", "{\"a\":1,}", "{\"a\":\"\\x\"}", "{} {}", "{\"a\":01}", "{\"a\":\"\x01\"}"}) {
    const parsed p = parse(json);
    ASSERT_FALSE(p.info) << json;
    EXPECT_EQ(p.info.error().code(), hedge::errc::parse_error) << json;
  }
  std::string with_nul = "{\"a\":1}";
  with_nul += '\0';
  with_nul += "garbage";
  EXPECT_FALSE(parse(with_nul).info);
}

TEST(Response, DeepNestingStopsAtTheBound) {
  for (std::size_t depth : {30u, 33u, 100000u}) {
    std::string json = "{\"x\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
    const parsed p = parse(json);
    if (depth + 1 <= json::max_depth) {
      EXPECT_TRUE(p.info) << depth;
    } else {
      ASSERT_FALSE(p.info) << depth;
      EXPECT_NE(p.info.error().message().find("deeper"), std::string_view::npos);
    }
  }
}

TEST(Response, TopLogprobsBeyondTwentyAreDropped) {
  std::string json = R"({"choices":[{"logprobs":{"content":[{"token":"a","logprob":-1,"top_logprobs":[)";
  for (int i = 0; i < 25; ++i) json += std::string(i ? "," : "") + R"({"token":"t","logprob":-2})";
  json += "]}]}}]}";
  static response_reader<4> reader;
  std::size_t tops = 0;
  std::string copy = json;
  auto r = reader.parse(copy.data(), copy.size(), [&](const choice_delta& d) {
    for (const auto& t : d.tokens) tops = t.top_logprobs().size();
    return true;
  });
  ASSERT_TRUE(r);
  EXPECT_EQ(tops, max_top_logprobs);
}

TEST(Response, MixedShapesStayInsideTheTokenArray) {
  // Found by fuzz/cloud_response.cpp: a full legacy choice, then llama.cpp's top-level list.
  static response_reader<3> reader;
  const parsed p = parse<3>(
      R"({"choices":[{"logprobs":{"tokens":["a","b","c"],"content":[{"token":"x"}]}}],)"
      R"("completion_probabilities":[{"token":"y","logprob":-1},{"token":"z"}]})",
      reader);
  ASSERT_TRUE(p.info) << p.info.error().message();
  EXPECT_EQ(p.deltas, "choice 0 text=[] {x:nan} {b:nan} {c:nan}\nchoice 0 text=[] {y:-1} {z:nan}\n");
}

TEST(Response, ACallbackReturningFalseStops) {
  std::string json = fixture("openai_chat.json");
  static response_reader<> reader;
  auto r = reader.parse(json.data(), json.size(), [](const choice_delta&) { return false; });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::rejected);
}

}  // namespace
