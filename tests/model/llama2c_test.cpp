// llama2.c checkpoints: the real stories260K.bin (legacy v0), a version 1 file built from
// it, the sign rule, and hostile headers and truncations, each an error with a message.
#include "hedge/model/llama2c.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

using hedge::errc;
using hedge::model::llama2c_checkpoint;

/// A 4-byte aligned byte buffer (std::vector<std::byte> of floats' alignment).
struct aligned_bytes {
  std::vector<float> storage;
  std::size_t size = 0;
  explicit aligned_bytes(std::size_t n) : storage((n + 3) / 4), size(n) {}
  std::byte* data() { return reinterpret_cast<std::byte*>(storage.data()); }
  std::span<const std::byte> span() const { return {reinterpret_cast<const std::byte*>(storage.data()), size}; }
};

aligned_bytes read_aligned_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  aligned_bytes b(raw.size());
  std::memcpy(b.data(), raw.data(), raw.size());
  return b;
}

const std::string stories = HEDGE_SHARED_DIR "/models/stories260K.bin";

#define SKIP_WITHOUT_MODEL()                                          \
  if (!std::ifstream(stories).good()) GTEST_SKIP() << stories << " is absent (../shared/models)"

void put_i32(aligned_bytes& b, std::size_t offset, std::int32_t v) { std::memcpy(b.data() + offset, &v, 4); }

TEST(Llama2c, ReadsStories260KHeaderAndWeights) {
  SKIP_WITHOUT_MODEL();
  const auto file = read_aligned_file(stories);
  const auto c = llama2c_checkpoint::parse(file.span());
  ASSERT_TRUE(c.ok()) << c.error().message();
  const auto& cfg = c->config();
  EXPECT_EQ(c->version(), 0);
  EXPECT_EQ(cfg.dim, 64u);
  EXPECT_EQ(cfg.hidden_dim, 172u);
  EXPECT_EQ(cfg.n_layers, 5u);
  EXPECT_EQ(cfg.n_heads, 8u);
  EXPECT_EQ(cfg.n_kv_heads, 4u);
  EXPECT_EQ(cfg.vocab_size, 512u);
  EXPECT_EQ(cfg.context_length, 512u);
  EXPECT_EQ(cfg.head_dim(), 8u);
  EXPECT_EQ(cfg.rope_dim, 8u);
  EXPECT_TRUE(cfg.shared_classifier);
  // The weight order: the embedding first, right after the header; the last layer's w3 ends
  // where rms_final starts; the classifier is the embedding.
  const float* base = reinterpret_cast<const float*>(file.span().data());
  EXPECT_EQ(c->token_embedding().data(), base + 7);
  EXPECT_EQ(c->layer(0).rms_att.data(), base + 7 + 512 * 64);
  const auto last = c->layer(4);
  EXPECT_EQ(last.w3.data() + last.w3.rows() * last.w3.cols(), c->rms_final().data());
  EXPECT_EQ(last.wk.rows(), 32u);
  EXPECT_EQ(last.wk.cols(), 64u);
  EXPECT_EQ(last.w2.rows(), 64u);
  EXPECT_EQ(last.w2.cols(), 172u);
  EXPECT_EQ(c->classifier().data(), c->token_embedding().data());
  // RMSNorm weights of a trained model are near 1, the embedding's are small: a misplaced
  // view would read the one as the other.
  for (std::size_t l = 0; l < 5; ++l) EXPECT_GT(c->layer(l).rms_att[0], 0.05f);
}

