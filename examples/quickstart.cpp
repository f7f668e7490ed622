// The README's example: hedge's core types working together. A weight matrix
// stored as f16 in 64-byte-aligned heap storage, viewed as a matrix, multiplied
// by a vector with the work split across a thread pool, errors as values.
#include <hedge/os/thread_pool.hpp>
#include <hedge/hedge.hpp>

#include <cstdio>

int main() {
  constexpr std::size_t rows = 256, cols = 512;
  auto weights = hedge::heap_storage<hedge::f16>::make(rows * cols);
  auto x = hedge::heap_storage<float>::make(cols);
  auto y = hedge::heap_storage<float>::make(rows);
  if (!weights || !x || !y) return std::puts("allocation failed"), 1;

  const hedge::matrix_view<hedge::f16> w{weights->data(), rows, cols};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) w(r, c) = hedge::f32_to_f16(0.001f * static_cast<float>((r * 7 + c * 3) % 97));
  for (std::size_t c = 0; c < cols; ++c) x->data()[c] = 1.0f;

  hedge::exec::thread_pool pool;  // one worker per hardware thread; rows are split, never shared
  pool.parallel_for(rows, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      float acc = 0.0f;
      for (std::size_t c = 0; c < cols; ++c) acc += hedge::f16_to_f32(w(r, c)) * x->data()[c];
      y->data()[r] = acc;
    }
  });

  hedge::error full{hedge::errc::capacity_exceeded};
  full << "sequence " << 3 << " is full at " << std::size_t{512} << " tokens";
  std::printf("arch=%s threads=%zu y[0]=%.4f y[255]=%.4f\nan error value: [%s] %s\n",
              hedge::arch::best_name().data(), pool.concurrency(), static_cast<double>(y->data()[0]),
              static_cast<double>(y->data()[rows - 1]), hedge::to_string(full.code()).data(), full.c_str());
  return 0;
}
