// KV cache: capacity math, element round trips, sequence operations (extend,
// write, truncate, fork with copy-on-write, release), sliding window, errors,
// and every storage policy, including user-written element and storage types.
#include "hedge/kv/cache.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "support/alloc_counter.hpp"

namespace {

using hedge::errc;
using hedge::kv::kv_config;
using hedge::kv::kv_dynamic_shape;

// Deterministic K/V values for (layer, position, head, dim).
float key_value(std::size_t layer, std::uint64_t pos, std::size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + 0.11f * static_cast<float>(pos) + static_cast<float>(layer));
}

template <class Cache>
hedge::result<void> fill(Cache& c, hedge::kv::kv_seq s, std::uint64_t from, std::uint64_t to) {
  const auto& shape = c.shape();
  std::vector<float> k(shape.kv_heads() * shape.head_dim()), v(k.size());
  for (std::uint64_t pos = from; pos < to; ++pos) {
    for (std::size_t layer = 0; layer < shape.layers(); ++layer) {
      for (std::size_t i = 0; i < k.size(); ++i) {
        k[i] = key_value(layer, pos, i);
        v[i] = -key_value(layer, pos + 7, i);
      }
      HEDGE_TRY(c.write(s, layer, pos, k, v));
    }
  }
  return hedge::ok();
}

// Reads back one stored key of (layer, head) at pos, decoded to floats.
template <class Elem>
std::vector<float> read_key(const hedge::kv::kv_sequence_view<Elem>& view, std::size_t layer, std::size_t head,
                            std::uint64_t pos) {
  auto run = view.contiguous(layer, head, pos, pos + 1);
  std::vector<float> out(view.head_dim());
  Elem::decode(std::span(run.keys, view.vector_units()), out);
  return out;
}

TEST(KvCapacity, BytesPerTokenIsConstexprForStaticShapes) {
  using shape = hedge::kv::kv_static_shape<32, 8, 128>;
  static_assert(hedge::kv::kv_bytes_per_token<hedge::kv::kv_f16>(shape{}) == 2 * 32 * 8 * 128 * 2);
  static_assert(hedge::kv::kv_bytes_per_token<hedge::kv::kv_f32>(shape{}) == 2 * 32 * 8 * 128 * 4);
  static_assert(hedge::kv::kv_bytes_per_token<hedge::kv::kv_q8_0>(shape{}) == 2 * 32 * 8 * 4 * 34);
  static_assert(hedge::kv::kv_bytes_per_token<hedge::kv::kv_q4_0>(shape{}) == 2 * 32 * 8 * 4 * 18);
  // head_dim 80 pads q8_0 to 3 blocks per vector.
  static_assert(hedge::kv::kv_bytes_per_token<hedge::kv::kv_q8_0>(hedge::kv::kv_static_shape<1, 1, 80>{}) == 2 * 3 * 34);
  constexpr kv_config config{2, 64, 16, 0, 0};
  constexpr std::size_t bytes = hedge::kv::kv_storage_bytes<hedge::kv::kv_f16>(shape{}, config);
  static_assert(bytes >= 2 * 64 * 2 * 32 * 8 * 128 * 2);
  hedge::kv::kv_cache<shape, hedge::kv::kv_f16> cache;
  ASSERT_TRUE(cache.init(shape{}, config));
  EXPECT_EQ(cache.bytes_per_token(), 2u * 32 * 8 * 128 * 2);
  EXPECT_EQ(cache.total_pages(), 8u);
  EXPECT_EQ(cache.free_tokens(), 128u);
  EXPECT_EQ(cache.max_tokens(), 64u);
}

template <class Elem>
class KvElementRoundTrip : public ::testing::Test {};
using elements = ::testing::Types<hedge::kv::kv_f32, hedge::kv::kv_f16, hedge::kv::kv_bf16, hedge::kv::kv_q8_0, hedge::kv::kv_q4_0>;
TYPED_TEST_SUITE(KvElementRoundTrip, elements);

