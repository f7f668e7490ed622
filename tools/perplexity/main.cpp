// hedge-perplexity: how well a model predicts a text, by llama.cpp's llama-perplexity method
// (model/perplexity.hpp); with --reference, how far its predictions are from another
// model's on the same tokens, as llama-perplexity --kl-divergence reports it.
//
//   hedge-perplexity -m MODEL -f TEXT [--reference MODEL] [--ctx N] [--chunks N] [--threads N]
//
// The text (less one final newline, as llama.cpp's -f reads it) is tokenized whole (BOS first
// where the vocabulary adds one) and cut into chunks of --ctx tokens (default 512,
// llama-perplexity's); the second half of each chunk is scored. Both models run in this process: no logits file. On stderr, the running estimate
// after each chunk ("[1]4.1234,[2]..." as llama.cpp prints it; with --reference, a line per
// chunk) and llama.cpp's "Final estimate: PPL = X +/- E". On stdout, "perplexity: X +/- E",
// with --reference the comparison's lines (llama.cpp's names), then one JSON line with
// every figure.
// Exit status: 0 done (--help included), 1 a model, text or evaluation error (the message
// says which file and why: a text shorter than 2 chunks, a reference of another vocabulary),
// 2 a usage error.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "hedge/model/perplexity.hpp"
#include "hedge/os/model_file.hpp"
#include "hedge/os/thread_pool.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge;
using namespace hedge::model;

constexpr const char* usage_text =
    "usage: hedge-perplexity -m MODEL -f TEXT [--reference MODEL] [--ctx N] [--chunks N] [--threads N]\n"
    "  -m MODEL           a GGUF file\n"
    "  -f TEXT            the text to score (a file)\n"
    "  --reference MODEL  a GGUF of the same vocabulary (the F32 or F16 source of a quantized\n"
    "                     MODEL): adds KL divergence, top-1 agreement and the perplexity difference\n"
    "  --ctx N            tokens per chunk, the second half scored (default 512, as llama-perplexity)\n"
    "  --chunks N         at most N chunks (default: as many as the text fills)\n"
    "  --threads N        threads (default 1)\n"
    "exit status: 0 done, 1 a model, text or evaluation error, 2 a usage error\n";

constexpr tools::cli cli{"hedge-perplexity", usage_text};

struct options {
  std::string model, text, reference;
  std::size_t context = 512, chunks = 0, threads = 1;
};

result<os::loaded_model> load(const std::string& path) {
  return os::load_model({.model = path, .tokenizer = {}, .quantize = load_quantization::none});
}

/// The forward pass over `m` (which must stay where it is: the model reads its weights
/// there) for chunks of o.context tokens.
result<os::runnable_llama> prepare(os::loaded_model& m, const std::string& path, const options& o) {
  auto run = os::make_llama(m, {.context = o.context, .max_threads = o.threads});
  if (!run) return error{run.error().code()} << path << ": " << run.error().message();
  if (o.context > m.weights.config.context_length)
    std::fprintf(stderr, "hedge-perplexity: warning: %s was trained on a context of %u tokens (--ctx %zu)\n",
                 path.c_str(), static_cast<unsigned>(m.weights.config.context_length), o.context);
  return run;
}

/// `name` padded to 30 columns (a multi-byte character, as in "Δp", takes one).
void print_estimate(const char* name, estimate e, double scale = 1.0, const char* unit = "") {
  int columns = 0;
  for (const char* c = name; *c != 0; ++c) columns += (static_cast<unsigned char>(*c) & 0xC0) != 0x80;
  std::printf("%s%*s: %10.6f ± %10.6f%s\n", name, 30 - columns, "", scale * e.value, scale * e.uncertainty, unit);
}

/// `"name":value,"name_error":uncertainty` for the JSON line.
void json_estimate(const char* name, estimate e) {
  std::printf(",\"%s\":%.9g,\"%s_error\":%.9g", name, e.value, name, e.uncertainty);
}

