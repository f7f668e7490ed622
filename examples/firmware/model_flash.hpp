// examples/firmware/model_flash.hpp: where model_flash.cpp puts the model's GGUF bytes.
#pragma once

#include <cstddef>
#include <span>

extern "C" const std::byte hedge_model_gguf[];
extern "C" const std::byte hedge_model_gguf_end[];

namespace firmware {

/// The GGUF in flash.
inline std::span<const std::byte> model_gguf() noexcept {
  return {hedge_model_gguf, static_cast<std::size_t>(hedge_model_gguf_end - hedge_model_gguf)};
}

}  // namespace firmware
