// The heap-free load path a firmware image takes (examples/firmware): a GGUF's bytes read in
// place, the layer table, the vocabulary and the model's memory lent by the caller, the
// prompt encoded with a workspace; then greedy decoding. Run here on the host with the
// global operator new counted: the whole path, loading included, allocates nothing, and
// gives what the heap path gives.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/attention/prefill.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/kv/element.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_quantize.hpp"
#include "hedge/model/gguf_vocabulary.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/model/weights.hpp"
#include "support/alloc_counter.hpp"
#include "support/model_files.hpp"

namespace {

using namespace hedge::model;

/// The firmware's model type: Q8_0 (and the F16 fallback of hedge-quantize's Q8_0 mix,
/// F32 norms), f32 KV cache, every byte in caller memory.
using firmware_formats = weight_formats<hedge::quant::f32, hedge::quant::f16, hedge::quant::q8_0>;
using firmware_llama = llama<firmware_formats, hedge::kv::kv_f32, hedge::buffer_storage<std::byte>>;

/// 64-byte aligned bytes, as a static array in a firmware image is.
struct aligned_bytes {
  std::vector<std::byte> storage;
  std::span<std::byte> span;
  explicit aligned_bytes(std::size_t n) : storage(n + 64) {
    const auto at = reinterpret_cast<std::uintptr_t>(storage.data());
    span = {storage.data() + (64 - at % 64) % 64, n};
  }
};

/// stories260K.gguf as `hedge-quantize ... Q8_0` writes it, 4-byte aligned.
struct stories_q8_0 {
  std::size_t bytes = 0;
  std::vector<float> f32 = hedge::test::read_aligned(hedge::test::models_dir + "stories260K.gguf", bytes);
  std::size_t q8_0_bytes = 0;  // set by quantize(), so declared before q8_0
  std::vector<float> q8_0 = quantize();
  gguf_file file = *gguf_file::parse({reinterpret_cast<const std::byte*>(q8_0.data()), q8_0_bytes});