template <Executor E>
int evaluate(const options& o, E& executor) {
  auto m = load(o.model);
  if (!m) return cli.fail(m.error());
  std::optional<os::loaded_model> reference_file;
  if (!o.reference.empty()) {
    auto r = load(o.reference);
    if (!r) return cli.fail(r.error());
    if (auto same = check_same_vocabulary(m->tok.vocab(), r->tok.vocab()); !same)
      return cli.fail(error{same.error().code()} << o.reference << ": " << same.error().message());
    reference_file.emplace(std::move(*r));
  }
  auto model = prepare(*m, o.model, o);
  if (!model) return cli.fail(model.error());
  std::optional<os::runnable_llama> reference;
  if (reference_file) {
    auto r = prepare(*reference_file, o.reference, o);
    if (!r) return cli.fail(r.error());
    reference.emplace(std::move(*r));
  }
  auto text = os::mapped_file::open(o.text);
  if (!text) return cli.fail(text.error());
  std::string_view content(reinterpret_cast<const char*>(text->bytes().data()), text->bytes().size());
  if (!content.empty() && content.back() == '\n') content.remove_suffix(1);  // as llama.cpp's -f reads a file
  auto tokens = m->tok.encode(content);
  if (!tokens) return cli.fail(error{tokens.error().code()} << o.text << ": " << tokens.error().message());
  auto chunks = perplexity_chunks::plan(tokens->size(), o.context, o.chunks);
  if (!chunks) return cli.fail(error{chunks.error().code()} << o.text << ": " << chunks.error().message());
  const auto& settings = m->tok.vocab().settings();
  const token_id bos = settings.add_bos ? settings.bos : no_token;
  std::fprintf(stderr, "perplexity: %zu tokens, %zu chunks of %zu (the last %zu of each scored)\n", tokens->size(),
               chunks->count, chunks->context, chunks->scored());
  if (!reference) {
    auto sums = measure_perplexity(model->model, *tokens, *chunks, bos, executor,
                                   [](std::size_t i, const perplexity_accumulator& s) {
                                     std::fprintf(stderr, "[%zu]%.4f,", i + 1, s.perplexity().value);
                                   });
    std::fprintf(stderr, "\n");
    if (!sums) return cli.fail(sums.error());
    const estimate ppl = sums->perplexity();
    std::fprintf(stderr, "Final estimate: PPL = %.4f +/- %.5f\n", ppl.value, ppl.uncertainty);
    std::printf("perplexity: %.4f +/- %.5f\n", ppl.value, ppl.uncertainty);
    std::printf("{\"tokens\":%zu,\"context\":%zu,\"chunks\":%zu,\"scored\":%zu", tokens->size(), chunks->context,
                chunks->count, sums->count());
    json_estimate("perplexity", ppl);
    std::printf("}\n");
  } else {
    auto sums = measure_kl_divergence(
        model->model, reference->model, *tokens, *chunks, bos, executor,
        [](std::size_t i, const kl_divergence_accumulator& s) {
          const auto k = s.summary();
          std::fprintf(stderr, "chunk %zu: PPL %.4f, ln(PPL(Q)/PPL(base)) %.5f, KLD %.6f, same top p %.3f %%\n", i + 1,
                       k.perplexity.value, k.log_ratio.value, k.kl_divergence.value, 100.0 * k.same_top.value);
        });
    if (!sums) return cli.fail(sums.error());
    const kl_divergence_summary k = sums->summary();
    std::fprintf(stderr, "Final estimate: PPL = %.4f +/- %.5f\n", k.perplexity.value, k.perplexity.uncertainty);
    std::printf("perplexity: %.4f +/- %.5f\n", k.perplexity.value, k.perplexity.uncertainty);
    print_estimate("Mean PPL(Q)", k.perplexity);
    print_estimate("Mean PPL(base)", k.reference_perplexity);
    std::printf("%-30s: %6.2f%%\n", "Cor(ln(PPL(Q)), ln(PPL(base)))", 100.0 * k.correlation);
    print_estimate("Mean ln(PPL(Q)/PPL(base))", k.log_ratio);
    print_estimate("Mean PPL(Q)/PPL(base)", k.ratio);
    print_estimate("Mean PPL(Q)-PPL(base)", k.difference);
    print_estimate("Mean    KLD", k.kl_divergence);
    std::printf("%-30s: %10.6f\n", "Maximum KLD", k.max_kl_divergence);
    print_estimate("RMS Δp", k.rms_p_diff, 100.0, " %");
    print_estimate("Same top p", k.same_top, 100.0, " %");
    std::printf("{\"tokens\":%zu,\"context\":%zu,\"chunks\":%zu,\"scored\":%zu", tokens->size(), chunks->context,
                chunks->count, k.count);
    json_estimate("perplexity", k.perplexity);
    json_estimate("reference_perplexity", k.reference_perplexity);
    std::printf(",\"correlation\":%.9g", k.correlation);
    json_estimate("log_ratio", k.log_ratio);
    json_estimate("ratio", k.ratio);
    json_estimate("difference", k.difference);
    json_estimate("kl_divergence", k.kl_divergence);
    std::printf(",\"max_kl_divergence\":%.9g", k.max_kl_divergence);
    json_estimate("rms_p_diff", k.rms_p_diff);
    json_estimate("same_top", k.same_top);
    std::printf("}\n");
  }
  return std::ferror(stdout) ? cli.fail(error{errc::io_error} << "cannot write the result to standard output") : 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  const auto option = [&](std::string_view a, std::string_view v) {
    bool ok = true;
    if (a == "-m") o.model = v;
    else if (a == "-f") o.text = v;
    else if (a == "--reference") o.reference = v;
    else if (a == "--ctx") ok = parse_number(v, o.context) && o.context >= 4 && o.context <= (std::size_t{1} << 24);
    else if (a == "--chunks") ok = parse_number(v, o.chunks) && o.chunks >= 1;
    else if (a == "--threads") ok = parse_number(v, o.threads) && o.threads >= 1 && o.threads <= 1024;
    else return tools::cli::option::unknown;
    return tools::cli::checked(ok);
  };
  if (const auto status = cli.parse_options(argc, argv, tools::no_flags, option)) return *status;
  if (o.model.empty()) return cli.usage_error("no -m MODEL");
  if (o.text.empty()) return cli.usage_error("no -f TEXT");
  // One thread runs on the calling thread: no pool to wake at every matrix.
  if (o.threads == 1) {
    exec::serial serial;
    return evaluate(o, serial);
  }
  exec::thread_pool pool(o.threads);
  return evaluate(o, pool);
}
