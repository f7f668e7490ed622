// PII detector: check-digit helpers, one case per entity family, look-alikes, and the
// recall/precision targets on the committed corpus tests/route/data/pii_corpus.tsv.
#include "hedge/route/pii_detector.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "hedge/model/random.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

#if HEDGE_SIMD_X86
/// The pre-scan variant checked against the scalar one: AVX2, compiled in every x86 build
/// (a baseline -march=x86-64 one too) and run where the CPU has it.
using simd_arch = hedge::arch::avx2;
using simd_prescan = hedge::route::avx2::pii_prescan;
#define SKIP_WITHOUT_SIMD() \
  if (!simd_arch::supported()) GTEST_SKIP() << "this CPU has no AVX2"
#else
using simd_arch = hedge::arch::native;
using simd_prescan = detail::pii_prescan<>;
#define SKIP_WITHOUT_SIMD() static_cast<void>(0)
#endif

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

// --- plain-run skip: find (pre-scan, scalar and AVX2) must equal find_reference ---------

std::vector<std::string> corpus_texts() {
  std::ifstream in{std::string{hedge::test::source_dir()} + "/tests/route/data/pii_corpus.tsv"};
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    texts.push_back(line.substr(line.find('\t', line.find('\t') + 1) + 1));
  }
  return texts;
}

/// Every match of `find` with each pre-scan equals `find_reference`'s.
void expect_same_matches(std::string_view text) {
  std::array<pii_match, 64> expected{}, got{};
  const pii_detector detector;
  const auto n = detector.find_reference(text, expected);
  const auto check = [&](auto arch) {
    const auto m = detector.find(text, got, arch);
    ASSERT_EQ(m, n) << decltype(arch)::name << ": " << text;
    for (std::size_t k = 0; k < n; ++k) {
      EXPECT_EQ(got[k].entity, expected[k].entity) << text;
      EXPECT_EQ(got[k].offset, expected[k].offset) << text;
      EXPECT_EQ(got[k].length, expected[k].length) << text;
    }
  };
  check(hedge::arch::scalar{});
  if (simd_arch::supported()) check(simd_arch{});
  check(hedge::arch::best{});
}

/// Text from an alphabet weighted towards what the matchers and the pre-scan care about.
std::string random_text(hedge::model::seeded_random& rng, std::size_t size) {
  static constexpr std::string_view pieces[] = {
      "a", "e", "b", "d", "B", "D", "x", "F", "DE", "GB", " ", " ", "\n", ",", ".", "?", "'", "\"", "-", ":", "::",
      "@", "+", "(", ")", "/", "_", "0", "1", "4", "9", "12", "255", "born ", "DOB ", "birth", "March ", "1985",
      "de-ad-be-ef-00-11", "ab:cd", "\xc3\xa9", "\t", "version ", "a@b.co", "4111 1111 1111 1111",
      "7B ", "3rd", "1 (555) 123-4567", "bo", "bir", "do", "r", "o", "i", "$", "=", ";", "[", "]", "`", "{", "}",
      "~", "\r", "#", "*", "<", ">", "^", "\\", "|", "!", "%", "&", "\x7f", "\x01"};
  std::string s;
  while (s.size() < size) s += pieces[rng.below(std::size(pieces))];
  return s;
}

TEST(PiiPreScan, MatchesReferenceOnCorpus) {
  const auto texts = corpus_texts();
  ASSERT_GE(texts.size(), 400u);
  std::string joined;  // also as one long text, so the 32-byte blocks span several snippets
  for (const auto& t : texts) {
    expect_same_matches(t);
    joined += t + ". ";
  }
  expect_same_matches(joined);
}

TEST(PiiPreScan, MatchesReferenceOnRandomAndMutatedText) {
  hedge::model::seeded_random rng{7};
  for (int k = 0; k < 3000; ++k) expect_same_matches(random_text(rng, rng.below(200)));
  // Corpus snippets inside long plain text at every alignment, with random bytes changed.
  const auto texts = corpus_texts();
  const std::string filler = "which of the following describes a plain sentence, really? ";
  for (int k = 0; k < 3000; ++k) {
    std::string s = filler.substr(0, rng.below(filler.size())) + texts[rng.below(texts.size())] + filler;
    for (std::uint64_t m = rng.below(3); m > 0; --m) s[rng.below(s.size())] = static_cast<char>(rng.below(256));
    expect_same_matches(s);
  }
}

