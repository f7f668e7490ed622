// The tokenizers against llama.cpp's ids on the vocabularies of the models people run on
// devices (../shared/models/vocab/): llama.cpp's own test cases for gpt-2 and phi-3, then
// the references scripts/vocab_references.py made with llama.cpp's prebuilt
// (tests/model/data/vocab_texts.txt and vocab_ids_*.txt: llama.cpp's test texts, random
// Unicode, code, digits, white space, markup and invalid UTF-8) on llama-bpe (Llama 3),
// qwen2, gpt-2, smollm and phi-3, with and without parse_special, and the text llama.cpp's
// detokenize gives those ids (vocab_decode_*.txt). Then the file's flags and
// sets (BOS, end of generation), decoding back, refusals and the heap-free encode.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/tokenizer.hpp"
#include "support/alloc_counter.hpp"
#include "support/model_files.hpp"

namespace {

using hedge::model::decode_options;
using hedge::model::encode_options;
using hedge::model::token_id;
using hedge::model::tokenizer;
using ids = std::vector<token_id>;

const std::string vocab_dir = hedge::test::models_dir + "vocab/";
const std::string data_dir = std::string(hedge::test::source_dir()) + "/tests/model/data/";

#define SKIP_WITHOUT_VOCABS()                                                         \
  if (!std::ifstream(vocab_dir + "ggml-vocab-gpt-2.gguf").good()) \
  GTEST_SKIP() << vocab_dir << " is absent (../shared/models/vocab: llama.cpp's test vocabularies)"

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// tokenizer.ggml.pre's value replaced in a GGUF's bytes (the vocabularies have no tensors).
std::string with_pre(std::string gguf, const std::string& name) {
  const std::string key = "tokenizer.ggml.pre";
  const std::uint64_t key_length = key.size();
  std::string pattern(reinterpret_cast<const char*>(&key_length), 8);
  pattern += key;
  const std::size_t at = gguf.find(pattern);
  if (at == std::string::npos) return gguf;
  const std::size_t value = at + pattern.size() + 4;
  std::uint64_t length = 0;
  std::memcpy(&length, gguf.data() + value, 8);
  const std::uint64_t new_length = name.size();
  return gguf.substr(0, value) + std::string(reinterpret_cast<const char*>(&new_length), 8) + name + gguf.substr(value + 8 + length);
}

/// A GGUF's bytes with one more key, a bool, first among its keys.
std::string with_bool_key(const std::string& gguf, const std::string& key, bool value) {
  std::uint64_t count = 0;
  std::memcpy(&count, gguf.data() + 16, 8);
  ++count;
  const std::uint64_t key_length = key.size();
  const std::uint32_t type = 7;  // GGUF bool
  std::string kv(reinterpret_cast<const char*>(&key_length), 8);
  kv += key;
  kv += std::string(reinterpret_cast<const char*>(&type), 4);
  kv += static_cast<char>(value ? 1 : 0);
  return gguf.substr(0, 16) + std::string(reinterpret_cast<const char*>(&count), 8) + kv + gguf.substr(24);
}

/// A vocabulary file loaded as the tools load it; its bytes stay alive with it. "smollm" is
/// the gpt-2 file with tokenizer.ggml.pre "smollm"; "llama2-no-space-prefix" Llama 2's with
/// tokenizer.ggml.add_space_prefix = false, as Gemma's files say (the references were made
/// from the same bytes).
struct loaded {
  std::vector<float> storage;
  hedge::result<hedge::model::vocabulary> vocab = hedge::error{hedge::errc::invalid_argument};
};

loaded load(const std::string& name) {
  std::string bytes;
  if (name == "smollm")
    bytes = with_pre(read_text(vocab_dir + "ggml-vocab-gpt-2.gguf"), "smollm");
  else if (name == "llama2-no-space-prefix")
    bytes = with_bool_key(read_text(hedge::test::models_dir + "llama2-vocab.gguf"), "tokenizer.ggml.add_space_prefix", false);
  else
    bytes = read_text(vocab_dir + "ggml-vocab-" + name + ".gguf");
  loaded l;
  l.storage = hedge::test::aligned_copy(std::as_bytes(std::span<const char>(bytes)));
  auto gguf = hedge::model::gguf_file::parse({reinterpret_cast<const std::byte*>(l.storage.data()), bytes.size()});
  if (!gguf) {
    l.vocab = gguf.error();
    return l;
  }
  l.vocab = hedge::model::read_gguf_vocabulary(*gguf);
  return l;
}

ids parse_ids(const std::string& text) {
  ids out;
  std::istringstream in(text);
  token_id id;
  while (in >> id) out.push_back(id);
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

bool valid_utf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    if (n == 3 && ((b == 0xE0 && static_cast<unsigned char>(s[i + 1]) < 0xA0) || (b == 0xED && static_cast<unsigned char>(s[i + 1]) >= 0xA0)))
      return false;
    if (n == 4 && ((b == 0xF0 && static_cast<unsigned char>(s[i + 1]) < 0x90) || (b == 0xF4 && static_cast<unsigned char>(s[i + 1]) >= 0x90)))
      return false;
    i += n;
  }
  return true;
}

