// Inputs shared by the gemv and gemm benchmarks: deterministic floats and
// quantized weight matrices (speed does not depend on the values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/inputs.hpp"
#include "hedge/quant/block_format.hpp"

namespace hedge::bench {

/// A rows x k matrix of format W in GGUF layout: 16 distinct quantized rows,
/// tiled (quantizing 45M values with the Q4_K reference search would take
/// longer than the benchmarks).
template <quant::BlockFormat W>
std::vector<typename W::block> quantized_weights(std::size_t rows, std::size_t k) {
  constexpr std::size_t distinct = 16;
  const std::size_t blocks = k / W::block_elements;
  std::vector<typename W::block> w(rows * blocks);
  const auto floats = pseudo_random_floats(distinct * k, 7);
  for (std::size_t r = 0; r < rows; ++r) {
    if (r < distinct) {
      (void)quant::quantize<W>({floats.data() + r * k, k}, {w.data() + r * blocks, blocks});
    } else {
      for (std::size_t b = 0; b < blocks; ++b) w[r * blocks + b] = w[(r % distinct) * blocks + b];
    }
  }
  return w;
}

}  // namespace hedge::bench
