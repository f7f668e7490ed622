// hedge-generate: text from a GGUF or llama2.c checkpoint, with llama2.c run's flags so the
// two compare directly. Prints the prompt and the generated text (as run does: the piece
// after BOS without its leading space), then on stderr `prefill: N tokens, X tok/s` and
// `decode: N tokens, Y tok/s`.
//
//   hedge-generate -m MODEL [-z TOKENIZER] [-i PROMPT] [-n STEPS] [-t TEMPERATURE] [-p TOPP]
//                  [-s SEED] [--rng llama2c|splitmix] [--threads N] [--quantize q8_0|q4_0]
//                  [--ignore-eos] [--print-ids]
//
// -n counts positions as run does: the prompt's included (at most the model's context).
// Generation stops at -n, or when the model emits BOS or EOS (run stops at BOS) unless
// --ignore-eos. Defaults are run's: -n 256, -t 1.0, -p 0.9, a seed from the clock.
// Exit status: 0 done (--help included), 1 a model, tokenizer or generation error (the
// message says which file and why), 2 a usage error.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/os/model_file.hpp"
#include "hedge/model/forward.hpp"
#include "hedge/model/generate.hpp"
#include "hedge/model/sampler.hpp"
#include "hedge/model/tokenizer.hpp"
#include "hedge/os/thread_pool.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge;
using namespace hedge::model;

constexpr const char* usage_text =
    "usage: hedge-generate -m MODEL [-z TOKENIZER] [-i PROMPT] [-n STEPS] [-t TEMPERATURE] [-p TOPP]\n"
    "                      [-s SEED] [--rng llama2c|splitmix] [--threads N] [--quantize q8_0|q4_0]\n"
    "                      [--ignore-eos] [--print-ids]\n"
    "  -m MODEL      a GGUF file, or a llama2.c .bin (then -z TOKENIZER, its tokenizer.bin)\n"
    "  -n STEPS      positions in all, the prompt's included (default 256)\n"
    "  -t, -p, -s    temperature (1.0; 0 = greedy), top-p (0.9), seed (from the clock)\n"
    "  --rng         llama2c: llama2.c run's generator (its draws for the same seed); splitmix (default)\n"
    "  --threads N   threads (default 1)\n"
    "  --quantize T  quantize the float weights to T at load time\n"
    "  --ignore-eos  do not stop when the model emits BOS or EOS\n"
    "  --print-ids   after the text, a line 'ids: ...': every token after BOS, the prompt's included\n"
    "exit status: 0 done, 1 a model or generation error, 2 a usage error\n";

constexpr tools::cli cli{"hedge-generate", usage_text};

struct options {
  std::string model, tokenizer, prompt;
  std::size_t steps = 256, threads = 1;
  float temperature = 1.0f, top_p = 0.9f;
  std::uint64_t seed = 0;
  bool llama2c_rng = false, ignore_eos = false, print_ids = false;
  std::string quantize;
};

