// tools/server/scheduler.hpp: a generation that fills the context in the batched decode step
// ends with the capacity error (400 context_length_exceeded), after the tokens it made, while
// the generation batched beside it and the next one on its slot run as usual. The HTTP layer
// bounds max_tokens by the context's room, so only a job submitted directly reaches that branch.
#include "../../tools/server/scheduler.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "support/model_files.hpp"

namespace {

using hedge::server::job;
using hedge::server::scheduler;

/// Submits jobs and waits for them to end (their `changed` runs on the worker thread).
class scheduler_jobs {
 public:
  std::shared_ptr<job> make(std::vector<hedge::model::token_id> prompt, std::size_t max_tokens) {
    auto j = std::make_shared<job>();
    j->prompt = std::move(prompt);
    j->max_tokens = max_tokens;
    j->request.temperature = 0.0f;  // greedy
    j->request.ignore_eos = true;
    j->request.logprobs = true;  // each generated token in its own event
    // The worker writes the job, then calls this: what the test reads is recorded here.
    j->changed = [this](job& changed) {
      if (!changed.done) return;
      std::lock_guard lock(mutex_);
      ended_.insert(&changed);
      ended_changed_.notify_all();
    };
    return j;
  }

  /// Whether `s` queued every job and each ended within a minute (the worker no longer
  /// touches them then).
  bool run(scheduler& s, std::initializer_list<std::shared_ptr<job>> batch) {
    for (const auto& j : batch)
      if (s.submit(j) != scheduler::admission::queued) return false;
    std::unique_lock lock(mutex_);
    for (const auto& j : batch)
      if (!ended_changed_.wait_for(lock, std::chrono::seconds(60), [&] { return ended_.contains(j.get()); }))
        return false;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ended_changed_;
  std::set<const job*> ended_;
};

/// The texts of the tokens a job generated, in order.
std::vector<std::string> token_texts(const job& j) {
  std::vector<std::string> texts;
  for (const auto& e : j.events)
    if (e.token) texts.push_back(e.token->text);
  return texts;
}

TEST(Scheduler, AGenerationThatFillsTheContextEndsWithTheCapacityError) {
  SKIP_WITHOUT_MODELS();
  auto loaded = hedge::os::load_model({.model = hedge::test::models_dir + "stories260K.gguf",
                                       .tokenizer = {},
                                       .quantize = hedge::model::load_quantization::none});
  ASSERT_TRUE(loaded) << loaded.error().message();
  hedge::server::metrics metrics;
  constexpr std::size_t context = 16;
  auto s = scheduler::make(*loaded, hedge::model::chat_format::plain, context, 1, 4, metrics, 2);
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ((*s)->context(), context);
  const hedge::model::token_id bos = (*s)->tokenizer().vocab().settings().bos;
  const std::vector<hedge::model::token_id> prompt = {bos, 100, 200, 300};

  scheduler_jobs jobs;
  // More tokens than the context has room for, beside one that ends by its max_tokens.
  auto filling = jobs.make(prompt, 4 * context);
  auto short_one = jobs.make(prompt, 3);
  ASSERT_TRUE(jobs.run(**s, {filling, short_one}));

  ASSERT_TRUE(filling->error.has_value());
  EXPECT_EQ(filling->error->status, 400);
  EXPECT_EQ(filling->error->code, "context_length_exceeded");
  EXPECT_EQ(filling->error->type, "invalid_request_error");
  EXPECT_EQ(filling->error->message, "the generation has filled the context of 16 tokens");
  // Every position after the prompt's holds a generated token, and the last one sampled
  // (from the logits of the context's last position) was delivered too.
  const auto filled = token_texts(*filling);
  ASSERT_EQ(filled.size(), context - prompt.size() + 1);

  EXPECT_FALSE(short_one->error.has_value());
  EXPECT_EQ(short_one->finish_reason, "length");
  // Greedy: the neighbour's tokens are the filling generation's first ones.
  EXPECT_EQ(token_texts(*short_one), std::vector<std::string>(filled.begin(), filled.begin() + 3));

  // The slot the capacity error freed serves the next generation.
  auto next = jobs.make(prompt, 3);
  auto other = jobs.make(prompt, 3);
  ASSERT_TRUE(jobs.run(**s, {next, other}));
  EXPECT_FALSE(next->error.has_value());
  EXPECT_FALSE(other->error.has_value());
  EXPECT_EQ(token_texts(*next), token_texts(*short_one));
  EXPECT_EQ(token_texts(*other), token_texts(*short_one));
  (*s)->shutdown();
}

}  // namespace
