// hedge-gguf-info: a readable dump of a GGUF file, as llama.cpp's gguf-dump prints it:
// the header, every metadata key with its type and value (arrays abbreviated to their
// first elements and their count), the tensor table, and the llama hyperparameters hedge
// reads from it. It is also the tool to run on a file that fails to load: it prints the
// reader's error, which names the byte offset, key or tensor.
//
//   hedge-gguf-info FILE
//
// Strings are printed quoted, with control characters, quotes and invalid UTF-8 escaped,
// so a hostile file cannot drive the terminal.
// Exit status: 0 the file parses (--help included), 1 it cannot be read or parsed (the
// message says why), 2 a usage error (the usage follows it).
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_llama.hpp"
#include "hedge/os/mapped_file.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge::model;

constexpr const char* usage_text =
    "usage: hedge-gguf-info FILE\n"
    "prints a GGUF file's header, metadata and tensor table, or why it does not load\n"
    "exit status: 0 the file parses, 1 it cannot be read or parsed, 2 a usage error\n";

constexpr hedge::tools::cli cli{"hedge-gguf-info", usage_text};

/// Array elements printed before the count.
constexpr std::uint64_t shown_elements = 8;
/// String bytes printed before the rest is counted.
constexpr std::size_t shown_string_bytes = 160;

/// Length of the valid UTF-8 sequence at s[i] that is not a control character (C1
/// controls U+0080..U+009F included), or 0.
std::size_t printable_utf8(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n;
  std::uint32_t cp;
  if (b < 0x80) return b >= 0x20 && b != 0x7F ? 1 : 0;
  if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1Fu; }
  else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0Fu; }
  else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07u; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F)) return 0;
  return n;
}

/// `s` escaped (in quotes when `quote`), at most shown_string_bytes of it.
std::string escaped(std::string_view s, bool quote) {
  std::string out = quote ? "\"" : "";
  std::size_t i = 0;
  while (i < s.size() && i < shown_string_bytes) {
    const char c = s[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (const std::size_t n = printable_utf8(s, i); n != 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      out += hex;
      ++i;
    }
  }
  if (quote) out += '"';
  if (i < s.size()) out.append("... (").append(std::to_string(s.size())).append(" bytes)");
  return out;
}

/// One scalar value (a string quoted).
std::string scalar(const gguf_value& v) {
  char text[64];
  switch (v.type()) {
    case gguf_value_type::string: return escaped(*v.as_string(), true);
    case gguf_value_type::boolean: return *v.as_bool() ? "true" : "false";
    case gguf_value_type::float32:
    case gguf_value_type::float64: std::snprintf(text, sizeof text, "%.9g", *v.as_f64()); return text;
    case gguf_value_type::uint8:
    case gguf_value_type::uint16:
    case gguf_value_type::uint32:
    case gguf_value_type::uint64:
      std::snprintf(text, sizeof text, "%llu", static_cast<unsigned long long>(*v.as_u64()));
      return text;
    default: std::snprintf(text, sizeof text, "%lld", static_cast<long long>(*v.as_i64())); return text;
  }
}

std::string value_text(const gguf_value& v) {
  if (!v.is_array()) return scalar(v);
  std::string out = "[";
  std::uint64_t i = 0;
  for (const gguf_value element : v.elements()) {
    if (i == shown_elements) {
      out += ", ...";
      break;
    }
    if (i++ > 0) out += ", ";
    out += scalar(element);
  }
  out += ']';
  return out;
}

std::string type_text(const gguf_value& v) {
  if (!v.is_array()) return std::string{to_string(v.type())};
  std::string out = "[";
  out.append(to_string(v.element_type())).append("]");
  return out;
}

void print_llama(const gguf_file& file) {
  const auto architecture = file.find("general.architecture");
  if (!architecture || !architecture->as_string()) return;
  const auto config = read_llama_config(file);
  if (!config) {
    std::printf("\nllama hyperparameters: %s\n", config.error().c_str());
    return;
  }
  std::printf(
      "\nllama hyperparameters: dim %u, hidden_dim %u, layers %u, heads %u, kv heads %u, vocab %u, context %u, "
      "rope dims %u, rms eps %g, rope theta %g, %s classifier\n",
      config->dim, config->hidden_dim, config->n_layers, config->n_heads, config->n_kv_heads, config->vocab_size,
      config->context_length, config->rope_dim, static_cast<double>(config->norm_eps),
      static_cast<double>(config->rope_theta), config->shared_classifier ? "shared" : "separate");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::string_view{argv[1]} == "--help" || std::string_view{argv[1]} == "-h")) return cli.help();
  if (argc != 2 || argv[1][0] == '\0' || (argv[1][0] == '-' && argv[1][1] != '\0'))
    return cli.usage_error(argc != 2 ? "expected one FILE" : (argv[1][0] == '\0' ? "empty FILE" : "unknown option"));
  const std::string path = argv[1];
  const auto mapped = hedge::os::mapped_file::open(path);
  if (!mapped) return cli.fail(mapped.error());
  const auto file = gguf_file::parse(mapped->bytes());
  if (!file) return cli.fail(path + " does not load: " + std::string(file.error().message()));
  std::printf("%s: GGUF version %u, %zu bytes, alignment %u, %llu metadata entries, %llu tensors, data at byte %llu\n",
              path.c_str(), file->version(), mapped->size(), file->alignment(),
              static_cast<unsigned long long>(file->metadata_count()),
              static_cast<unsigned long long>(file->tensor_count()),
              static_cast<unsigned long long>(file->data_offset()));

  std::printf("\nmetadata:\n  %4s  %-10s %8s  %s\n", "#", "type", "count", "key = value");
  std::uint64_t index = 0;
  for (const gguf_kv kv : file->metadata()) {
    std::printf("  %4llu  %-10s %8llu  %s = %s\n", static_cast<unsigned long long>(++index),
                type_text(kv.value).c_str(), static_cast<unsigned long long>(kv.value.size()),
                escaped(kv.key, false).c_str(), value_text(kv.value).c_str());
  }

  std::printf("\ntensors:\n  %4s  %-7s %-24s %14s %14s  %s\n", "#", "type", "dims", "offset", "bytes", "name");
  index = 0;
  std::uint64_t total = 0;
  for (const gguf_tensor t : file->tensors()) {
    std::string dims;
    for (std::uint32_t d = 0; d < t.n_dims; ++d) {
      if (d > 0) dims += " x ";
      dims += std::to_string(t.dims[d]);
    }
    std::printf("  %4llu  %-7s %-24s %14llu %14zu  %s\n", static_cast<unsigned long long>(++index),
                std::string{type_traits(t.type).name}.c_str(), dims.c_str(),
                static_cast<unsigned long long>(t.offset), t.bytes.size(), escaped(t.name, false).c_str());
    total += t.bytes.size();
  }
  std::printf("  tensor data: %llu bytes\n", static_cast<unsigned long long>(total));
  print_llama(*file);
  return 0;
}