template <class Random>
int generate(const options& o, os::loaded_model& m, Random random) {
  const auto& cfg = m.weights.config;
  const std::size_t context = std::min<std::size_t>(o.steps, cfg.context_length);
  auto runnable = os::make_llama(m, {.context = context, .max_threads = o.threads});
  if (!runnable) return cli.fail(runnable.error());
  auto& model = runnable->model;
  auto gen = generator<llama<>>::make(model, m.tok);
  if (!gen) return cli.fail(gen.error());
  auto prompt = m.tok.encode(o.prompt);
  if (!prompt) return cli.fail(prompt.error());
  if (prompt->size() >= context)
    return cli.fail(error{errc::capacity_exceeded} << "the prompt's " << prompt->size() << " tokens leave no room in "
                                               << context << " steps");
  auto session = model.create_session();
  if (!session) return cli.fail(session.error());
  sampler<Random> chooser{{.temperature = o.temperature, .top_p = o.top_p}, random};
  const auto& settings = m.tok.vocab().settings();
  const std::vector<token_id> stop_tokens{settings.bos, settings.eos};
  const generation_options go{.max_tokens = context - (prompt->size() - 1), .stop_tokens = stop_tokens,
                              .ignore_eos = o.ignore_eos};
  // The prompt's text, as run prints it while feeding it.
  stream_decoder prompt_text(m.tok);
  for (const token_id t : *prompt)
    if (t != settings.bos)
      static_cast<void>(prompt_text.push(t, [](std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }));
  std::vector<token_id> ids(prompt->begin() + (prompt->front() == settings.bos ? 1 : 0), prompt->end());
  const auto print = [&](const generated_token& t) {
    std::fwrite(t.text.data(), 1, t.text.size(), stdout);
    std::fflush(stdout);
    if (t.id != no_token) ids.push_back(t.id);
    return true;
  };
  // One thread runs on the calling thread: no pool to wake at every matrix.
  exec::serial serial;
  exec::thread_pool pool(o.threads);
  const auto summary = o.threads == 1 ? gen->run(*session, *prompt, chooser, go, serial, print)
                                      : gen->run(*session, *prompt, chooser, go, pool, print);
  std::printf("\n");
  if (!summary) return cli.fail(summary.error());
  if (summary->reason == stop_reason::stop_token && !ids.empty()) ids.pop_back();  // run does not print its BOS
  if (o.print_ids) {
    std::printf("ids:");
    for (const token_id t : ids) std::printf(" %d", t);
    std::printf("\n");
  }
  const std::size_t decoded = summary->generated > 0 ? summary->generated - 1 : 0;
  std::fprintf(stderr, "prefill: %zu tokens, %.1f tok/s\n", summary->prompt_tokens,
               static_cast<double>(summary->prompt_tokens) / summary->prefill_seconds);
  std::fprintf(stderr, "decode: %zu tokens, %.1f tok/s\n", decoded,
               summary->decode_seconds > 0 ? static_cast<double>(decoded) / summary->decode_seconds : 0.0);
  return std::ferror(stdout) ? cli.fail(error{errc::io_error} << "cannot write the text to standard output") : 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  bool seeded = false;
  std::string rng = "splitmix";
  const auto flag = [&](std::string_view a) {
    if (a == "--ignore-eos") return o.ignore_eos = true;
    if (a == "--print-ids") return o.print_ids = true;
    return false;
  };
  const auto option = [&](std::string_view a, std::string_view v) {
    bool ok = true;
    if (a == "-m") o.model = v;
    else if (a == "-z") o.tokenizer = v;
    else if (a == "-i") o.prompt = v;
    else if (a == "-n") ok = parse_number(v, o.steps) && o.steps >= 1;
    else if (a == "-t") ok = parse_number(v, o.temperature) && o.temperature >= 0.0f && o.temperature <= 1e6f;
    else if (a == "-p") ok = parse_number(v, o.top_p) && o.top_p >= 0.0f && o.top_p <= 1.0f;
    else if (a == "-s") ok = parse_number(v, o.seed), seeded = true;
    else if (a == "--rng") ok = (rng = v) == "llama2c" || rng == "splitmix";
    else if (a == "--threads") ok = parse_number(v, o.threads) && o.threads >= 1 && o.threads <= 1024;
    else if (a == "--quantize") ok = (o.quantize = v) == "q8_0" || o.quantize == "q4_0";
    else return tools::cli::option::unknown;
    return tools::cli::checked(ok);
  };
  if (const auto status = cli.parse_options(argc, argv, flag, option)) return *status;
  if (o.model.empty()) return cli.usage_error("no -m MODEL");
  // run's rule: a seed of 0 (or none) comes from the clock.
  if (!seeded || o.seed == 0)
    o.seed = static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  const auto quantize = o.quantize == "q8_0"   ? model::load_quantization::q8_0
                        : o.quantize == "q4_0" ? model::load_quantization::q4_0
                                               : model::load_quantization::none;
  auto m = os::load_model({.model = o.model, .tokenizer = o.tokenizer, .quantize = quantize});
  if (!m) return cli.fail(m.error());
  return rng == "llama2c" ? generate(o, *m, llama2c_random{o.seed}) : generate(o, *m, seeded_random{o.seed});
}
