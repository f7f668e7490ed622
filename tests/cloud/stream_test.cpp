#include "hedge/cloud/stream.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "cloud_support.hpp"

namespace {

using namespace hedge::cloud;
using hedge::cloud::test::describe;
using hedge::cloud::test::fixture;

using stream_type = completion_stream<4096, 4>;

// Everything a run over one body produced, as text.
std::string run(stream_type& stream, std::string_view body, const std::vector<std::size_t>& cuts) {
  stream.reset();
  std::string out;
  std::size_t at = 0;
  hedge::result<void> status;
  auto on = [&](const choice_delta& d) {
    out += describe(d);
    return true;
  };
  for (std::size_t i = 0; i <= cuts.size() && status; ++i) {
    const std::size_t end = i < cuts.size() ? cuts[i] : body.size();
    status = stream.feed(body.substr(at, end - at), on);
    at = end;
  }
  if (!status) out += "error " + std::string(hedge::to_string(status.error().code())) + ": " + std::string(status.error().message()) + "\n";
  out += "completed=" + std::to_string(stream.completed()) + " done=" + std::to_string(stream.done()) +
         " finish=" + std::string(stream.finish_reason()) + " tokens=" + std::to_string(stream.tokens()) +
         " usage=" + std::to_string(stream.usage().prompt_tokens) + "/" + std::to_string(stream.usage().completion_tokens) +
         "/" + std::to_string(stream.usage().total_tokens) + "\n";
  return out;
}

struct stream_case {
  const char* file;
  const char* expected;
};

const stream_case cases[] = {
    {"openai_chat_stream.sse",
     "choice 0 role=assistant text=[]\n"
     "choice 0 text=[Once]\n"
     "choice 0 text=[ upon]\n"
     "choice 0 text=[ a time, \"Lily\"\n]\n"
     "choice 0 text=[caf\xC3\xA9 \xF0\x9F\x98\x80]\n"
     "choice 0 text=[] finish=stop\n"
     "completed=1 done=1 finish=stop tokens=4 usage=12/5/17\n"},
    {"openai_chat_stream_logprobs.sse",
     "choice 0 role=assistant text=[]\n"
     "choice 0 text=[Hello] {Hello:-0.31725305 bytes 72 101 108 108 111 |Hello:-0.31725305 |Hi:-1.3190403}\n"
     "choice 0 text=[!] {!:-0.02380986 bytes 33 |!:-0.02380986 | there:-3.787621}\n"
     "choice 0 text=[ \xC3\xA9] { \xC3\xA9:-1.5e-05 bytes 32 195 169 | \xC3\xA9:-1.5e-05 | e:-11.25}\n"
     "choice 0 text=[] finish=length\n"
     "completed=1 done=1 finish=length tokens=3 usage=-1/-1/-1\n"},
    {"vllm_chat_stream.sse",
     "choice 0 role=assistant text=[]\n"
     "choice 0 text=[The] {The:-0.4 bytes 84 104 101 |The:-0.4}\n"
     "choice 0 text=[ sky is] { sky:-1.25 bytes 32 115 107 121 | sky:-1.25} { is:-0.0625 bytes 32 105 115 | is:-0.0625}\n"
     "choice 0 text=[ blue.] finish=stop { blue.:-0.5 bytes 32 98 108 117 101 46 | blue.:-0.5}\n"
     "completed=1 done=1 finish=stop tokens=4 usage=15/4/19\n"},
    {"llamacpp_chat_stream.sse",
     "choice 0 role=assistant text=[]\n"
     "choice 0 text=[Lily]\n"
     "choice 0 text=[ went]\n"
     "choice 0 text=[] finish=length\n"
     "completed=1 done=1 finish=length tokens=2 usage=6/2/8\n"},
    {"llamacpp_completion_stream.sse",
     "choice 0 text=[ Lily] { Lily:-0.7 bytes 32 76 105 108 121 | Lily:-0.7 | Tom:-1.1}\n"
     "choice 0 text=[ ran] { ran:-2 bytes 32 114 97 110 | ran:-2 | was:-0.3}\n"
     "choice 0 text=[] finish=length\n"
     "completed=1 done=0 finish=length tokens=2 usage=-1/-1/-1\n"},
    {"tgi_chat_stream.sse",
     "choice 0 role=assistant text=[Deep]\n"
     "choice 0 role=assistant text=[ learning]\n"
     "choice 0 role=assistant text=[.] finish=eos_token\n"
     "completed=1 done=1 finish=eos_token tokens=3 usage=-1/-1/-1\n"},
    {"ollama_chat_stream.sse",
     "choice 0 role=assistant text=[Hi]\n"
     "choice 0 role=assistant text=[ there!]\n"
     "choice 0 role=assistant text=[] finish=stop\n"
     "completed=1 done=1 finish=stop tokens=2 usage=26/3/29\n"},
    {"openai_stream_error.sse",
     "choice 0 role=assistant text=[Par]\n"
     "error unavailable: the server sent an error (server_error): The server had an error while processing your request. Sorry about that!\n"
     "completed=0 done=0 finish= tokens=1 usage=-1/-1/-1\n"},
    {"tgi_stream_error.sse",
     "choice 0 role=assistant text=[Deep]\n"
     "error unavailable: the server sent an error (generation): Request failed during generation: Server error: CUDA out of memory\n"
     "completed=0 done=0 finish= tokens=1 usage=-1/-1/-1\n"},
};

TEST(Stream, EveryServersFixture) {
  auto stream = std::make_unique<stream_type>();
  for (const stream_case& c : cases) EXPECT_EQ(run(*stream, fixture(c.file), {}), c.expected) << c.file;
}

TEST(Stream, SplitAtEveryByteOffsetGivesTheSameResult) {
  auto stream = std::make_unique<stream_type>();
  for (const stream_case& c : cases) {
    const std::string body = fixture(c.file);
    for (std::size_t cut = 0; cut <= body.size(); ++cut) ASSERT_EQ(run(*stream, body, {cut}), c.expected) << c.file << " cut at " << cut;
  }
}

TEST(Stream, RandomSplitsGiveTheSameResult) {
  auto stream = std::make_unique<stream_type>();
  std::mt19937 rng(18);
  for (const stream_case& c : cases) {
    const std::string body = fixture(c.file);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::size_t> cuts;
      for (std::size_t at = 0; at < body.size();) {
        at += 1 + rng() % (trial % 3 == 0 ? 3 : 64);
        if (at < body.size()) cuts.push_back(at);
      }
      ASSERT_EQ(run(*stream, body, cuts), c.expected) << c.file << " trial " << trial;
    }
  }
}

