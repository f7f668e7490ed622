// The tokenizer: llama.cpp's SPM rules on small hand-made vocabularies (merge order,
// ties, byte fallback, space prefix, user-defined pieces, decode and streaming decode),
// errors, no heap with a caller workspace; then the real vocabularies: Llama 2's
// 32,000 pieces against the ids llama.cpp gave on tests/model/data/tokenizer_texts.jsonl,
// and stories260K's (GGUF and tokenizer.bin) against llama2.c's reference prompt ids.
#include "hedge/model/tokenizer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/llama2c_tokenizer.hpp"
#include "support/alloc_counter.hpp"

namespace {

using hedge::errc;
using hedge::model::decode_options;
using hedge::model::encode_options;
using hedge::model::stream_decoder;
using hedge::model::token_id;
using hedge::model::token_record;
using hedge::model::token_type;
using hedge::model::tokenizer;
using hedge::model::vocabulary;
using hedge::model::vocabulary_settings;

using ids = std::vector<token_id>;

/// A vocabulary of <unk>, <s>, </s>, the 256 byte tokens (ids 3..258) and `extra` pieces from id 259.
struct small_vocab {
  std::vector<std::string> names;
  std::vector<token_record> records;

  explicit small_vocab(std::vector<std::pair<std::string, float>> extra,
                       std::vector<std::pair<std::string, token_type>> typed = {}) {
    names = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
      char name[7];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      names.emplace_back(name);
    }
    for (auto& e : extra) names.push_back(e.first);
    for (auto& t : typed) names.push_back(t.first);
    records.resize(names.size());
    records[0].type = token_type::unknown;
    records[1].type = records[2].type = token_type::control;
    for (int b = 0; b < 256; ++b) records[3 + b].type = token_type::byte;
    for (std::size_t i = 0; i < extra.size(); ++i) records[259 + i].score = extra[i].second;
    for (std::size_t i = 0; i < typed.size(); ++i) records[259 + extra.size() + i].type = typed[i].second;
    for (std::size_t i = 0; i < names.size(); ++i) records[i].piece = names[i];
  }

  tokenizer make(vocabulary_settings settings = {}) const {
    auto v = vocabulary::build(records.size(), [&](std::size_t i) -> hedge::result<token_record> { return records[i]; }, settings);
    EXPECT_TRUE(v.ok());
    return tokenizer{std::move(*v)};
  }
};

ids encode(const tokenizer& t, std::string_view text, bool bos = false) {
  auto r = t.encode(text, encode_options{bos});
  EXPECT_TRUE(r.ok()) << r.error().c_str();
  return r ? *r : ids{};
}

const std::string u2581 = "\xE2\x96\x81";

TEST(Tokenizer, MergesTheHighestScoringPairFirst) {
  // "▁ab": pieces ▁a (-5), ab (-1), ▁ab (-2). ab wins first, then ▁ + ab -> ▁ab.
  small_vocab v({{u2581, -10}, {"a", -10}, {"b", -10}, {u2581 + "a", -5}, {"ab", -1}, {u2581 + "ab", -2}});
  const tokenizer t = v.make();
  EXPECT_EQ(encode(t, "ab"), (ids{264}));
  // Without ▁ab, ab still merges first, leaving ▁ alone.
  small_vocab w({{u2581, -10}, {"a", -10}, {"b", -10}, {u2581 + "a", -5}, {"ab", -1}});
  EXPECT_EQ(encode(w.make(), "ab"), (ids{259, 263}));
}

TEST(Tokenizer, EqualScoresMergeTheLeftmostPair) {
  small_vocab v({{"a", -10}, {"aa", -1}});
  vocabulary_settings s;
  s.add_space_prefix = false;
  const tokenizer t = v.make(s);
  EXPECT_EQ(encode(t, "aaa"), (ids{260, 259}));
  EXPECT_EQ(encode(t, "aaaaa"), (ids{260, 260, 259}));
}