// What is read back is what the element's encode/decode pair gives, at the right
// (layer, head, position), through paged and contiguous layouts alike.
TYPED_TEST(KvElementRoundTrip, WriteThenReadEveryLayerHeadPosition) {
  using Elem = TypeParam;
  for (std::size_t page_tokens : {std::size_t{0}, std::size_t{3}, std::size_t{16}}) {
    for (std::size_t dim : {std::size_t{64}, std::size_t{80}}) {
      auto cache = hedge::kv::kv_cache<kv_dynamic_shape, Elem>::make({3, 2, dim}, kv_config{2, 40, page_tokens, 0, 0});
      ASSERT_TRUE(cache) << cache.error().c_str();
      auto s = *cache->create();
      ASSERT_TRUE(cache->extend(s, 37));
      ASSERT_TRUE(fill(*cache, s, 0, 37));
      auto view = *cache->view(s);
      for (std::size_t layer = 0; layer < 3; ++layer)
        for (std::size_t head = 0; head < 2; ++head)
          for (std::uint64_t pos : {0u, 1u, 15u, 16u, 36u}) {
            std::vector<float> expected(dim), encoded_back(dim);
            for (std::size_t i = 0; i < dim; ++i) expected[i] = key_value(layer, pos, head * dim + i);
            std::vector<typename Elem::unit> units(Elem::units(dim));
            ASSERT_TRUE(Elem::encode(expected, units));
            Elem::decode(units, encoded_back);
            const auto got = read_key(view, layer, head, pos);
            for (std::size_t i = 0; i < dim; ++i) ASSERT_EQ(got[i], encoded_back[i]) << layer << head << pos << i;
            // and the format's own error bound holds (q4_0: one step of max/8 at most)
            const double bound = std::is_same_v<Elem, hedge::kv::kv_q4_0> ? 0.13 : 1e-2;
            for (std::size_t i = 0; i < dim; ++i) ASSERT_NEAR(got[i], expected[i], bound);
          }
    }
  }
}

TEST(KvErrors, FullSequenceIsAnErrorNamingSequenceAndCapacity) {
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f16>::make({1, 1, 8}, kv_config{2, 10, 4, 0, 0});
  ASSERT_TRUE(cache);
  auto a = *cache->create();
  auto b = *cache->create();
  ASSERT_TRUE(cache->extend(b, 10));
  auto r = cache->extend(b, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), errc::capacity_exceeded);
  EXPECT_NE(r.error().message().find("sequence 1 is full at 10 tokens"), std::string_view::npos) << r.error().c_str();
  EXPECT_EQ(*cache->length(b), 10u);  // nothing changed
  // A third sequence does not fit.
  auto c = cache->create();
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code(), errc::capacity_exceeded);
  (void)a;
}

TEST(KvErrors, ExhaustedPoolUnknownSequenceBadPositionLayerShape) {
  // 3 pages of 4 tokens shared by 2 sequences of up to 12.
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32>::make({2, 1, 8}, kv_config{2, 12, 4, 3, 0});
  ASSERT_TRUE(cache);
  auto a = *cache->create();
  auto b = *cache->create();
  ASSERT_TRUE(cache->extend(a, 8));
  auto full = cache->extend(b, 5);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code(), errc::capacity_exceeded);
  EXPECT_NE(full.error().message().find("page pool exhausted"), std::string_view::npos);
  EXPECT_EQ(cache->free_pages(), 1u);
  EXPECT_EQ(*cache->length(b), 0u);

  std::vector<float> kv(8, 1.f), wrong(7, 1.f);
  EXPECT_EQ(cache->write(a, 0, 8, kv, kv).error().code(), errc::out_of_range);
  EXPECT_EQ(cache->write(a, 2, 0, kv, kv).error().code(), errc::out_of_range);
  EXPECT_EQ(cache->write(a, 0, 0, wrong, kv).error().code(), errc::shape_mismatch);
  EXPECT_EQ(cache->extend(hedge::kv::kv_seq{7}, 1).error().code(), errc::invalid_argument);
  ASSERT_TRUE(cache->release(b));
  EXPECT_EQ(cache->extend(b, 1).error().code(), errc::invalid_argument);
  EXPECT_EQ(cache->truncate(a, 9).error().code(), errc::out_of_range);

  hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32> empty;
  EXPECT_FALSE(empty.create());
}