// Every byte value in each of the four places a stop rule looks at (the byte before, the
// byte, the one after and the one after that), the other three drawn from the bytes the rules
// name, at offsets inside a 32-byte block and across its boundaries, the scan starting at
// the text's start and at the byte itself: the nibble tables give the scalar stops.
TEST(PiiPreScan, AvxStopsEqualScalarStopsForEveryByte) {
  SKIP_WITHOUT_SIMD();
  constexpr std::string_view named = "@0 9(+:-aAfFgGzZbBdDiIoOrR_x.";
  hedge::model::seeded_random rng{5};
  for (std::size_t place = 0; place < 4; ++place) {
    for (int b = 0; b < 256; ++b) {
      for (int draw = 0; draw < 40; ++draw) {
        char window[4];
        for (char& c : window) c = named[rng.below(named.size())];
        window[place] = static_cast<char>(b);
        for (const std::size_t at : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{30}, std::size_t{31},
                                     std::size_t{32}, std::size_t{33}, std::size_t{45}, std::size_t{46}}) {
          std::string s(48, 'q');
          for (std::size_t k = 1; k < s.size(); k += 4) s[k] = ' ';
          for (std::size_t k = 0; k < 4; ++k)
            if (at + k >= 1 && at + k - 1 < s.size()) s[at + k - 1] = window[k];
          for (const std::size_t from : {std::size_t{0}, at}) {
            ASSERT_EQ(detail::next_pii_stop(s, from, s.size(), simd_arch{}),
                      detail::next_pii_stop(s, from, s.size(), hedge::arch::scalar{}))
                << "byte " << b << " in place " << place << " at " << at << " from " << from << ": " << s;
          }
        }
      }
    }
  }
}

// Which bytes stop the pre-scan: only where a neighbour leaves them something to start.
TEST(PiiPreScan, StopsOnlyWhereAnEntityCanStart) {
  const auto stop = [](std::string_view s) { return detail::next_pii_stop(s, 0, s.size(), hedge::arch::scalar{}); };
  EXPECT_EQ(stop("Answer: (B) well-known, the x"), 29u);  // ':' '(' '-' after other letters: none
  EXPECT_EQ(stop("In 1990, 42 of 7B rose"), 22u);         // digits that start nothing
  EXPECT_EQ(stop("pi is 3.14, 10-20 m, 1/2 of 10 20"), 33u);  // two groups, no third
  EXPECT_EQ(stop("ip 10.0.0.1"), 3u);                     // a third group
  EXPECT_EQ(stop("call 555 123 4567"), 5u);               // a third group after a space
  EXPECT_EQ(stop("card 4111111111111"), 5u);              // 13 digits
  EXPECT_EQ(stop("card 411111111111 1"), 5u);             // 13 card bytes: two groups
  EXPECT_EQ(stop("at 3:15"), 3u);                         // ':'
  EXPECT_EQ(stop("call 1-(800)"), 5u);                    // a separator before '('
  EXPECT_EQ(stop("in 1985 (age 3)"), 15u);                // a separator before '(' after a run other than "1"
  EXPECT_EQ(stop("see x2"), 5u);                          // a digit after a letter
  EXPECT_EQ(stop("see fe80::1"), 6u);                     // a digit after hex letters
  EXPECT_EQ(stop("at de:ad:be"), 5u);                     // ':' after a hex letter
  EXPECT_EQ(stop("at de-ad-be"), 5u);                     // '-' after a hex letter
  EXPECT_EQ(stop("Note: one-third, free-form"), 26u);     // ... but not before a next group
  EXPECT_EQ(stop("call (5"), 5u);                         // '(' before a digit
  EXPECT_EQ(stop("ip ::1"), 3u);                          // "::"
  EXPECT_EQ(stop("mail x@y"), 6u);
  EXPECT_EQ(stop("the Born, neighbor"), 4u);              // a run starting "bor"
  EXPECT_EQ(stop("reborn doubt"), 12u);                   // not inside a run; "dou" is not "dob"
}

// Each digit format is found through the pre-scan's digit rule that lets it start: a third
// group (after ':', '-', '.', '/' or a space), 13 card bytes in one or two groups, ':', and
// "1" before a separator and '('; inside prose whose decimals and ranges do not stop it.
TEST(PiiPreScan, EachDigitRuleLetsItsFormatsStart) {
  const std::pair<std::string_view, pii_entity> cases[] = {
      {"pi 3.14, ip 10.0.0.1 ok", pii_entity::ipv4},
      {"10-20 m, ssn 123-45-6789 ok", pii_entity::ssn},
      {"1/2 of, mac 00-1a-2b-3c-4d-5e ok", pii_entity::mac},
      {"at 3:15, mac 00:1a:2b:3c:4d:5e ok", pii_entity::mac},
      {"v 2001:db8::1 ok", pii_entity::ipv6},
      {"v 2001::1 ok", pii_entity::ipv6},
      {"v 1:: ok", pii_entity::ipv6},
      {"v abcd::1 ok", pii_entity::ipv6},
      {"call 415 555 0132 ok", pii_entity::phone},
      {"call 1-(415) 555-0132 ok", pii_entity::phone},
      {"call 1 (415) 555-0132 ok", pii_entity::phone},
      {"card 4111111111111111 ok", pii_entity::credit_card},
      {"card 411111111111 1111 ok", pii_entity::credit_card},
      {"card 4111-111111111111 ok", pii_entity::credit_card},
      {"card 4111 1111 1111 1111 ok", pii_entity::credit_card},
  };
  for (const auto& [text, entity] : cases) {
    EXPECT_EQ(first_entity(text), entity) << text;
    expect_same_matches(text);
  }
}