/// stories260K.bin rewritten as a version 1 file (export.py's version1_export order), with
/// the classifier stored apart when `separate_classifier`.
aligned_bytes as_version1(const llama2c_checkpoint& v0, bool separate_classifier) {
  const auto& cfg = v0.config();
  std::vector<float> out(256 / 4, 0.0f);
  const auto append = [&](const float* p, std::size_t n) { out.insert(out.end(), p, p + n); };
  for (std::size_t l = 0; l < cfg.n_layers; ++l) append(v0.layer(l).rms_att.data(), cfg.dim);
  for (std::size_t l = 0; l < cfg.n_layers; ++l) append(v0.layer(l).rms_ffn.data(), cfg.dim);
  append(v0.rms_final().data(), cfg.dim);
  append(v0.token_embedding().data(), std::size_t{cfg.vocab_size} * cfg.dim);
  const auto each = [&](auto member) {
    for (std::size_t l = 0; l < cfg.n_layers; ++l) {
      const auto m = v0.layer(l).*member;
      append(m.data(), m.rows() * m.cols());
    }
  };
  using L = hedge::model::llama2c_layer;
  each(&L::wq), each(&L::wk), each(&L::wv), each(&L::wo), each(&L::w1), each(&L::w2), each(&L::w3);
  if (separate_classifier) append(v0.classifier().data(), std::size_t{cfg.vocab_size} * cfg.dim);
  aligned_bytes b(out.size() * 4);
  std::memcpy(b.data(), out.data(), b.size);
  const std::int32_t header[9] = {static_cast<std::int32_t>(llama2c_checkpoint::magic), 1,
                                  static_cast<std::int32_t>(cfg.dim), static_cast<std::int32_t>(cfg.hidden_dim),
                                  static_cast<std::int32_t>(cfg.n_layers), static_cast<std::int32_t>(cfg.n_heads),
                                  static_cast<std::int32_t>(cfg.n_kv_heads), static_cast<std::int32_t>(cfg.vocab_size),
                                  static_cast<std::int32_t>(cfg.context_length)};
  std::memcpy(b.data(), header, sizeof header);
  b.data()[36] = std::byte{separate_classifier ? std::uint8_t{0} : std::uint8_t{1}};
  return b;
}

TEST(Llama2c, Version1FileGivesTheSameWeights) {
  SKIP_WITHOUT_MODEL();
  const auto file = read_aligned_file(stories);
  const auto v0 = llama2c_checkpoint::parse(file.span());
  ASSERT_TRUE(v0.ok());
  for (const bool separate : {false, true}) {
    const auto bytes = as_version1(*v0, separate);
    const auto v1 = llama2c_checkpoint::parse(bytes.span());
    ASSERT_TRUE(v1.ok()) << v1.error().message();
    EXPECT_EQ(v1->version(), 1);
    EXPECT_EQ(v1->config().shared_classifier, !separate);
    const auto same = [](auto a, auto b, std::size_t n) { return std::memcmp(a.data(), b.data(), n * 4) == 0; };
    const auto& cfg = v0->config();
    EXPECT_TRUE(same(v0->token_embedding(), v1->token_embedding(), std::size_t{cfg.vocab_size} * cfg.dim));
    EXPECT_TRUE(same(v0->classifier(), v1->classifier(), std::size_t{cfg.vocab_size} * cfg.dim));
    EXPECT_TRUE(same(v0->rms_final(), v1->rms_final(), cfg.dim));
    for (std::size_t l = 0; l < cfg.n_layers; ++l) {
      const auto a = v0->layer(l), b = v1->layer(l);
      EXPECT_TRUE(same(a.rms_att, b.rms_att, cfg.dim) && same(a.rms_ffn, b.rms_ffn, cfg.dim));
      EXPECT_TRUE(same(a.wq, b.wq, a.wq.rows() * a.wq.cols()) && same(a.wk, b.wk, a.wk.rows() * a.wk.cols()) &&
                  same(a.wv, b.wv, a.wv.rows() * a.wv.cols()) && same(a.wo, b.wo, a.wo.rows() * a.wo.cols()) &&
                  same(a.w1, b.w1, a.w1.rows() * a.w1.cols()) && same(a.w2, b.w2, a.w2.rows() * a.w2.cols()) &&
                  same(a.w3, b.w3, a.w3.rows() * a.w3.cols()))
          << "layer " << l;
    }
    if (separate) {
      EXPECT_NE(v1->classifier().data(), v1->token_embedding().data());
    }
  }
}

