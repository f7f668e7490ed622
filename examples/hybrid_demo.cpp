// hedge's main job: the hybrid engine (include/hedge/engine/) serving a set of requests with
// two real tiers, and printing what it did for each: the route and why, which tier wrote
// which bytes, the verifier's verdict, hand-offs, retries, fallbacks, cost and times.
//
//  - Edge tier: a real llama checkpoint (../shared/models/stories260K.gguf, a TinyStories
//    model), or, when that folder is absent or with --synthetic, a small random llama the
//    demo writes as a GGUF first; hedge runs it on its own kernels (engine::edge_tier).
//  - Cloud tiers, in fallback order: a closed loopback port (a cloud that is down: its
//    retries, fallback and circuit breaker are real), then, with --cloud URL, an
//    OpenAI-compatible server (hedge-server on loopback when run by examples/hybrid_demo.sh)
//    reached by cloud_client over libcurl (engine::cloud_tier).
// The demo holds no orchestration: routing, verification, hand-off, retries, fallback,
// redaction and telemetry are the engine's.
//
// Usage: hedge_example_hybrid_demo [MODEL.gguf | --synthetic] [--threads N] [--cloud URL]
//        hedge_example_hybrid_demo --write-synthetic PATH   (writes the synthetic model, exits)
#include <hedge/engine/cloud_tier.hpp>
#include <hedge/engine/edge_tier.hpp>
#include <hedge/engine/hybrid_engine.hpp>
#include <hedge/os/http_transport.hpp>
#include <hedge/os/mapped_file.hpp>
#include <hedge/os/model_file.hpp>
#include <hedge/os/steady_clock.hpp>
#include <hedge/os/thread_pool.hpp>
#include <hedge/hedge.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "hedge/os/csv_files.hpp"

namespace {

using namespace hedge;
using namespace hedge::model;

/// Exits with the error's message: the demo has no way to continue without the step.
template <class T>
T check(result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "%s: [%s] %s\n", what, to_string(r.error().code()).data(), r.error().c_str());
    std::exit(1);
  }
  if constexpr (!std::is_void_v<T>) return std::move(*r);
}

/// A small random llama with a byte-level vocabulary, written as a GGUF file: the edge
/// model when no real checkpoint is at hand (speed and plumbing, not stories).
void write_synthetic_gguf(const std::string& path) {
  std::vector<std::string> pieces{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<std::int32_t> types{2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof piece, "<0x%02X>", b);
    pieces.emplace_back(piece), scores.push_back(0), types.push_back(6);
  }
  for (char c = 'a'; c <= 'z'; ++c) pieces.emplace_back(1, c), scores.push_back(-1), types.push_back(1);
  pieces.emplace_back("\xE2\x96\x81"), scores.push_back(-1), types.push_back(1);  // the SentencePiece space
  gguf_writer w;
  w.add("tokenizer.ggml.model", "llama");
  w.add_array("tokenizer.ggml.tokens", std::span<const std::string>(pieces));
  w.add_array("tokenizer.ggml.scores", std::span<const float>(scores));
  w.add_array("tokenizer.ggml.token_type", std::span<const std::int32_t>(types));
  synthetic_tensor_bytes tensors;
  check(add_synthetic_llama(w,
                            {.dim = 64, .hidden_dim = 192, .layers = 2, .heads = 4, .kv_heads = 2, .context = 256,
                             .vocab = static_cast<std::uint32_t>(pieces.size()), .seed = 2024},
                            tensors),
        "synthetic model");
  std::vector<std::byte> bytes;
  check(w.write(bytes), "synthetic model");
  check(os::write_text_file(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())),
        "synthetic model");
}

/// Prints generated text with control bytes escaped (a random model emits any byte).
void print_text(std::string_view text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 && c != '\n') std::printf("\\x%02x", b);
    else std::putchar(c);
  }
}

using curl_client = cloud::cloud_client<os::curl_transport>;
using cloud_backend = engine::cloud_tier<curl_client>;
using edge_backend = engine::edge_tier<llama<>, exec::thread_pool>;
using demo_router = route::router<route::privacy_policy, route::health_policy, route::context_fit_policy,
                                  route::latency_policy, route::cost_policy>;
using demo_engine = engine::hybrid_engine<edge_backend, cloud_backend, demo_router, verify::logistic_verifier,
                                          os::steady_clock, engine::telemetry>;

/// A cloud endpoint: a libcurl transport to `url`, a client on it, and the engine's tier.
struct cloud_endpoint {
  explicit cloud_endpoint(std::string root) : url(std::move(root)), transport(url) {
    cloud::endpoint e;
    e.limits.connect = std::chrono::seconds(2);
    client = std::make_unique<curl_client>(transport, e);
    tier = std::make_unique<cloud_backend>(*client);
  }
  std::string url;
  os::curl_transport transport;
  std::unique_ptr<curl_client> client;  // its buffers make it large: on the heap
  std::unique_ptr<cloud_backend> tier;
};

