// libFuzzer target: the complexity weights-file parser must return a value or an error
// for any input, never crash or read out of bounds; a model it accepts has finite weights
// and scales, a finite score bound (max_abs_logit), and scores every prompt (the input
// itself, and a long single token that saturates the features) finitely within that bound.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "hedge/route/complexity_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static auto model = std::make_unique<hedge::route::complexity_model<64>>();
  // Past hashed_saturation 4-grams and the mean word length's saturation point.
  static const std::string long_token(std::size_t{1} << 18, 'q');
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  if (hedge::route::parse_complexity_weights(text, *model).ok()) {
    if (!std::isfinite(model->bias)) std::abort();
    for (float w : model->dense)
      if (!std::isfinite(w)) std::abort();
    for (float step : model->scale)
      if (!std::isfinite(step) || !(step > 0.0f)) std::abort();
    const double bound = model->max_abs_logit();
    if (!std::isfinite(bound)) std::abort();
    for (const std::string_view prompt : {text, std::string_view{long_token}}) {
      const float z = model->logit(prompt);
      if (!std::isfinite(z) || !(std::abs(static_cast<double>(z)) <= bound)) std::abort();
    }
  }
  return 0;
}
