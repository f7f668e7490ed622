// libFuzzer target: the complexity weights-file parser must return a value or an error
// for any input, never crash, read out of bounds or leave non-finite weights or
// scales.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "hedge/route/complexity_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static auto model = std::make_unique<hedge::route::complexity_model<64>>();
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  if (hedge::route::parse_complexity_weights(text, *model).ok()) {
    if (!std::isfinite(model->bias)) std::abort();
    for (float w : model->dense)
      if (!std::isfinite(w)) std::abort();
    for (float step : model->scale)
      if (!std::isfinite(step) || !(step > 0.0f)) std::abort();
    (void)model->logit(text);
  }
  return 0;
}
