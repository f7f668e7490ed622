// The cloud client's overhead per streamed token: SSE parsing, the chunk's JSON parsed in
// place, and the delta callback, on an OpenAI-shaped stream of 512 tokens (every chunk
// carries id, created, model, system_fingerprint, service_tier, a delta and usage: null, as
// gpt-4o's do with stream_options.include_usage), with and without logprobs and
// top_logprobs=5 (each token then carries its bytes and five alternatives with theirs).
// The body arrives one event per on_body call (a token at a time, as a live stream does)
// or in 1448-byte pieces (TCP segments of a burst). BM_ClientStream adds the client around
// it: request writing, the transport call through function_ref, outcome and timing, with a
// transport that replays the body from memory. Run:
//   build/<dir>/bench/hedge_bench_cloud --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// ns_per_token is the time per token (Google Benchmark prints it with an SI prefix: 150n = 150 ns).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/cloud/client.hpp"
#include "hedge/cloud/stream.hpp"

namespace {

constexpr int stream_tokens = 512;

std::string bytes_of(std::string_view token) {
  std::string out = "[";
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(static_cast<unsigned char>(token[i]));
  }
  return out + "]";
}

// JSON text of a token (the words below need escaping only for the quote and newline).
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

// One SSE event per token, OpenAI's chunk shape, then the finish, usage and [DONE] events.
std::vector<std::string> openai_events(int top_logprobs) {
  static const char* words[] = {" Once", " upon", " a", " time", ",", " there", " was", " a", " little", " girl",
                                " named", " Lily", ".", " She", " loved", " to", " play", " outside", " \"", "\n"};
  const std::string head =
      R"(data: {"id":"chatcmpl-AbCdEfGhIjKlMnOpQrStUvWxYz012","object":"chat.completion.chunk","created":1732500000,)"
      R"("model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_0ba0d124f1","choices":)";
  std::vector<std::string> events;
  events.push_back(head + R"([{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null})" "\n\n");
  for (int i = 0; i < stream_tokens; ++i) {
    const std::string_view w = words[i % 20];
    std::string logprobs = "null";
    if (top_logprobs > 0) {
      logprobs = R"({"content":[{"token":)" + json_string(w) + R"(,"logprob":-0.31725305,"bytes":)" + bytes_of(w) +
                 R"(,"top_logprobs":[)";
      for (int k = 0; k < top_logprobs; ++k) {
        const std::string_view alt = k == 0 ? w : std::string_view(words[(i + 7 * k) % 20]);
        if (k) logprobs += ",";
        logprobs += R"({"token":)" + json_string(alt) + R"(,"logprob":-)" + std::to_string(1.3190403 * k) +
                    R"(,"bytes":)" + bytes_of(alt) + "}";
      }
      logprobs += R"(]}],"refusal":null})";
    }
    events.push_back(head + R"([{"index":0,"delta":{"content":)" + json_string(w) + R"(},"logprobs":)" + logprobs +
                     R"(,"finish_reason":null}],"usage":null})" "\n\n");
  }
  events.push_back(head + R"([{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null})" "\n\n");
  events.push_back(head + R"([],"usage":{"prompt_tokens":12,"completion_tokens":512,"total_tokens":524}})" "\n\n");
  events.push_back("data: [DONE]\n\n");
  return events;
}

// The body cut as the transport would hand it over: per event, or in 1448-byte segments.
std::vector<std::string> pieces(int top_logprobs, bool per_event) {
  const std::vector<std::string> events = openai_events(top_logprobs);
  if (per_event) return events;
  std::string body;
  for (const auto& e : events) body += e;
  std::vector<std::string> out;
  for (std::size_t at = 0; at < body.size(); at += 1448) out.push_back(body.substr(at, 1448));
  return out;
}

void set_counters(benchmark::State& state, std::size_t bytes) {
  state.counters["ns_per_token"] = benchmark::Counter(stream_tokens, benchmark::Counter::kIsIterationInvariantRate |
                                                                         benchmark::Counter::kInvert);
  state.counters["bytes_per_token"] = benchmark::Counter(static_cast<double>(bytes) / stream_tokens);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}

// Args: top_logprobs (0: no logprobs), per_event (1) or 1448-byte pieces (0).
void BM_StreamParse(benchmark::State& state) {
  const std::vector<std::string> body = pieces(static_cast<int>(state.range(0)), state.range(1) != 0);
  std::size_t bytes = 0;
  for (const auto& p : body) bytes += p.size();
  auto stream = std::make_unique<hedge::cloud::completion_stream<>>();
  std::size_t text = 0;
  for (auto _ : state) {
    stream->reset();
    for (const auto& p : body) {
      auto r = stream->feed(p, [&](const hedge::cloud::choice_delta& d) {
        text += d.text.size();
        for (const auto& t : d.tokens) text += t.top_size;
        return true;
      });
      if (!r) state.SkipWithError(r.error().c_str());
    }
    if (stream->tokens() != stream_tokens) state.SkipWithError("wrong token count");
  }
  benchmark::DoNotOptimize(text);
  set_counters(state, bytes);
}
BENCHMARK(BM_StreamParse)->ArgNames({"top_logprobs", "per_event"})->ArgsProduct({{0, 5}, {1, 0}});

// A transport replaying a prepared body from memory.
struct replay_transport {
  const std::vector<std::string>* body = nullptr;
  hedge::result<void> send(const hedge::cloud::http_request&, const hedge::cloud::transport_limits&,
                           hedge::cloud::response_sink sink) {
    hedge::cloud::http_response_head head;
    head.status = 200;
    head.content_type = "text/event-stream";
    if (!sink.on_head(head)) return hedge::error{hedge::errc::rejected, "cancelled"};
    for (const auto& p : *body)
      if (!sink.on_body(p)) return hedge::error{hedge::errc::rejected, "cancelled"};
    return hedge::ok();
  }
};

void BM_ClientStream(benchmark::State& state) {
  const int top = static_cast<int>(state.range(0));
  const std::vector<std::string> body = pieces(top, true);
  std::size_t bytes = 0;
  for (const auto& p : body) bytes += p.size();
  replay_transport transport{&body};
  auto client = std::make_unique<hedge::cloud::cloud_client<replay_transport>>(
      transport, hedge::cloud::endpoint{.base_path = "/v1", .model = "gpt-4o-mini", .api_key = "sk-bench", .limits = {}});
  const hedge::cloud::chat_message messages[] = {{"user", "Tell me a story about a girl named Lily."}};
  hedge::cloud::request_options options;
  options.include_usage = true;
  if (top > 0) options.top_logprobs = top;
  std::size_t text = 0;
  for (auto _ : state) {
    const auto out = client->stream_chat(messages, options, [&](const hedge::cloud::choice_delta& d) {
      text += d.text.size();
      return true;
    });
    if (!out.ok()) state.SkipWithError(out.status.error().c_str());
  }
  benchmark::DoNotOptimize(text);
  set_counters(state, bytes);
}
BENCHMARK(BM_ClientStream)->ArgNames({"top_logprobs"})->Arg(0)->Arg(5);

}  // namespace
