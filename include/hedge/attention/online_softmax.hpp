// hedge/attention/online_softmax.hpp: the mergeable running state of softmax(q.K) V.
//
// Attention over keys k_1..k_n is out = sum_i exp(l_i) v_i / sum_i exp(l_i).
// Streaming it (Milakov & Gimelshein 2018, "Online normalizer calculation for
// softmax"; FlashAttention) keeps three things per query head:
//   max  m = max_i l_i seen so far (subtracted before exp, so nothing overflows)
//   sum  s = sum_i exp(l_i - m)
//   acc  a = sum_i exp(l_i - m) v_i            (head_dim floats, unnormalised)
// Two states over disjoint key ranges merge exactly (FlashInfer's state
// `merge`, FlashDecoding's split-KV reduction):
//   m = max(m1, m2), s = s1 e^(m1-m) + s2 e^(m2-m), a = a1 e^(m1-m) + a2 e^(m2-m)
// so a sequence split across threads gives the same result as one pass, up to
// float rounding. `softmax_state` holds (m, s); `acc` is caller memory (decode
// keeps it in its workspace), which keeps the type small and allocation-free.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "hedge/core/view.hpp"

namespace hedge::attention {

/// Running max and normaliser of an online softmax; the accumulator is passed alongside.
struct softmax_state {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.f;

  /// Folds `other` (covering other keys) into this state and `acc`.
  void merge(vector_view<float> acc, const softmax_state& other, vector_view<const float> other_acc) noexcept {
    if (other.sum == 0.f) return;  // an empty range contributes nothing (and may have max = -inf)
    if (sum == 0.f) {
      *this = other;
      for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = other_acc[i];
      return;
    }
    const float m = max > other.max ? max : other.max;
    const float self_scale = std::exp(max - m), other_scale = std::exp(other.max - m);
    sum = sum * self_scale + other.sum * other_scale;
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = acc[i] * self_scale + other_acc[i] * other_scale;
    max = m;
  }

  /// The attention output: acc / sum (zeros for an empty key range).
  void finish(vector_view<const float> acc, vector_view<float> out) const noexcept {
    const float inverse = sum != 0.f ? 1.f / sum : 0.f;
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = acc[i] * inverse;
  }
};

}  // namespace hedge::attention
