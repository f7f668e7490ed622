// hedge/core/parse_number.hpp: the whole text is one number of the type, or nothing is read.
#include "hedge/core/parse_number.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace {

using hedge::parse_number;

TEST(ParseNumber, ReadsTheWholeTextAsOneNumber) {
  std::uint64_t u = 0;
  EXPECT_TRUE(parse_number("18446744073709551615", u));
  EXPECT_EQ(u, std::numeric_limits<std::uint64_t>::max());
  int i = 0;
  EXPECT_TRUE(parse_number("-42", i));
  EXPECT_EQ(i, -42);
  double d = 0;
  EXPECT_TRUE(parse_number("2.5e-3", d));
  EXPECT_EQ(d, 2.5e-3);
  float f = 0;
  EXPECT_TRUE(parse_number(".5", f));
  EXPECT_EQ(f, 0.5f);
}

TEST(ParseNumber, RefusesPartsEmptyTextAndWhatTheTypeCannotHold) {
  int i = 7;
  for (const char* text : {"", " 1", "1 ", "+1", "1x", "0x10", "abc", "2147483648"})
    EXPECT_FALSE(parse_number(text, i)) << '\'' << text << '\'';
  std::uint32_t u = 0;
  EXPECT_FALSE(parse_number("-1", u));
  EXPECT_FALSE(parse_number("1.5", u));
}

TEST(ParseNumber, RefusesFloatsThatAreNotFinite) {
  double d = 0;
  for (const char* text : {"inf", "-inf", "nan", "1e999"}) EXPECT_FALSE(parse_number(text, d)) << text;
  float f = 0;
  EXPECT_FALSE(parse_number("1e39", f));
  EXPECT_TRUE(parse_number("3.4e38", f));
}

}  // namespace

