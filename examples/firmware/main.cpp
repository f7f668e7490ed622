// A Cortex-M7 firmware program using hedge's core types with static storage
// only: f16 weights in an in-object buffer, a matrix view over them, a
// matrix-vector product through the serial executor, errors as values. The CI
// check (check.cmake) proves the linked image references no heap function.
#include "hedge/hedge.hpp"

#include <cstddef>
#include <cstdint>

namespace {

constexpr std::size_t rows = 8;
constexpr std::size_t cols = 16;

hedge::static_storage<hedge::f16, rows * cols> weights;
hedge::static_storage<float, cols> input;
hedge::static_storage<float, rows> output;

hedge::result<float> checked_sum(hedge::vector_view<const float> v) {
  float total = 0.0f;
  for (float x : v) {
    if (x != x) return hedge::error{hedge::errc::invalid_argument} << "NaN in output of length " << v.size();
    total += x;
  }
  return total;
}

}  // namespace

int main() {
  const hedge::matrix_view<hedge::f16> w{weights.data(), rows, cols};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      w(r, c) = hedge::f32_to_f16(static_cast<float>(r + 1) * 0.125f - static_cast<float>(c) * 0.0625f);
  for (std::size_t c = 0; c < cols; ++c) input.data()[c] = 1.0f / static_cast<float>(c + 1);

  hedge::exec::serial{}.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      float acc = 0.0f;
      for (std::size_t c = 0; c < cols; ++c) acc += hedge::f16_to_f32(w(r, c)) * input.data()[c];
      output.data()[r] = acc;
    }
  });

  const hedge::result<float> sum = checked_sum({output.data(), rows});
  return sum ? static_cast<int>(*sum) & 0x7F : static_cast<int>(sum.error().code());
}
