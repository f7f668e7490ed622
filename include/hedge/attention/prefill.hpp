// hedge/attention/prefill.hpp: causal attention for a block of query tokens (prompt
// processing, or verifying a speculative draft), after their K/V were written to the cache.
//
// The block's tokens are the last `tokens` positions of the sequence; token i (at
// position p) attends to keys [0, p] (or (p - window, p] with a sliding window),
// with the same GQA, scale, soft-cap and ALiBi rules as decode.
//
// Work is tiled as FlashAttention-2 (Dao 2023) tiles it: an item is one KV head
// and a tile of query tokens (with all the query heads of its GQA group, ~64
// rows); items run in parallel on the executor; each item walks key tiles up to
// its last query, keeping an online-softmax state per row, so the materialised
// score matrix never exceeds rows x 64. The scalar kernel (the reference) runs the
// decode reference per query row; the AVX2 kernel (prefill_avx2.hpp) dequantizes
// each key/value tile once and runs S = Q K^T and O += P V as register-tiled
// 4 x 16 float GEMM microkernels. The arch defaults to `arch::best`, resolved once
// per call (core/dispatch.hpp) above the parallel loop.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hedge/attention/params.hpp"
#include "hedge/attention/prefill_avx2.hpp"
#include "hedge/attention/prefill_scalar.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kv/cache.hpp"

namespace hedge::attention {

/// Causal attention of the last `tokens` positions of `kv` at `layer` (see file comment).
/// \tparam A    the kernel variant (arch::best by default; arch::scalar is the reference)
/// \tparam Elem the KV element format
/// \tparam E    the executor running (kv head, query tile) items
/// \param q         tokens x q_heads x head_dim floats (RoPE applied); q_heads a multiple of kv_heads
/// \param out       same shape as q
/// \param workspace prefill_workspace_floats(q_heads, kv_heads, head_dim, executor.concurrency()) floats
template <arch::Arch A = arch::best, kv::KvElement Elem, Executor E = exec::serial>
result<void> prefill_attention(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, std::size_t tokens,
                               vector_view<const float> q, vector_view<float> out, const attention_params& params,
                               vector_view<float> workspace, E& executor) noexcept {
  if (!A::supported()) return error{errc::unsupported} << "prefill attention: this CPU cannot run arch " << A::name;
  const std::size_t dim = kv.head_dim(), kv_heads = kv.kv_heads();
  if (layer >= kv.layers()) return error{errc::out_of_range} << "prefill attention: layer " << layer << " >= " << kv.layers();
  if (dim > attention_max_head_dim)
    return error{errc::unsupported} << "prefill attention: head_dim " << dim << " > " << attention_max_head_dim;
  if (tokens == 0 || tokens > kv.end() || q.size() % (tokens * dim) != 0 || (q.size() / (tokens * dim)) % kv_heads != 0)
    return error{errc::shape_mismatch} << "prefill attention: " << q.size() << " query floats for " << tokens
                                       << " tokens (sequence length " << kv.end() << ") x " << kv_heads
                                       << " KV heads x " << dim;
  if (out.size() != q.size())
    return error{errc::shape_mismatch} << "prefill attention: out has " << out.size() << " floats, q " << q.size();
  const std::size_t q_heads = q.size() / (tokens * dim), group = q_heads / kv_heads;
  if (!params.alibi_slopes.empty() && params.alibi_slopes.size() != q_heads)
    return error{errc::shape_mismatch} << "prefill attention: " << params.alibi_slopes.size()
                                       << " ALiBi slopes for " << q_heads << " query heads";
  const std::uint64_t first_pos = kv.end() - tokens;
  if (prefill_first_key(first_pos, kv.window()) < kv.stored_begin())
    return error{errc::out_of_range} << "prefill attention: the first query at " << first_pos
                                     << " needs keys the sliding-window ring overwrote (oldest "
                                     << kv.stored_begin() << ")";
  const std::size_t parts = std::max<std::size_t>(1, executor.concurrency());
  const std::size_t item_floats = prefill_item_floats(group, dim);
  if (workspace.size() < parts * item_floats)
    return error{errc::capacity_exceeded} << "prefill attention: workspace of " << workspace.size()
                                          << " floats, needs " << parts * item_floats;
  const std::size_t query_tile = prefill_query_tile(group);
  const std::size_t tiles = (tokens + query_tile - 1) / query_tile, items = kv_heads * tiles;
  // One part per thread, each with its own scratch; items go to parts in contiguous runs.
  arch::visit<A>([&](auto tag) {
    executor.parallel_for(parts, [&](std::size_t first_part, std::size_t last_part) {
      for (std::size_t part = first_part; part < last_part; ++part) {
        const range mine = split_range(items, parts, part);
        for (std::size_t item = mine.begin; item < mine.end; ++item) {
          const std::size_t head = item / tiles, tile = item % tiles;
          const detail::prefill_task task{q.data(), out.data(), q_heads, group, head, tile * query_tile,
                                          std::min(tokens, (tile + 1) * query_tile), first_pos,
                                          workspace.data() + part * item_floats};
          detail::prefill_tile(tag, kv, layer, params, task);
        }
      }
    });
  });
  return ok();
}

/// Causal prefill attention on the calling thread (see above).
template <arch::Arch A = arch::best, kv::KvElement Elem>
result<void> prefill_attention(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, std::size_t tokens,
                               vector_view<const float> q, vector_view<float> out, const attention_params& params,
                               vector_view<float> workspace) noexcept {
  exec::serial serial;
  return prefill_attention<A>(kv, layer, tokens, q, out, params, workspace, serial);
}

}  // namespace hedge::attention
