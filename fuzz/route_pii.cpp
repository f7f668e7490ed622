// libFuzzer target: the PII detector on arbitrary bytes; matches must lie inside the input,
// in order, without overlap.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hedge/route/pii_detector.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  std::array<hedge::route::pii_match, 64> found{};
  const auto n = hedge::route::pii_detector{}.find(text, found);
  std::size_t end = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (found[k].length == 0 || found[k].offset < end || found[k].offset + found[k].length > size) std::abort();
    end = found[k].offset + found[k].length;
  }
  return 0;
}