TEST(KvErrors, QuantizedElementRejectsNonFiniteValues) {
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_q8_0>::make({1, 1, 32}, kv_config{1, 4, 0, 0, 0});
  ASSERT_TRUE(cache);
  auto s = *cache->create();
  ASSERT_TRUE(cache->extend(s, 1));
  std::vector<float> k(32, 1.f), v(32, 1.f);
  v[3] = NAN;
  EXPECT_EQ(cache->write(s, 0, 0, k, v).error().code(), errc::invalid_argument);
}

TEST(KvSequences, TruncateReturnsPagesAndAllowsRewrite) {
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32>::make({1, 1, 8}, kv_config{1, 32, 4, 0, 0});
  ASSERT_TRUE(cache);
  auto s = *cache->create();
  ASSERT_TRUE(cache->extend(s, 13));
  EXPECT_EQ(cache->free_pages(), 4u);
  ASSERT_TRUE(cache->truncate(s, 5));
  EXPECT_EQ(cache->free_pages(), 6u);
  EXPECT_EQ(*cache->length(s), 5u);
  EXPECT_EQ(*cache->extend(s, 2), 5u);
  ASSERT_TRUE(cache->truncate(s, 0));
  EXPECT_EQ(cache->free_pages(), 8u);
}

TEST(KvSequences, ForkSharesPagesAndCopiesOnWrite) {
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32>::make({2, 1, 8}, kv_config{3, 32, 4, 0, 0});
  ASSERT_TRUE(cache);
  auto parent = *cache->create();
  ASSERT_TRUE(cache->extend(parent, 10));
  ASSERT_TRUE(fill(*cache, parent, 0, 10));
  const std::size_t free_before = cache->free_pages();
  auto child = *cache->fork(parent);
  EXPECT_EQ(cache->free_pages(), free_before);  // the prefix is shared, not copied
  EXPECT_EQ(*cache->length(child), 10u);
  // Extending the child copies only the shared, partly filled tail page.
  ASSERT_TRUE(cache->extend(child, 1));
  EXPECT_EQ(cache->free_pages(), free_before - 1);
  std::vector<float> ones(8, 1.f);
  ASSERT_TRUE(cache->write(child, 0, 10, ones, ones));
  // Rewriting a shared full page in the child copies it too; the parent keeps its values.
  ASSERT_TRUE(cache->write(child, 1, 2, ones, ones));
  EXPECT_EQ(cache->free_pages(), free_before - 2);
  const auto parent_key = read_key(*cache->view(parent), 1, 0, 2);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(parent_key[i], key_value(1, 2, i));
  const auto child_key = read_key(*cache->view(child), 1, 0, 2);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(child_key[i], 1.f);
  const auto shared_key = read_key(*cache->view(child), 0, 0, 5);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(shared_key[i], key_value(0, 5, i));
  // Releasing the parent frees only its private pages.
  ASSERT_TRUE(cache->release(parent));
  ASSERT_TRUE(cache->release(child));
  EXPECT_EQ(cache->free_pages(), cache->total_pages());
}

