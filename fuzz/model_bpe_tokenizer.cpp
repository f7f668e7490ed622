// Byte-level BPE encode and decode on arbitrary bytes, over a small vocabulary (the 256
// byte tokens, a few merges whose results are tokens, a control and a user-defined piece),
// with each pre-tokenizer and with or without parse_special: never crashes, every id is in
// range, the ids fit max_tokens, encode touches only the caller's workspace, and
// decode(encode(x)) == x for valid UTF-8 (every byte is spelled, so nothing is lost).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/model/byte_unicode.hpp"
#include "hedge/model/tokenizer.hpp"

namespace {

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (n == 0 || n > s.size() - i) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    const std::uint32_t c1 = static_cast<unsigned char>(s[i + 1 < s.size() ? i + 1 : i]);
    if ((b == 0xE0 && c1 < 0xA0) || (b == 0xED && c1 >= 0xA0) || (b == 0xF0 && c1 < 0x90) || (b == 0xF4 && c1 >= 0x90)) return false;
    i += n;
  }
  return true;
}

/// A byte's spelling (its GPT-2 code point as UTF-8).
std::string spell(unsigned char b) {
  char out[2];
  return {out, hedge::model::byte_unicode::encode(b, out)};
}

struct fixture {
  std::vector<std::string> pieces, merges;
  hedge::model::tokenizer by_pre[4];

  fixture() {
    for (int b = 0; b < 256; ++b) pieces.push_back(spell(static_cast<unsigned char>(b)));
    const std::string space = spell(' ');
    // merges "LEFT RIGHT"; each result is a piece too
    for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
             {"a", "b"}, {space, "a"}, {space + "a", "b"}, {"b", "a"}, {"ab", "ab"}, {"1", "2"}, {space, space}, {"\xC3\xA4", "x"}}) {
      merges.push_back(l + " " + r);
      pieces.push_back(l + r);
    }
    merges.push_back("nospace");  // no split: skipped, as llama.cpp
    pieces.push_back("<|ctl|>");
    pieces.push_back("<tool>");
    const hedge::model::pre_tokenizer kinds[4] = {hedge::model::pre_tokenizer::gpt2, hedge::model::pre_tokenizer::llama3,
                                                  hedge::model::pre_tokenizer::qwen2, hedge::model::pre_tokenizer::smollm};
    for (int k = 0; k < 4; ++k) by_pre[k] = make(kinds[k]);
  }

  hedge::model::tokenizer make(hedge::model::pre_tokenizer pre) const {
    hedge::model::vocabulary_settings s;
    s.model = hedge::model::tokenizer_model::bpe;
    s.pre = pre;
    s.ignore_merges = pre == hedge::model::pre_tokenizer::llama3;
    s.bos = static_cast<hedge::model::token_id>(pieces.size() - 2);
    s.eos = s.bos;
    s.unk = hedge::model::no_token;
    s.add_bos = true;
    s.add_space_prefix = false;
    s.escape_whitespace = false;
    auto m = hedge::model::bpe_merges::build(merges.size(), [&](std::size_t i) -> hedge::result<std::string_view> { return std::string_view(merges[i]); });
    if (!m) std::abort();
    auto v = hedge::model::vocabulary::build(
        pieces.size(),
        [&](std::size_t i) -> hedge::result<hedge::model::token_record> {
          hedge::model::token_record r{pieces[i], 0.0f, hedge::model::token_type::normal};
          if (pieces[i] == "<|ctl|>") r.type = hedge::model::token_type::control;
          if (pieces[i] == "<tool>") r.type = hedge::model::token_type::user_defined;
          return r;
        },
        s, std::move(*m));
    if (!v) std::abort();
    return hedge::model::tokenizer{std::move(*v)};
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fixture f;
  if (size == 0) return 0;
  const hedge::model::tokenizer& t = f.by_pre[data[0] & 3];
  const bool bos = data[0] & 4, special = data[0] & 8;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::byte> workspace(hedge::model::tokenizer::workspace_bytes(text.size()));
  std::vector<hedge::model::token_id> ids(t.max_tokens(text.size()));
  auto n = t.encode(text, ids, workspace, {.add_special = bos, .parse_special = special});
  if (!n) std::abort();
  ids.resize(*n);
  for (auto id : ids)
    if (!t.vocab().contains(id)) std::abort();
  const std::span<const hedge::model::token_id> body = std::span(ids).subspan(bos ? 1 : 0);
  auto back = t.decode(body, hedge::model::decode_options{false, true});
  if (!back) std::abort();
  if (valid_utf8(text) && *back != text) std::abort();
  return 0;
}
