// hedge-quantize: re-quantizes a GGUF file's float weight matrices with hedge's reference
// quantizers, keeping its metadata and the tensors llama.cpp's quantize keeps (which tensor
// becomes what: hedge/model/gguf_quantize.hpp). Prints one line per converted tensor.
//
//   hedge-quantize IN.gguf OUT.gguf q8_0|q4_0|q4_k
//
// Exit status: 0 done (--help included), 1 the input cannot be read or the output written
// (the message names the file and the reason), 2 a usage error.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_quantize.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/os/csv_files.hpp"
#include "hedge/os/mapped_file.hpp"

namespace {

constexpr const char* usage_text =
    "usage: hedge-quantize IN.gguf OUT.gguf q8_0|q4_0|q4_k\n"
    "re-quantizes the F32/F16/BF16 weight matrices of IN.gguf into OUT.gguf (metadata and\n"
    "norms kept; output.weight Q6_K for q4_0/q4_k, as llama.cpp does)\n"
    "exit status: 0 done, 1 an input or output error, 2 a usage error\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "hedge-quantize: %s\n%s", message.c_str(), usage_text);
  return 2;
}

int fail(const hedge::error& e) {
  std::fprintf(stderr, "hedge-quantize: %s\n", e.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge;
  using quant::gguf_type;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  for (const auto a : args)
    if (a == "--help" || a == "-h") return std::fputs(usage_text, stdout), 0;
  if (args.size() != 3) return usage_error("expected IN.gguf OUT.gguf TYPE");
  const std::string in(args[0]), out(args[1]);
  if (in.empty() || out.empty()) return usage_error("empty file name");
  gguf_type wanted;
  if (args[2] == "q8_0") wanted = gguf_type::q8_0;
  else if (args[2] == "q4_0") wanted = gguf_type::q4_0;
  else if (args[2] == "q4_k") wanted = gguf_type::q4_k;
  else return usage_error("unknown type '" + std::string(args[2]) + "' (q8_0, q4_0 or q4_k)");

  auto mapped = os::mapped_file::open(in);
  if (!mapped) return fail(mapped.error());
  auto file = model::gguf_file::parse(mapped->bytes());
  if (!file) return fail(error{file.error().code()} << in << ": " << file.error().message());
  model::gguf_writer writer;
  model::quantized_storage storage;
  const auto converted = model::quantize_gguf(*file, wanted, writer, storage);
  if (!converted) return fail(error{converted.error().code()} << in << ": " << converted.error().message());
  std::vector<std::byte> bytes;
  if (auto w = writer.write(bytes); !w) return fail(error{w.error().code()} << out << ": " << w.error().message());
  if (auto w = os::write_text_file(out, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())); !w)
    return fail(w.error());
  for (const auto& t : *converted)
    std::printf("%-28s %-5s -> %s\n", std::string(t.name).c_str(), std::string(model::type_traits(t.from).name).c_str(),
                std::string(model::type_traits(t.to).name).c_str());
  std::printf("wrote %s: %zu of %llu tensors converted, %zu bytes (input %zu)\n", out.c_str(), converted->size(),
              static_cast<unsigned long long>(file->tensor_count()), bytes.size(), mapped->bytes().size());
  return 0;
}
