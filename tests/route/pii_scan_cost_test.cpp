// The PII scan is linear in the worst case: the bytes it examines, counted, stay under a
// fixed number per input byte over adversarial families (every stop kind and every entity
// prefix, each followed by long runs of every byte class), and that number does not grow
// with the input. A count, not a timing: a quadratic path shows as thousands of reads per
// byte at a few KB, on any machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/route/pii_detector.hpp"

namespace {

using namespace hedge::route;

/// A text that counts every byte read through it (pii_matchers.hpp: what a text may be).
struct counted_text {
  std::string_view bytes;
  std::size_t* reads;
  constexpr std::size_t size() const noexcept { return bytes.size(); }
  char operator[](std::size_t i) const noexcept {
    ++*reads;
    return bytes[i];
  }
};
/// The check-digit functions' slice: n bytes read.
std::string_view pii_slice(counted_text t, std::size_t i, std::size_t n) noexcept {
  *t.reads += n;
  return t.bytes.substr(i, n);
}

/// A vector pre-scan cursor, charged for what one call can read: the bytes from the
/// position asked to the stop found, plus one block's reach past it (a 32-byte block, the
/// bytes on either side its rules look at, and the 64-byte window of the digit-run rule).
template <class Cursor>
struct counted_cursor {
  static constexpr std::size_t block_reach = 32 + 2 + 65;
  Cursor inner;
  std::size_t* reads;
  std::size_t next(std::size_t i) noexcept {
    const std::size_t stop = inner.next(i);
    *reads += stop - i + block_reach;
    return stop;
  }
};

/// Bytes examined per input byte by the scan of `pii_detector::find` with the given
/// pre-scan over `text`, every entity enabled (`find` with room for every match).
template <class MakeCursor>
double reads_per_byte(std::string_view text, MakeCursor make_cursor) {
  std::size_t reads = 0;
  const counted_text counted{text, &reads};
  auto cursor = make_cursor(counted, &reads);
  detail::pii_scan<counted_text>{pii_entity::all}.run<true>(counted, cursor, [](const pii_match&) { return true; });
  return static_cast<double>(reads) / static_cast<double>(text.size());
}

double scalar_reads_per_byte(std::string_view text) {
  return reads_per_byte(text, [](counted_text t, std::size_t*) { return detail::pii_prescan<counted_text>{t}; });
}

double reference_reads_per_byte(std::string_view text) {
  std::size_t reads = 0;
  const counted_text counted{text, &reads};
  detail::pii_prescan<counted_text> unused{counted};
  detail::pii_scan<counted_text>{pii_entity::all}.run<false>(counted, unused, [](const pii_match&) { return true; });
  return static_cast<double>(reads) / static_cast<double>(text.size());
}

#if HEDGE_SIMD_X86
double avx2_reads_per_byte(std::string_view text) {
  return reads_per_byte(text, [text](counted_text, std::size_t* reads) {
    return counted_cursor<avx2::pii_prescan>{avx2::pii_prescan{text}, reads};
  });
}
#endif

// Every kind of pre-scan stop and a prefix of every entity format (and of their look-alikes
// that make matchers read on), as an attacker would put before a long run.
constexpr std::array<std::string_view, 46> prefixes{
    "a1", "x1", "zz-", "a-", "a:", "ab:c", "ab-cd", "DE89", "DE89 3704 ", "GB82 WEST 1234 5698 7654 32",
    "@", "a@", "a@b", "a@b.", "x.y@z.co", "(1", "+1", "+1 ", "+44 (20) ", "::", "1::", "2001:db8::", "fe80:",
    "1", "1:", "12:34:", "12-34-", "1-(", "1 (", "1.2.", "192.168.1.", "version 1.2.3.", "123-45-", "2024-05-",
    "14/05/", "555 123 ", "1-800-", "4111 1111 1111", "4111111111111", "bir", "bor", "dob", "born ", "DOB: ",
    "March 3, ", "3rd of "};
// The runs that follow: every byte class the scan tells apart, alone and in pairs.
constexpr std::array<std::string_view, 22> fillers{"b",  "a",   "1",  "0",  " ",   ".",  "-",  ":",
                                                   "@",  "(",   "+",  "/",  "1 ",  "1.", "1-", "a:",
                                                   "a1", "1a",  "ab:", "::", "bir", "born "};

/// The family of a prefix and a filler at `size` bytes: the prefix once, then the filler;
/// or (prefix, `run` fillers) repeated.
std::string family(std::string_view prefix, std::string_view filler, std::size_t run, std::size_t size) {
  std::string s;
  s.reserve(size + prefix.size() + filler.size());
  while (s.size() < size) {
    s += prefix;
    for (std::size_t k = 0; k < run && s.size() < size; ++k) s += filler;
  }
  s.resize(size);
  return s;
}

/// The bound every family must meet, and the most the cost per byte may grow from a small
/// text to one eight times larger (a linear scan's cost per byte does not grow; a
/// quadratic one's grows eightfold).
constexpr double max_reads_per_byte = 128.0;
constexpr double max_growth = 1.25;

template <class Cost>
void expect_linear(const char* name, Cost cost) {
  double worst = 0.0;
  std::string worst_family;
  for (const auto prefix : prefixes) {
    for (const auto filler : fillers) {
      for (const std::size_t run : {std::size_t{1} << 20, std::size_t{1}, std::size_t{16}}) {
        const double small = cost(family(prefix, filler, run, 2048));
        const double large = cost(family(prefix, filler, run, 16384));
        EXPECT_LE(large, max_reads_per_byte) << name << ": '" << prefix << "' then '" << filler << "' x " << run;
        EXPECT_LE(large, small * max_growth + 1.0) << name << ": '" << prefix << "' then '" << filler << "' x " << run;
        if (large > worst) worst = large, worst_family = std::string(prefix) + "' then '" + std::string(filler);
      }
    }
  }
  std::printf("%s: at most %.1f bytes read per input byte ('%s')\n", name, worst, worst_family.c_str());
}

TEST(PiiScanCost, ScalarPreScanScanIsLinear) { expect_linear("scalar pre-scan", scalar_reads_per_byte); }

TEST(PiiScanCost, ReferenceScanIsLinear) { expect_linear("reference scan", reference_reads_per_byte); }

#if HEDGE_SIMD_X86
TEST(PiiScanCost, Avx2PreScanScanIsLinear) {
  if (!hedge::arch::avx2::supported()) GTEST_SKIP() << "this CPU has no AVX2";
  expect_linear("AVX2 pre-scan", avx2_reads_per_byte);
}
#endif

// The counted scans find what `find` finds: the count is of the scan the detector runs.
TEST(PiiScanCost, CountedScanFindsWhatFindFinds) {
  const std::string text = "mail a.b@example.com, card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, born 3 March 1985";
  std::size_t reads = 0;
  const counted_text counted{text, &reads};
  detail::pii_prescan<counted_text> cursor{counted};
  std::vector<pii_match> counted_matches;
  detail::pii_scan<counted_text>{pii_entity::all}.run<true>(counted, cursor, [&](const pii_match& m) {
    counted_matches.push_back(m);
    return true;
  });
  std::array<pii_match, 8> found{};
  const std::size_t n = pii_detector{}.find(text, found);
  ASSERT_EQ(counted_matches.size(), n);
  ASSERT_EQ(n, 4u);
  for (std::size_t k = 0; k < n; ++k) {
    EXPECT_EQ(counted_matches[k].entity, found[k].entity);
    EXPECT_EQ(counted_matches[k].offset, found[k].offset);
    EXPECT_EQ(counted_matches[k].length, found[k].length);
  }
  EXPECT_GT(reads, 0u);
}

}  // namespace
