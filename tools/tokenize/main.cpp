// hedge-tokenize: the token ids of a text under a model's vocabulary, as llama.cpp gives them.
//
//   hedge-tokenize -m MODEL.gguf [--no-bos] [--special] [--pieces] TEXT
//   hedge-tokenize -z tokenizer.bin [--no-bos] [--special] [--pieces] TEXT
//
// The last line of stdout is the ids, space-separated (BOS first where the vocabulary adds
// one, unless --no-bos); --special reads special-token text ("<|im_start|>") as the token
// (llama.cpp's parse_special); with --pieces each id's piece comes first, one per line. Exit 0 on success, 1 when the file
// cannot be read or parsed, 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/llama2c_tokenizer.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/os/mapped_file.hpp"
#include "../common/cli.hpp"

namespace {

constexpr const char* usage_text =
    "usage: hedge-tokenize -m MODEL.gguf [--no-bos] [--special] [--pieces] TEXT\n"
    "       hedge-tokenize -z tokenizer.bin [--no-bos] [--special] [--pieces] TEXT\n"
    "Prints the token ids of TEXT (llama.cpp's rules: SentencePiece or byte-level BPE, as\n"
    "the file says) space-separated on the last line, BOS first where the vocabulary adds\n"
    "one unless --no-bos. Special-token text such as \"<s>\" is plain text unless\n"
    "--special; --pieces also prints each id's piece, one per line.\n";

constexpr hedge::tools::cli cli{"hedge-tokenize", usage_text};

/// The piece with bytes outside printable ASCII as \xHH, so every line stays one line.
std::string printable(std::string_view piece) {
  std::string out;
  for (char c : piece) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && c != '\\') {
      out += c;
    } else if (b >= 0x80) {
      out += c;  // UTF-8 bytes go out as they are (▁ stays visible)
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      out += hex;
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* gguf_path = nullptr;
  const char* bin_path = nullptr;
  const char* text = nullptr;
  bool bos = true, pieces = false, special = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return cli.help();
    if (arg == "-m" || arg == "-z") {
      if (i + 1 == argc) return cli.usage_error("-m and -z take a file");
      (arg == "-m" ? gguf_path : bin_path) = argv[++i];
    } else if (arg == "--no-bos") {
      bos = false;
    } else if (arg == "--special") {
      special = true;
    } else if (arg == "--pieces") {
      pieces = true;
    } else if (arg.size() > 1 && arg[0] == '-' && text == nullptr && arg != "--") {
      return cli.usage_error("unknown option " + std::string(arg));
    } else {
      if (arg == "--" && i + 1 < argc) ++i;
      if (text != nullptr) return cli.usage_error("give the text as one argument (quote it)");
      text = argv[i];
    }
  }
  if ((gguf_path == nullptr) == (bin_path == nullptr))
    return cli.usage_error("give exactly one of -m MODEL.gguf and -z tokenizer.bin");
  if (text == nullptr) return cli.usage_error("no text given");

  const char* path = gguf_path != nullptr ? gguf_path : bin_path;
  auto file = hedge::os::mapped_file::open(path);
  if (!file) return cli.fail(file.error());
  hedge::result<hedge::model::vocabulary> vocab = hedge::error{hedge::errc::invalid_argument};
  if (gguf_path != nullptr) {
    auto gguf = hedge::model::gguf_file::parse(file->bytes());
    if (!gguf) return cli.fail(std::string(path) + ": " + std::string(gguf.error().message()));
    vocab = hedge::model::read_gguf_vocabulary(*gguf);
  } else {
    vocab = hedge::model::read_llama2c_tokenizer(file->bytes());
  }
  if (!vocab) return cli.fail(std::string(path) + ": " + std::string(vocab.error().message()));
  const hedge::model::tokenizer tokenizer{std::move(*vocab)};
  auto ids = tokenizer.encode(text, hedge::model::encode_options{.add_special = bos, .parse_special = special});
  if (!ids) return cli.fail(ids.error());
  if (pieces) {
    for (auto id : *ids) std::printf("%6d '%s'\n", id, printable(tokenizer.vocab()[id].piece).c_str());
  }
  for (std::size_t i = 0; i < ids->size(); ++i) std::printf(i == 0 ? "%d" : " %d", (*ids)[i]);
  std::printf("\n");
  return 0;
}