TEST(Tokenizer, UnknownCharactersFallBackToBytes) {
  small_vocab v({{u2581, -1}, {"x", -1}});
  const tokenizer t = v.make();
  // "é" is C3 A9: no piece, so its two byte tokens.
  EXPECT_EQ(encode(t, "x\xC3\xA9"), (ids{259, 260, 3 + 0xC3, 3 + 0xA9}));
  // A lone lead byte takes the next bytes as its character (llama.cpp's unicode_len_utf8).
  EXPECT_EQ(encode(t, "\xE4xx"), (ids{259, 3 + 0xE4, 3 + 'x', 3 + 'x'}));
}

TEST(Tokenizer, BosEosAndTheSpacePrefix) {
  small_vocab v({{u2581, -1}, {"x", -1}});
  vocabulary_settings s;
  s.add_eos = true;
  const tokenizer t = v.make(s);
  EXPECT_EQ(encode(t, "x", true), (ids{1, 259, 260, 2}));
  EXPECT_EQ(encode(t, "", true), (ids{1, 2}));
  EXPECT_EQ(encode(t, "", false), (ids{}));
  s.add_space_prefix = false;
  EXPECT_EQ(encode(v.make(s), "x"), (ids{260}));
}

TEST(Tokenizer, UserDefinedPiecesSplitTheTextAndControlPiecesDoNot) {
  small_vocab v({{u2581, -1}, {"x", -1}, {"<", -1}, {">", -1}, {"s", -1}},
                {{"<tool>", token_type::user_defined}, {"<s>", token_type::control}});
  const tokenizer t = v.make();
  const token_id tool = 264;
  // The text after a user-defined piece gets a space prefix again, as llama.cpp does.
  EXPECT_EQ(encode(t, "x<tool>x"), (ids{259, 260, tool, 259, 260}));
  EXPECT_EQ(encode(t, "<tool>"), (ids{tool}));
  // "<s>" in the text is plain text with parse_special = false... unless a merge makes it:
  // there is no "<s" or "s>" piece here, so it stays three pieces.
  EXPECT_EQ(encode(t, "<s>"), (ids{259, 261, 263, 262}));
}

