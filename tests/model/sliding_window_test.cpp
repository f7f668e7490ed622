// Gemma's local (sliding-window) layers keep a ring of sliding_window + max_prefill
// positions (model/forward.hpp): the ring's logits equal those of the layers reading the
// last window of a cache that keeps every position, the ring's memory does not grow with
// the context, and a session rolls back within the ring's slack and refuses, unchanged,
// to roll back past what the ring overwrote. (Against llama.cpp past the window:
// architecture_test.cpp's gemma2 and gemma3 cases, 26 positions through a window of 4.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/model/forward.hpp"
#include "synthetic_gguf.hpp"

namespace {

using namespace hedge::model;
using hedge::errc;
using hedge::test::load_synthetic;

// architecture_test.cpp's gemma3: two local layers in three, windows of 4.
synthetic_llama gemma3_spec() {
  synthetic_llama s{.dim = 64, .hidden_dim = 96, .layers = 3, .heads = 4, .kv_heads = 2, .context = 64, .vocab = 64};
  s.architecture = "gemma3", s.head_dim = 32, s.sliding_window = 4, s.sliding_pattern = 3;
  s.rope_theta = 1000000.0f, s.rope_scaling = 8.0f;
  return s;
}

std::vector<std::int32_t> token_ids(std::size_t n) {
  std::vector<std::int32_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>((7 * i + 3) % 64);
  return ids;
}

/// The logits after each of `ids`, decoded one at a time from the session's length on.
template <class Model>
std::vector<std::vector<float>> decode_all(Model& model, hedge::kv::kv_seq s, std::span<const std::int32_t> ids) {
  std::vector<std::vector<float>> out;
  for (const std::int32_t id : ids) {
    auto logits = model.decode(s, id);
    EXPECT_TRUE(logits.ok()) << logits.error().c_str();
    if (!logits) return out;
    out.emplace_back(logits->begin(), logits->end());
  }
  return out;
}

/// gemma3_spec's model twice: `ring` with a ring of 4 + 4 = 8 positions in a context of
/// 64, and `full` with a context of 32, which a ring of 4 + 32 would not undercut, so its
/// local layers read the last window of the one cache.
class SlidingWindowRing : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(loaded.ok()) << loaded.error().c_str();
    ASSERT_TRUE(ring.ok()) << ring.error().c_str();
    ASSERT_TRUE(full.ok()) << full.error().c_str();
  }
  hedge::result<hedge::test::synthetic_model> loaded = load_synthetic(gemma3_spec());
  hedge::result<llama<>> ring = make({.max_sessions = 2, .context = 64, .max_prefill = 4});
  hedge::result<llama<>> full = make({.context = 32, .max_prefill = 32});

 private:
  hedge::result<llama<>> make(const llama_options& options) {
    if (!loaded) return loaded.error();
    return llama<>::make(loaded->weights, options);
  }
};

TEST_F(SlidingWindowRing, LogitsEqualTheMaskedFullCache) {
  ASSERT_EQ(ring->local_cache().layout().ring_tokens, 8u);
  EXPECT_EQ(ring->local_cache().shape().layers(), 2u);
  EXPECT_EQ(ring->cache().shape().layers(), 1u);
  EXPECT_EQ(full->local_cache().layout().total_bytes, 0u);
  EXPECT_EQ(full->cache().shape().layers(), 3u);

  const auto ids = token_ids(30);  // the ring wraps three times
  auto rs = *ring->create_session();
  auto fs = *full->create_session();
  const auto from_ring = decode_all(*ring, rs, ids);
  const auto from_full = decode_all(*full, fs, ids);
  ASSERT_EQ(from_ring.size(), ids.size());
  ASSERT_EQ(from_full.size(), ids.size());
  for (std::size_t t = 0; t < ids.size(); ++t) {
    for (std::size_t j = 0; j < from_ring[t].size(); ++j)
      ASSERT_EQ(from_ring[t][j], from_full[t][j]) << "position " << t << ", logit " << j;
  }

  // Prefill in chunks of 4 through the ring: within the prefill-vs-decode tolerance of
  // forward_test.cpp (attention summation order), at every chunk boundary.
  ASSERT_TRUE(ring->release(rs).ok());
  auto ps = *ring->create_session();
  for (std::size_t first = 0; first < 28; first += 7) {
    auto logits = ring->prefill(ps, std::span<const std::int32_t>(ids).subspan(first, 7));
    ASSERT_TRUE(logits.ok()) << logits.error().c_str();
    double most = 0.0, scale = 0.0;
    for (std::size_t j = 0; j < logits->size(); ++j) {
      most = std::max(most, std::abs(static_cast<double>((*logits)[j]) - from_full[first + 6][j]));
      scale = std::max(scale, std::abs(static_cast<double>(from_full[first + 6][j])));
    }
    EXPECT_LT(most / scale, 1e-5) << "prefill up to position " << first + 6;
  }
}

