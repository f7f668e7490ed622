// hedge-speculate: cross-tier speculative decoding against cloud-only decoding of the same
// request, on the same OpenAI-compatible endpoint (engine/speculative.hpp, cloud_scorer.hpp).
// The edge model drafts (optionally quantized as it loads, optionally slowed to a phone's
// pace); the endpoint scores each draft with one /completions call (token ids, echo,
// logprobs, max_tokens 1, return_tokens_as_token_ids: hedge-server, vLLM). Cloud-only is one
// streamed /completions call for the same ids. Both are greedy and run to -n tokens
// (ignore_eos), so their outputs must be equal; the line says whether they were.
//
//   hedge-speculate -m EDGE.gguf --url URL [-i PROMPT] [-n TOKENS] [--runs R]
//                   [--quantize q4_0|q8_0] [--draft-delay-ms MS] [--k-max K]
//                   [--cloud-price IN,OUT] [--label TEXT]
//
// Prints one JSON object: medians of the wall time per request for each mode, their ratio,
// the acceptance rate, rounds, positions the cloud scored against tokens it generated, and
// the estimated cost of each mode at the cloud's per-million-token prices (speculation sends
// the whole context every round: its input tokens grow with the rounds).
// Exit status: 0 measured, 1 an error, 2 a usage error.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "hedge/cloud/json_writer.hpp"
#include "hedge/engine/cloud_scorer.hpp"
#include "hedge/engine/edge_tier.hpp"
#include "hedge/engine/speculative.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/model_file.hpp"
#include "hedge/os/steady_clock.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge;

constexpr const char* usage_text =
    "usage: hedge-speculate -m EDGE.gguf --url URL [-i PROMPT] [-n TOKENS] [--runs R]\n"
    "                       [--quantize q4_0|q8_0] [--draft-delay-ms MS] [--k-max K]\n"
    "                       [--cloud-price IN,OUT] [--label TEXT]\n"
    "  -m EDGE.gguf        the draft model (it must share the endpoint model's vocabulary)\n"
    "  --url URL           the endpoint's root, e.g. http://127.0.0.1:8080 (the client adds /v1)\n"
    "  --quantize FORMAT   quantize the draft's float weights as they load\n"
    "  --draft-delay-ms MS wait MS per drafted token (an edge slower than this machine)\n"
    "  --cloud-price IN,OUT  the endpoint's prices per million input and output tokens (default 0.15,0.60)\n"
    "exit status: 0 measured, 1 an error, 2 a usage error\n";

constexpr tools::cli cli{"hedge-speculate", usage_text};

using client_type = cloud::cloud_client<os::curl_transport, std::chrono::steady_clock, cloud::client_buffers{.tokens = 1100}>;
using edge_type = engine::edge_tier<model::llama<>, exec::serial>;

/// The edge tier, slowed by a fixed delay per decoded token.
struct paced_drafter {
  edge_type* edge;
  std::chrono::milliseconds delay;
  [[nodiscard]] std::size_t vocab_size() const { return edge->vocab_size(); }
  result<std::span<const float>> reset(std::span<const std::int32_t> ids) { return edge->reset(ids); }
  result<std::span<const float>> extend(std::int32_t id) {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    return edge->extend(id);
  }
  result<void> truncate(std::size_t n) { return edge->truncate(n); }
};

/// The scorer, counting the tokens each round sends.
struct counting_scorer {
  engine::cloud_scorer<client_type>* scorer;
  std::uint64_t sent = 0;
  result<std::span<const engine::position_score>> score(const engine::score_call& c) {
    sent += c.context.size() + c.draft.size();
    return scorer->score(c);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, url, prompt = "Once upon a time", label, quantize;
  std::size_t tokens = 128, runs = 3, k_max = 8;
  unsigned draft_delay_ms = 0;
  double price_in = 0.15, price_out = 0.60;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") return cli.help();
    if (i + 1 >= argc) return cli.usage_error(std::string(a) + " needs a value");
    const std::string_view v = argv[++i];
    bool ok = true;
    if (a == "-m") model_path = v;
    else if (a == "--url") url = v;
    else if (a == "-i") prompt = v;
    else if (a == "-n") ok = parse_number(v, tokens) && tokens > 0 && tokens <= 1000;
    else if (a == "--runs") ok = parse_number(v, runs) && runs > 0 && runs <= 100;
    else if (a == "--k-max") ok = parse_number(v, k_max) && k_max > 0 && k_max <= 32;
    else if (a == "--draft-delay-ms") ok = parse_number(v, draft_delay_ms) && draft_delay_ms <= 10'000;
    else if (a == "--quantize") quantize = v, ok = v == "q4_0" || v == "q8_0";
    else if (a == "--label") label = v;
    else if (a == "--cloud-price") {
      const auto comma = v.find(',');
      ok = comma != std::string_view::npos && parse_number(v.substr(0, comma), price_in) &&
           parse_number(v.substr(comma + 1), price_out);
    } else ok = false;
    if (!ok) return cli.usage_error("bad argument " + std::string(a) + " " + std::string(v));
  }
  if (model_path.empty() || url.empty()) return cli.usage_error("-m and --url are required");

