// hedge/attention/decode.hpp: decode attention, one new query token per sequence
// against every cached position (causal: the query is the last position).
//
// Grouped-query attention (GQA, Ainslie et al. 2023; MQA when kv_heads = 1):
// query head h reads KV head h / (q_heads / kv_heads), so the `group` query heads
// of one KV head are processed together and each K/V byte is read once per token.
//
// Flash-decoding (Dao et al. 2023, "Flash-Decoding for long-context inference"):
// the positions of each KV head are cut into `splits` contiguous ranges; the
// executor's threads claim the (kv head, split) items one at a time, each produces online
// softmax states (hedge/attention/online_softmax.hpp) in the workspace, and the
// states merge in split order. Any split count gives the same output up to float
// rounding (tests bound the difference by 1e-5 relative to max |v|: the merge
// rescales by exp of max differences, rounding once per step).
//
// Kernels per arch tag: decode_scalar.hpp (reference), decode_avx2.hpp (x86 AVX2),
// decode_avx512.hpp (x86 AVX-512 VNNI; vpdpbusd for q8_0/q4_0 keys) and decode_neon.hpp
// (AArch64 neon and neon_dotprod; K/V read in their stored format and dequantized in
// registers). A tag without an overload (avx512bw) uses its parent's.
// The arch defaults to `arch::best`, resolved once per call (core/dispatch.hpp) above
// the parallel loop, so a baseline x86-64 build runs the AVX2 kernel on an AVX2 CPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hedge/attention/decode_avx2.hpp"
#include "hedge/attention/decode_avx512.hpp"
#include "hedge/attention/decode_neon.hpp"
#include "hedge/attention/decode_scalar.hpp"
#include "hedge/attention/online_softmax.hpp"
#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kv/cache.hpp"

namespace hedge::attention {

/// Decode attention for one sequence at `layer`: `out` = softmax(transform(q.K)) V
/// per query head, over the positions `kv` shows (all cached ones, or the sliding window).
/// \tparam A    the kernel variant (arch::best by default; arch::scalar is the reference)
/// \tparam Elem the KV element format
/// \tparam E    the executor running (kv head, split) items
/// \param q         q_heads x head_dim floats (RoPE applied), q_heads a multiple of kv_heads
/// \param out       q_heads x head_dim floats
/// \param workspace decode_workspace_floats(q_heads, head_dim, splits) floats
/// \param splits    positions splits per KV head; 0 = decode_splits(kv_heads, length, executor.concurrency())
template <arch::Arch A = arch::best, kv::KvElement Elem, Executor E = exec::serial>
result<void> decode_attention(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, vector_view<const float> q,
                              vector_view<float> out, const attention_params& params, vector_view<float> workspace,
                              E& executor, std::size_t splits = 0) noexcept {
  if (!A::supported()) return error{errc::unsupported} << "decode attention: this CPU cannot run arch " << A::name;
  const std::size_t dim = kv.head_dim(), kv_heads = kv.kv_heads();
  if (layer >= kv.layers()) return error{errc::out_of_range} << "decode attention: layer " << layer << " >= " << kv.layers();
  if (dim > attention_max_head_dim)
    return error{errc::unsupported} << "decode attention: head_dim " << dim << " > " << attention_max_head_dim;
  if (q.size() % dim != 0 || (q.size() / dim) % kv_heads != 0 || q.empty())
    return error{errc::shape_mismatch} << "decode attention: " << q.size() << " query floats are not a multiple of "
                                       << kv_heads << " KV heads x " << dim;
  if (out.size() != q.size())
    return error{errc::shape_mismatch} << "decode attention: out has " << out.size() << " floats, q " << q.size();
  const std::size_t q_heads = q.size() / dim, group = q_heads / kv_heads;
  if (!params.alibi_slopes.empty() && params.alibi_slopes.size() != q_heads)
    return error{errc::shape_mismatch} << "decode attention: " << params.alibi_slopes.size()
                                       << " ALiBi slopes for " << q_heads << " query heads";
  const std::uint64_t begin = kv.begin(), tokens = kv.end() - kv.begin();
  if (splits == 0) splits = decode_splits(kv_heads, tokens, executor.concurrency());
  if (workspace.size() < decode_workspace_floats(q_heads, dim, splits))
    return error{errc::capacity_exceeded} << "decode attention: workspace of " << workspace.size()
                                          << " floats, needs " << decode_workspace_floats(q_heads, dim, splits);
  const std::size_t stride = decode_state_floats(dim), padded = attention_padded_dim(dim);
  // The threads claim (kv head, split) items one at a time (parallel_claim): items write
  // disjoint workspace states and merge in split order below, so the output does not
  // depend on which thread ran what.
  const std::size_t items = kv_heads * splits;
  arch::visit<A>([&](auto tag) {
    parallel_claim(executor, items, items, [&](std::size_t first, std::size_t last) {
      for (std::size_t item = first; item < last; ++item) {
        const std::size_t head = item / splits, split = item % splits;
        const range r = split_range(static_cast<std::size_t>(tokens), splits, split);
        const detail::decode_task task{q.data() + head * group * dim, group, head * group, head, begin + r.begin,
                                       begin + r.end, kv.end() - 1, workspace.data() + item * group * stride};
        detail::decode_partial(tag, kv, layer, params, task);
      }
    });
  });
  for (std::size_t head = 0; head < kv_heads; ++head) {
    for (std::size_t n = 0; n < group; ++n) {
      float* first = workspace.data() + (head * splits * group + n) * stride;
      softmax_state merged{first[padded], first[padded + 1]};
      for (std::size_t split = 1; split < splits; ++split) {
        const float* other = workspace.data() + ((head * splits + split) * group + n) * stride;
        merged.merge({first, dim}, softmax_state{other[padded], other[padded + 1]}, {other, dim});
      }
      merged.finish({first, dim}, out.subview((head * group + n) * dim, dim));
    }
  }
  return ok();
}

/// Decode attention on the calling thread (see above).
template <arch::Arch A = arch::best, kv::KvElement Elem>
result<void> decode_attention(const kv::kv_sequence_view<Elem>& kv, std::size_t layer, vector_view<const float> q,
                              vector_view<float> out, const attention_params& params, vector_view<float> workspace,
                              std::size_t splits = 0) noexcept {
  exec::serial serial;
  return decode_attention<A>(kv, layer, q, out, params, workspace, serial, splits);
}

}  // namespace hedge::attention
