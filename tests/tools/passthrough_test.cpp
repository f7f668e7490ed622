// tools/server/passthrough.hpp: a request body reaches the cloud byte for byte except the
// strings it must change, and the cloud's answer reaches the client byte for byte except the
// placeholders it restores.
#include "../../tools/server/passthrough.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using hedge::engine::privacy_options;
using hedge::engine::privacy_vault;
using hedge::server::answer_restorer;
using hedge::server::forward_body;

TEST(Passthrough, AFieldTheGatewayDoesNotKnowArrivesByteForByte) {
  // Odd spacing, numbers written as written, escapes, nested unknown fields, no PII.
  const std::string body =
      "{ \"model\" : \"gpt-x\",\n \"messages\":[{\"role\":\"user\",\"content\":\"say \\\"hi\\\" \\u00e9\\n\"}],"
      "\"temperature\": 0.70, \"x\":{\"a\":[1, 2.50e0, null, true]}, \"tools\":[{\"type\":\"function\"}]}";
  privacy_vault vault;
  auto out = forward_body(body, {}, privacy_options{}, vault);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->body, body);
  EXPECT_EQ(out->redactions, 0u);
}

TEST(Passthrough, OnlyTheStringsWithPiiAndTheModelChange) {
  const std::string body =
      R"({"model":"edge","messages":[{"role":"user","content":"card 4111 1111 1111 1111, say \"ok\""},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":)"
      R"({"name":"pay","arguments":"{\"card\":\"4111 1111 1111 1111\"}"}}]},)"
      R"({"role":"user","content":[{"type":"text","text":"mail bob@example.com"},{"type":"image_url","image_url":{"url":"data:,x"}}]}],)"
      R"("temperature":0.70})";
  privacy_vault vault;
  auto out = forward_body(body, "gpt-4o-mini", privacy_options{}, vault);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->redactions, 3u);
  EXPECT_EQ(out->body,
            R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":"card <CARD_1>, say \"ok\""},)"
            R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":)"
            R"({"name":"pay","arguments":"{\"card\":\"<CARD_1>\"}"}}]},)"
            R"({"role":"user","content":[{"type":"text","text":"mail <EMAIL_1>"},{"type":"image_url","image_url":{"url":"data:,x"}}]}],)"
            R"("temperature":0.70})");
}

TEST(Passthrough, AModelIsAddedWhereThereWasNone) {
  privacy_vault vault;
  auto out = forward_body(R"(  {"messages":[{"role":"user","content":"hi"}]})", "big", privacy_options{}, vault);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->body, R"(  {"model":"big","messages":[{"role":"user","content":"hi"}]})");
}

TEST(Passthrough, WithoutPlaceholdersEveryEventPassesUnchanged) {
  privacy_vault vault;
  answer_restorer restore(vault, true);
  const std::string event =
      R"({"id":"x", "choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": 1}"}}]},"finish_reason":null}]})";
  EXPECT_EQ(restore.event(event), "data: " + event + "\n\n");
  EXPECT_EQ(restore.event("{this is not json"), "");  // the caller ends the stream
  EXPECT_EQ(restore.flush(), "");
}

TEST(Passthrough, APlaceholderSplitAcrossEventsIsRestoredWhole) {
  privacy_vault vault;
  std::string redacted;
  hedge::engine::redact("card 4111 1111 1111 1111", privacy_options{}, vault, redacted);
  ASSERT_EQ(redacted, "card <CARD_1>");
  answer_restorer restore(vault, true);
  std::string seen;
  for (const char* piece : {"Your <CA", "RD_1> is", " noted"}) {
    const std::string e = restore.event(std::string(R"({"choices":[{"index":0,"delta":{"content":")") + piece +
                                        R"("},"finish_reason":null}]})");
    seen += e;
  }
  seen += restore.event(R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})");
  std::string text;
  for (std::size_t at = seen.find(R"("content":")"); at != std::string::npos; at = seen.find(R"("content":")", at + 1)) {
    const std::size_t begin = at + 11;
    text += seen.substr(begin, seen.find('"', begin) - begin);
  }
  EXPECT_EQ(text, "Your 4111 1111 1111 1111 is noted");
  EXPECT_NE(seen.find(R"("finish_reason":"stop")"), std::string::npos);
}

TEST(Passthrough, AWholeAnswerHasItsPlaceholdersRestored) {
  privacy_vault vault;
  std::string redacted;
  hedge::engine::redact("mail bob@example.com", privacy_options{}, vault, redacted);
  answer_restorer restore(vault, true);
  EXPECT_EQ(restore.whole(R"({"choices":[{"index":0,"message":{"role":"assistant","content":"to <EMAIL_1>"}}], "x": 1})"),
            R"({"choices":[{"index":0,"message":{"role":"assistant","content":"to bob@example.com"}}], "x": 1})");
}

}  // namespace