TEST(KvSequences, SlidingWindowRingKeepsTheLastWindow) {
  // window 6 in a ring of 8 tokens (2 pages of 4): 2 tokens of rollback slack.
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32>::make({1, 1, 8}, kv_config{1, 8, 4, 0, 6});
  ASSERT_TRUE(cache);
  auto s = *cache->create();
  for (int t = 0; t < 23; ++t) {
    const auto pos = cache->extend(s, 1);
    ASSERT_TRUE(pos) << pos.error().c_str();
    ASSERT_TRUE(fill(*cache, s, *pos, *pos + 1));
  }
  EXPECT_EQ(cache->free_pages(), 0u);
  auto view = *cache->view(s);
  EXPECT_EQ(view.begin(), 17u);
  EXPECT_EQ(view.end(), 23u);
  for (std::uint64_t pos = 17; pos < 23; ++pos) {
    const auto key = read_key(view, 0, 0, pos);
    for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(key[i], key_value(0, pos, i)) << pos;
  }
  // Positions 15..22 are stored: rolling back 2 keeps the window intact, 3 does not.
  EXPECT_EQ(cache->truncate(s, 20).error().code(), errc::out_of_range);
  ASSERT_TRUE(cache->truncate(s, 21));
  EXPECT_EQ(cache->view(s)->begin(), 15u);
  std::vector<float> kv(8, 0.f);
  EXPECT_EQ(cache->write(s, 0, 12, kv, kv).error().code(), errc::out_of_range);  // overwritten by the ring
}

TEST(KvStorage, StaticBufferAndHeapPoliciesBehaveAlike) {
  using shape = hedge::kv::kv_static_shape<2, 2, 32>;
  constexpr kv_config config{2, 24, 8, 0, 0};
  constexpr std::size_t bytes = hedge::kv::kv_storage_bytes<hedge::kv::kv_f16>(shape{}, config);
  static hedge::kv::kv_cache<shape, hedge::kv::kv_f16, hedge::static_storage<std::byte, bytes>> in_object;
  ASSERT_TRUE(in_object.init(shape{}, config));

  alignas(64) static std::byte memory[bytes];
  auto buffer = hedge::buffer_storage<std::byte>::make(memory);
  ASSERT_TRUE(buffer);
  auto lent = hedge::kv::kv_cache<shape, hedge::kv::kv_f16, hedge::buffer_storage<std::byte>>::make(shape{}, config, *buffer);
  ASSERT_TRUE(lent) << lent.error().c_str();
  auto heap = hedge::kv::kv_cache<shape, hedge::kv::kv_f16>::make(shape{}, config);
  ASSERT_TRUE(heap);

  auto s1 = *in_object.create();
  auto s2 = *lent->create();
  auto s3 = *heap->create();
  ASSERT_TRUE(in_object.extend(s1, 20) && lent->extend(s2, 20) && heap->extend(s3, 20));
  ASSERT_TRUE(fill(in_object, s1, 0, 20) && fill(*lent, s2, 0, 20) && fill(*heap, s3, 0, 20));
  for (std::uint64_t pos = 0; pos < 20; ++pos) {
    EXPECT_EQ(read_key(*in_object.view(s1), 1, 1, pos), read_key(*heap->view(s3), 1, 1, pos));
    EXPECT_EQ(read_key(*lent->view(s2), 1, 1, pos), read_key(*heap->view(s3), 1, 1, pos));
  }

  // A too-small or misaligned caller buffer is an error, not a crash.
  auto small = hedge::buffer_storage<std::byte>::make(std::span(memory, 64));
  ASSERT_TRUE(small);
  auto too_small = hedge::kv::kv_cache<shape, hedge::kv::kv_f16, hedge::buffer_storage<std::byte>>::make(shape{}, config, *small);
  ASSERT_FALSE(too_small);
  EXPECT_EQ(too_small.error().code(), errc::capacity_exceeded);
}

TEST(KvStorage, SequenceOperationsDoNotAllocateAfterInit) {
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_q8_0>::make({2, 2, 64}, kv_config{4, 64, 16, 0, 0});
  ASSERT_TRUE(cache);
  std::vector<float> kv(128, 0.5f);
  hedge::test::alloc_scope scope;
  auto s = *cache->create();
  for (std::uint64_t pos = 0; pos < 40; ++pos) {
    ASSERT_TRUE(cache->extend(s, 1));
    ASSERT_TRUE(cache->write(s, 0, pos, kv, kv));
  }
  auto f = *cache->fork(s);
  ASSERT_TRUE(cache->extend(f, 3));
  ASSERT_TRUE(cache->truncate(s, 10));
  ASSERT_TRUE(cache->release(f));
  EXPECT_EQ(scope.count(), 0u);
}