ids encode_ids(const tokenizer& t, const std::string& text, encode_options options) {
  auto r = t.encode(text, options);
  EXPECT_TRUE(r.ok()) << r.error().c_str();
  return r.ok() ? *r : ids{};
}

/// llama.cpp's test file pair: texts split by "__ggml_vocab_test__" lines, ids per line.
void expect_llama_cpp_cases(const std::string& name) {
  auto l = load(name);
  ASSERT_TRUE(l.vocab.ok()) << l.vocab.error().c_str();
  const tokenizer t{std::move(*l.vocab)};
  const std::string inp = read_text(vocab_dir + "ggml-vocab-" + name + ".gguf.inp");
  std::istringstream out(read_text(vocab_dir + "ggml-vocab-" + name + ".gguf.out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::size_t cases = 0;
  for (std::size_t at = 0;;) {
    const std::size_t end = inp.find(separator, at);
    if (end == std::string::npos) break;
    const std::string text = inp.substr(at, end - at);
    at = end + separator.size();
    std::string line;
    ASSERT_TRUE(std::getline(out, line));
    EXPECT_EQ(encode_ids(t, text, {.add_special = false}), parse_ids(line)) << name << " case " << cases << ": [" << text << "]";
    ++cases;
  }
  EXPECT_GE(cases, 40u);
}

TEST(VocabLlamaCppCases, Gpt2) {
  SKIP_WITHOUT_VOCABS();
  expect_llama_cpp_cases("gpt-2");
}

TEST(VocabLlamaCppCases, Phi3) {
  SKIP_WITHOUT_VOCABS();
  expect_llama_cpp_cases("phi-3");
}

/// Every reference text of vocab_texts.txt, with and without parse_special.
void expect_references(const std::string& name) {
  auto l = load(name);
  ASSERT_TRUE(l.vocab.ok()) << l.vocab.error().c_str();
  const tokenizer t{std::move(*l.vocab)};
  const bool bpe = t.vocab().settings().model == hedge::model::tokenizer_model::bpe;
  std::ifstream texts(data_dir + "vocab_texts.txt"), refs(data_dir + "vocab_ids_" + name + ".txt");
  std::string text_line, ref_line;
  std::size_t count = 0;
  while (std::getline(texts, text_line) && std::getline(refs, ref_line)) {
    const std::string text_name = text_line.substr(0, text_line.find(' '));
    const std::string text = from_hex(text_line.substr(text_line.find(' ') + 1));
    const std::size_t tab1 = ref_line.find('\t'), tab2 = ref_line.find('\t', tab1 + 1);
    ASSERT_EQ(ref_line.substr(0, tab1), text_name);
    const ids plain = parse_ids(ref_line.substr(tab1 + 1, tab2 - tab1 - 1));
    const ids special = parse_ids(ref_line.substr(tab2 + 1));
    EXPECT_EQ(encode_ids(t, text, {.add_special = false}), plain) << name << " " << text_name;
    EXPECT_EQ(encode_ids(t, text, {.add_special = false, .parse_special = true}), special) << name << " " << text_name << " (parse_special)";
    // Byte-level BPE loses nothing of valid UTF-8 (every byte is spelled): the pieces give
    // the text back (decode's whole-text clean-up aside, checked below).
    if (bpe && valid_utf8(text)) {
      std::string pieces;
      ASSERT_TRUE(t.for_each_piece(plain, {}, [&](std::string_view p) { pieces.append(p); }).ok());
      EXPECT_EQ(pieces, text) << name << " " << text_name;
    }
    ++count;
  }
  EXPECT_GE(count, 250u) << "tests/model/data/vocab_ids_" << name << ".txt";

  // Decoding: llama_detokenize's text of the same ids (vocab_decode_*.txt), plain and with
  // the special pieces rendered.
  std::ifstream ids_file(data_dir + "vocab_ids_" + name + ".txt"), decoded(data_dir + "vocab_decode_" + name + ".txt");
  std::string ids_line, decoded_line;
  std::size_t decodes = 0;
  while (std::getline(decoded, decoded_line)) {
    const std::size_t tab1 = decoded_line.find('\t'), tab2 = decoded_line.find('\t', tab1 + 1);
    const std::string text_name = decoded_line.substr(0, tab1);
    while (std::getline(ids_file, ids_line) && ids_line.substr(0, ids_line.find('\t')) != text_name) {
    }
    ASSERT_FALSE(ids_file.eof()) << text_name;
    const std::size_t i1 = ids_line.find('\t'), i2 = ids_line.find('\t', i1 + 1);
    const ids plain = parse_ids(ids_line.substr(i1 + 1, i2 - i1 - 1));
    const ids special = parse_ids(ids_line.substr(i2 + 1));
    EXPECT_EQ(*t.decode(plain), from_hex(decoded_line.substr(tab1 + 1, tab2 - tab1 - 1))) << name << " " << text_name;
    EXPECT_EQ(*t.decode(special, decode_options{false, true}), from_hex(decoded_line.substr(tab2 + 1)))
        << name << " " << text_name << " (unparse_special)";
    ++decodes;
  }
  EXPECT_GE(decodes, 250u) << "tests/model/data/vocab_decode_" << name << ".txt";
}

TEST(VocabReferences, LlamaBpe) {
  SKIP_WITHOUT_VOCABS();
  expect_references("llama-bpe");
}
TEST(VocabReferences, Qwen2) {
  SKIP_WITHOUT_VOCABS();
  expect_references("qwen2");
}
TEST(VocabReferences, Gpt2) {
  SKIP_WITHOUT_VOCABS();
  expect_references("gpt-2");
}
TEST(VocabReferences, Smollm) {
  SKIP_WITHOUT_VOCABS();
  expect_references("smollm");
}
TEST(VocabReferences, Phi3) {
  SKIP_WITHOUT_VOCABS();
  expect_references("phi-3");
}

TEST(VocabReferences, SentencePieceWithoutSpacePrefix) {
  SKIP_WITHOUT_VOCABS();
  expect_references("llama2-no-space-prefix");
}

TEST(VocabFlags, Llama3AddsBosAndEndsOnItsMarkers) {
  SKIP_WITHOUT_VOCABS();
  auto l = load("llama-bpe");
  ASSERT_TRUE(l.vocab.ok()) << l.vocab.error().c_str();
  const tokenizer t{std::move(*l.vocab)};
  const auto& v = t.vocab();
  EXPECT_EQ(v.size(), 128256u);
  EXPECT_EQ(v.settings().pre, hedge::model::pre_tokenizer::llama3);
  EXPECT_TRUE(v.settings().add_bos);
  EXPECT_EQ(v.settings().bos, 128000);
  EXPECT_EQ(encode_ids(t, "Hello world", {}), (ids{128000, 9906, 1917}));
  // (Llama 3.0's vocabulary: <|eom_id|> came with 3.1.)
  for (const char* marker : {"<|end_of_text|>", "<|eot_id|>"}) {
    const token_id id = v.find(marker);
    ASSERT_NE(id, hedge::model::no_token) << marker;
    EXPECT_TRUE(v.is_end_of_generation(id)) << marker;
  }
  EXPECT_FALSE(v.is_end_of_generation(v.find("<|start_header_id|>")));
  // Control pieces render only when asked.
  const token_id eot = v.find("<|eot_id|>");
  EXPECT_EQ(*t.piece(eot), "");
  EXPECT_EQ(*t.piece(eot, {.unparse_special = true}), "<|eot_id|>");
  EXPECT_EQ(*t.piece(9906), "Hello");
  EXPECT_EQ(*t.piece(1917), " world");
  EXPECT_FALSE(t.piece(128256).ok());
}

TEST(VocabFlags, QwenAddsNoBosAndEndsOnImEnd) {
  SKIP_WITHOUT_VOCABS();
  auto l = load("qwen2");
  ASSERT_TRUE(l.vocab.ok()) << l.vocab.error().c_str();
  const tokenizer t{std::move(*l.vocab)};
  const auto& v = t.vocab();
  EXPECT_EQ(v.settings().pre, hedge::model::pre_tokenizer::qwen2);
  EXPECT_FALSE(v.settings().add_bos);
  EXPECT_EQ(encode_ids(t, "Hello", {}), encode_ids(t, "Hello", {.add_special = false}));
  EXPECT_TRUE(v.is_end_of_generation(v.find("<|im_end|>")));
  EXPECT_TRUE(v.is_end_of_generation(v.find("<|endoftext|>")));
  EXPECT_FALSE(v.is_end_of_generation(v.find("<|im_start|>")));
  // parse_special: the markup's markers are one id each.
  const ids special = encode_ids(t, "<|im_start|>user", {.add_special = false, .parse_special = true});
  ASSERT_FALSE(special.empty());
  EXPECT_EQ(special.front(), v.find("<|im_start|>"));
}

TEST(VocabFlags, Phi3IsSentencePieceOf32064) {
  SKIP_WITHOUT_VOCABS();
  auto l = load("phi-3");
  ASSERT_TRUE(l.vocab.ok()) << l.vocab.error().c_str();
  EXPECT_EQ(l.vocab->size(), 32064u);
  EXPECT_EQ(l.vocab->settings().model, hedge::model::tokenizer_model::spm);
  EXPECT_TRUE(l.vocab->is_end_of_generation(l.vocab->find("<|end|>")));
  EXPECT_TRUE(l.vocab->is_end_of_generation(l.vocab->settings().eos));
}

TEST(VocabRefusals, UnknownPreTokenizerIsNamed) {
  SKIP_WITHOUT_VOCABS();
  std::string bytes = with_pre(read_text(vocab_dir + "ggml-vocab-gpt-2.gguf"), "falcon");
  const auto storage = hedge::test::aligned_copy(std::as_bytes(std::span<const char>(bytes)));
  auto gguf = hedge::model::gguf_file::parse({reinterpret_cast<const std::byte*>(storage.data()), bytes.size()});
  ASSERT_TRUE(gguf.ok()) << gguf.error().c_str();
  auto v = hedge::model::read_gguf_vocabulary(*gguf);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().code(), hedge::errc::unsupported);
  EXPECT_NE(std::string(v.error().message()).find("\"falcon\""), std::string::npos) << v.error().c_str();
}

TEST(VocabEncode, BpeTouchesNoHeapWithAWorkspace) {
  SKIP_WITHOUT_VOCABS();
  auto l = load("qwen2");
  ASSERT_TRUE(l.vocab.ok());
  const tokenizer t{std::move(*l.vocab)};
  const std::string text = "The quick brown fox's 12345 jumps\n\n  over <|im_end|> the lazy dog. Ünïcödé ✓ 🦙 \xff";
  std::vector<std::byte> workspace(tokenizer::workspace_bytes(text.size()));
  std::vector<token_id> out(t.max_tokens(text.size()));
  std::size_t n = 0;
  {
    hedge::test::alloc_scope scope;
    auto r = t.encode(text, out, workspace, {.add_special = true, .parse_special = true});
    ASSERT_TRUE(r.ok());
    n = *r;
    EXPECT_EQ(scope.count(), 0u);
  }
  out.resize(n);
  EXPECT_EQ(out, encode_ids(t, text, {.add_special = true, .parse_special = true}));
  // Too small an output is an error, not an overrun.
  std::vector<token_id> small(3);
  EXPECT_FALSE(t.encode(text, small, workspace).ok());
}

}  // namespace