  auto loaded = os::load_model({.model = model_path, .tokenizer = {},
                                .quantize = quantize == "q4_0"   ? model::load_quantization::q4_0
                                            : quantize == "q8_0" ? model::load_quantization::q8_0
                                                                 : model::load_quantization::none});
  if (!loaded) return cli.fail(loaded.error());
  auto runnable = os::make_llama(*loaded, {.max_sessions = 1, .context = 1024, .max_threads = 1});
  if (!runnable) return cli.fail(runnable.error());
  exec::serial serial;
  auto render = [](std::span<const cloud::chat_message>, std::vector<model::token_id>&) -> result<void> {
    return error{errc::unsupported} << "raw prompts only";
  };
  auto edge = edge_type::make(runnable->model, loaded->tok, serial, render);
  if (!edge) return cli.fail(edge.error());
  engine::edge_call call;
  call.prompt = prompt;
  auto ids = edge->prompt_ids(call);
  if (!ids) return cli.fail(ids.error());
  const std::vector<std::int32_t> prompt_ids(ids->begin(), ids->end());
  if (prompt_ids.size() + tokens + 16 > 1024) return cli.fail("the prompt and -n tokens exceed the 1024-token context");

  os::curl_transport transport(url);
  cloud::endpoint endpoint;
  auto client = std::make_unique<client_type>(transport, endpoint);
  engine::cloud_scorer<client_type> scorer(*client, 1024);
  auto decoder = engine::speculative_decoder<os::steady_clock>::make(edge->vocab_size(), k_max, 1024, {});
  if (!decoder) return cli.fail(decoder.error());

  std::vector<char> request(64 * 1024);
  std::vector<double> cloud_ms, speculative_ms;
  std::vector<std::int32_t> cloud_ids, speculative_ids;
  engine::speculative_stats stats;
  std::uint64_t sent = 0;
  for (std::size_t run = 0; run < runs; ++run) {
    // Cloud only: one streamed call.
    cloud::json_writer w(request);
    w.begin_object().key("prompt").begin_array();
    for (const auto id : prompt_ids) w.integer(id);
    w.end_array().key("max_tokens").integer(static_cast<std::int64_t>(tokens)).key("temperature").number(0);
    w.key("ignore_eos").boolean(true).key("logprobs").integer(1).key("return_tokens_as_token_ids").boolean(true);
    w.key("stream").boolean(true).end_object();
    auto body = w.finish();
    if (!body) return cli.fail(body.error());
    cloud_ids.clear();
    auto start = std::chrono::steady_clock::now();
    const auto outcome = client->send_stream("/completions", *body, [&](const cloud::choice_delta& d) {
      for (const auto& t : d.tokens) cloud_ids.push_back(engine::token_id_of(t.token));
      return true;
    });
    if (!outcome.ok()) return cli.fail("cloud-only call: " + std::string(outcome.status.error().message()));
    cloud_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());

    // Speculative: the edge drafts, the endpoint scores.
    paced_drafter drafter{&*edge, std::chrono::milliseconds(draft_delay_ms)};
    counting_scorer counting{&scorer};
    speculative_ids.clear();
    start = std::chrono::steady_clock::now();
    auto summary = decoder->run(drafter, counting, prompt_ids, {.max_tokens = tokens, .alternatives = 1, .stop_tokens = {}},
                                [&](const engine::speculative_token& t) {
                                  speculative_ids.push_back(t.id);
                                  return true;
                                });
    if (!summary) return cli.fail("speculative run: " + std::string(summary.error().message()));
    speculative_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    stats = summary->stats;
    sent = counting.sent;
  }
  const double cloud = median(cloud_ms), speculative = median(speculative_ms);
  const double cost_cloud = (static_cast<double>(prompt_ids.size()) * price_in + static_cast<double>(tokens) * price_out) / 1e6;
  const double cost_speculative = (static_cast<double>(sent) * price_in + static_cast<double>(stats.rounds) * price_out) / 1e6;
  std::printf(
      "{\"label\":\"%s\",\"tokens\":%zu,\"runs\":%zu,\"cloud_only_ms\":%.1f,\"speculative_ms\":%.1f,\"speedup\":%.3f,"
      "\"acceptance\":%.3f,\"rounds\":%zu,\"draft_length\":%zu,\"scored_positions\":%zu,\"cloud_generated\":%zu,"
      "\"cloud_input_tokens_speculative\":%llu,\"cost_cloud_only\":%.8f,\"cost_speculative\":%.8f,\"same_output\":%s}\n",
      label.c_str(), tokens, runs, cloud, speculative, speculative > 0 ? cloud / speculative : 0.0, stats.acceptance(),
      stats.rounds, decoder->draft_length(), stats.scored, stats.cloud_tokens, static_cast<unsigned long long>(sent),
      cost_cloud, cost_speculative, cloud_ids == speculative_ids ? "true" : "false");
  return cloud_ids == speculative_ids ? 0 : 1;
}
