// Complexity features and model: one-pass features, weights-file round trip and errors,
// training on a toy separable task.
#include "hedge/route/complexity_model.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "hedge/model/random.hpp"
#include "hedge/os/csv_files.hpp"
#include "hedge/route/training.hpp"
#include "support/alloc_counter.hpp"

namespace {

using namespace hedge::route;

#if HEDGE_SIMD_X86
/// The feature pass checked against the scalar one: AVX2, compiled in every x86 build (a
/// baseline -march=x86-64 one too) and run where the CPU has it.
using simd_arch = hedge::arch::avx2;
#else
using simd_arch = hedge::arch::native;
#endif

/// Every bucket reported, in order per group (the order the model sums in), plus the
/// summary, for one instruction set (the scalar one where the CPU lacks Arch).
template <class Arch, std::size_t Buckets>
std::array<std::vector<std::uint32_t>, hashed_group_count> trace_features(std::string_view text,
                                                                          feature_summary& summary,
                                                                          const feature_hash_keys& keys = {}) {
  if (!Arch::supported()) return trace_features<hedge::arch::scalar, Buckets>(text, summary, keys);
  std::array<std::vector<std::uint32_t>, hashed_group_count> trace;
  summary = complexity_features<Buckets>::extract(
      text, [&](hashed_group g, std::uint32_t b) noexcept { trace[static_cast<std::size_t>(g)].push_back(b); }, keys,
      Arch{});
  return trace;
}

template <std::size_t Buckets>
void expect_same_features(std::string_view text, const feature_hash_keys& keys = {}) {
  feature_summary scalar{}, native{};
  const auto expected = trace_features<hedge::arch::scalar, Buckets>(text, scalar, keys);
  const auto got = trace_features<simd_arch, Buckets>(text, native, keys);
  ASSERT_EQ(got, expected) << text;
  EXPECT_EQ(native.occurrences, scalar.occurrences) << text;
  EXPECT_EQ(native.dense, scalar.dense) << text;  // bit-identical floats
}

// The vector pass reports what the scalar passes (the specification) report, in the same
// order per group, on text built from every byte class, at every length and alignment.
TEST(ComplexityFeatures, VectorPassEqualsScalarPass) {
  static constexpr std::string_view pieces[] = {"a", "Z", "q", "7", " ", "  ", "\n", ",", ". ", "?", "+", "-", "*",
                                                "/", "=", "^", "<", ">", "%", "|", "{", "}", ";", "_", "`", "[",
                                                "]", "\\", "$", "\t", "@", "\x7f", "\x80", "\xc3\xa9", "\xff", "\x01",
                                                "word ", "Word, ", "x^2 ", "\\frac{1}{2}"};
  hedge::model::seeded_random rng{5};
  auto model = std::make_unique<complexity_model<256>>();
  for (auto& group : model->hashed)
    for (auto& w : group) w = static_cast<std::int16_t>(static_cast<int>(rng.below(65535)) - 32767);
  model->scale = {1e-5f, 3e-5f};
  for (auto& w : model->dense) w = static_cast<float>(rng.uniform() - 0.5);
  for (int k = 0; k < 2000; ++k) {
    std::string text;
    const auto size = rng.below(300);
    while (text.size() < size) text += pieces[rng.below(std::size(pieces))];
    const auto keys = feature_hash_keys::of_seed(static_cast<std::uint64_t>(k % 3));
    expect_same_features<16384>(text, keys);
    expect_same_features<4>(text, keys);
    // Bit-identical scores (integer sums of the hashed weights).
    model->hash_seed = static_cast<std::uint64_t>(k % 3);
    const float expected = model->logit(text, hedge::arch::scalar{});
    EXPECT_EQ(model->logit(text), expected) << text;
    if (simd_arch::supported()) {
      EXPECT_EQ(model->logit(text, simd_arch{}), expected) << text;
    }
  }
  for (int b = 0; b < 256; ++b) expect_same_features<256>(std::string(70, static_cast<char>(b)));
  expect_same_features<16384>(std::string(1000, ' ') + "end");
}

// A word of every length up to 140 bytes at every offset of two 32-byte blocks, before
// another word, after one or at the text's start: words inside a unit, carried into the
// next one (also over a whole unit), ending at the unit's last byte, and in the scalar tail.
TEST(ComplexityFeatures, WordsOfEveryLengthAtEveryOffset) {
  hedge::model::seeded_random rng{17};
  static constexpr char word_bytes[] = "abcXYZ0189\x80\xc3\xe9\xff";
  std::vector<std::size_t> lengths;
  for (std::size_t length = 1; length <= 140; ++length) lengths.push_back(length);
  // Lengths whose low byte (the hashed part of a length) wraps.
  for (std::size_t length : {255, 256, 257, 300, 511, 512, 513}) lengths.push_back(length);
  for (const std::size_t length : lengths) {
    for (std::size_t offset = 0; offset < 70; ++offset) {
      std::string text(offset, ' ');
      if (offset > 3) text.replace(0, 3, "An ");
      for (std::size_t k = 0; k < length; ++k) text += word_bytes[rng.below(sizeof word_bytes - 1)];
      text += rng.below(2) == 0 ? " and more words follow here, past the next block." : ".";
      expect_same_features<4096>(text, feature_hash_keys::of_seed(length % 2));
    }
  }
}

// The hash is the weights file's contract (format 4): pinned here from its definition,
// (first 8 folded bytes, little-endian, xor length << 56) times the word key, top bits; a
// bigram (rotl(previous, 29) ^ hash) times the bigram key; a 4-gram (bytes, latest lowest)
// ending at each odd offset from 3 on, times the gram key, top bits. The second text is
// long enough for the vector pass's blocks (and their first-block and tail cases).
TEST(ComplexityFeatures, HashesFollowTheDocumentedDefinition) {
  constexpr std::uint64_t word_key = 0x9e3779b97f4a7c15u, bigram_key = 0xc2b2ae3d27d4eb4fu;
  constexpr std::uint32_t gram_key = 0x9e3779b1u;
  const auto first8 = [](std::string_view w) {
    std::uint64_t v = 0;
    for (std::size_t k = 0; k < w.size() && k < 8; ++k) v |= std::uint64_t{static_cast<unsigned char>(w[k])} << (8 * k);
    return v;
  };
  const auto word = [&](std::string_view w) { return (first8(w) ^ (std::uint64_t{w.size()} << 56)) * word_key; };
  const std::uint64_t a = word("photosynthesis"), b = word("is");
  const std::uint64_t bigram = (((a << 29) | (a >> 35)) ^ b) * bigram_key;
  const std::vector<std::uint32_t> expected_words{static_cast<std::uint32_t>(a >> 52), static_cast<std::uint32_t>(b >> 52),
                                                  static_cast<std::uint32_t>(bigram >> 52)};
  const auto grams = [&](std::string_view text) {
    const auto fold = [](char c) -> std::uint32_t {
      const auto u = static_cast<unsigned char>(c);
      return u >= 'A' && u <= 'Z' ? u - 'A' + 'a' : u <= ' ' ? ' ' : u;
    };
    std::vector<std::uint32_t> out;
    for (std::size_t t = 3; t < text.size(); t += 2) {
      const std::uint32_t gram = fold(text[t - 3]) << 24 | fold(text[t - 2]) << 16 | fold(text[t - 1]) << 8 | fold(text[t]);
      out.push_back((gram * gram_key) >> 20);
    }
    return out;
  };
  feature_summary summary{};
  for (const auto& trace : {trace_features<hedge::arch::scalar, 4096>("Photosynthesis is", summary),
                            trace_features<simd_arch, 4096>("Photosynthesis is", summary)}) {
    EXPECT_EQ(trace[0], expected_words);
    EXPECT_EQ(trace[1], grams("Photosynthesis is"));
    EXPECT_EQ(summary.occurrences[1], 7u);
  }
  // 100 bytes: a unit of two blocks, a unit of one, a 4-byte scalar tail.
  const std::string_view long_text =
      "Which of the following is TRUE of x^2 + 1 = 0?\tAnswer: (B), in 12 steps; see {3}. Then SHOW it fast!";
  for (const auto& trace : {trace_features<hedge::arch::scalar, 4096>(long_text, summary),
                            trace_features<simd_arch, 4096>(long_text, summary)}) {
    EXPECT_EQ(trace[1], grams(long_text));
    EXPECT_EQ(summary.occurrences[1], long_text.size() / 2 - 1);
  }
}

// Seeds draw other multipliers (odd, so multiply-shift hashing stays universal) and so other
// buckets; seed 0 is the default keys. A model scores with the keys of its hash_seed.
TEST(ComplexityFeatures, HashSeedsDrawOtherBuckets) {
  EXPECT_EQ(feature_hash_keys::of_seed(0).word, feature_hash_keys{}.word);
  EXPECT_EQ(feature_hash_keys::of_seed(0).gram, feature_hash_keys{}.gram);
  for (std::uint64_t seed = 1; seed < 100; ++seed) {
    const auto keys = feature_hash_keys::of_seed(seed);
    EXPECT_EQ(keys.word & keys.bigram & keys.gram & 1u, 1u);
    EXPECT_NE(keys.word, feature_hash_keys::of_seed(seed + 1).word);
  }
  const std::string text = "Which of the following statements about photosynthesis is correct? A. It releases CO2.";
  feature_summary a{}, b{};
  const auto seed0 = trace_features<simd_arch, 4096>(text, a);
  const auto seed1 = trace_features<simd_arch, 4096>(text, b, feature_hash_keys::of_seed(1));
  for (std::size_t g = 0; g < hashed_group_count; ++g) {
    EXPECT_EQ(seed0[g].size(), seed1[g].size());
    EXPECT_NE(seed0[g], seed1[g]);
  }
  EXPECT_EQ(a.dense, b.dense);
  auto model = std::make_unique<complexity_model<4096>>();
  for (std::size_t k = 0; k < 4096; ++k) model->hashed[0][k] = static_cast<std::int16_t>(k % 97);
  const float z0 = model->logit(text);
  model->hash_seed = 1;
  EXPECT_NE(model->logit(text), z0);
}

// Above 2^20 bytes the vector char sums are flushed every 65536 batches (2^20 bytes): same
// score. Every char weight is the largest, so a lane that missed its flush would wrap.
TEST(ComplexityFeatures, LongPromptScoresLikeTheScalarPass) {
  hedge::model::seeded_random rng{9};
  auto model = std::make_unique<complexity_model<256>>();
  for (auto& w : model->hashed[0]) w = static_cast<std::int16_t>(static_cast<int>(rng.below(65535)) - 32767);
  model->hashed[1].fill(complexity_model<256>::max_hashed_weight);
  std::string text;
  while (text.size() < (std::size_t{1} << 21) + 100000) text += "Solve x^2 = 4? Then Explain, in 3 steps. ";
  EXPECT_EQ(model->logit(text), model->logit(text, hedge::arch::scalar{}));
  if (simd_arch::supported()) {
    EXPECT_EQ(model->logit(text, simd_arch{}), model->logit(text, hedge::arch::scalar{}));
  }
}

// The dense features' inline log(1 + n) against libm's double log1p: the float nearest the
// exact value, but where that value lies within 1e-9 (relative) of a rounding midpoint.
TEST(ComplexityFeatures, LogOfCountsMatchesLibm) {
  const auto check = [](std::uint64_t n) {
    const double expected = std::log1p(static_cast<double>(n));
    const float got = detail::log1p_count(n);
    const double half_ulp =
        (static_cast<double>(std::nextafter(got, std::numeric_limits<float>::infinity())) - static_cast<double>(got)) / 2.0;
    ASSERT_LE(std::abs(static_cast<double>(got) - expected), half_ulp + 1e-9 * expected) << n;
  };
  for (std::uint64_t n = 0; n < 100000; ++n) check(n);
  for (std::uint64_t n = 100000; n < (std::uint64_t{1} << 52); n = n * 3 + 7) check(n);
}

TEST(ComplexityFeatures, CountsAndDenseValues) {
  std::size_t words = 0, chars = 0;
  const auto s = complexity_features<256>::extract("Solve x^2 = 4?", [&](hashed_group g, std::uint32_t b) noexcept {
    EXPECT_LT(b, 256u);
    (g == hashed_group::words ? words : chars) += 1;
  });
  EXPECT_EQ(words, 4u + 3u);  // unigrams solve x 2 4, three bigrams
  EXPECT_EQ(s.occurrences[0], words);
  EXPECT_EQ(s.occurrences[1], chars);
  EXPECT_GT(s.dense[static_cast<std::size_t>(dense_feature::math_fraction)], 0.0f);
  EXPECT_GT(s.dense[static_cast<std::size_t>(dense_feature::question_marks)], 0.0f);
}

TEST(ComplexityFeatures, CaseFoldedAndDeterministic) {
  std::vector<std::uint32_t> a, b;
  complexity_features<1024>::extract("Hello World", [&](hashed_group, std::uint32_t k) noexcept { a.push_back(k); });
  complexity_features<1024>::extract("hello world", [&](hashed_group, std::uint32_t k) noexcept { b.push_back(k); });
  EXPECT_EQ(a, b);
}

TEST(ComplexityModel, ScoringAllocatesNothing) {
  static complexity_model<4096> model;
  model.bias = 0.25f;
  hedge::test::alloc_scope scope;
  const float z = model.logit("What is the integral of sin(x) dx from 0 to pi?");
  EXPECT_EQ(scope.count(), 0u);
  EXPECT_FLOAT_EQ(z, 0.25f);
}

TEST(ComplexityModel, WeightsFileRoundTrip) {
  auto model = std::make_unique<complexity_model<256>>();
  model->bias = -0.5f;
  model->dense[3] = 1.25f;
  model->scale = {0.125f, 3e-5f};
  model->hashed[0][7] = 1;
  model->hashed[0][8] = -32767;
  model->hashed[1][255] = 32767;
  model->hash_seed = 0xfedcba9876543210u;
  const std::string path = ::testing::TempDir() + "hedge_weights_roundtrip.txt";
  ASSERT_TRUE(hedge::os::write_complexity_weights(*model, path, "test").ok());
  auto text = hedge::os::read_text_file(path);
  ASSERT_TRUE(text.ok());
  auto loaded = std::make_unique<complexity_model<256>>();
  ASSERT_TRUE(parse_complexity_weights(*text, *loaded).ok());
  EXPECT_EQ(loaded->bias, model->bias);
  EXPECT_EQ(loaded->dense, model->dense);
  EXPECT_EQ(loaded->scale, model->scale);
  EXPECT_EQ(loaded->hashed, model->hashed);
  EXPECT_EQ(loaded->hash_seed, model->hash_seed);
  const std::string prompt = "Which of these is a prime number? A. 9 B. 15 C. 17";
  EXPECT_EQ(loaded->logit(prompt), model->logit(prompt));
  std::remove(path.c_str());
}

TEST(ComplexityModel, BadWeightsFilesAreErrorsWithLineNumbers) {
  complexity_model<16> m;
  const auto code = [&](std::string_view text) { return parse_complexity_weights(text, m).error().code(); };
  EXPECT_EQ(code(""), hedge::errc::parse_error);
  EXPECT_EQ(code("hello 2\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 1\n"), hedge::errc::unsupported);  // float weights, rotate-xor word hash
  EXPECT_EQ(code("hedge-complexity 2\n"), hedge::errc::unsupported);  // words hashed in 8-byte chunks
  EXPECT_EQ(code("hedge-complexity 3\n"), hedge::errc::unsupported);  // a 4-gram at every byte
  EXPECT_EQ(code("hedge-complexity 4\n"), hedge::errc::unsupported);  // no saturation, no 'end' record
  EXPECT_EQ(code("hedge-complexity 6\n"), hedge::errc::unsupported);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 32\n"), hedge::errc::shape_mismatch);
  EXPECT_EQ(code("hedge-complexity 5\nbias 0\n"), hedge::errc::parse_error);  // no buckets line
  EXPECT_EQ(code("hedge-complexity 5\nwords 1 5\nbuckets 16\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nwords 16 5\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nwords 1 0.5\n"), hedge::errc::parse_error);  // not an integer
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nwords 1 32768\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nchars 1 -32768\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nscale words 0\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nscale chars -1e-5\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nscale dense 1e-5\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nbias nan\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\ndense no_such 1\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nbias 1 2\n"), hedge::errc::parse_error);
  EXPECT_EQ(code("hedge-complexity 5\nbuckets 16\nhash_seed -1\n"), hedge::errc::parse_error);
  // A file without a hash_seed line means seed 0, also after a file that had one.
  ASSERT_TRUE(parse_complexity_weights("hedge-complexity 5\nbuckets 16\nhash_seed 7\nend 3\n", m).ok());
  EXPECT_EQ(m.hash_seed, 7u);
  ASSERT_TRUE(parse_complexity_weights("hedge-complexity 5\nbuckets 16\nend 2\n", m).ok());
  EXPECT_EQ(m.hash_seed, 0u);
  const auto e = parse_complexity_weights("hedge-complexity 5\nbuckets 16\n# ok\nchars x 1\n", m).error();
  EXPECT_EQ(std::string{e.message()}, "complexity weights line 4: bad bucket index");
  EXPECT_TRUE(parse_complexity_weights("# c\r\nhedge-complexity 5\r\nbuckets 16\r\nscale chars 1e-3\r\nchars 3 -7\r\nend 4\r\n", m).ok());
  EXPECT_EQ(m.hashed[1][3], -7);
  EXPECT_FLOAT_EQ(m.scale[1], 1e-3f);
  EXPECT_FLOAT_EQ(m.scale[0], 1.0f);
}

// Every feature saturates, so a model's score has a bound for any input: a 16 MB single
// token (its mean word length alone once scored a logit of about 2e5) and a 50 MB field of
// words score within max_abs_logit, on every arch, with weights at their worst (every
// dense weight 1, every hashed weight the largest), and the dense features stay within
// [0, dense_feature_max].
TEST(ComplexityModel, HugePromptsScoreWithinTheBound) {
  auto model = std::make_unique<complexity_model<4096>>();
  model->bias = 0.5f;
  model->dense.fill(1.0f);
  model->scale = {1e-4f, 2e-4f};
  for (auto& group : model->hashed) group.fill(complexity_model<4096>::max_hashed_weight);
  const double bound = model->max_abs_logit();
  ASSERT_TRUE(std::isfinite(bound));
  EXPECT_LT(bound, 3000.0);
  const std::string token(std::size_t{16} << 20, 'b');
  std::string field;
  while (field.size() < std::size_t{50} << 20) field += "Prove that x^2 + 1 > 0 for every real x; then EXPLAIN {why}? ";
  for (const std::string* prompt : std::array<const std::string*, 2>{&token, &field}) {
    const float z = model->logit(*prompt);
    EXPECT_LE(std::abs(z), bound) << prompt->size();
    EXPECT_EQ(model->logit(*prompt, hedge::arch::scalar{}), z);
    const auto summary = complexity_features<4096>::extract(*prompt, [](hashed_group, std::uint32_t) noexcept {});
    for (std::size_t k = 0; k < dense_feature_count; ++k) {
      EXPECT_GE(summary.dense[k], 0.0f) << dense_feature_names[k];
      EXPECT_LE(summary.dense[k], dense_feature_max[k]) << dense_feature_names[k];
    }
  }
  // The token saturates its mean word length, and its one 4-gram ("bbbb", 8 M times) its
  // group: that group's term is sqrt(hashed_saturation) times the largest weight.
  const auto summary = complexity_features<4096>::extract(token, [](hashed_group, std::uint32_t) noexcept {});
  const auto mean_word_length = static_cast<std::size_t>(dense_feature::mean_word_length);
  EXPECT_EQ(summary.dense[mean_word_length], dense_feature_max[mean_word_length]);
  auto gram_only = std::make_unique<complexity_model<4096>>();
  gram_only->scale = model->scale;
  gram_only->hashed[1] = model->hashed[1];
  const double gram_term = 2e-4 * complexity_model<4096>::max_hashed_weight * hashed_saturation_sqrt;
  EXPECT_NEAR(gram_only->logit(token), gram_term, gram_term * 1e-5);
  EXPECT_LE(gram_only->logit(token), gram_only->max_abs_logit());
}

// The normalisation is 1/sqrt(n) up to hashed_saturation occurrences and sqrt(N)/n past
// it: continuous at N, and n weights of magnitude w never sum to more than sqrt(N) w.
TEST(ComplexityFeatures, HashedNormalisationSaturates) {
  feature_summary s{};
  s.occurrences = {100, hashed_saturation};
  EXPECT_FLOAT_EQ(s.group_scale(hashed_group::words), 0.1f);
  EXPECT_FLOAT_EQ(s.group_scale(hashed_group::chars), 1.0f / hashed_saturation_sqrt);
  s.occurrences = {4 * hashed_saturation, std::uint64_t{1} << 40};
  EXPECT_FLOAT_EQ(s.group_scale(hashed_group::words), 0.25f / hashed_saturation_sqrt);
  EXPECT_FLOAT_EQ(static_cast<float>(std::uint64_t{1} << 40) * s.group_scale(hashed_group::chars), hashed_saturation_sqrt);
}

// Weights whose worst-case score is beyond the float range are refused, naming the entry's
// line: 'scale words 3e38' with a word weight scored every prompt +-inf, and calibration
// then printed threshold_logit=-inf.
TEST(ComplexityModel, WeightsWithAnUnboundedScoreAreRefused) {
  complexity_model<16> m;
  const auto message = [&](std::string_view text) {
    const auto r = parse_complexity_weights(text, m);
    return r.ok() ? std::string{"ok"} : std::string{r.error().message()};
  };
  EXPECT_EQ(message("hedge-complexity 5\nbuckets 16\nscale words 3e38\nwords 3 1\nend 4\n"),
            "complexity weights line 3: scale words (times its largest weight) makes the score unbounded: its "
            "worst-case logit exceeds the float range");
  EXPECT_EQ(message("hedge-complexity 5\nbuckets 16\n# q\ndense question_marks 3e37\nend 3\n"),
            "complexity weights line 4: dense question_marks makes the score unbounded: its worst-case logit exceeds "
            "the float range");
  // Each term finite, their sum not: the largest is named.
  EXPECT_EQ(message("hedge-complexity 5\nbuckets 16\ndense log_bytes 6e37\nbias -2e38\nend 4\n"),
            "complexity weights line 4: bias makes the score unbounded: its worst-case logit exceeds the float range");
  // A large scale with no weight in its group scores nothing: accepted.
  EXPECT_EQ(message("hedge-complexity 5\nbuckets 16\nscale words 3e38\nchars 3 -7\nend 4\n"), "ok");
  EXPECT_LE(std::abs(m.logit("a prompt of some length, with words")), m.max_abs_logit());
}

// The 'end <records>' record makes truncation an error: a file cut after any line or inside
// one (as 'chars 4095 13367' cut to 'chars 4095 133'), or missing a line, is refused; the
// whole file, and the whole file without its last newline, load.
TEST(ComplexityModel, TruncatedWeightsFilesAreRefused) {
  auto big = std::make_unique<complexity_model<4096>>();
  hedge::model::seeded_random rng{3};
  for (int k = 0; k < 60; ++k) big->hashed[rng.below(2)][rng.below(4096)] = static_cast<std::int16_t>(rng.below(2000) + 1);
  big->hashed[1][4095] = 13367;
  big->scale = {1e-5f, 2e-5f};
  const std::string text = complexity_weights_text(*big, "truncation");
  auto loaded = std::make_unique<complexity_model<4096>>();
  ASSERT_TRUE(parse_complexity_weights(text, *loaded).ok());
  EXPECT_EQ(loaded->hashed, big->hashed);
  std::size_t cut = 0;
  for (int line = 0; line < 20; ++line) cut = text.find('\n', cut) + 1;
  const auto after_20_lines = parse_complexity_weights(std::string_view{text}.substr(0, cut), *loaded);
  ASSERT_FALSE(after_20_lines.ok());
  EXPECT_EQ(std::string{after_20_lines.error().message()},
            "complexity weights: truncated (no 'end <records>' line after line 20)");
  const std::size_t mid = text.find("chars 4095 13367\n");
  ASSERT_NE(mid, std::string::npos);
  EXPECT_FALSE(parse_complexity_weights(std::string_view{text}.substr(0, mid + 14), *loaded).ok());  // "chars 4095 133"
  std::string lost_line = text;
  lost_line.erase(mid, 17);
  const auto lost = parse_complexity_weights(lost_line, *loaded);
  ASSERT_FALSE(lost.ok());
  EXPECT_NE(lost.error().message().find("records precede it"), std::string_view::npos);
  EXPECT_FALSE(parse_complexity_weights(text + "bias 1\n", *loaded).ok());  // a record after 'end'
  EXPECT_TRUE(parse_complexity_weights(text + "# a comment\n\n", *loaded).ok());

  // Every cut of a small file.
  complexity_model<16> small;
  small.bias = -0.25f;
  small.hashed[0][3] = 1250;
  small.hashed[1][15] = -13367;
  const std::string small_text = complexity_weights_text(small);
  complexity_model<16> m;
  for (std::size_t n = 0; n + 1 < small_text.size(); ++n)
    EXPECT_FALSE(parse_complexity_weights(std::string_view{small_text}.substr(0, n), m).ok()) << small_text.substr(0, n);
  EXPECT_TRUE(parse_complexity_weights(std::string_view{small_text}.substr(0, small_text.size() - 1), m).ok());
  EXPECT_TRUE(parse_complexity_weights(small_text, m).ok());
  EXPECT_EQ(m.hashed[1][15], -13367);
}

TEST(ComplexityTraining, LearnsASeparableToyTask) {
  std::vector<std::string> prompts;
  std::vector<float> labels;
  const char* hard[] = {"prove the integral converges", "derive the eigenvalues of the matrix", "prove the lemma by induction"};
  const char* easy[] = {"what colour is the sky", "name a fruit", "what colour is grass"};
  for (int k = 0; k < 3; ++k) prompts.push_back(hard[k]), labels.push_back(1.0f), prompts.push_back(easy[k]), labels.push_back(0.0f);
  std::vector<sparse_features> features;
  for (const auto& p : prompts) features.push_back(sparse_features_of<1024>(p));
  std::vector<const sparse_features*> x;
  for (const auto& f : features) x.push_back(&f);
  std::vector<float> weights(labels.size(), 1.0f);
  auto model = std::make_unique<complexity_model<1024>>();
  ASSERT_TRUE(train_complexity_model(x, labels, weights, logistic_options{.epochs = 30}, *model).ok());
  EXPECT_GT(model->probability("prove the theorem by induction"), 0.5f);
  EXPECT_LT(model->probability("what colour is a banana"), 0.5f);
}

}  // namespace
