// Generation end to end on stories260K (.bin + tok512.bin): run.c's greedy and sampled texts
// (../shared/models/reference), stop strings, stop tokens, cancellation and a full context.
#include "hedge/model/generate.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hedge/model/forward.hpp"
#include "hedge/model/llama2c.hpp"
#include "hedge/model/llama2c_tokenizer.hpp"
#include "hedge/model/weights.hpp"
#include "support/model_files.hpp"

namespace {

using namespace hedge::model;

const std::string& models_folder = hedge::test::models_dir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct stories_with_tokenizer {
  std::size_t bytes = 0, tokenizer_bytes = 0;
  std::vector<float> file = hedge::test::read_aligned(models_folder + "stories260K.bin", bytes);
  std::vector<float> tokenizer_file = hedge::test::read_aligned(models_folder + "tok512.bin", tokenizer_bytes);
  llama2c_checkpoint checkpoint = *llama2c_checkpoint::parse({reinterpret_cast<const std::byte*>(file.data()), bytes});
  llama_weights weights = std::move(*llama2c_weights(checkpoint));
  tokenizer tok{*read_llama2c_tokenizer({reinterpret_cast<const std::byte*>(tokenizer_file.data()), tokenizer_bytes},
                                        checkpoint.config().vocab_size)};
};

/// What run.c prints for `-n steps [-i prompt]` with this sampler: the prompt, then every
/// token until BOS or `steps` positions.
template <class Random>
std::string run_like_run_c(const stories_with_tokenizer& s, const std::string& prompt, std::size_t steps,
                           sampler<Random> chooser) {
  auto model = llama<>::make(s.weights, {.context = steps});
  EXPECT_TRUE(model.ok());
  auto gen = generator<llama<>>::make(*model, s.tok);
  EXPECT_TRUE(gen.ok());
  const auto ids = s.tok.encode(prompt);
  EXPECT_TRUE(ids.ok());
  const std::vector<token_id> stop_tokens{1};  // run.c stops when the model emits BOS
  const generation_options options{.max_tokens = steps - (ids->size() - 1), .stop_tokens = stop_tokens};
  std::string text = prompt;
  hedge::exec::serial serial;
  auto session = *model->create_session();
  const auto summary = gen->run(session, *ids, chooser, options, serial, [&](const generated_token& t) {
    text += t.text;
    return true;
  });
  EXPECT_TRUE(summary.ok()) << summary.error().message();
  return text + "\n";
}

TEST(Generate, GreedyTextIsRunCs) {
  SKIP_WITHOUT_MODELS();
  const stories_with_tokenizer s;
  EXPECT_EQ(run_like_run_c(s, "", 256, sampler{sampler_config{}, seeded_random{0}}),
            read_text(models_folder + "reference/llama2c_noprompt_n256.txt"));
  EXPECT_EQ(run_like_run_c(s, "Once upon a time", 256, sampler{sampler_config{}, seeded_random{0}}),
            read_text(models_folder + "reference/llama2c_prompt_onceuponatime_n256.txt"));
  // 512 steps: run.c stops when the model emits BOS.
  EXPECT_EQ(run_like_run_c(s, "", 512, sampler{sampler_config{}, seeded_random{0}}),
            read_text(models_folder + "reference/llama2c_noprompt_n512.txt"));
}

TEST(Generate, SampledTextIsRunCsWithItsGenerator) {
  SKIP_WITHOUT_MODELS();
  const stories_with_tokenizer s;
  const sampler chooser{sampler_config{.temperature = 1.0f, .top_p = 0.9f}, llama2c_random{133742}};
  EXPECT_EQ(run_like_run_c(s, "", 256, chooser),
            read_text(models_folder + "reference/llama2c_t1.0_p0.9_s133742_n256.txt"));
}

struct harness {
  stories_with_tokenizer s;
  llama<> model = *llama<>::make(s.weights, {.max_sessions = 2, .context = 64});
  generator<llama<>> gen = *generator<llama<>>::make(model, s.tok);
  hedge::exec::serial serial;
  std::vector<token_id> prompt = *s.tok.encode("Once upon a time");
  sampler<seeded_random> greedy{sampler_config{}, seeded_random{0}};
};

TEST(Generate, StopStringsAreNotDeliveredNorWhatFollows) {
  SKIP_WITHOUT_MODELS();
  harness h;
  // The greedy continuation is ", there was a little girl named Lily. She loved ...".
  const std::vector<std::string_view> stop{"girl named"};
  std::string text;
  std::vector<token_id> delivered;
  auto session = *h.model.create_session();
  const auto summary = h.gen.run(session, h.prompt, h.greedy, {.max_tokens = 40, .stop = stop}, h.serial,
                                 [&](const generated_token& t) {
                                   text += t.text;
                                   delivered.push_back(t.id);
                                   return true;
                                 });
  ASSERT_TRUE(summary.ok()) << summary.error().message();
  EXPECT_EQ(summary->reason, stop_reason::stop_string);
  EXPECT_EQ(text, ", there was a little ");
  // " girl" was held back (it may begin "girl named") until " named" showed it did.
  EXPECT_EQ(delivered.size(), summary->generated);
}

TEST(Generate, APieceAfterThePromptKeepsItsLeadingSpace) {
  SKIP_WITHOUT_MODELS();
  harness h;
  auto session = *h.model.create_session();
  const auto prompt = *h.s.tok.encode("Once upon a time,");
  std::string text;
  ASSERT_TRUE(h.gen.run(session, prompt, h.greedy, {.max_tokens = 3}, h.serial, [&](const generated_token& t) {
                   text += t.text;
                   return true;
                 }).ok());
  EXPECT_EQ(text, " there was a");
}

TEST(Generate, CancellationLeavesTheSessionUsable) {
  SKIP_WITHOUT_MODELS();
  harness h;
  auto session = *h.model.create_session();
  std::size_t calls = 0;
  const auto summary = h.gen.run(session, h.prompt, h.greedy, {.max_tokens = 40}, h.serial, [&](const generated_token&) {
    return ++calls < 3;
  });
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->reason, stop_reason::cancelled);
  EXPECT_EQ(summary->generated, 3u);
  // The prompt and the two tokens decoded before the cancel are in the session.
  EXPECT_EQ(*h.model.length(session), h.prompt.size() + 2);
  ASSERT_TRUE(h.model.rollback(session, 0).ok());
  std::string text;
  const auto again = h.gen.run(session, h.prompt, h.greedy, {.max_tokens = 6}, h.serial, [&](const generated_token& t) {
    text += t.text;
    return true;
  });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->reason, stop_reason::max_tokens);
  EXPECT_EQ(text, ", there was a little g");  // "g" then "irl": 6 tokens end inside the word
}

