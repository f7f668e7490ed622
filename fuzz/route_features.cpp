// libFuzzer target: complexity features of arbitrary bytes. The vector pass (arch::best:
// the best this CPU runs, AVX2 on x86) must report the same buckets per group, in the same
// order, and the same summary as the scalar pass, its specification; and the dense
// features stay within their saturation bounds.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "hedge/route/complexity_features.hpp"

namespace {
using features = hedge::route::complexity_features<1024>;

template <class Arch>
std::array<std::vector<std::uint32_t>, hedge::route::hashed_group_count> trace(std::string_view text,
                                                                                hedge::route::feature_summary& summary) {
  std::array<std::vector<std::uint32_t>, hedge::route::hashed_group_count> out;
  // The hash keys of a seed taken from the text's length: the default keys and others.
  summary = features::extract(
      text, [&](hedge::route::hashed_group g, std::uint32_t b) noexcept { out[static_cast<std::size_t>(g)].push_back(b); },
      hedge::route::feature_hash_keys::of_seed(text.size() % 4), Arch{});
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  hedge::route::feature_summary scalar{}, native{};
  const auto expected = trace<hedge::arch::scalar>(text, scalar);
  const auto got = trace<hedge::arch::best>(text, native);
  if (got != expected || scalar.occurrences != native.occurrences ||
      std::memcmp(scalar.dense.data(), native.dense.data(), sizeof scalar.dense) != 0)
    std::abort();
  // Every dense feature within [0, dense_feature_max]: the score's bound rests on it.
  for (std::size_t k = 0; k < hedge::route::dense_feature_count; ++k)
    if (!(native.dense[k] >= 0.0f && native.dense[k] <= hedge::route::dense_feature_max[k])) std::abort();
  return 0;
}
