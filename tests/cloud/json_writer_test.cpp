#include "hedge/cloud/json_writer.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using hedge::cloud::json_writer;
using hedge::cloud::valid_utf8_prefix;

std::string written(const hedge::result<std::string_view>& r) { return r ? std::string(*r) : "ERROR " + std::string(r.error().message()); }

TEST(JsonWriter, EscapesQuotesBackslashesAndControls) {
  char buffer[256];
  json_writer w(buffer);
  w.begin_object().key("s").string("a\"b\\c\n\r\t\b\f\x01\x1f\x7f/").key("n").null().end_object();
  EXPECT_EQ(written(w.finish()), R"({"s":"a\"b\\c\n\r\t\b\f\u0001\u001f)" "\x7f" R"(/","n":null})");
}

TEST(JsonWriter, KeepsEmbeddedNulAsEscape) {
  char buffer[64];
  json_writer w(buffer);
  w.string(std::string_view("a\0b", 3));
  EXPECT_EQ(written(w.finish()), R"("a\u0000b")");
}

TEST(JsonWriter, WritesCommasNumbersAndNesting) {
  char buffer[256];
  json_writer w(buffer);
  w.begin_array().integer(0).integer(-42).integer(INT64_MIN).number(0.7).number(1.0).number(-0.000001).number(2.5e-7);
  w.begin_object().end_object().begin_array().end_array().boolean(true).boolean(false).end_array();
  EXPECT_EQ(written(w.finish()), "[0,-42,-9223372036854775808,0.7,1,-0.000001,0,{},[],true,false]");
}

TEST(JsonWriter, RefusesNonFiniteNumbers) {
  char buffer[64];
  json_writer w(buffer);
  w.begin_array().number(std::numeric_limits<double>::infinity()).end_array();
  EXPECT_EQ(w.finish().error().code(), hedge::errc::invalid_argument);
}

TEST(JsonWriter, ValidatesUtf8) {
  EXPECT_EQ(valid_utf8_prefix("caf\xC3\xA9 \xF0\x9F\x98\x80"), 10u);
  EXPECT_EQ(valid_utf8_prefix("a\xC0\xAF"), 1u);          // overlong '/'
  EXPECT_EQ(valid_utf8_prefix("a\xE0\x80\xAF"), 1u);      // overlong, 3 bytes
  EXPECT_EQ(valid_utf8_prefix("ab\xED\xA0\x80"), 2u);     // UTF-16 surrogate
  EXPECT_EQ(valid_utf8_prefix("\xF4\x90\x80\x80"), 0u);   // above U+10FFFF
  EXPECT_EQ(valid_utf8_prefix("x\xE2\x82"), 1u);          // truncated
  EXPECT_EQ(valid_utf8_prefix("\x80"), 0u);               // lone continuation
  EXPECT_EQ(valid_utf8_prefix("\xF4\x8F\xBF\xBF"), 4u);   // U+10FFFF
  char buffer[64];
  json_writer w(buffer);
  w.string("ok\xFF");
  auto r = w.finish();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  EXPECT_NE(r.error().message().find("UTF-8 at byte 2"), std::string_view::npos);
}

TEST(JsonWriter, ReportsAFullBufferWithoutWritingPastIt) {
  char buffer[8 + 1];
  buffer[8] = '#';
  json_writer w(std::span<char>(buffer, 8));
  w.begin_object().key("long").string("value").end_object();
  auto r = w.finish();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_EQ(buffer[8], '#');
}

TEST(JsonWriter, RefusesUnbalancedNestingAndTooDeep) {
  char buffer[256];
  json_writer a(buffer);
  a.begin_object();
  EXPECT_FALSE(a.finish());
  json_writer b(buffer);
  for (std::size_t i = 0; i <= json_writer::max_depth; ++i) b.begin_array();
  EXPECT_EQ(b.finish().error().code(), hedge::errc::capacity_exceeded);
}

}  // namespace