std::string_view tier_name(engine::tier_id t) {
  constexpr std::string_view clouds[] = {"cloud 0", "cloud 1", "cloud 2", "cloud 3"};
  return t.kind == route::tier::edge ? "edge" : clouds[t.cloud];
}

/// One request through the engine; its events and outcome printed as they come.
void serve(demo_engine& hybrid, std::string_view label, engine::engine_request request) {
  std::printf("\n%s\n  \"%.*s\"\n", label.data(), static_cast<int>(request.prompt.size()), request.prompt.data());
  const auto out = hybrid.run(request, [](const engine::engine_event& e) {
    switch (e.kind) {
      case engine::event_kind::routed:
      case engine::event_kind::token: break;
      case engine::event_kind::handoff:
        std::printf("  hand-off %s -> %s at token %zu (%s)\n", tier_name(e.from).data(), tier_name(e.tier).data(),
                    e.at_token, engine::to_string(e.why).data());
        break;
      case engine::event_kind::retry:
        std::printf("  retry %s, attempt %u after %lld ms ([%s])\n", tier_name(e.tier).data(), e.attempt,
                    static_cast<long long>(e.delay.count()), to_string(e.failure).data());
        break;
      case engine::event_kind::fallback:
        std::printf("  fallback %s -> %s ([%s])\n", tier_name(e.from).data(), tier_name(e.tier).data(),
                    to_string(e.failure).data());
        break;
      case engine::event_kind::breaker:
        std::printf("  circuit breaker of %s: %s\n", tier_name(e.tier).data(), engine::to_string(e.transition).data());
        break;
    }
  });
  const std::string_view explanation = out.explanation();
  std::printf("  route: %.*s\n  mode: %s\n", static_cast<int>(explanation.find(" | ")), explanation.data(),
              engine::to_string(out.ran).data());
  if (out.redactions > 0) std::printf("  %zu personal data spans sent as placeholders, restored in the answer\n", out.redactions);
  const std::string_view text = hybrid.delivered();
  for (std::size_t i = 0; i < out.span_count; ++i) {
    const auto& span = out.spans[i];
    std::printf("  [%s] \"", tier_name(span.tier).data());
    print_text(text.substr(span.begin, span.end - span.begin));
    std::printf("\"\n");
  }
  if (out.verified)
    std::printf("  verifier: %s (%s, confidence %.2f)%s\n",
                out.verdict.action == verify::verify_action::accept ? "accept" : "escalate",
                verify::to_string(out.verdict.why).data(), out.verdict.confidence,
                out.escalated ? ": escalated" : "");
  for (std::size_t slot = 0; slot < engine::tier_slots; ++slot) {
    const auto& r = out.tiers[slot];
    if (!r.used) continue;
    const auto id = slot == 0 ? engine::tier_id::edge() : engine::tier_id::cloud_at(slot - 1);
    std::printf("  %-7s %u call%s, %llu tokens in, %llu out, %llu delivered", tier_name(id).data(), r.attempts,
                r.attempts == 1 ? "" : "s", static_cast<unsigned long long>(r.input_tokens),
                static_cast<unsigned long long>(r.output_tokens), static_cast<unsigned long long>(r.delivered_tokens));
    if (r.time_to_first_token)
      std::printf(", first token %.1f ms", std::chrono::duration<double, std::milli>(*r.time_to_first_token).count());
    std::printf(", cost %.6f\n", r.cost);
  }
  if (out.ok())
    std::printf("  done: %zu tokens in %.1f ms, finish %s\n", out.tokens,
                std::chrono::duration<double, std::milli>(out.total).count(), out.finish_reason.data());
  else
    std::printf("  no answer: [%s] %s\n", to_string(out.status.error().code()).data(), out.status.error().c_str());
}

