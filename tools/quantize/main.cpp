// hedge-quantize: re-quantizes a GGUF file's float weight matrices with hedge's reference
// quantizers into one of llama.cpp's mixes, keeping its metadata and the tensors
// llama.cpp's quantize keeps (which tensor becomes what: hedge/model/gguf_quantize.hpp).
// Prints one line per converted tensor.
//
//   hedge-quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0
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
#include "../common/cli.hpp"

namespace {

constexpr const char* usage_text =
    "usage: hedge-quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0\n"
    "re-quantizes the F32/F16/BF16 weight matrices of IN.gguf into OUT.gguf as llama.cpp's\n"
    "llama-quantize mix of that name does (metadata and norms kept; output.weight Q6_K, and\n"
    "for Q4_K_M/Q5_K_M attn_v and ffn_down Q6_K on the layers llama-quantize picks; rows\n"
    "that are not whole 256-blocks fall back to Q5_0/Q5_1/Q8_0, and F16)\n"
    "exit status: 0 done, 1 an input or output error, 2 a usage error\n";

constexpr hedge::tools::cli cli{"hedge-quantize", usage_text};

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge;
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  for (const auto a : args)
    if (a == "--help" || a == "-h") return cli.help();
  if (args.size() != 3) return cli.usage_error("expected IN.gguf OUT.gguf TYPE");
  const std::string in(args[0]), out(args[1]);
  if (in.empty() || out.empty()) return cli.usage_error("empty file name");
  const auto mix = model::parse_quant_mix(args[2]);
  if (!mix) return cli.usage_error("unknown mix '" + std::string(args[2]) + "' (Q4_K_M, Q5_K_M, Q8_0 or Q4_0)");

  auto mapped = os::mapped_file::open(in);
  if (!mapped) return cli.fail(mapped.error());
  auto file = model::gguf_file::parse(mapped->bytes());
  if (!file) return cli.fail(error{file.error().code()} << in << ": " << file.error().message());
  model::gguf_writer writer;
  model::quantized_storage storage;
  const auto converted = model::quantize_gguf(*file, *mix, writer, storage);
  if (!converted) return cli.fail(error{converted.error().code()} << in << ": " << converted.error().message());
  std::vector<std::byte> bytes;
  if (auto w = writer.write(bytes); !w) return cli.fail(error{w.error().code()} << out << ": " << w.error().message());
  if (auto w = os::write_text_file(out, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())); !w)
    return cli.fail(w.error());
  for (const auto& t : *converted)
    std::printf("%-28s %-5s -> %s\n", std::string(t.name).c_str(), std::string(model::type_traits(t.from).name).c_str(),
                std::string(model::type_traits(t.to).name).c_str());
  std::printf("wrote %s: %zu of %llu tensors converted, %zu bytes (input %zu)\n", out.c_str(), converted->size(),
              static_cast<unsigned long long>(file->tensor_count()), bytes.size(), mapped->bytes().size());
  return 0;
}