TEST(Generate, AFullContextIsAnErrorAfterTheTokensBeforeIt) {
  SKIP_WITHOUT_MODELS();
  harness h;
  auto session = *h.model.create_session();
  std::size_t delivered = 0;
  const auto summary = h.gen.run(session, h.prompt, h.greedy, {.max_tokens = 100}, h.serial, [&](const generated_token& t) {
    delivered += t.id != no_token;
    return true;
  });
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.error().code(), hedge::errc::capacity_exceeded);
  // 64 positions: the prompt's 5 and 59 generated tokens decoded, the 60th sampled and
  // delivered, then no room to decode it.
  EXPECT_EQ(delivered, 64u - h.prompt.size() + 1);
}

TEST(Generate, StopTokensAndTheirOverride) {
  SKIP_WITHOUT_MODELS();
  harness h;
  // With no prompt, greedy 512 steps end when the model emits BOS (see GreedyTextIsRunCs).
  const std::vector<token_id> bos_only{1};
  const std::vector<token_id> just_bos{1};
  auto model = *llama<>::make(h.s.weights, {.context = 512});
  auto gen = *generator<llama<>>::make(model, h.s.tok);
  auto seq = *model.create_session();
  const auto stopped = gen.run(seq, just_bos, h.greedy, {.max_tokens = 511, .stop_tokens = bos_only}, h.serial,
                               [](const generated_token&) { return true; });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->reason, stop_reason::stop_token);
  ASSERT_TRUE(model.rollback(seq, 0).ok());
  const auto ignored = gen.run(seq, just_bos, h.greedy, {.max_tokens = 400, .stop_tokens = bos_only, .ignore_eos = true},
                               h.serial, [](const generated_token&) { return true; });
  ASSERT_TRUE(ignored.ok());
  EXPECT_EQ(ignored->reason, stop_reason::max_tokens);
  EXPECT_EQ(ignored->generated, 400u);
}

}  // namespace