TEST(Tokenizer, DecodeFollowsLlamaCppsDetokenize) {
  small_vocab v({{u2581, -1}, {"x", -1}, {u2581 + "x", -1}});
  const tokenizer t = v.make();
  EXPECT_EQ(*t.decode(ids{261}), "x");                 // the first piece's space is dropped
  EXPECT_EQ(*t.decode(ids{1, 261}), " x");             // BOS first: llama.cpp keeps the space
  EXPECT_EQ(*t.decode(ids{1, 261}, decode_options{true, false}), " x");
  EXPECT_EQ(*t.decode(ids{1, 261, 2}, decode_options{false, true}), "<s> x</s>");
  EXPECT_EQ(*t.decode(ids{3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  auto bad = t.decode(ids{261, 999});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), errc::out_of_range);
  char small[1];
  auto too_small = t.decode(ids{261, 261}, small);
  ASSERT_FALSE(too_small.ok());
  EXPECT_EQ(too_small.error().code(), errc::capacity_exceeded);
}

TEST(Tokenizer, StreamDecoderNeverSplitsACharacter) {
  small_vocab v({{u2581, -1}, {"x", -1}});
  const tokenizer t = v.make();
  // "x" then 🦙 (F0 9F A6 99) as four byte tokens, then "x", then a truncated é.
  const ids input{260, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99, 260, 3 + 0xC3};
  stream_decoder d(t);
  std::vector<std::string> parts;
  auto sink = [&](std::string_view s) { parts.emplace_back(s); };
  for (token_id id : input) ASSERT_TRUE(d.push(id, sink).ok());
  EXPECT_EQ(parts, (std::vector<std::string>{"x", "\xF0\x9F\xA6\x99", "x"}));
  d.finish(sink);
  EXPECT_EQ(parts.back(), "\xC3");
  // An interrupted sequence goes out as it is, before the byte that interrupted it.
  stream_decoder e(t);
  parts.clear();
  for (token_id id : ids{3 + 0xE4, 3 + 0xB8, 260}) ASSERT_TRUE(e.push(id, sink).ok());
  EXPECT_EQ(parts, (std::vector<std::string>{"\xE4\xB8", "x"}));
  EXPECT_FALSE(e.push(100000, sink).ok());
}

TEST(Tokenizer, SpacesBehindLoneLeadBytesFitTheWorkspaceAndMaxTokens) {
  // "\xC0 " escapes to C0 E2 96 81: symbols [C0 E2] [96] [81], four byte tokens for two
  // input bytes. A workspace sized for one symbol per byte overran here.
  small_vocab v({{u2581, -1}, {"x", -1}});
  const tokenizer t = v.make();
  std::string text;
  for (int i = 0; i < 64; ++i) text += "\xC0 ";
  std::vector<std::byte> workspace(tokenizer::workspace_bytes(text.size()));
  std::vector<token_id> out(t.max_tokens(text.size()));
  auto n = t.encode(text, out, workspace, encode_options{false});
  ASSERT_TRUE(n.ok()) << n.error().c_str();
  EXPECT_EQ(*n, 1 + 4 * 64u);
  for (std::size_t i = 0; i < *n; ++i) EXPECT_TRUE(t.vocab().contains(out[i])) << i;
}

TEST(Tokenizer, EncodeReportsSmallBuffers) {
  small_vocab v({{u2581, -1}, {"x", -1}});
  const tokenizer t = v.make();
  std::vector<std::byte> workspace(tokenizer::workspace_bytes(3) - 1);
  token_id out[8];
  auto r = t.encode("xxx", out, workspace);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), errc::capacity_exceeded);
  workspace.resize(tokenizer::workspace_bytes(3));
  auto full = t.encode("xxx", std::span<token_id>(out, 2), workspace);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), errc::capacity_exceeded);
  EXPECT_LE(*t.encode("xxx", out, workspace), t.max_tokens(3));
}

TEST(Tokenizer, EncodeWithACallerWorkspaceDoesNotAllocate) {
  small_vocab v({{u2581, -1}, {"x", -1}, {"xx", -0.5f}, {u2581 + "x", -0.7f}});
  const tokenizer t = v.make();
  const std::string text = "xx x\xC3\xA9 xxx  x";
  std::vector<std::byte> workspace(tokenizer::workspace_bytes(text.size()));
  std::vector<token_id> out(t.max_tokens(text.size()));
  hedge::test::alloc_scope scope;
  auto n = t.encode(text, out, workspace);
  EXPECT_EQ(scope.count(), 0u);
  ASSERT_TRUE(n.ok());
  EXPECT_GT(*n, 0u);
}

TEST(Tokenizer, EncodeAtMostRefusesInMemoryBoundedByTheLimit) {
  small_vocab v({{u2581, -1}, {"x", -1}, {"xx", -0.5f}, {u2581 + "x", -0.7f}});
  const tokenizer t = v.make();
  const std::string text = "xx x\xC3\xA9 xxx  x";
  const ids all = encode(t, text, true);
  auto within = t.encode_at_most(text, all.size());
  ASSERT_TRUE(within.ok()) << within.error().c_str();
  EXPECT_EQ(*within, all);
  auto over = t.encode_at_most(text, all.size() - 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), errc::capacity_exceeded);
  // Past limit x max_bytes_per_id() bytes no id count fits: refused before any allocation.
  EXPECT_EQ(t.max_bytes_per_id(), 6u);  // "<0xC3>"
  const std::string huge(1u << 20, 'x');
  hedge::test::alloc_scope scope;
  auto refused = t.encode_at_most(huge, huge.size() / 6 - 1);
  EXPECT_EQ(scope.count(), 0u);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), errc::capacity_exceeded);
  // Within that bound the text is encoded, and then its ids are counted.
  EXPECT_EQ(t.encode_at_most(std::string(60, 'x'), 10).error().code(), errc::capacity_exceeded);
  EXPECT_TRUE(t.encode_at_most(std::string(60, 'x'), 60).ok());
}

