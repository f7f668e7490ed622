// hedge/attention/prefill_scalar.hpp: the prefill kernel contract (one item = a KV
// head and a tile of query tokens; see prefill.hpp) and its scalar reference,
// which runs the decode reference kernel once per query token.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/online_softmax.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kv/cache.hpp"

namespace hedge::attention {

/// Keys per key tile of the tiled prefill kernels.
inline constexpr std::size_t prefill_key_tile = 64;

/// Query tokens per item: about 64 query rows (tokens x GQA group) per tile.
constexpr std::size_t prefill_query_tile(std::size_t group) noexcept { return group >= 64 ? 1 : 64 / group; }

/// Scratch floats one item needs (the larger of the scalar and tiled kernels' needs).
constexpr std::size_t prefill_item_floats(std::size_t group, std::size_t head_dim) noexcept {
  const std::size_t rows = prefill_query_tile(group) * group, padded = attention_padded_dim(head_dim);
  const std::size_t tiled = rows * (2 * padded + prefill_key_tile + 2) + 2 * prefill_key_tile * padded;
  const std::size_t reference = group * decode_state_floats(head_dim);
  return std::max(tiled, reference);
}

/// Workspace floats `prefill_attention` needs when run with `parts` parallel parts
/// (the executor's concurrency).
constexpr std::size_t prefill_workspace_floats(std::size_t q_heads, std::size_t kv_heads, std::size_t head_dim,
                                               std::size_t parts) noexcept {
  return parts * prefill_item_floats(q_heads / kv_heads, head_dim);
}

/// Lowest key position the query at `query_pos` sees.
constexpr std::uint64_t prefill_first_key(std::uint64_t query_pos, std::size_t window) noexcept {
  return window != 0 && query_pos + 1 > window ? query_pos + 1 - window : 0;
}

namespace detail {

/// One item: a KV head and query tokens [token_begin, token_end) of the block.
struct prefill_task {
  const float* q;                        ///< the whole block: tokens x q_heads x head_dim
  float* out;                            ///< same shape as q
  std::size_t q_heads, group, kv_head;
  std::size_t token_begin, token_end;
  std::uint64_t first_pos;               ///< position of block token 0
  float* scratch;                        ///< prefill_item_floats(group, head_dim) floats
};

/// Scalar reference: the decode reference kernel per query token.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void prefill_tile(arch::scalar, const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                  const prefill_task& t) noexcept {
  const std::size_t dim = kv.head_dim(), stride = decode_state_floats(dim), padded = attention_padded_dim(dim);
  for (std::size_t i = t.token_begin; i < t.token_end; ++i) {
    const std::uint64_t pos = t.first_pos + i;
    const std::size_t row = i * t.q_heads + t.kv_head * t.group;
    const decode_task task{t.q + row * dim, t.group, t.kv_head * t.group, t.kv_head,
                           prefill_first_key(pos, kv.window()), pos + 1, pos, t.scratch};
    decode_partial(arch::scalar{}, kv, layer, p, task);
    for (std::size_t n = 0; n < t.group; ++n) {
      const float* state = t.scratch + n * stride;
      softmax_state{state[padded], state[padded + 1]}.finish({state, dim}, {t.out + (row + n) * dim, dim});
    }
  }
}

}  // namespace detail

}  // namespace hedge::attention
