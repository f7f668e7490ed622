// Chat templates: the format recognised from a file's tokenizer.chat_template, and each
// family's prompt ids equal to llama.cpp tokenizing the rendered prompt text with
// parse_special (the tokenizer's ids are checked against llama.cpp in vocab_test.cpp), on
// the Qwen2, Llama 3 and Phi-3 vocabularies of ../shared/models/vocab/.
#include "hedge/model/chat_template.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "support/model_files.hpp"

namespace {

using hedge::model::chat_format;
using hedge::model::chat_message;
using hedge::model::chat_renderer;
using hedge::model::token_id;
using hedge::model::tokenizer;

const std::string vocab_dir = hedge::test::models_dir + "vocab/";

TEST(ChatTemplate, RecognisedByMarker) {
  using hedge::model::detect_chat_format;
  EXPECT_EQ(detect_chat_format("{% for m in messages %}<|im_start|>{{ m.role }}"), chat_format::chatml);
  EXPECT_EQ(detect_chat_format("<|start_header_id|>' + message['role'] + '<|end_header_id|>"), chat_format::llama3);
  EXPECT_EQ(detect_chat_format("{{ '<start_of_turn>' + role + '\\n' }}"), chat_format::gemma);
  EXPECT_EQ(detect_chat_format("{{'<|user|>' + '\\n' + message['content'] + '<|end|>'}}"), chat_format::phi3);
  EXPECT_EQ(detect_chat_format("{{ '<|user|>\\n' + message['content'] + eos_token }}"), chat_format::zephyr);
  EXPECT_EQ(detect_chat_format("[INST] {{ m }} [/INST]"), chat_format::llama2);
  EXPECT_EQ(detect_chat_format("{{ jinja nobody knows }}"), chat_format::plain);
  EXPECT_EQ(detect_chat_format(""), chat_format::plain);
  for (const auto f : {chat_format::plain, chat_format::chatml, chat_format::llama3, chat_format::gemma, chat_format::phi3,
                       chat_format::llama2, chat_format::zephyr})
    EXPECT_EQ(hedge::model::chat_format_named(hedge::model::to_string(f)), f);
  EXPECT_FALSE(hedge::model::chat_format_named("jinja").has_value());
}

struct loaded {
  std::vector<float> storage;
  tokenizer tok;
  bool ok = false;
};

loaded load(const std::string& name) {
  loaded l;
  std::size_t bytes = 0;
  l.storage = hedge::test::read_aligned(vocab_dir + "ggml-vocab-" + name + ".gguf", bytes);
  auto gguf = hedge::model::gguf_file::parse({reinterpret_cast<const std::byte*>(l.storage.data()), bytes});
  if (!gguf) return l;
  auto v = hedge::model::read_gguf_vocabulary(*gguf);
  if (!v) return l;
  l.tok = tokenizer{std::move(*v)};
  l.ok = true;
  return l;
}

#define SKIP_WITHOUT_VOCABS()                                                         \
  if (!std::ifstream(vocab_dir + "ggml-vocab-qwen2.gguf").good()) \
  GTEST_SKIP() << vocab_dir << " is absent (../shared/models/vocab)"

const std::vector<chat_message> conversation = {
    {"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "2+2?"}};

/// llama.cpp's ids of the rendered prompt: tokenized with parse_special and add_special.
std::vector<token_id> as_llama_cpp(const tokenizer& t, const std::string& prompt) {
  auto ids = t.encode(prompt, {.add_special = true, .parse_special = true});
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<token_id>{};
}

TEST(ChatTemplate, ChatMLOnQwen) {
  SKIP_WITHOUT_VOCABS();
  const auto l = load("qwen2");
  ASSERT_TRUE(l.ok);
  const chat_renderer r(l.tok, chat_format::chatml);
  auto ids = r.render(conversation);
  ASSERT_TRUE(ids.ok()) << ids.error().c_str();
  EXPECT_EQ(*ids, as_llama_cpp(l.tok,
                               "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                               "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                               "<|im_start|>assistant\n"));
  const auto& stops = r.stop_tokens();
  EXPECT_NE(std::find(stops.begin(), stops.end(), l.tok.vocab().find("<|im_end|>")), stops.end());
}

TEST(ChatTemplate, Llama3) {
  SKIP_WITHOUT_VOCABS();
  const auto l = load("llama-bpe");
  ASSERT_TRUE(l.ok);
  const chat_renderer r(l.tok, chat_format::llama3);
  auto ids = r.render(conversation);
  ASSERT_TRUE(ids.ok()) << ids.error().c_str();
  // The vocabulary adds <|begin_of_text|> as BOS: the prompt text starts after it.
  EXPECT_EQ(*ids, as_llama_cpp(l.tok,
                               "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                               "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                               "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n"));
  EXPECT_EQ(ids->front(), 128000);
  const auto& stops = r.stop_tokens();
  EXPECT_NE(std::find(stops.begin(), stops.end(), l.tok.vocab().find("<|eot_id|>")), stops.end());
}

TEST(ChatTemplate, Phi3DropsTheWhiteSpaceAfterItsMarkers) {
  SKIP_WITHOUT_VOCABS();
  const auto l = load("phi-3");
  ASSERT_TRUE(l.ok);
  const chat_renderer r(l.tok, chat_format::phi3);
  auto ids = r.render(conversation);
  ASSERT_TRUE(ids.ok()) << ids.error().c_str();
  EXPECT_EQ(*ids, as_llama_cpp(l.tok,
                               "<|system|>\nBe brief.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello!<|end|>\n"
                               "<|user|>\n2+2?<|end|>\n<|assistant|>\n"));
  const auto& stops = r.stop_tokens();
  EXPECT_NE(std::find(stops.begin(), stops.end(), l.tok.vocab().find("<|end|>")), stops.end());
}

TEST(ChatTemplate, GemmaFoldsTheSystemMessageIntoTheFirstUserTurn) {
  SKIP_WITHOUT_VOCABS();
  // No Gemma vocabulary here: on Qwen's its markers are text, so the rendered text shows.
  const auto l = load("qwen2");
  ASSERT_TRUE(l.ok);
  const chat_renderer r(l.tok, chat_format::gemma);
  auto ids = r.render(conversation);
  ASSERT_TRUE(ids.ok()) << ids.error().c_str();
  EXPECT_EQ(*l.tok.decode(*ids),
            "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n");
}

}  // namespace