engine::engine_request story(std::string_view prompt, engine::mode m = engine::mode::automatic) {
  engine::engine_request r;
  r.prompt = prompt;
  r.requested = m;
  r.sampling.max_tokens = 48;
  r.sampling.temperature = 0.8;
  r.sampling.top_p = 0.9;
  r.sampling.seed = 7;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = HEDGE_SHARED_DIR "/models/stories260K.gguf";
  std::string cloud_url;
  std::size_t threads = 1;
  bool synthetic = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--synthetic") synthetic = true;
    else if (a == "--threads" && i + 1 < argc) threads = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--cloud" && i + 1 < argc) cloud_url = argv[++i];
    else if (a == "--write-synthetic" && i + 1 < argc) return write_synthetic_gguf(argv[++i]), 0;
    else if (!a.empty() && a[0] != '-') path = a;
    else
      return std::fprintf(stderr,
                          "usage: %s [MODEL.gguf | --synthetic] [--threads N] [--cloud URL]\n"
                          "       %s --write-synthetic PATH\n",
                          argv[0], argv[0]),
             2;
  }
  if (threads == 0) return std::fprintf(stderr, "--threads needs a positive count\n"), 2;
  if (synthetic || !os::mapped_file::open(path)) {
    if (!synthetic) std::printf("%s is absent: using a synthetic model\n", path.c_str());
    std::error_code ec;
    path = (std::filesystem::temp_directory_path(ec) / "hedge_demo_synthetic.gguf").string();
    write_synthetic_gguf(path);
  }
  std::printf("hedge hybrid demo: arch %s, %zu thread%s\n\n", arch::best_name().data(), threads, threads == 1 ? "" : "s");

  // The edge tier: the model loaded as every hedge tool loads one (os/model_file.hpp).
  auto loaded = check(os::load_model({.model = path, .tokenizer = {}, .quantize = load_quantization::none}), "model");
  const tokenizer& tok = loaded.tok;
  const auto cfg = loaded.weights.config;
  auto runnable = check(os::make_llama(loaded, {.max_sessions = 2,
                                                .context = cfg.context_length < 512 ? cfg.context_length : 512,
                                                .max_threads = threads}),
                        "model");
  auto& model = runnable.model;
  exec::thread_pool pool(threads);
  std::printf("edge model: %s (%zu bytes): dim %u, %u layers, %u heads (%u KV heads), vocabulary %u\n", path.c_str(),
              loaded.file.bytes().size(), cfg.dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.vocab_size);
  // A story model has no chat template: a conversation is its messages' text, one per line.
  auto render = [&](std::span<const cloud::chat_message> messages, std::vector<token_id>& ids) -> result<void> {
    std::string text;
    for (const auto& m : messages) text.append(m.content).append("\n");
    auto encoded = tok.encode(text);
    if (!encoded) return encoded.error();
    ids.insert(ids.end(), encoded->begin(), encoded->end());
    return ok();
  };
  auto edge = check(edge_backend::make(model, tok, pool, render), "edge tier");

  // The cloud tiers in fallback order: a closed port first (down), then the real one.
  std::vector<std::unique_ptr<cloud_endpoint>> endpoints;
  endpoints.push_back(std::make_unique<cloud_endpoint>("http://127.0.0.1:1"));
  if (!cloud_url.empty()) endpoints.push_back(std::make_unique<cloud_endpoint>(cloud_url));
  std::vector<cloud_backend*> clouds;
  for (const auto& e : endpoints) clouds.push_back(e->tier.get());
  std::printf("cloud 0: %s (a closed port: down)\n", endpoints[0]->url.c_str());
  if (cloud_url.empty())
    std::printf("cloud 1: not configured (--cloud URL; examples/hybrid_demo.sh starts hedge-server for it)\n");
  else
    std::printf("cloud 1: %s\n", cloud_url.c_str());

  // The deferral weights are illustrative; fit real ones on labelled generations (docs/routing.md).
  verify::deferral_rule rule;
  rule.bias = -2.0f;
  rule.weights = {-1.5f, 0.0f, -2.0f, 0.5f, 0.0f};
  rule.threshold = 0.5;
  engine::engine_options options;
  options.cloud_prices[0] = options.cloud_prices[1] = {0.15, 0.60};  // per million tokens
  options.retry.max_attempts = 2;
  options.retry.base_delay = std::chrono::milliseconds(50);
  options.cloud_limits.connect = std::chrono::seconds(2);
  options.cloud_limits.total = std::chrono::seconds(60);
  demo_engine hybrid(edge, clouds, demo_router{}, verify::logistic_verifier{rule}, os::steady_clock{},
                     engine::telemetry{}, options);

  // The cloud at a closed port fails three times, so its breaker opens and the router's
  // health policy stops sending it requests; the real one answers behind it.
  serve(hybrid, "1. the cloud first: cloud 0 is down, its retries fail, cloud 1 answers",
        story("Once upon a time, in a small town,", engine::mode::cloud_first));
  serve(hybrid, "2. the edge first, verified: the verifier accepts or escalates; an escalation is invisible",
        [] {
          auto r = story("Lily and her dog went to the park.", engine::mode::edge_first);
          r.hold = engine::delivery::verified();
          return r;
        }());
  serve(hybrid, "3. the edge first, streamed at once: an escalation continues after the delivered text",
        story("Tom found a big red ball.", engine::mode::edge_first));
  engine::engine_request card = story("My card 4111 1111 1111 1111 was charged twice, write a complaint.",
                                      engine::mode::cloud_first);
  serve(hybrid, "4. personal data: redacted before it leaves, restored in the answer", card);
  engine::engine_request regulated = story("Summarise this discharge letter.");
  regulated.classes = route::data_class::regulated;
  serve(hybrid, "5. a regulated data class: it never leaves the device", regulated);
  serve(hybrid, "6. the router decides", story("Tell me a short story about a cat."));
  engine::engine_request long_document = story("Summarise the attached contract.");
  long_document.expected_output_tokens = 4096;  // more than the edge's context: cloud only
  serve(hybrid, "7. too long for the edge's context", long_document);

  std::string metrics;
  hybrid.observer().write_json(metrics);
  std::printf("\ntelemetry: %s\n", metrics.c_str());
  return 0;
}
