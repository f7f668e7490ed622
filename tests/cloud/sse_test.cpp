#include "hedge/cloud/sse.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using hedge::cloud::sse_event;
using hedge::cloud::sse_reader;

struct collected {
  std::vector<std::string> events;  // "type|data"
  hedge::result<void> status;
};

collected read_all(std::string_view stream, std::size_t piece, std::size_t capacity = 256) {
  std::vector<char> buffer(capacity);
  sse_reader reader(buffer);
  collected out;
  for (std::size_t at = 0; at < stream.size() && out.status; at += piece) {
    out.status = reader.feed(stream.substr(at, piece), [&](sse_event& e) {
      EXPECT_EQ(e.data[e.size], '\0');
      out.events.push_back(std::string(e.type) + "|" + std::string(e.text()));
      return true;
    });
  }
  reader.finish();
  return out;
}

TEST(Sse, FollowsTheStandardsLineAndFieldRules) {
  const std::string stream =
      "\xEF\xBB\xBF"                    // a BOM, dropped
      ": comment\n"
      "data: a\r\n"
      "data:b\r"                         // no space after the colon; CR alone ends a line
      "data:  c\n"                       // only one space is dropped
      "id: 7\nretry: 10\nunknown: x\n"
      "\n"
      "event: error\ndata\n\n"           // "data" alone: an empty line of data
      "event: x\n\n"                     // no data: nothing dispatched, type reset
      "data: after\n\n"
      "data: pending at the end";        // discarded
  for (std::size_t piece = 1; piece <= stream.size(); ++piece) {
    const collected c = read_all(stream, piece);
    ASSERT_TRUE(c.status) << piece;
    ASSERT_EQ(c.events.size(), 3u) << piece;
    EXPECT_EQ(c.events[0], "message|a\nb\n c");
    EXPECT_EQ(c.events[1], "error|");
    EXPECT_EQ(c.events[2], "message|after");
  }
}

TEST(Sse, CrLfSplitAcrossPiecesIsOneLineEnd) {
  std::vector<char> buffer(64);
  sse_reader reader(buffer);
  std::vector<std::string> events;
  auto on = [&](sse_event& e) {
    events.emplace_back(e.text());
    return true;
  };
  ASSERT_TRUE(reader.feed("data: x\r", on));
  ASSERT_TRUE(reader.feed("\ndata: y\r", on));  // the LF belongs to the CR before it
  ASSERT_TRUE(reader.feed("\n\r", on));          // blank line (CR) dispatches
  ASSERT_TRUE(reader.feed("\n", on));            // LF after that CR: nothing
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0], "x\ny");
}

TEST(Sse, APartialBomIsData) {
  const collected c = read_all("\xEF\xBB" "data: z\n\n", 1);
  ASSERT_TRUE(c.status);
  EXPECT_TRUE(c.events.empty());  // the line's field name is "\xEF\xBBdata": unknown
  const collected d = read_all("data: \xEF\xBB\xBF" "z\n\n", 3);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0], "message|\xEF\xBB\xBFz");  // only a leading BOM goes
}

TEST(Sse, AnEventLargerThanTheBufferIsAnError) {
  const std::string big = "data: " + std::string(300, 'x') + "\n\n";
  const collected c = read_all(big, 13, 256);
  ASSERT_FALSE(c.status);
  EXPECT_EQ(c.status.error().code(), hedge::errc::capacity_exceeded);
  // Exactly at the limit: 255 bytes of data plus its LF (the NUL at dispatch).
  const std::string fits = "data: " + std::string(255, 'y') + "\n\n";
  const collected f = read_all(fits, 5, 256);
  ASSERT_TRUE(f.status);
  ASSERT_EQ(f.events.size(), 1u);
  const std::string over = "data: " + std::string(256, 'y') + "\n\n";
  EXPECT_FALSE(read_all(over, 5, 256).status);
  const std::string long_type = "event: " + std::string(40, 't') + "\ndata: 1\n\n";
  EXPECT_FALSE(read_all(long_type, 4, 256).status);
}

TEST(Sse, ErrorIsStickyUntilReset) {
  std::vector<char> buffer(8);
  sse_reader reader(buffer);
  auto on = [](sse_event&) { return true; };
  EXPECT_FALSE(reader.feed("data: 0123456789\n\n", on));
  EXPECT_FALSE(reader.feed("data: 1\n\n", on));
  reader.reset();
  int n = 0;
  EXPECT_TRUE(reader.feed("data: 1\n\n", [&](sse_event&) { return ++n, true; }));
  EXPECT_EQ(n, 1);
}

TEST(Sse, AFalseCallbackStopsTheReader) {
  std::vector<char> buffer(64);
  sse_reader reader(buffer);
  int n = 0;
  ASSERT_TRUE(reader.feed("data: 1\n\ndata: 2\n\n", [&](sse_event&) { return ++n, false; }));
  EXPECT_EQ(n, 1);
  EXPECT_TRUE(reader.stopped());
}

TEST(Sse, FinishTellsWhetherAnEventWasPending) {
  std::vector<char> buffer(64);
  sse_reader reader(buffer);
  auto on = [](sse_event&) { return true; };
  ASSERT_TRUE(reader.feed("data: 1\n\n", on));
  EXPECT_FALSE(reader.finish());
  ASSERT_TRUE(reader.feed("data: 2\n", on));
  EXPECT_TRUE(reader.finish());
}

}  // namespace