TEST(SlidingWindowMemory, LocalMemoryIsBoundedByTheWindow) {
  auto spec = gemma3_spec();
  spec.context = 4096;
  const auto loaded = load_synthetic(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.error().c_str();
  for (const std::size_t context : {std::size_t{1024}, std::size_t{4096}}) {
    auto model = llama<>::make(loaded->weights, {.context = context, .max_prefill = 16});
    ASSERT_TRUE(model.ok()) << model.error().c_str();
    // 2 local layers x 2 KV heads x 32 dims x (K, V) x f32, for 4 + 16 positions.
    EXPECT_EQ(model->local_cache().layout().ring_tokens, 20u);
    EXPECT_LE(model->local_cache().layout().total_bytes, 20u * 2 * 2 * 32 * 2 * 4 + 4096);
    EXPECT_EQ(model->cache().layout().ring_tokens, context);
    EXPECT_EQ(model->cache().bytes_per_token(), 1u * 2 * 32 * 2 * 4);  // the global layer only
  }
}

TEST_F(SlidingWindowRing, RollbackWithinTheRingAndRefusedPastIt) {
  const auto ids = token_ids(30);
  // The same 26 ids, then 4 others: what the session holds after the rollback below.
  std::vector<std::int32_t> branch(ids.begin(), ids.begin() + 26);
  branch.insert(branch.end(), {11, 12, 13, 14});
  auto fs = *full->create_session();
  const auto expected = decode_all(*full, fs, branch);

  // 30 positions through a ring of 8: it holds 22..29. Back to 26 (window 22..25) works,
  // and decoding on from there gives the full cache's logits.
  auto rs = *ring->create_session();
  ASSERT_EQ(decode_all(*ring, rs, ids).size(), 30u);
  ASSERT_TRUE(ring->rollback(rs, 26).ok());
  EXPECT_EQ(*ring->length(rs), 26u);
  const auto again = decode_all(*ring, rs, std::span<const std::int32_t>(branch).subspan(26, 4));
  ASSERT_EQ(again.size(), 4u);
  for (std::size_t t = 0; t < 4; ++t) {
    for (std::size_t j = 0; j < again[t].size(); ++j) ASSERT_EQ(again[t][j], expected[26 + t][j]) << t << " " << j;
  }

  // Back to 20 needs positions 16..19, which the ring overwrote: an error, nothing changed.
  const auto refused = ring->rollback(rs, 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), errc::out_of_range);
  EXPECT_NE(refused.error().message().find("needs position 16, already overwritten"), std::string_view::npos)
      << refused.error().c_str();
  EXPECT_EQ(*ring->length(rs), 30u);
  auto next = ring->decode(rs, 5);
  ASSERT_TRUE(next.ok()) << next.error().c_str();

  // Back to empty always works: the session starts over.
  ASSERT_TRUE(ring->rollback(rs, 0).ok());
  const auto fresh = decode_all(*ring, rs, std::span<const std::int32_t>(branch).first(10));
  ASSERT_EQ(fresh.size(), 10u);
  for (std::size_t j = 0; j < fresh[9].size(); ++j) ASSERT_EQ(fresh[9][j], expected[9][j]);

  // A fork shares the ring; each session rolls back on its own.
  auto child = ring->fork(rs);
  ASSERT_TRUE(child.ok()) << child.error().c_str();
  ASSERT_TRUE(ring->rollback(*child, 8).ok());
  EXPECT_EQ(*ring->length(rs), 10u);
  ASSERT_TRUE(ring->release(*child).ok());
  ASSERT_TRUE(ring->release(rs).ok());
}

}  // namespace
