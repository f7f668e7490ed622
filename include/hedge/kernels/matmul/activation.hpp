// hedge/kernels/matmul/activation.hpp: activation rows as the matmul kernels
// read them, prepared once per call in caller workspace.
//
// One prepared row of K floats, for weight format W:
//   float formats (F32/F16/BF16):  nothing; the kernels read the floats
//   Q8_0 activation (Q4_0, Q8_0):  [ K/32 q8_0 blocks | pad to 4 | K/32 int32 offsets | K/32 float scales ]
//   Q8_K activation (Q4_K, Q6_K):  [ K/256 q8_k blocks ]
// The Q8_0 side arrays are derived from the blocks, once per row: offsets[b] =
// 8 * sum_j q_j lets the interleaved Q4_0 kernels apply the "-8" nibble offset
// once per block for 8 weight rows, and scales[b] = float(d) saves every
// microkernel an fp16 conversion. The blocks themselves are exactly GGUF Q8_0,
// made by the reference quantizer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "hedge/core/half.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/view.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q8_0.hpp"

namespace hedge::kernels::matmul {

/// Whether format W multiplies against the float activation directly.
template <quant::BlockFormat W>
inline constexpr bool float_activation = std::is_same_v<typename W::activation, quant::f32>;

/// Bytes of one prepared activation row of k elements for weight format W.
template <quant::BlockFormat W>
constexpr std::size_t activation_row_bytes(std::size_t k) noexcept {
  using act = typename W::activation;
  if constexpr (float_activation<W>) {
    return 0;
  } else if constexpr (std::is_same_v<act, quant::q8_0>) {
    return (quant::row_bytes<act>(k) + 3) / 4 * 4 + k / act::block_elements * (sizeof(std::int32_t) + sizeof(float));
  } else {
    return (quant::row_bytes<act>(k) + 3) / 4 * 4;
  }
}

/// A prepared activation row: its blocks and (Q8_0) per-block side arrays.
template <quant::BlockFormat W>
struct activation_row {
  const typename W::activation::block* blocks;
  const std::int32_t* offsets;  ///< 8 * sum of the block's q (Q8_0 only)
  const float* scales;          ///< the block's d as float (Q8_0 only)
};

/// Quantizes x into `bytes` (activation_row_bytes<W>(x.size()) of them, 4-byte
/// aligned) and returns the row; for float formats returns x itself.
template <quant::BlockFormat W>
result<activation_row<W>> prepare_activation(vector_view<const float> x, std::byte* bytes) noexcept {
  if constexpr (float_activation<W>) {
    return activation_row<W>{x.data(), nullptr, nullptr};
  } else {
    using act = typename W::activation;
    const std::size_t blocks = x.size() / act::block_elements;
    auto* out = reinterpret_cast<typename act::block*>(bytes);
    HEDGE_TRY(quant::quantize<act>(x, {out, blocks}));
    std::int32_t* offsets = nullptr;
    float* scales = nullptr;
    if constexpr (std::is_same_v<act, quant::q8_0>) {
      offsets = reinterpret_cast<std::int32_t*>(bytes + (quant::row_bytes<act>(x.size()) + 3) / 4 * 4);
      scales = reinterpret_cast<float*>(offsets + blocks);
      for (std::size_t b = 0; b < blocks; ++b) {
        std::int32_t sum = 0;
        for (std::int8_t q : out[b].qs) sum += q;
        offsets[b] = 8 * sum;
        scales[b] = f16_to_f32(out[b].d);
      }
    }
    return activation_row<W>{out, offsets, scales};
  }
}

}  // namespace hedge::kernels::matmul
