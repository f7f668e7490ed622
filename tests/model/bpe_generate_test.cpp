// A model with a byte-level BPE vocabulary end to end, as the tools load one: a synthetic
// llama GGUF (random weights) carrying Qwen2's or Llama 3's tokenizer.ggml.* keys, parsed,
// its vocabulary read as BPE, a chat prompt rendered in the file's family's template, and
// greedy generation through the generator: the prompt ids are the tokenizer's, the
// streamed text is the decode of the generated ids, and generation ends on the
// vocabulary's end-of-generation set when the model emits one of its markers.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "hedge/core/executor.hpp"
#include "hedge/model/chat_template.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/generate.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/synthetic_llama.hpp"
#include "hedge/model/weights.hpp"
#include "support/model_files.hpp"

namespace {

using namespace hedge::model;

void generate_with(const std::string& vocab_name, chat_format format) {
  const std::string path = hedge::test::models_dir + "vocab/ggml-vocab-" + vocab_name + ".gguf";
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " is absent (../shared/models/vocab)";
  std::size_t vocab_bytes = 0;
  const auto vocab_storage = hedge::test::read_aligned(path, vocab_bytes);
  auto vocab_file = gguf_file::parse({reinterpret_cast<const std::byte*>(vocab_storage.data()), vocab_bytes});
  ASSERT_TRUE(vocab_file.ok()) << vocab_file.error().c_str();
  std::uint32_t tokens = 0;
  gguf_writer w;
  for (const auto& kv : vocab_file->metadata()) {
    if (!kv.key.starts_with("tokenizer.ggml.")) continue;
    w.add_value(kv.key, kv.value);
    if (kv.key == "tokenizer.ggml.tokens") tokens = static_cast<std::uint32_t>(kv.value.size());
  }
  synthetic_llama spec;
  spec.dim = 32;
  spec.hidden_dim = 64;
  spec.heads = spec.kv_heads = 4;
  spec.context = 64;
  spec.vocab = tokens;
  spec.embedding = spec.output = hedge::quant::gguf_type::q8_0;
  synthetic_tensor_bytes tensors;
  ASSERT_TRUE(add_synthetic_llama(w, spec, tensors).ok());
  std::vector<std::byte> bytes;
  ASSERT_TRUE(w.write(bytes).ok());
  const auto storage = hedge::test::aligned_copy(bytes);
  auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(storage.data()), bytes.size()});
  ASSERT_TRUE(file.ok()) << file.error().c_str();
  auto weights = gguf_weights(*file);
  ASSERT_TRUE(weights.ok()) << weights.error().c_str();
  auto vocab = read_gguf_vocabulary(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().c_str();
  ASSERT_EQ(vocab->settings().model, tokenizer_model::bpe);
  const tokenizer tok{std::move(*vocab)};

  auto model = llama<>::make(*weights, {.context = 64});
  ASSERT_TRUE(model.ok()) << model.error().c_str();
  auto gen = generator<llama<>>::make(*model, tok);
  ASSERT_TRUE(gen.ok()) << gen.error().c_str();
  const chat_renderer renderer(tok, format);
  const chat_message hello[] = {{"user", "Hello, how are you?"}};
  const auto prompt = renderer.render(hello);
  ASSERT_TRUE(prompt.ok()) << prompt.error().c_str();
  std::vector<token_id> generated;
  std::string text;
  hedge::exec::serial serial;
  auto session = *model->create_session();
  sampler chooser{sampler_config{}, seeded_random{0}};
  const generation_options options{.max_tokens = 24, .stop_tokens = renderer.stop_tokens()};
  const auto summary = gen->run(session, *prompt, chooser, options, serial, [&](const generated_token& t) {
    if (t.id != no_token) generated.push_back(t.id);
    text += t.text;
    return true;
  });
  ASSERT_TRUE(summary.ok()) << summary.error().c_str();
  EXPECT_GT(summary->generated, 0u);
  // The text streamed is the generated ids' decode (a stop token is not delivered).
  EXPECT_EQ(text, *tok.decode(generated));
  for (const token_id id : generated) EXPECT_FALSE(tok.vocab().is_end_of_generation(id));
}

TEST(BpeGenerate, QwenVocabularyWithChatML) { generate_with("qwen2", chat_format::chatml); }
TEST(BpeGenerate, Llama3VocabularyWithItsTemplate) { generate_with("llama-bpe", chat_format::llama3); }

}  // namespace
