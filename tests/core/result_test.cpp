#include "hedge/core/result.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace {

hedge::result<int> parse_digit(char c) {
  if (c < '0' || c > '9') return hedge::error{hedge::errc::parse_error} << "not a digit: '" << c << "'";
  return c - '0';
}

hedge::result<int> sum_digits(const char* s) {
  int total = 0;
  for (; *s != '\0'; ++s) {
    auto d = parse_digit(*s);
    if (!d) return d.error();
    total += *d;
  }
  return total;
}

hedge::result<void> check_positive(int x) {
  if (x <= 0) return hedge::error{hedge::errc::invalid_argument, "x must be positive"};
  return hedge::ok();
}

hedge::result<void> check_both(int a, int b) {
  HEDGE_TRY(check_positive(a));
  HEDGE_TRY(check_positive(b));
  return hedge::ok();
}

}  // namespace

TEST(Result, HoldsValueOrError) {
  auto good = sum_digits("123");
  ASSERT_TRUE(good);
  EXPECT_EQ(*good, 6);
  auto bad = sum_digits("1x3");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), hedge::errc::parse_error);
  EXPECT_EQ(bad.error().message(), "not a digit: 'x'");
  EXPECT_EQ(bad.value_or(-1), -1);
}

TEST(Result, VoidAndTryPropagate) {
  EXPECT_TRUE(check_both(1, 2));
  auto r = check_both(1, -2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), hedge::errc::invalid_argument);
  EXPECT_EQ(r.error().message(), "x must be positive");
}

TEST(Result, MessageFormatsNumbersWithoutAllocation) {
  hedge::error e{hedge::errc::capacity_exceeded};
  e << "seq " << 7 << " full at " << std::size_t{512} << " tokens, " << -42L << ", " << 2.5 << ", " << -0.0004;
  EXPECT_EQ(e.message(), "seq 7 full at 512 tokens, -42, 2.500, -0.000");
  hedge::error big{hedge::errc::ok};
  big << INT64_MIN << ' ' << UINT64_MAX;
  EXPECT_EQ(big.message(), "-9223372036854775808 18446744073709551615");
  EXPECT_EQ(std::string(big.c_str()), big.message());
}

TEST(Result, MessageIsTruncatedNotOverflowed) {
  hedge::error e{hedge::errc::io_error};
  for (int i = 0; i < 100; ++i) e << "0123456789";
  EXPECT_EQ(e.message().size(), hedge::error::max_message);
  EXPECT_EQ(e.c_str()[hedge::error::max_message], '\0');
}

TEST(Result, MoveOnlyAndNonTrivialValues) {
  hedge::result<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p);
  auto moved = std::move(p);
  EXPECT_EQ(**moved, 5);
  hedge::result<std::string> s = std::string(100, 'a');
  hedge::result<std::string> copy = s;
  EXPECT_EQ(copy->size(), 100u);
  copy = hedge::error{hedge::errc::timeout, "late"};
  EXPECT_FALSE(copy);
  copy = s;
  EXPECT_EQ(*copy, *s);
}

TEST(Result, ErrcNamesAreStable) {
  EXPECT_EQ(hedge::to_string(hedge::errc::capacity_exceeded), "capacity_exceeded");
  EXPECT_EQ(hedge::to_string(hedge::errc::rejected), "rejected");
}

static_assert([] {
  hedge::error e{hedge::errc::out_of_range};
  e << "token " << 600 << " >= " << 512u;
  return e.message() == "token 600 >= 512";
}(), "error messages can be built at compile time");
