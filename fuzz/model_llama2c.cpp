// libFuzzer target: the llama2.c checkpoint reader on arbitrary bytes. When a file parses,
// every view it gives must lie inside the input: reading each weight's first and last
// float would make ASan report any view that does not.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "hedge/model/llama2c.hpp"

namespace {
float touch(const float* p, std::size_t n) { return n == 0 ? 0.0f : p[0] + p[n - 1]; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<float> aligned((size + 3) / 4);  // the reader wants 4-byte aligned floats
  if (size != 0) std::memcpy(aligned.data(), data, size);
  const auto c = hedge::model::llama2c_checkpoint::parse({reinterpret_cast<const std::byte*>(aligned.data()), size});
  if (!c) {
    if (c.error().message().empty()) std::abort();
    return 0;
  }
  const auto& cfg = c->config();
  if (!cfg.check()) std::abort();
  volatile float sum = touch(c->token_embedding().data(), std::size_t{cfg.vocab_size} * cfg.dim) +
                       touch(c->classifier().data(), std::size_t{cfg.vocab_size} * cfg.dim) +
                       touch(c->rms_final().data(), cfg.dim);
  for (std::size_t l = 0; l < cfg.n_layers; ++l) {
    const auto w = c->layer(l);
    sum = sum + touch(w.rms_att.data(), w.rms_att.size()) + touch(w.rms_ffn.data(), w.rms_ffn.size());
    for (const auto& m : {w.wq, w.wk, w.wv, w.wo, w.w1, w.w2, w.w3}) sum = sum + touch(m.data(), m.rows() * m.cols());
  }
  return 0;
}
