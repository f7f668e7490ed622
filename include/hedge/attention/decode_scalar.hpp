// hedge/attention/decode_scalar.hpp: the decode attention kernel contract and its
// scalar reference.
//
// A kernel computes one (kv head, split) item of decode attention (see
// hedge/attention/decode.hpp): the online-softmax states of the query heads of
// one GQA group over a range of key positions, written to the workspace as
//
//   per query head:  [ acc: padded_dim floats | max | sum | pad to 8 ]
//
// The scalar kernel decodes each K/V vector to floats with the element's own
// `decode` and takes one online-softmax step per position: it is the
// specification the SIMD kernels (decode_avx2.hpp) are tested against, and the
// fallback for element formats without a SIMD reader.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "hedge/attention/params.hpp"
#include "hedge/core/arch.hpp"
#include "hedge/kv/cache.hpp"
#include "hedge/kv/element.hpp"

namespace hedge::attention {

/// Largest head_dim the attention kernels take (stack buffers are sized by it).
inline constexpr std::size_t attention_max_head_dim = 256;

/// head_dim rounded up to whole 32-value blocks (the widest element block): the
/// kernels' accumulators and query copies use this width.
constexpr std::size_t attention_padded_dim(std::size_t head_dim) noexcept { return (head_dim + 31) / 32 * 32; }

/// Floats one partial state (one query head, one split) takes in the workspace.
constexpr std::size_t decode_state_floats(std::size_t head_dim) noexcept { return attention_padded_dim(head_dim) + 8; }

/// Workspace floats `decode_attention` needs.
constexpr std::size_t decode_workspace_floats(std::size_t q_heads, std::size_t head_dim, std::size_t splits) noexcept {
  return q_heads * splits * decode_state_floats(head_dim);
}

/// Splits per KV head for a sequence: enough (kv head, split) items to keep every
/// thread busy, but at least `min_tokens` positions per split so the merge and the
/// per-item start-up stay negligible.
constexpr std::size_t decode_splits(std::size_t kv_heads, std::uint64_t tokens, std::size_t threads,
                                    std::size_t min_tokens = 256) noexcept {
  const std::size_t wanted = (threads + kv_heads - 1) / kv_heads;
  const std::uint64_t most = std::max<std::uint64_t>(1, tokens / min_tokens);
  return static_cast<std::size_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(wanted, most)));
}

namespace detail {

/// One (kv head, split) item: the queries of one GQA group over a range of positions.
struct decode_task {
  const float* queries;          ///< `count` query heads, head_dim floats each
  std::size_t count;             ///< query heads in the group
  std::size_t first_query_head;  ///< index of queries[0] among all query heads (ALiBi slopes)
  std::size_t kv_head;
  std::uint64_t begin, end;      ///< key positions of this split
  std::uint64_t query_pos;       ///< position of the query token
  float* states;                 ///< `count` partial states (decode_state_floats each)
};

/// Scalar reference: decodes each K/V vector to floats, one online-softmax step per position.
/// \tparam Elem the KV element format
template <kv::KvElement Elem>
void decode_partial(arch::scalar, const kv::kv_sequence_view<Elem>& kv, std::size_t layer, const attention_params& p,
                    const decode_task& task) noexcept {
  const std::size_t dim = kv.head_dim(), units = kv.vector_units(), stride = decode_state_floats(dim);
  const std::size_t padded = attention_padded_dim(dim);
  for (std::size_t n = 0; n < task.count; ++n) {
    float* state = task.states + n * stride;
    std::fill(state, state + stride, 0.f);
    state[padded] = -std::numeric_limits<float>::infinity();
  }
  float key[attention_max_head_dim], value[attention_max_head_dim];
  for (std::uint64_t pos = task.begin; pos < task.end;) {
    const auto run = kv.contiguous(layer, task.kv_head, pos, task.end);
    for (std::size_t i = 0; i < run.tokens; ++i, ++pos) {
      Elem::decode(std::span(run.keys + i * units, units), std::span(key, dim));
      Elem::decode(std::span(run.values + i * units, units), std::span(value, dim));
      for (std::size_t n = 0; n < task.count; ++n) {
        const float* q = task.queries + n * dim;
        float* state = task.states + n * stride;
        float dot = 0.f;
        for (std::size_t j = 0; j < dim; ++j) dot += q[j] * key[j];
        const float logit = transform_logit(p, dot * p.scale, task.first_query_head + n, pos, task.query_pos);
        float& max = state[padded];
        float& sum = state[padded + 1];
        if (logit > max) {  // rescale what was accumulated under the old max
          const float correction = std::exp(max - logit);
          sum *= correction;
          for (std::size_t j = 0; j < dim; ++j) state[j] *= correction;
          max = logit;
        }
        const float weight = std::exp(logit - max);
        sum += weight;
        for (std::size_t j = 0; j < dim; ++j) state[j] += weight * value[j];
      }
    }
  }
}

}  // namespace detail

}  // namespace hedge::attention