TEST(Stream, BytesAfterDoneAreIgnored) {
  auto stream = std::make_unique<stream_type>();
  const std::string body = "data: [DONE]\n\ndata: {broken\n\n";
  EXPECT_EQ(run(*stream, body, {}), "completed=1 done=1 finish= tokens=0 usage=-1/-1/-1\n");
}

TEST(Stream, BrokenJsonIsAParseError) {
  auto stream = std::make_unique<stream_type>();
  const std::string body = fixture("openai_chat_stream.sse");
  std::string broken = body.substr(0, body.find("data:", body.find("\"Once\""))) + "data: {\"choices\":[{\"delta\":{\"content\":\"x\"\n\n";
  const std::string out = run(*stream, broken, {});
  EXPECT_NE(out.find("error parse_error: JSON at byte"), std::string::npos) << out;
  EXPECT_NE(out.find("text=[Once]"), std::string::npos) << out;
}

TEST(Stream, AnEventOverTheBufferIsCapacityExceeded) {
  auto stream = std::make_unique<stream_type>();
  const std::string body = "data: {\"choices\":[{\"delta\":{\"content\":\"" + std::string(5000, 'a') + "\"}}]}\n\n";
  EXPECT_NE(run(*stream, body, {}).find("error capacity_exceeded"), std::string::npos);
}

}  // namespace
