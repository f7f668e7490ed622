// hedge/attention/params.hpp: the knobs of scaled dot-product attention, and the
// logit transform they define (FlashInfer's "logits transform" hook).
//
//   logit = scale * q.k                             (scale is usually 1/sqrt(head_dim))
//   logit = softcap * tanh(logit / softcap)         if softcap > 0 (Gemma 2)
//   logit += slope[query head] * (key_pos - query_pos)   if ALiBi slopes are given (Press et al. 2022)
//
// RoPE is not here: it is applied to q and k before k enters the cache.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hedge/core/view.hpp"

namespace hedge::attention {

/// Attention parameters shared by decode and prefill.
struct attention_params {
  float scale = 1.f;                           ///< multiplies q.k
  float softcap = 0.f;                         ///< 0 = no soft-capping
  vector_view<const float> alibi_slopes = {};  ///< empty, or one slope per query head
};

/// Applies soft-cap and ALiBi to one logit already multiplied by `scale`.
inline float transform_logit(const attention_params& p, float scaled, std::size_t query_head, std::uint64_t key_pos,
                             std::uint64_t query_pos) noexcept {
  if (p.softcap > 0.f) scaled = p.softcap * std::tanh(scaled / p.softcap);
  if (!p.alibi_slopes.empty())
    scaled += p.alibi_slopes[query_head] *
              static_cast<float>(static_cast<double>(key_pos) - static_cast<double>(query_pos));
  return scaled;
}

/// True when the transform is more than the scale (the fast paths skip the call otherwise).
inline bool has_logit_transform(const attention_params& p) noexcept {
  return p.softcap > 0.f || !p.alibi_slopes.empty();
}

}  // namespace hedge::attention
