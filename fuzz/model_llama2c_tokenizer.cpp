// llama2.c's tokenizer.bin parser on arbitrary bytes: a malformed file is an error, never
// a crash or a read past the buffer; a file that parses encodes and decodes a text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "hedge/model/llama2c_tokenizer.hpp"
#include "hedge/model/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto vocab = hedge::model::read_llama2c_tokenizer(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (!vocab) {
    if (vocab.error().message().empty()) std::abort();
    return 0;
  }
  const hedge::model::tokenizer t{std::move(*vocab)};
  auto ids = t.encode("Once upon a time, \xE4\xB8\xAD <s> \xFF!");
  if (!ids) return 0;  // e.g. no byte token and no unknown token: an error with a message
  for (auto id : *ids)
    if (!t.vocab().contains(id)) std::abort();
  auto text = t.decode(*ids);
  if (!text) std::abort();
  return 0;
}
