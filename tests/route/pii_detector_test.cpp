// PII detector: check-digit helpers, one case per entity family, look-alikes, and the
// recall/precision targets on the committed corpus tests/route/data/pii_corpus.tsv.
#include "hedge/route/pii_detector.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

pii_entity first_entity(std::string_view text) {
  const auto m = pii_detector{}.first(text);
  return m ? m->entity : pii_entity::none;
}

TEST(PiiChecks, LuhnAcceptsKnownTestCardsAndRejectsOneDigitChanges) {
  EXPECT_TRUE(luhn_valid("4111111111111111"));
  EXPECT_TRUE(luhn_valid("4111 1111 1111 1111"));
  EXPECT_TRUE(luhn_valid("378282246310005"));
  EXPECT_FALSE(luhn_valid("4111111111111112"));
  EXPECT_FALSE(luhn_valid("378282246310006"));
  EXPECT_FALSE(luhn_valid("41111x1111111111"));
}

TEST(PiiChecks, Mod97AcceptsPublishedExampleIbans) {
  EXPECT_TRUE(iban_valid("DE89370400440532013000"));
  EXPECT_TRUE(iban_valid("GB82 WEST 1234 5698 7654 32"));
  EXPECT_FALSE(iban_valid("DE88370400440532013000"));
  EXPECT_FALSE(iban_valid("GB82WEST12345698765433"));
  EXPECT_FALSE(iban_valid("DE8937"));  // too short
}

TEST(PiiDetector, FindsEachEntityKind) {
  EXPECT_EQ(first_entity("write to jane.doe+x@mail.example.com today"), pii_entity::email);
  EXPECT_EQ(first_entity("call (415) 555-0132 now"), pii_entity::phone);
  EXPECT_EQ(first_entity("call +44 20 7946 0958"), pii_entity::phone);
  EXPECT_EQ(first_entity("card 4111-1111-1111-1111."), pii_entity::credit_card);
  EXPECT_EQ(first_entity("IBAN DE89 3704 0044 0532 0130 00 please"), pii_entity::iban);
  EXPECT_EQ(first_entity("SSN 123-45-6789"), pii_entity::ssn);
  EXPECT_EQ(first_entity("host 192.168.1.20 down"), pii_entity::ipv4);
  EXPECT_EQ(first_entity("host 2001:db8::8a2e:370:7334 down"), pii_entity::ipv6);
  EXPECT_EQ(first_entity("host fe80:0:0:0:202:b3ff:fe1e:8329"), pii_entity::ipv6);
  EXPECT_EQ(first_entity("nic 00:1A:2b:3c:4D:5e"), pii_entity::mac);
  EXPECT_EQ(first_entity("I was born on March 3, 1985"), pii_entity::date_of_birth);
  EXPECT_EQ(first_entity("DOB: 1985-03-03"), pii_entity::date_of_birth);
}

TEST(PiiDetector, RejectsLookAlikes) {
  EXPECT_EQ(first_entity("card 4111 1111 1111 1112"), pii_entity::none);   // Luhn fails
  EXPECT_EQ(first_entity("meeting on 2024-05-01"), pii_entity::none);       // not a birth date
  EXPECT_EQ(first_entity("upgrade to version 1.2.3.4"), pii_entity::none);  // version string
  EXPECT_EQ(first_entity("values 1.2.3.4.5"), pii_entity::none);            // five parts
  EXPECT_EQ(first_entity("SSN 666-12-3456"), pii_entity::none);             // never issued
  EXPECT_EQ(first_entity("at 12:30:45 sharp"), pii_entity::none);           // a time
  EXPECT_EQ(first_entity("use std::vector or Foo::bar"), pii_entity::none);
  EXPECT_EQ(first_entity("ping @alice or user@localhost"), pii_entity::none);
  EXPECT_EQ(first_entity("ISBN 978-3-16-148410-0"), pii_entity::none);
  EXPECT_EQ(first_entity("IBAN DE88 3704 0044 0532 0130 00"), pii_entity::none);
}

TEST(PiiDetector, EntitySetIsConfigurable) {
  const pii_detector only_email{pii_entity::email};
  EXPECT_FALSE(only_email.first("SSN 123-45-6789").has_value());
  EXPECT_TRUE(only_email.first("a.b@example.org").has_value());
}

TEST(PiiDetector, ReportsEveryMatchWithOffsetsAndAllocatesNothing) {
  const std::string text = "mail bob@example.com, call 415-555-0132, SSN 123-45-6789.";
  std::array<pii_match, 8> found{};
  hedge::test::alloc_scope scope;
  const auto n = pii_detector{}.find(text, found);
  EXPECT_EQ(scope.count(), 0u);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(text.substr(found[0].offset, found[0].length), "bob@example.com");
  EXPECT_EQ(text.substr(found[1].offset, found[1].length), "415-555-0132");
  EXPECT_EQ(text.substr(found[2].offset, found[2].length), "123-45-6789");
}

TEST(PiiDetector, IsUsableAtCompileTime) {
  static_assert(pii_detector{}.first("SSN 123-45-6789")->entity == pii_entity::ssn);
  static_assert(!pii_detector{}.first("nothing here").has_value());
}

// Corpus: positives must be found as their labelled entity; anything found in a negative,
// or a wrong kind found in a positive, counts against precision.
TEST(PiiCorpus, MeetsRecallAndPrecisionTargets) {
  std::ifstream in{std::string{hedge::test::source_dir()} + "/tests/route/data/pii_corpus.tsv"};
  ASSERT_TRUE(in) << "tests/route/data/pii_corpus.tsv missing";
  std::size_t positives = 0, negatives = 0, true_pos = 0, false_pos = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
    ASSERT_NE(t2, std::string::npos) << line;
    const bool positive = line[0] == '1';
    const std::string entity = line.substr(t1 + 1, t2 - t1 - 1), text = line.substr(t2 + 1);
    const auto found = pii_detector{}.first(text);
    if (positive) {
      ++positives;
      if (found && to_string(found->entity) == entity) {
        ++true_pos;
      } else {
        ADD_FAILURE() << "missed " << entity << ": " << text;
        if (found) ++false_pos;
      }
    } else {
      ++negatives;
      if (found) {
        ++false_pos;
        ADD_FAILURE() << "false " << to_string(found->entity) << ": " << text;
      }
    }
  }
  const double recall = static_cast<double>(true_pos) / static_cast<double>(positives);
  const double precision = static_cast<double>(true_pos) / static_cast<double>(true_pos + false_pos);
  std::printf("pii corpus: %zu positives, %zu negatives, recall %.4f, precision %.4f\n", positives, negatives, recall,
              precision);
  EXPECT_GE(positives, 200u);
  EXPECT_GE(negatives, 200u);
  EXPECT_GE(recall, 0.98);
  EXPECT_GE(precision, 0.95);
}

}  // namespace