TEST(Tokenizer, VocabularyLookupAnswersTheLastDuplicate) {
  small_vocab v({{"dup", -1}, {"dup", -2}});
  const tokenizer t = v.make();
  EXPECT_EQ(t.vocab().find("dup"), 260);
  EXPECT_EQ(t.vocab().find(""), hedge::model::no_token);
  EXPECT_EQ(t.vocab().byte_token(0x41), 3 + 0x41);
}

// --- llama2.c tokenizer.bin --------------------------------------------------------

std::vector<std::byte> tokenizer_bin(const std::vector<std::pair<std::string, float>>& tokens) {
  std::vector<std::byte> out(4);
  out[0] = std::byte{16};
  for (auto& [piece, score] : tokens) {
    std::byte header[8];
    std::memcpy(header, &score, 4);
    const auto length = static_cast<std::int32_t>(piece.size());
    std::memcpy(header + 4, &length, 4);
    out.insert(out.end(), header, header + 8);
    for (char c : piece) out.push_back(static_cast<std::byte>(c));
  }
  return out;
}

TEST(Llama2cTokenizer, ReadsPiecesScoresAndTypes) {
  const auto file = tokenizer_bin({{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}, {"<0x41>", 0}, {" ", -1}, {"a", -2}, {" a", -0.5f}});
  auto v = hedge::model::read_llama2c_tokenizer(file);
  ASSERT_TRUE(v.ok()) << v.error().c_str();
  EXPECT_EQ(v->size(), 7u);
  EXPECT_EQ((*v)[3].type, token_type::byte);
  EXPECT_EQ((*v)[1].type, token_type::control);
  const tokenizer t{std::move(*v)};
  EXPECT_EQ(encode(t, "aA", true), (ids{1, 6, 3}));
}

TEST(Llama2cTokenizer, RejectsMalformedFiles) {
  const auto good = tokenizer_bin({{"<unk>", 0}, {"ab", -1}});
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    if (cut == 4 + 8 + 5) continue;  // a whole first entry: a valid 1-token file
    auto v = hedge::model::read_llama2c_tokenizer(std::span(good).first(cut));
    EXPECT_FALSE(v.ok()) << "cut at " << cut;
    if (!v) {
      EXPECT_EQ(v.error().code(), errc::parse_error);
    }
  }
  auto negative = good;
  negative[4 + 4 + 3] = std::byte{0x80};
  auto r = hedge::model::read_llama2c_tokenizer(negative);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("length"), std::string_view::npos) << r.error().c_str();
  EXPECT_FALSE(hedge::model::read_llama2c_tokenizer(good, 3).ok());
  EXPECT_TRUE(hedge::model::read_llama2c_tokenizer(good, 2).ok());
}

// --- the real vocabularies ---------------------------------------------------------

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<const std::byte> bytes_of(const std::vector<char>& v) { return {reinterpret_cast<const std::byte*>(v.data()), v.size()}; }

const std::string models = std::string(hedge::test::shared_dir()) + "/models/";

#define SKIP_WITHOUT(path) \
  if (!std::ifstream(path).good()) GTEST_SKIP() << (path) << " is absent (../shared/models)"

/// The string value of "key" in one JSON line, JSON escapes decoded (\uXXXX as UTF-8).
std::string json_string(const std::string& line, const std::string& key) {
  std::size_t start = line.find("\"" + key + "\":");
  if (start == std::string::npos) return {};
  start += key.size() + 3;
  while (start < line.size() && line[start] == ' ') ++start;
  if (start == line.size() || line[start] != '"') return {};
  std::string out;
  auto put = [&](std::uint32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | c >> 6);
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | c >> 12);
      out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | c >> 18);
      out += static_cast<char>(0x80 | (c >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (c >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  };
  for (std::size_t i = start + 1; i < line.size() && line[i] != '"'; ++i) {
    if (line[i] != '\\') {
      out += line[i];
      continue;
    }
    const char e = line[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        std::uint32_t c = std::stoul(line.substr(i + 1, 4), nullptr, 16);
        i += 4;
        if (c >= 0xD800 && c < 0xDC00 && line.compare(i + 1, 2, "\\u") == 0) {
          const std::uint32_t low = std::stoul(line.substr(i + 3, 4), nullptr, 16);
          c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        }
        put(c);
        break;
      }
      default: out += e;
    }
  }
  return out;
}

