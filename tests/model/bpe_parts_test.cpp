// The parts of the byte-level BPE tokenizer on their own: GPT-2's byte map, llama.cpp's
// UTF-8 reading, the category tables, the merge table's reading of tokenizer.ggml.merges,
// and each pre-tokenizer's cuts on the cases where the four differ.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "hedge/model/bpe_merges.hpp"
#include "hedge/model/byte_unicode.hpp"
#include "hedge/model/pre_tokenizer.hpp"
#include "hedge/model/unicode.hpp"

namespace {

using namespace hedge::model;

TEST(ByteUnicode, PrintableBytesStandForThemselvesTheOthersFollow256) {
  EXPECT_EQ(byte_unicode::code_point('A'), 'A');
  EXPECT_EQ(byte_unicode::code_point('~'), '~');
  EXPECT_EQ(byte_unicode::code_point(0xE9), 0xE9u);
  EXPECT_EQ(byte_unicode::code_point(0x00), 0x100u);
  EXPECT_EQ(byte_unicode::code_point('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_unicode::code_point(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_unicode::code_point(0xAD), 0x143u);  // the last of the 68
  for (unsigned b = 0; b < 256; ++b) EXPECT_EQ(byte_unicode::byte_of(byte_unicode::code_point(static_cast<unsigned char>(b))), static_cast<int>(b));
  EXPECT_EQ(byte_unicode::byte_of(0x144), -1);
  EXPECT_EQ(byte_unicode::byte_of(0xAD), -1);  // soft hyphen is spelled U+0143, so U+00AD spells no byte
  char out[2];
  ASSERT_EQ(byte_unicode::encode(' ', out), 2u);
  EXPECT_EQ(std::string(out, 2), "\xC4\xA0");
}

TEST(Unicode, ReadsUtf8AsLlamaCpp) {
  const auto read = [](std::string_view s) { return unicode::decode_utf8(s.data(), s.size()); };
  EXPECT_EQ(read("A").cpt, 'A');
  EXPECT_EQ(read("\xC3\xA9").cpt, 0xE9u);
  EXPECT_EQ(read("\xC0\x80").cpt, 0u);  // overlong: accepted
  EXPECT_EQ(read("\xC0\x80").length, 2u);
  EXPECT_EQ(read("\xED\xA0\x80").cpt, 0xD800u);  // a surrogate: accepted
  EXPECT_EQ(read("\xF0\x9F\xA6\x99").cpt, 0x1F999u);
  for (std::string_view bad : {"\x80", "\xC3", "\xC3(", "\xE2\x82", "\xF0\x9F\x98", "\xF8\x88\x80\x80\x80", "\xFF", "\xF5\x80\x80\x80"}) {
    EXPECT_EQ(read(bad).cpt, unicode::replacement_character) << bad.size();
    EXPECT_EQ(read(bad).length, 1u);
  }
}

TEST(Unicode, CategoriesAreUnicode15_1) {
  EXPECT_TRUE(unicode::flags_of('a').is_letter());
  EXPECT_TRUE(unicode::flags_of('7').is_number());
  EXPECT_TRUE(unicode::flags_of(0x0663).is_number());     // Arabic-Indic three
  EXPECT_TRUE(unicode::flags_of(0x216B).is_number());     // Roman numeral twelve (Nl)
  EXPECT_TRUE(unicode::flags_of(0x4E2D).is_letter());     // 中
  EXPECT_TRUE(unicode::flags_of(0x2EBF0).is_letter());    // CJK Extension I: 15.1
  EXPECT_EQ(unicode::category_of(0x2FFC), unicode::symbol);  // 15.1
  EXPECT_EQ(unicode::category_of(0x1C89), unicode::undefined);  // 16.0: not yet
  EXPECT_EQ(unicode::category_of(0x0301), unicode::mark);
  EXPECT_EQ(unicode::category_of(0x110000), unicode::undefined);
  EXPECT_TRUE(unicode::flags_of(0x3000).whitespace);
  EXPECT_TRUE(unicode::flags_of(0x85).whitespace);
  EXPECT_FALSE(unicode::flags_of(0x200B).whitespace);  // zero width space is Cf, not White_Space
  EXPECT_FALSE(unicode::code_point_flags{}.any());
  EXPECT_TRUE(unicode::flags_of(0x0378).any());  // unassigned: undefined, still a code point
}

TEST(BpeMerges, FirstRankHoldsUnsplittableAreSkipped) {
  const std::vector<std::string> merges = {"a b", "nospace", "a b", " x", "Ġ t", "ab c d"};
  auto m = bpe_merges::build(merges.size(), [&](std::size_t i) -> hedge::result<std::string_view> { return std::string_view(merges[i]); });
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->rank("a", "b"), 0);
  EXPECT_EQ(m->rank("Ġ", "t"), 4);
  EXPECT_EQ(m->rank("ab", "c d"), 5);  // split at the first space after the first byte
  EXPECT_EQ(m->rank(" x", ""), -1);    // " x" has no space after its first byte: skipped
  EXPECT_EQ(m->rank("b", "a"), -1);
  EXPECT_EQ(m->size(), 3u);
}

/// The words `kind` cuts `text` (valid UTF-8) into.
std::vector<std::string> words(pre_tokenizer kind, std::string_view text) {
  std::vector<std::uint32_t> cpts;
  std::vector<std::size_t> offsets;
  for (std::size_t at = 0; at < text.size();) {
    const auto d = unicode::decode_utf8(text.data() + at, text.size() - at);
    cpts.push_back(d.cpt);
    offsets.push_back(at);
    at += d.length;
  }
  offsets.push_back(text.size());
  std::vector<std::string> out;
  split_words(kind, cpts.data(), cpts.size(), [&](std::size_t b, std::size_t e) { out.emplace_back(text.substr(offsets[b], offsets[e] - offsets[b])); });
  return out;
}

using strings = std::vector<std::string>;

TEST(PreTokenizer, DigitsByFamily) {
  EXPECT_EQ(words(pre_tokenizer::gpt2, "a 12345b"), (strings{"a", " 12345", "b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "a 12345b"), (strings{"a", " ", "123", "45", "b"}));
  EXPECT_EQ(words(pre_tokenizer::qwen2, "a 123b"), (strings{"a", " ", "1", "2", "3", "b"}));
  EXPECT_EQ(words(pre_tokenizer::smollm, "a 123b"), (strings{"a", " ", "1", "2", "3", "b"}));
}

TEST(PreTokenizer, ContractionsAndCase) {
  EXPECT_EQ(words(pre_tokenizer::gpt2, "I'M don't"), (strings{"I", "'", "M", " don", "'t"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "I'M don't"), (strings{"I", "'M", " don", "'t"}));
}

TEST(PreTokenizer, WhiteSpaceAndNewlines) {
  EXPECT_EQ(words(pre_tokenizer::gpt2, "a   b"), (strings{"a", "  ", " b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "a   b"), (strings{"a", "  ", " b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "a \n\n b"), (strings{"a", " \n\n", " b"}));
  EXPECT_EQ(words(pre_tokenizer::gpt2, "a \n\n b"), (strings{"a", " \n\n", " b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "x!!\n\ny"), (strings{"x", "!!\n\n", "y"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "end  "), (strings{"end", "  "}));
}

TEST(PreTokenizer, PunctuationTakesOneLeadingSpace) {
  EXPECT_EQ(words(pre_tokenizer::gpt2, "a ...b"), (strings{"a", " ...", "b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "a ...b"), (strings{"a", " ...", "b"}));
  EXPECT_EQ(words(pre_tokenizer::llama3, "(hello)"), (strings{"(hello", ")"}));
}

TEST(PreTokenizer, NamesAreLlamaCpps) {
  pre_tokenizer p{};
  EXPECT_TRUE(pre_tokenizer_named("llama-bpe", p));
  EXPECT_EQ(p, pre_tokenizer::llama3);
  EXPECT_TRUE(pre_tokenizer_named("qwen2", p));
  EXPECT_EQ(p, pre_tokenizer::qwen2);
  EXPECT_TRUE(pre_tokenizer_named("gpt-2", p));
  EXPECT_EQ(p, pre_tokenizer::gpt2);
  EXPECT_TRUE(pre_tokenizer_named("smollm", p));
  EXPECT_EQ(p, pre_tokenizer::smollm);
  EXPECT_FALSE(pre_tokenizer_named("default", p));
  EXPECT_FALSE(pre_tokenizer_named("qwen35", p));
  EXPECT_FALSE(pre_tokenizer_named("", p));
}

}  // namespace
