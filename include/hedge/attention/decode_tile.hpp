// hedge/attention/decode_tile.hpp: the positions a SIMD decode kernel works on at once.
//
// The AVX2 and NEON decode kernels (decode_avx2.hpp, decode_neon.hpp) walk the cached
// positions in tiles of 64: the logits of a tile, one online-softmax rescale, then its
// values. A tile is gathered across page runs (kv_sequence_view::contiguous), so the
// per-tile work does not shrink with the page size and paged caches cost about what
// contiguous ones do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hedge/kv/cache.hpp"

namespace hedge {

/// Where the K and V vectors of up to `tile` consecutive positions of one (layer, KV head) are.
/// \tparam Elem the KV element format
template <class Elem>
struct decode_tile {
  static constexpr std::size_t tile = 64;
  const typename Elem::unit* keys[tile];
  const typename Elem::unit* values[tile];
  std::size_t count = 0;

  /// Fills the tile with positions [pos, min(pos + tile, end)) of (layer, head).
  void gather(const kv_sequence_view<Elem>& kv, std::size_t layer, std::size_t head, std::uint64_t pos,
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

}  // namespace hedge