  std::vector<float> quantize() {
    const auto source = gguf_file::parse({reinterpret_cast<const std::byte*>(f32.data()), bytes});
    EXPECT_TRUE(source.ok());
    gguf_writer writer;
    quantized_storage storage;
    std::vector<std::byte> out;
    EXPECT_TRUE(quantize_gguf(*source, quant_mix::q8_0, writer, storage).ok());
    EXPECT_TRUE(writer.write(out).ok());
    q8_0_bytes = out.size();
    return hedge::test::aligned_copy(out);
  }
};

std::string first_line(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  std::getline(in, line);
  return line + "\n";
}

/// The memory the firmware lends, sized on the heap before the counted part.
struct lent_memory {
  std::array<llama_layer, 8> layers{};
  aligned_bytes vocabulary;
  aligned_bytes model;
  aligned_bytes encode_workspace{tokenizer::workspace_bytes(64)};
  std::array<token_id, 64> prompt{};
};

TEST(CallerMemory, Stories260KQ8_0LoadsAndRunsRunCsGreedyTextWithoutTheHeap) {
  SKIP_WITHOUT_MODELS();
  const stories_q8_0 g;
  const auto vocabulary_bytes = gguf_vocabulary_bytes(g.file);
  ASSERT_TRUE(vocabulary_bytes.ok()) << vocabulary_bytes.error().message();
  const llama_options options{.context = 64, .max_prefill = 0};  // as the firmware: no prefill buffers
  std::size_t model_bytes = 0;
  {
    auto heap_weights = gguf_weights(g.file);
    ASSERT_TRUE(heap_weights.ok());
    const auto bytes = firmware_llama::memory_bytes(*heap_weights, options);
    ASSERT_TRUE(bytes.ok()) << bytes.error().message();
    model_bytes = *bytes;
  }
  lent_memory memory{.vocabulary = aligned_bytes(*vocabulary_bytes), .model = aligned_bytes(model_bytes)};
  // run.c -n 61 -i "Once upon a time": the reference's first line, which ends the 61st position.
  const std::string expected = first_line(hedge::test::models_dir + "reference/llama2c_prompt_onceuponatime_n256.txt");
  constexpr std::size_t steps = 61;
  std::array<char, 512> text{};
  std::size_t text_bytes = 0;

  const hedge::test::alloc_scope no_heap;
  auto weights = gguf_weights(g.file, memory.layers);
  ASSERT_TRUE(weights.ok()) << weights.error().message();
  EXPECT_EQ(weights->layers.size(), 5u);
  EXPECT_EQ(weights->layers[0].wq.type, hedge::quant::gguf_type::q8_0);
  auto vocab = read_gguf_vocabulary(g.file, memory.vocabulary.span);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message();
  const tokenizer tok{std::move(*vocab)};
  auto model = firmware_llama::make_in(*weights, options, memory.model.span);
  ASSERT_TRUE(model.ok()) << model.error().message();
  const auto n = tok.encode("Once upon a time", memory.prompt, memory.encode_workspace.span);
  ASSERT_TRUE(n.ok()) << n.error().message();
  const std::span<const token_id> prompt(memory.prompt.data(), *n);
  ASSERT_EQ(prompt.size(), 5u);
  EXPECT_EQ(prompt[1], 403);  // run.c's prompt ids: 1 403 407 261 378
  const auto session = model->create_session();
  ASSERT_TRUE(session.ok());
  auto logits = model->prefill(*session, prompt);
  ASSERT_TRUE(logits.ok()) << logits.error().message();
  // run.c prints each position's next token, the prompt's included, the first without its space.
  const auto print = [&](token_id id, bool after_bos) {
    ASSERT_TRUE(tok.visit_piece(
                       id,
                       [&](std::string_view piece) {
                         for (char c : piece)
                           if (text_bytes + 1 < text.size()) text[text_bytes++] = c;
                       },
                       {.strip_leading_space = after_bos})
                    .ok());
  };
  for (std::size_t i = 1; i < prompt.size(); ++i) print(prompt[i], i == 1);
  token_id next = argmax(*logits);  // the prompt's last position's next token
  for (std::size_t pos = prompt.size(); next != tok.vocab().settings().bos; ++pos) {
    print(next, false);
    if (pos == steps) break;
    logits = model->decode(*session, next);
    ASSERT_TRUE(logits.ok()) << logits.error().message();
    next = argmax(*logits);
  }
  text[text_bytes++] = '\n';
  EXPECT_EQ(no_heap.count(), 0u);
  EXPECT_EQ(std::string(text.data(), text_bytes), expected);
}

TEST(CallerMemory, LentMemoryGivesTheHeapPathsLogits) {
  SKIP_WITHOUT_MODELS();
  const stories_q8_0 g;
  auto heap_weights = gguf_weights(g.file);
  ASSERT_TRUE(heap_weights.ok());
  const llama_options options{.context = 32, .max_prefill = 4};
  auto heap_model = llama<firmware_formats>::make(*heap_weights, options);
  ASSERT_TRUE(heap_model.ok());
  std::array<llama_layer, 5> layers{};
  auto weights = gguf_weights(g.file, layers);
  ASSERT_TRUE(weights.ok());
  aligned_bytes memory(*firmware_llama::memory_bytes(*weights, options));
  auto model = firmware_llama::make_in(*weights, options, memory.span);
  ASSERT_TRUE(model.ok()) << model.error().message();
  const auto a = heap_model->create_session(), b = model->create_session();
  const std::vector<token_id> prompt{1, 403, 407, 261, 378, 432};
  auto x = heap_model->prefill(*a, prompt);
  auto y = model->prefill(*b, prompt);
  for (int step = 0; step < 8; ++step) {
    ASSERT_TRUE(x.ok() && y.ok());
    ASSERT_EQ(std::vector<float>(x->begin(), x->end()), std::vector<float>(y->begin(), y->end())) << step;
    const auto next = argmax(*x);
    x = heap_model->decode(*a, next);
    y = model->decode(*b, next);
  }
}

TEST(CallerMemory, WithoutPrefillBuffersThePromptRunsAsDecodes) {
  SKIP_WITHOUT_MODELS();
  const stories_q8_0 g;
  auto weights = gguf_weights(g.file);
  ASSERT_TRUE(weights.ok());
  const llama_options chunked{.context = 32, .max_prefill = 8}, unbuffered{.context = 32, .max_prefill = 0};
  // The prefill rows and the prefill attention's tiles are most of this model's scratch.
  const std::size_t with_rows = *llama<firmware_formats>::memory_bytes(*weights, chunked);
  const std::size_t without = *llama<firmware_formats>::memory_bytes(*weights, unbuffered);
  EXPECT_LT(without + 8 * 64 * sizeof(float) + hedge::attention::prefill_workspace_floats(8, 4, 8, 1) * sizeof(float),
            with_rows)
      << without << " vs " << with_rows;
  auto decoding = llama<firmware_formats>::make(*weights, chunked);
  auto model = llama<firmware_formats>::make(*weights, unbuffered);
  ASSERT_TRUE(decoding.ok() && model.ok());
  const auto a = decoding->create_session(), b = model->create_session();
  const std::vector<token_id> prompt{1, 403, 407, 261, 378, 432};
  hedge::result<std::span<const float>> x = hedge::error{hedge::errc::invalid_argument};
  for (const token_id t : prompt) x = decoding->decode(*a, t);
  const auto y = model->prefill(*b, prompt);
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(std::vector<float>(x->begin(), x->end()), std::vector<float>(y->begin(), y->end()));
  EXPECT_EQ(*model->length(*b), prompt.size());
  // A prompt past the context changes nothing.
  const std::vector<token_id> long_prompt(40, 403);
  const auto refused = model->prefill(*b, long_prompt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_EQ(*model->length(*b), prompt.size());
}

TEST(CallerMemory, TooLittleOrMisalignedMemoryIsAnError) {
  SKIP_WITHOUT_MODELS();
  const stories_q8_0 g;
  std::array<llama_layer, 4> four{};
  const auto short_table = gguf_weights(g.file, four);
  ASSERT_FALSE(short_table.ok());
  EXPECT_EQ(short_table.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_NE(short_table.error().message().find("block_count 5 in a table of 4 layers"), std::string_view::npos)
      << short_table.error().message();

  std::array<llama_layer, 5> layers{};
  const auto weights = gguf_weights(g.file, layers);
  ASSERT_TRUE(weights.ok());
  const llama_options options{.context = 16, .max_prefill = 4};
  const std::size_t needed = *firmware_llama::memory_bytes(*weights, options);
  aligned_bytes memory(needed + 64);
  const auto small = firmware_llama::make_in(*weights, options, memory.span.first(needed - 1));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code(), hedge::errc::capacity_exceeded);
  EXPECT_NE(small.error().message().find("the model needs " + std::to_string(needed)), std::string_view::npos)
      << small.error().message();
  const auto misaligned = firmware_llama::make_in(*weights, options, memory.span.subspan(8, needed));
  ASSERT_FALSE(misaligned.ok());
  EXPECT_EQ(misaligned.error().code(), hedge::errc::misaligned);

  const std::size_t vocabulary_bytes = *gguf_vocabulary_bytes(g.file);
  aligned_bytes vocabulary_memory(vocabulary_bytes);
  const auto short_vocabulary = read_gguf_vocabulary(g.file, vocabulary_memory.span.first(vocabulary_bytes - 1));
  ASSERT_FALSE(short_vocabulary.ok());
  EXPECT_EQ(short_vocabulary.error().code(), hedge::errc::capacity_exceeded);
}

TEST(CallerMemory, LentVocabularyEncodesAsTheHeapOne) {
  std::size_t bytes = 0;
  const auto data = hedge::test::read_aligned(hedge::test::models_dir + "llama2-vocab.gguf", bytes);
  if (bytes == 0) GTEST_SKIP() << hedge::test::models_dir << "llama2-vocab.gguf is absent (../shared/models)";
  const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(data.data()), bytes});
  ASSERT_TRUE(file.ok());
  auto heap = read_gguf_vocabulary(*file);
  ASSERT_TRUE(heap.ok());
  aligned_bytes memory(*gguf_vocabulary_bytes(*file));
  auto lent = read_gguf_vocabulary(*file, memory.span);
  ASSERT_TRUE(lent.ok()) << lent.error().message();
  EXPECT_EQ(lent->size(), 32000u);
  const tokenizer a{std::move(*heap)}, b{std::move(*lent)};
  EXPECT_EQ(std::vector<std::int32_t>(a.vocab().end_of_generation().begin(), a.vocab().end_of_generation().end()),
            std::vector<std::int32_t>(b.vocab().end_of_generation().begin(), b.vocab().end_of_generation().end()));
  for (const std::string_view text : {"Once upon a time", "  tabs\tand\nnew lines  ", "émoji 🦙 and 数字 12345", ""}) {
    const auto x = a.encode(text), y = b.encode(text);
    ASSERT_TRUE(x.ok() && y.ok());
    EXPECT_EQ(*x, *y) << text;
  }
}

TEST(CallerMemory, ByteLevelBpeInLentMemoryIsRefusedByName) {
  std::size_t bytes = 0;
  const auto data = hedge::test::read_aligned(hedge::test::models_dir + "vocab/ggml-vocab-gpt-2.gguf", bytes);
  if (bytes == 0) GTEST_SKIP() << hedge::test::models_dir << "vocab/ggml-vocab-gpt-2.gguf is absent (../shared/models)";
  const auto file = gguf_file::parse({reinterpret_cast<const std::byte*>(data.data()), bytes});
  ASSERT_TRUE(file.ok());
  aligned_bytes memory(*gguf_vocabulary_bytes(*file));
  const auto lent = read_gguf_vocabulary(*file, memory.span);
  ASSERT_FALSE(lent.ok());
  EXPECT_EQ(lent.error().code(), hedge::errc::unsupported);
  EXPECT_NE(lent.error().message().find("\"gpt2\" in caller memory"), std::string_view::npos) << lent.error().message();
}

}  // namespace