TEST(Llama2c, SignRuleMarksASeparateClassifier) {
  SKIP_WITHOUT_MODEL();
  auto file = read_aligned_file(stories);
  // The same file with vocab_size negated needs 512 x 64 more floats at the end.
  put_i32(file, 20, -512);
  const auto short_by_classifier = llama2c_checkpoint::parse(file.span());
  ASSERT_FALSE(short_by_classifier.ok());
  EXPECT_NE(short_by_classifier.error().message().find("separate classifier"), std::string_view::npos)
      << short_by_classifier.error().message();
  aligned_bytes longer(file.size + 512 * 64 * 4);
  std::memcpy(longer.data(), file.data(), file.size);
  const auto c = llama2c_checkpoint::parse(longer.span());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(c->config().shared_classifier);
  EXPECT_EQ(c->config().vocab_size, 512u);
  EXPECT_EQ(c->classifier().data(), reinterpret_cast<const float*>(longer.span().data()) + file.size / 4);
}

TEST(Llama2c, EveryTruncationIsAnErrorThatSaysSo) {
  SKIP_WITHOUT_MODEL();
  const auto file = read_aligned_file(stories);
  for (std::size_t n = 0; n < file.size; n += n < 64 ? 1 : 4093) {
    const auto c = llama2c_checkpoint::parse(file.span().first(n));
    ASSERT_FALSE(c.ok()) << n;
    EXPECT_EQ(c.error().code(), errc::parse_error) << n;
    EXPECT_FALSE(c.error().message().empty());
  }
  const auto last = llama2c_checkpoint::parse(file.span().first(file.size - 4));
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.error().message().find("truncated"), std::string_view::npos) << last.error().message();
}

TEST(Llama2c, HostileHeadersAreErrorsWithTheField) {
  SKIP_WITHOUT_MODEL();

  struct hostile {
    std::size_t offset;
    std::int32_t value;
    const char* says;
  };
  const hostile cases[] = {
      {0, 0, "dim 0 at byte 0"},
      {0, -64, "dim -64"},
      {4, 0, "hidden_dim 0"},
      {8, 0, "n_layers 0"},
      {12, 0, "n_heads 0"},
      {12, 7, "not a multiple of the head count"},
      {16, 3, "not a multiple of the kv head count"},
      {16, -4, "n_kv_heads -4"},
      {20, INT32_MIN, "vocab_size"},
      {24, 0, "seq_len 0"},
      {0, 0x7fffffc0, "needs more than"},   // dim 2^31 - 64: the weights overflow any file
      {8, 0x7fffffff, "needs more than"},   // 2^31 - 1 layers
      {4, 0x7fffffff, "needs more than"},   // hidden_dim 2^31 - 1
      {24, 0x7fffffff, "context length 2147483647 above"},  // seq_len 2^31 - 1: 64 GiB of freq_cis tables
  };
  for (const auto& h : cases) {
    auto file = read_aligned_file(stories);
    put_i32(file, h.offset, h.value);
    const auto c = llama2c_checkpoint::parse(file.span());
    ASSERT_FALSE(c.ok()) << h.says;
    EXPECT_NE(c.error().message().find(h.says), std::string_view::npos) << c.error().message();
  }
}

TEST(Llama2c, RefusesVersion2UnknownVersionsAndMisalignedBuffers) {
  aligned_bytes header(256);
  std::memset(header.data(), 0, 256);
  put_i32(header, 0, static_cast<std::int32_t>(llama2c_checkpoint::magic));
  put_i32(header, 4, 2);
  auto c = llama2c_checkpoint::parse(header.span());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), errc::unsupported);
  EXPECT_NE(c.error().message().find("version 2"), std::string_view::npos);
  put_i32(header, 4, 7);
  c = llama2c_checkpoint::parse(header.span());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("unknown version 7"), std::string_view::npos);
  put_i32(header, 4, 1);
  header.data()[36] = std::byte{2};
  c = llama2c_checkpoint::parse(header.span());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("flag 2 at byte 36"), std::string_view::npos) << c.error().message();
  aligned_bytes shifted(64);
  c = llama2c_checkpoint::parse(shifted.span().subspan(1));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), errc::misaligned);
}

}  // namespace
