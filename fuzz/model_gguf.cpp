// libFuzzer target: the GGUF reader must return a file or an error for any bytes, never
// read out of bounds or hang. When a file parses, every key, value, array element and
// tensor byte range is read, as a consumer would (and the llama hyperparameters, and
// the typed views): a length or offset the parser let through that lies shows up here
// as an ASan report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_llama.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace {

using namespace hedge::model;

volatile std::uint64_t sink;

std::uint64_t first_and_last(std::span<const std::byte> bytes) {
  return bytes.empty() ? 0 : static_cast<unsigned>(bytes.front()) + static_cast<unsigned>(bytes.back());
}

template <class F>
std::uint64_t view(const gguf_tensor& t) {
  std::uint64_t sum = 0;
  if (auto m = t.matrix<F>(); m && m->rows() > 0 && m->cols() > 0)
    sum += first_and_last(std::as_bytes(std::span{&(*m)(m->rows() - 1, m->cols() - 1), 1}));
  if (auto v = t.vector<F>(); v && !v->empty()) sum += first_and_last(std::as_bytes(std::span{&(*v)[v->size() - 1], 1}));
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A heap copy of exactly `size` bytes, 16-byte aligned, so ASan guards its end.
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  const auto file = gguf_file::parse(bytes);
  if (!file) {
    if (file.error().message().empty()) std::abort();
    return 0;
  }
  std::uint64_t sum = 0;
  std::uint64_t entries = 0;
  for (const gguf_kv kv : file->metadata()) {
    ++entries;
    sum += first_and_last(std::as_bytes(std::span{kv.key}));
    const gguf_value& v = kv.value;
    if (v.is_array()) {
      std::uint64_t elements = 0;
      for (const gguf_value e : v.elements()) {
        ++elements;
        if (auto s = e.as_string()) sum += first_and_last(std::as_bytes(std::span{*s}));
        if (auto i = e.as_i64()) sum += static_cast<std::uint64_t>(*i);
        if (auto f = e.as_f64()) sum += *f > 0;
        if (auto b = e.as_bool()) sum += *b;
      }
      if (elements != v.size()) std::abort();
      for (const std::string_view s : v.strings()) sum += first_and_last(std::as_bytes(std::span{s}));
      if (v.size() > 0 && !v.array_at(v.size() - 1)) std::abort();
    } else {
      if (auto s = v.as_string()) sum += first_and_last(std::as_bytes(std::span{*s}));
      if (auto i = v.as_u64()) sum += *i;
      if (auto f = v.as_f32()) sum += *f > 0;
    }
    // find and find_tensor walk the file: checked on the first entries only, so the
    // harness stays linear in the input.
    if (entries <= 16 && !file->find(kv.key)) std::abort();
  }
  if (entries != file->metadata_count()) std::abort();
  std::uint64_t tensors = 0;
  for (const gguf_tensor t : file->tensors()) {
    ++tensors;
    sum += first_and_last(t.bytes);
    if (t.bytes.data() < bytes.data() || t.bytes.data() + t.bytes.size() > bytes.data() + bytes.size()) std::abort();
    sum += view<hedge::quant::f32>(t) + view<hedge::quant::f16>(t) + view<hedge::quant::bf16>(t) +
           view<hedge::quant::q8_0>(t) + view<hedge::quant::q4_0>(t) + view<hedge::quant::q4_k>(t) +
           view<hedge::quant::q6_k>(t);
    if (tensors <= 16 && !file->find_tensor(t.name)) std::abort();
  }
  if (tensors != file->tensor_count()) std::abort();
  if (auto config = read_llama_config(*file)) sum += config->dim;
  sink = sum;
  return 0;
}
