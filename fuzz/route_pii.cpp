// libFuzzer target: the PII detector on arbitrary bytes; matches must lie inside the input,
// in order, without overlap, and equal those of the byte-by-byte reference scan.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hedge/route/pii_detector.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  std::array<hedge::route::pii_match, 64> found{};
  std::array<hedge::route::pii_match, 64> expected{};
  const hedge::route::pii_detector detector;
  const auto n = detector.find(text, found);
  if (detector.find_reference(text, expected) != n) std::abort();
  // The scalar pre-scan and `first` must agree with the dispatched one (arch::best) too.
  std::array<hedge::route::pii_match, 64> scalar{};
  if (detector.find(text, scalar, hedge::arch::scalar{}) != n) std::abort();
  const auto head = detector.first(text);
  if (head.has_value() != (n > 0) ||
      (n > 0 && (head->entity != found[0].entity || head->offset != found[0].offset || head->length != found[0].length)))
    std::abort();
  std::size_t end = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (found[k].length == 0 || found[k].offset < end || found[k].offset + found[k].length > size) std::abort();
    if (found[k].entity != expected[k].entity || found[k].offset != expected[k].offset ||
        found[k].length != expected[k].length || found[k].entity != scalar[k].entity ||
        found[k].offset != scalar[k].offset || found[k].length != scalar[k].length)
      std::abort();
    end = found[k].offset + found[k].length;
  }
  return 0;
}