// Digit runs of every length next to what decides whether an entity may start there
// (separators, a second run and what follows it, ':', '(', 13 card bytes), across
// block boundaries and the 64-byte window the vector pass looks at, from every start. Each
// text sits in a heap block of its exact size, so the sanitizer build sees any read past it.
TEST(PiiPreScan, AvxDigitRunStopsEqualScalarStops) {
  SKIP_WITHOUT_SIMD();
  hedge::model::seeded_random rng{13};
  constexpr std::string_view pieces[] = {"0", "7", "9", "12", "255", "1985", "0000000000", "4111111111", "1",
                                         "a", "F", "x", "G", " ", " ", ":", "-", ".", "/", "(", ",", "\n", "q", "- ", " ("};
  for (int k = 0; k < 2000; ++k) {
    std::string text;
    const std::size_t size = rng.below(140);
    while (text.size() < size) text += pieces[rng.below(std::size(pieces))];
    const auto exact = std::make_unique<char[]>(text.size());
    std::copy(text.begin(), text.end(), exact.get());
    const std::string_view s{exact.get(), text.size()};
    for (std::size_t i = 0; i <= s.size(); ++i)
      ASSERT_EQ(detail::next_pii_stop(s, i, s.size(), simd_arch{}),
                detail::next_pii_stop(s, i, s.size(), hedge::arch::scalar{}))
          << text << " from " << i;
  }
}

// The AVX2 cursor the scan uses keeps its last block's stops: one cursor per text, asked
// for the stop after each stop (as the scan resumes) and from every position in turn, gives
// the scalar stops; so does a fresh cursor asked once.
TEST(PiiPreScan, CursorResumingAfterEachStopEqualsScalarStops) {
  SKIP_WITHOUT_SIMD();
  hedge::model::seeded_random rng{17};
  for (int k = 0; k < 500; ++k) {
    const std::string s = random_text(rng, rng.below(200));
    simd_prescan chained{s};
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t stop = chained.next(i);
      ASSERT_EQ(stop, detail::next_pii_stop(s, i, s.size(), hedge::arch::scalar{})) << s << " from " << i;
      i = stop + 1 + rng.below(3);
    }
    simd_prescan stepping{s};
    for (std::size_t i = 0; i <= s.size(); ++i)
      ASSERT_EQ(stepping.next(i), detail::next_pii_stop(s, i, s.size(), hedge::arch::scalar{})) << s << " from " << i;
  }
}

// A baseline -march=x86-64 build contains the AVX2 pre-scan and `best` picks it on an AVX2
// CPU (once per call; core/dispatch.hpp).
TEST(PiiPreScan, BestRunsTheAvx2PreScanOnAnAvx2Cpu) {
  SKIP_WITHOUT_SIMD();
  const bool avx2_cursor = hedge::arch::visit<hedge::arch::best>([](auto tag) {
    return std::is_same_v<decltype(detail::make_pii_prescan(std::string_view{}, tag)), simd_prescan>;
  });
  EXPECT_TRUE(avx2_cursor) << "best is " << hedge::arch::best_name();
#if HEDGE_SIMD_X86 && !defined(__AVX2__)
  ::testing::Test::RecordProperty("baseline_build_runs", std::string{hedge::arch::best_name()});
#endif
}

TEST(PiiPreScan, AvxStopsEqualScalarStops) {
  SKIP_WITHOUT_SIMD();
  hedge::model::seeded_random rng{11};
  for (int k = 0; k < 500; ++k) {
    const std::string s = random_text(rng, rng.below(150));
    for (std::size_t i = 0; i <= s.size(); ++i)
      ASSERT_EQ(detail::next_pii_stop(s, i, s.size(), simd_arch{}),
                detail::next_pii_stop(s, i, s.size(), hedge::arch::scalar{}))
          << s << " from " << i;
  }
}

}  // namespace