std::string base64_decode(const std::string& s) {
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  for (char c : s) {
    const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* p = std::strchr(table, c);
    if (c == '=' || p == nullptr) break;
    bits = bits << 6 | static_cast<std::uint32_t>(p - table);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out += static_cast<char>(bits >> count & 0xFF);
    }
  }
  return out;
}

ids json_ids(const std::string& line) {
  ids out;
  const std::size_t at = line.find("\"ids\":[");
  std::istringstream in(line.substr(at + 7));
  token_id id;
  char sep;
  while (in >> id) {
    out.push_back(id);
    if (!(in >> sep) || sep != ',') break;
  }
  return out;
}

struct reference_text {
  std::string name, text;
  bool valid_utf8;
  ids expected;
};

std::vector<reference_text> reference_texts() {
  const std::string data = std::string(hedge::test::source_dir()) + "/tests/model/data/";
  std::ifstream texts(data + "tokenizer_texts.jsonl"), ids_file(data + "llama2_vocab_ids.jsonl");
  std::vector<reference_text> out;
  std::string text_line, ids_line;
  while (std::getline(texts, text_line) && std::getline(ids_file, ids_line)) {
    reference_text r;
    r.name = json_string(text_line, "name");
    r.valid_utf8 = text_line.find("\"base64\"") == std::string::npos;
    r.text = r.valid_utf8 ? json_string(text_line, "text") : base64_decode(json_string(text_line, "base64"));
    EXPECT_EQ(json_string(ids_line, "name"), r.name);
    r.expected = json_ids(ids_line);
    out.push_back(std::move(r));
  }
  return out;
}

TEST(TokenizerLlama2Vocab, MatchesLlamaCppOnEveryReferenceText) {
  SKIP_WITHOUT(models + "llama2-vocab.gguf");
  const auto file = read_file(models + "llama2-vocab.gguf");
  auto gguf = hedge::model::gguf_file::parse(bytes_of(file));
  ASSERT_TRUE(gguf.ok()) << gguf.error().c_str();
  auto v = hedge::model::read_gguf_vocabulary(*gguf);
  ASSERT_TRUE(v.ok()) << v.error().c_str();
  ASSERT_EQ(v->size(), 32000u);
  const tokenizer t{std::move(*v)};
  const auto texts = reference_texts();
  ASSERT_GE(texts.size(), 80u);
  for (const auto& r : texts) {
    EXPECT_EQ(encode(t, r.text, false), r.expected) << r.name;
    ids with_bos{1};
    with_bos.insert(with_bos.end(), r.expected.begin(), r.expected.end());
    EXPECT_EQ(encode(t, r.text, true), with_bos) << r.name;
    // Every byte has its token, so valid UTF-8 without a literal ▁ (which decodes as a
    // space) decodes back to the text, control pieces rendered. Invalid UTF-8 need not: a
    // lone lead byte swallows the escaped space after it, which then decodes as bytes.
    if (r.valid_utf8 && r.text.find(u2581) == std::string::npos) {
      EXPECT_EQ(*t.decode(r.expected, decode_options{false, true}), r.text) << r.name;
    }
  }
}