// A user-written element format: 8-bit "fixed point" with a fixed scale.
struct fixed_point_element {
  using unit = std::int8_t;
  static constexpr std::string_view name = "fixed8";
  static constexpr std::size_t units(std::size_t head_dim) noexcept { return head_dim; }
  static hedge::result<void> encode(std::span<const float> values, std::span<unit> out) noexcept {
    for (std::size_t i = 0; i < values.size(); ++i)
      out[i] = static_cast<unit>(std::lround(std::fmax(-1.f, std::fmin(1.f, values[i])) * 127.f));
    return hedge::ok();
  }
  static void decode(std::span<const unit> stored, std::span<float> out) noexcept {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(stored[i]) / 127.f;
  }
};

// A user-written storage: a fixed arena that is neither static_storage nor buffer_storage.
struct arena_storage {
  using value_type = std::byte;
  alignas(64) std::byte bytes[1 << 14];
  std::byte* data() noexcept { return bytes; }
  const std::byte* data() const noexcept { return bytes; }
  std::size_t size() const noexcept { return sizeof bytes; }
};

TEST(KvConcepts, UserElementAndStorageModelTheConcepts) {
  static_assert(hedge::kv::KvElement<fixed_point_element>);
  static_assert(hedge::kv::KvStorage<arena_storage>);
  static_assert(!hedge::kv::KvStorage<hedge::heap_storage<float>>);
  static hedge::kv::kv_cache<hedge::kv::kv_static_shape<1, 1, 16>, fixed_point_element, arena_storage> cache;
  ASSERT_TRUE(cache.init({}, kv_config{1, 16, 4, 0, 0}));
  auto s = *cache.create();
  ASSERT_TRUE(cache.extend(s, 3));
  ASSERT_TRUE(fill(cache, s, 0, 3));
  const auto key = read_key(*cache.view(s), 0, 0, 2);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_NEAR(key[i], key_value(0, 2, i), 1.f / 127);
}

TEST(KvSequences, SlidingWindowTruncateRemembersWhatTheRingOverwrote) {
  // window 4 in a ring of 8: after 20 positions the ring holds 12..19. Rolling back to 16
  // (window 12..15) works; rolling back again to 12 (window 8..11) must not, although a
  // ring of length 16 would hold 8..15: positions 8..11 were overwritten by 16..19.
  auto cache = hedge::kv::kv_cache<kv_dynamic_shape, hedge::kv::kv_f32>::make({1, 1, 8}, kv_config{1, 8, 0, 0, 4});
  ASSERT_TRUE(cache);
  auto s = *cache->create();
  ASSERT_TRUE(cache->extend(s, 20));
  ASSERT_TRUE(fill(*cache, s, 12, 20));
  ASSERT_TRUE(cache->truncate(s, 16));
  const auto refused = cache->truncate(s, 12);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), errc::out_of_range);
  EXPECT_NE(refused.error().message().find("overwritten (oldest stored 12)"), std::string_view::npos)
      << refused.error().c_str();
  EXPECT_EQ(*cache->length(s), 16u);  // unchanged
  for (std::uint64_t pos = 12; pos < 16; ++pos) {
    const auto key = read_key(*cache->view(s), 0, 0, pos);
    for (std::size_t i = 0; i < 8; ++i) ASSERT_EQ(key[i], key_value(0, pos, i)) << pos;
  }
  // Back to empty always works, and the ring starts over.
  ASSERT_TRUE(cache->truncate(s, 0));
  ASSERT_TRUE(cache->extend(s, 6));
  ASSERT_TRUE(fill(*cache, s, 0, 6));
  ASSERT_TRUE(cache->truncate(s, 3));
  EXPECT_EQ(cache->view(s)->begin(), 0u);
}

}  // namespace
