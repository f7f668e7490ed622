// hedge/attention/decode_tile.hpp: the positions a SIMD decode kernel works on at once.
//
// The AVX2 and NEON decode kernels (decode_avx2.hpp, decode_neon.hpp) walk the cached
// positions in tiles of 64: the logits of a tile, one online-softmax rescale, then its
// values. A tile is gathered across page runs (kv_sequence_view::contiguous), so the
// per-tile work does not shrink with the page size and paged caches cost about what
// contiguous ones do. Also the query preparation and logit transform both kernels share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "hedge/attention/decode_scalar.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::attention::detail {

/// Where the K and V vectors of up to `tile` consecutive positions of one (layer, KV head) are.
/// \tparam Elem the KV element format
template <class Elem>
struct decode_tile {
  static constexpr std::size_t tile = 64;
  const typename Elem::unit* keys[tile];
  const typename Elem::unit* values[tile];
  std::size_t count = 0;

  /// Fills the tile with positions [pos, min(pos + tile, end)) of (layer, head).
  void gather(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, std::size_t head, std::uint64_t pos,
              std::uint64_t end) noexcept {
    count = 0;
    const std::size_t units = kv.vector_units();
    while (count < tile && pos < end) {
      const auto run = kv.contiguous(layer, head, pos, std::min<std::uint64_t>(end, pos + (tile - count)));
      for (std::size_t i = 0; i < run.tokens; ++i, ++count) {
        keys[count] = run.keys + i * units;
        values[count] = run.values + i * units;
      }
      pos += run.tokens;
    }
  }
};

/// Copies one query head into `padded` (zero-filled from `dim` to `width`) and, when
/// `quantize`, rounds it to Q8_0 with the K cache's own quantizer, handing each 32-value
/// block to on_block(index, block) so a kernel stores it in the form its dot product reads.
template <class OnBlock>
void prepare_decode_query(const float* query, std::size_t dim, std::size_t width, float* padded, bool quantize,
                          OnBlock&& on_block) noexcept {
  std::copy_n(query, dim, padded);
  std::fill(padded + dim, padded + width, 0.f);
  if (!quantize) return;
  for (std::size_t b = 0; b < width / 32; ++b) {
    quant::q8_0::block block;
    quant::q8_0::quantize_block(std::span<const float, 32>(padded + 32 * b, 32), block);
    on_block(b, block);
  }
}

/// Applies soft-cap, ALiBi and the window (transform_logit) to a tile's scaled logits,
/// laid out as the SIMD kernels keep them: logit of position pos + i for query head
/// first + n of the task at weights[4 * i + n].
/// \tparam N query heads handled together (1..4)
template <int N>
void transform_tile_logits(const attention_params& p, const decode_task& task, std::size_t first, std::uint64_t pos,
                           float* weights, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    for (int n = 0; n < N; ++n)
      weights[4 * i + n] = transform_logit(p, weights[4 * i + n], task.first_query_head + first + static_cast<std::size_t>(n),
                                           pos + i, task.query_pos);
}

/// Writes the finished partial state of the task's query head n (accumulator of head_dim
/// floats, running max and sum) in the workspace layout of decode_scalar.hpp.
inline void store_decode_state(const decode_task& task, std::size_t n, std::size_t head_dim, const float* acc,
                               float max, float sum) noexcept {
  const std::size_t padded = attention_padded_dim(head_dim), stride = decode_state_floats(head_dim);
  float* state = task.states + n * stride;
  std::copy_n(acc, head_dim, state);
  std::fill(state + head_dim, state + stride, 0.f);
  state[padded] = max;
  state[padded + 1] = sum;
}

}  // namespace hedge::attention::detail