TEST(TokenizerLlama2Vocab, DecodesAsLlamaCppsDetokenize) {
  SKIP_WITHOUT(models + "llama2-vocab.gguf");
  const auto file = read_file(models + "llama2-vocab.gguf");
  auto gguf = hedge::model::gguf_file::parse(bytes_of(file));
  ASSERT_TRUE(gguf.ok());
  auto v = hedge::model::read_gguf_vocabulary(*gguf);
  ASSERT_TRUE(v.ok());
  const tokenizer t{std::move(*v)};
  // llama_detokenize (remove_special = false) through node-llama-cpp's detokenize(ids, special).
  const struct {
    ids input;
    const char* plain;
    const char* special;
  } cases[] = {
      {{1, 15043}, " Hello", "<s> Hello"},
      {{15043, 3186}, "Hello world", "Hello world"},
      {{1, 29871, 29871, 15043}, "   Hello", "<s>   Hello"},
      {{2, 15043}, " Hello", "</s> Hello"},
      {{0, 15043}, " Hello", "<unk> Hello"},
      {{259, 15043}, "  Hello", "  Hello"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(*t.decode(c.input), c.plain);
    EXPECT_EQ(*t.decode(c.input, decode_options{false, true}), c.special);
  }
}

TEST(TokenizerLlama2Vocab, StreamingDecodeHandsOutWholeCharacters) {
  SKIP_WITHOUT(models + "llama2-vocab.gguf");
  const auto file = read_file(models + "llama2-vocab.gguf");
  auto gguf = hedge::model::gguf_file::parse(bytes_of(file));
  ASSERT_TRUE(gguf.ok());
  auto v = hedge::model::read_gguf_vocabulary(*gguf);
  ASSERT_TRUE(v.ok());
  const tokenizer t{std::move(*v)};
  for (const auto& r : reference_texts()) {
    if (!r.valid_utf8 || r.text.find(u2581) != std::string::npos) continue;
    stream_decoder d(t, decode_options{false, true});
    std::string joined;
    for (token_id id : r.expected) {
      ASSERT_TRUE(d.push(id, [&](std::string_view s) {
                     // Each part is whole UTF-8: it does not start with a continuation byte
                     // and its last character is complete.
                     ASSERT_FALSE(s.empty());
                     EXPECT_NE(static_cast<unsigned char>(s.front()) & 0xC0, 0x80) << r.name;
                     joined.append(s);
                   }).ok());
    }
    d.finish([&](std::string_view s) { joined.append(s); });
    EXPECT_EQ(joined, r.text) << r.name;
  }
}

/// The prompt ids (line 1, "# prompt_tokens: ...") of a reference .ids.txt.
ids prompt_ids(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::istringstream words(line.substr(line.find(':') + 1));
  ids out;
  for (token_id id; words >> id;) out.push_back(id);
  return out;
}

TEST(TokenizerStories, GgufAndTokenizerBinReproduceTheReferencePrompts) {
  SKIP_WITHOUT(models + "stories260K.gguf");
  const auto gguf_bytes = read_file(models + "stories260K.gguf");
  auto gguf = hedge::model::gguf_file::parse(bytes_of(gguf_bytes));
  ASSERT_TRUE(gguf.ok()) << gguf.error().c_str();
  auto from_gguf = hedge::model::read_gguf_vocabulary(*gguf);
  ASSERT_TRUE(from_gguf.ok()) << from_gguf.error().c_str();
  const auto bin_bytes = read_file(models + "tok512.bin");
  auto from_bin = hedge::model::read_llama2c_tokenizer(bytes_of(bin_bytes), 512);
  ASSERT_TRUE(from_bin.ok()) << from_bin.error().c_str();
  const tokenizer a{std::move(*from_gguf)}, b{std::move(*from_bin)};
  const std::pair<const char*, const char*> cases[] = {
      {"llama2c_prompt_onceuponatime_n256.ids.txt", "Once upon a time"},
      {"llama2c_noprompt_n256.ids.txt", ""},
  };
  for (auto [file, prompt] : cases) {
    const ids expected = prompt_ids(models + "reference/" + file);
    ASSERT_FALSE(expected.empty()) << file;
    EXPECT_EQ(encode(a, prompt, true), expected) << file;
    EXPECT_EQ(encode(b, prompt, true), expected) << file;
  }
}

}  // namespace
