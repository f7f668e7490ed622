// hedge's main job: hedge-server as a hybrid gateway between a local edge model and a cloud,
// and a mixed workload sent through the OpenAI API (hedge's own cloud_client over libcurl),
// as a user's application would send it.
//
//   this program --OpenAI API--> gateway (hedge-server -m EDGE --cloud URL) --> cloud
//                                   edge: the local model          (hedge-server -m CLOUD,
//                                                                    slowed and priced)
//
// It starts the cloud and the gateway on free loopback ports (or uses --cloud URL, a real
// OpenAI-compatible endpoint, key from the environment), then sends: short simple prompts,
// requests the caller sends to the cloud, personal data and a private data class, a prompt
// longer than the edge's context, a multi-turn conversation held for verification; then the
// cloud goes down (this program kills it), a burst trips the gateway's circuit breaker, the
// cloud comes back; one greedy request cloud-only and again speculative (the edge drafts, the
// cloud scores); then cloud requests until the budget runs out. For each request it prints
// the route and its reason, the tiers that wrote the text, the time to first token, the text,
// and any hand-off; at the end a summary (share per tier, p50/p95 time to first token per
// tier, escalations, fallbacks, retries, redactions, cost against all-cloud) and an SVG of
// the latencies with the outage marked. It exits 1 if any request was lost.
//
// Usage: hedge_example_gateway_demo SERVER EDGE.gguf [--cloud-model CLOUD.gguf | --cloud URL]
//                                   [--svg PATH] [--quick]
#include <hedge/cloud/client.hpp>
#include <hedge/os/http_transport.hpp>

#include <fcntl.h>
#include <signal.h>
#include <csignal>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace hedge;
using namespace std::chrono_literals;

/// A hedge-server process on a free loopback port (or on `port`), stopped with SIGTERM.
class server_process {
 public:
  server_process(const std::string& binary, std::vector<std::string> args, int port = 0) {
    args.insert(args.begin(), binary);
    args.push_back("--port");
    args.push_back(std::to_string(port));
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      // The servers' own log lines would interleave with the demo's; a server that does not
      // start is reported by the demo (run it by hand to see why).
      if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) dup2(null, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* lines = fdopen(out[0], "r");
    char line[256];
    if (lines != nullptr && std::fgets(line, sizeof line, lines) != nullptr) {
      const std::string s(line);
      if (const auto at = s.find("http://"); at != std::string::npos) url_ = s.substr(at, s.find_first_of("\r\n", at) - at);
    }
    if (lines != nullptr) std::fclose(lines);
  }
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;
  ~server_process() { stop(SIGTERM); }

  void stop(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] int port() const { return std::atoi(url_.substr(url_.rfind(':') + 1).c_str()); }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

/// A field of the gateway's `hedge` object, read from the last chunk's JSON text (the demo
/// reads a few flat fields; the spans' tiers are read in order).
std::string field(std::string_view json, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":";
  const auto at = json.find(key);
  if (at == std::string_view::npos) return {};
  auto v = json.substr(at + key.size());
  if (!v.empty() && v[0] == '"') return std::string(v.substr(1, v.find('"', 1) - 1));
  return std::string(v.substr(0, v.find_first_of(",}")));
}
std::vector<std::string> span_tiers(std::string_view json) {
  std::vector<std::string> tiers;
  for (auto at = json.find("{\"tier\":\""); at != std::string_view::npos; at = json.find("{\"tier\":\"", at + 1)) {
    const auto begin = at + 9;
    tiers.emplace_back(json.substr(begin, json.find('"', begin) - begin));
  }
  return tiers;
}

struct request_spec {
  std::string label;
  std::vector<std::pair<std::string, std::string>> messages;
  std::string hedge;  ///< the request's hedge object, e.g. {"mode":"cloud"}
  int max_tokens = 40;
  double temperature = 0.8;
};

struct record {
  std::string label, phase, mode, reason, text, error;
  std::vector<std::string> tiers;
  double ttft_ms = 0, total_ms = 0, cost = 0;
  bool answered = false, escalated = false, fallback = false;
  int retries = 0, redactions = 0;
  long handoff_at = -1;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  double acceptance = -1;  ///< a speculative request's
  long rounds = 0;
};

using client_type = cloud::cloud_client<os::curl_transport>;

record send(client_type& client, const request_spec& spec, std::string_view phase) {
  record r;
  r.label = spec.label;
  r.phase = phase;
  std::vector<cloud::chat_message> messages;
  for (const auto& [role, content] : spec.messages) messages.push_back({role, content});
  cloud::request_options o;
  o.max_tokens = spec.max_tokens;
  o.temperature = spec.temperature;
  o.top_p = 0.9;
  o.seed = 7;
  o.include_usage = true;
  const std::string extra = "{\"hedge\":" + spec.hedge + "}";
  o.extra = extra;
  std::string hedge_object;
  auto on_event = [&](std::string_view data) {
    if (const auto at = data.find("\"hedge\":{"); at != std::string_view::npos) hedge_object = std::string(data.substr(at + 8));
  };
  const function_ref<void(std::string_view)> observer(on_event);
  client.observe_events(&observer);
  const auto outcome = client.stream_chat(messages, o, [&](const cloud::choice_delta& d) {
    r.text.append(d.text);
    return true;
  });
  client.observe_events(nullptr);
  r.total_ms = std::chrono::duration<double, std::milli>(outcome.duration).count();
  if (outcome.time_to_first_token) r.ttft_ms = std::chrono::duration<double, std::milli>(*outcome.time_to_first_token).count();
  r.prompt_tokens = outcome.usage.prompt_tokens;
  r.completion_tokens = outcome.usage.completion_tokens;
  if (!outcome.ok()) {
    r.error = std::string(outcome.status.error().message());
    r.answered = outcome.http_status == 429;  // refused with 429 is an answer, not a loss
    return r;
  }
  r.answered = !hedge_object.empty();
  r.mode = field(hedge_object, "mode");
  r.reason = field(hedge_object, "reason");
  r.tiers = span_tiers(hedge_object);
  r.escalated = field(hedge_object, "escalated") == "true";
  r.fallback = field(hedge_object, "fallback") == "true";
  r.retries = std::atoi(field(hedge_object, "retries").c_str());
  r.redactions = std::atoi(field(hedge_object, "redactions").c_str());
  const std::string at = field(hedge_object, "handoff_at_token");
  r.handoff_at = at.empty() || at == "null" ? -1 : std::atol(at.c_str());
  r.cost = std::atof(field(hedge_object, "cost").c_str());
  if (const std::string a = field(hedge_object, "acceptance"); !a.empty()) {
    r.acceptance = std::atof(a.c_str());
    r.rounds = std::atol(field(hedge_object, "rounds").c_str());
  }
  return r;
}

void print(const record& r) {
  std::printf("\n[%s] %s\n", r.phase.c_str(), r.label.c_str());
  if (!r.error.empty() && r.tiers.empty()) {
    std::printf("  %s: %s\n", r.answered ? "refused" : "LOST", r.error.c_str());
    return;
  }
  std::string tiers;
  for (const auto& t : r.tiers) tiers += (tiers.empty() ? "" : " -> ") + t;
  std::printf("  route: %s (%s); answered by %s; first token %.1f ms, total %.1f ms\n", r.mode.c_str(),
              r.reason.c_str(), tiers.empty() ? "nobody" : tiers.c_str(), r.ttft_ms, r.total_ms);
  if (r.handoff_at >= 0) std::printf("  hand-off at token %ld%s\n", r.handoff_at, r.escalated ? " (escalated)" : r.fallback ? " (fallback)" : "");
  else if (r.fallback && r.reason == "budget_exhausted") std::printf("  over the hourly budget: the edge answered\n");
  else if (r.fallback) std::printf("  fallback: the cloud failed, the edge answered\n");
  if (r.retries > 0) std::printf("  %d retr%s\n", r.retries, r.retries == 1 ? "y" : "ies");
  if (r.redactions > 0) std::printf("  %d personal data span(s) sent as placeholders\n", r.redactions);
  std::string shown;
  for (char c : r.text.substr(0, 110)) shown += (static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  std::printf("  \"%s%s\"\n", shown.c_str(), r.text.size() > 110 ? "..." : "");
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

/// Time to first token per request, a dot per request coloured by the tier that answered
/// first, the outage shaded.
void write_svg(const std::string& path, const std::vector<record>& records, std::size_t outage_begin,
               std::size_t outage_end) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  const double width = 760, height = 300, left = 60, bottom = 260, top = 30;
  double most = 1;
  for (const auto& r : records) most = std::max(most, r.ttft_ms);
  const double step = (width - left - 20) / static_cast<double>(std::max<std::size_t>(records.size(), 1));
  std::fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' font-size='11'>\n",
               width, height);
  std::fprintf(f, "<rect x='%.1f' y='%.0f' width='%.1f' height='%.0f' fill='#fdd'/>\n", left + step * static_cast<double>(outage_begin),
               top, step * static_cast<double>(outage_end - outage_begin), bottom - top);
  std::fprintf(f, "<text x='%.1f' y='%.0f'>cloud down</text>\n", left + step * static_cast<double>(outage_begin) + 2, top + 12);
  std::fprintf(f, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n", left, bottom, width - 20, bottom);
  std::fprintf(f, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='black'/>\n", left, top, left, bottom);
  std::fprintf(f, "<text x='5' y='%.0f'>%.0f ms</text><text x='5' y='%.0f'>0</text>\n", top + 4, most, bottom);
  std::fprintf(f, "<text x='%.0f' y='%.0f'>request</text><text x='%.0f' y='16'>time to first token per request (hedge gateway)</text>\n",
               width / 2, bottom + 28, left);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    const bool edge = !r.tiers.empty() && r.tiers[0] == "edge";
    const char* colour = r.tiers.empty() ? "#999" : edge ? "#2a7" : "#36c";
    std::fprintf(f, "<circle cx='%.1f' cy='%.1f' r='4' fill='%s'/>\n", left + step * (static_cast<double>(i) + 0.5),
                 bottom - (bottom - top) * r.ttft_ms / most, colour);
  }
  std::fprintf(f, "<circle cx='%.0f' cy='%.0f' r='4' fill='#2a7'/><text x='%.0f' y='%.0f'>edge</text>", width - 140, bottom + 24,
               width - 132, bottom + 28);
  std::fprintf(f, "<circle cx='%.0f' cy='%.0f' r='4' fill='#36c'/><text x='%.0f' y='%.0f'>cloud</text></svg>\n", width - 80,
               bottom + 24, width - 72, bottom + 28);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SERVER EDGE.gguf [--cloud-model CLOUD.gguf | --cloud URL] [--svg PATH] [--quick]\n", argv[0]);
    return 2;
  }
  const std::string server = argv[1], edge_model = argv[2];
  std::string cloud_model = edge_model, external_cloud, svg = "gateway-demo.svg";
  bool quick = false;
  for (int i = 3; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--cloud-model" && i + 1 < argc) cloud_model = argv[++i];
    else if (a == "--cloud" && i + 1 < argc) external_cloud = argv[++i];
    else if (a == "--svg" && i + 1 < argc) svg = argv[++i];
    else if (a == "--quick") quick = true;
    else return std::fprintf(stderr, "unknown argument %s\n", argv[i]), 2;
  }
  std::signal(SIGPIPE, SIG_IGN);

  // The cloud: a hedge-server made slower (8 ms before each token), priced as a cloud.
  std::unique_ptr<server_process> cloud;
  std::string cloud_url = external_cloud;
  if (cloud_url.empty()) {
    cloud = std::make_unique<server_process>(server, std::vector<std::string>{"-m", cloud_model, "--token-delay-ms", "8"});
    cloud_url = cloud->url();
    if (cloud_url.empty()) return std::fprintf(stderr, "the cloud server did not start\n"), 1;
  }
  // The gateway: the edge model, the cloud behind it, prices and an hourly budget; one
  // worker, so its circuit breaker is the one the burst trips.
  server_process gateway(server, {"-m", edge_model, "--ctx-size", "256", "--cloud", cloud_url, "--cloud-price", "150,600", "--budget",
                                  quick ? "0.41/hour" : "0.51/hour", "--gateway-workers", "1", "--queue", "8"});
  if (gateway.url().empty()) return std::fprintf(stderr, "the gateway did not start\n"), 1;
  std::printf("cloud:   %s%s\ngateway: %s (edge: %s, context 256)\n", cloud_url.c_str(),
              external_cloud.empty() ? " (hedge-server, 8 ms per token, priced 150/600 per 1M tokens)" : "",
              gateway.url().c_str(), edge_model.c_str());

  os::curl_transport transport(gateway.url());
  cloud::endpoint e;
  e.limits.first_byte = 60s;
  auto client = std::make_unique<client_type>(transport, e);

  const std::string cloud_mode = "{\"mode\":\"cloud\"}";
  std::vector<request_spec> first = {
      {"a short prompt", {{"user", "Lily went to the park."}}, "{}", 40},
      {"another short prompt", {{"user", "Tom had a red ball."}}, "{}", 40},
      {"a long question the caller sends to the cloud",
       {{"user", "Write a careful story about a boy who learns to share his toys with his sister and friends."}},
       cloud_mode, 60},
      {"personal data: a card number, redacted before it leaves",
       {{"user", "My card 4111 1111 1111 1111 was charged twice. Write a note about it."}}, cloud_mode, 30},
      {"a private data class: never leaves the device",
       {{"user", "The patient's diagnosis is confidential."}}, "{\"mode\":\"cloud\",\"data_class\":\"private\"}", 30},
      {"longer than the edge's context of 256 (its answer would not fit)", {{"user", "Tell a very long story."}}, "{}",
       300},
      {"a multi-turn conversation, held until verified",
       {{"user", "Once upon a time there was a cat."}, {"assistant", "The cat liked to play."},
        {"user", "What did the cat do next?"}},
       "{\"delivery\":\"verified\"}", 40},
  };
  std::vector<record> records;
  auto run = [&](const request_spec& s, std::string_view phase) {
    records.push_back(send(*client, s, phase));
    print(records.back());
  };
  for (const auto& s : first) run(s, "normal");

  // The cloud goes down in the middle of the run.
  const std::size_t outage_begin = records.size();
  if (cloud) {
    std::printf("\n--- the cloud goes down (this program kills its process) ---\n");
    cloud->stop(SIGKILL);
  }
  const request_spec to_cloud{"a request for the cloud while it is down", {{"user", "Sam found a shiny key."}}, cloud_mode, 30};
  if (cloud) {
    run(to_cloud, "outage");
    std::printf("\n--- its failed retries opened the circuit breaker: a burst of 4 goes straight to the edge ---\n");
    for (int i = 0; i < 4; ++i) run({"burst " + std::to_string(i + 1), {{"user", "A little bird sang."}}, cloud_mode, 20}, "outage");
    run({"the router, with the breaker open", {{"user", "Mia baked a cake."}}, "{}", 30}, "outage");
  }
  const std::size_t outage_end = records.size();
  if (cloud) {
    std::printf("\n--- the cloud comes back; after the breaker's cooldown it answers again ---\n");
    const int port = std::atoi(cloud_url.substr(cloud_url.rfind(':') + 1).c_str());
    cloud = std::make_unique<server_process>(server, std::vector<std::string>{"-m", cloud_model, "--token-delay-ms", "8"}, port);
    std::this_thread::sleep_for(5500ms);
    run({"the cloud is back", {{"user", "Ben and his dog ran home."}}, cloud_mode, 30}, "recovered");
  }
  // Cross-tier speculation: the same greedy request cloud-only and speculative. Here both
  // tiers run the same checkpoint, so every draft is accepted; scripts/speculative-sweep.sh
  // measures a quantized draft and where the mode stops paying.
  std::printf("\n--- speculation: the edge drafts, the cloud scores each draft in one call ---\n");
  const std::vector<std::pair<std::string, std::string>> puppy = {{"user", "Lily found a little puppy."}};
  run({"the same request, cloud only (greedy)", puppy, cloud_mode, 48, 0.0}, "speculation");
  run({"the same request, speculative (greedy)", puppy, "{\"mode\":\"speculative\"}", 48, 0.0}, "speculation");
  {
    const record& alone = records[records.size() - 2];
    const record& speculative = records.back();
    std::printf("  speculative: %.0f ms against %.0f ms cloud-only (%.1fx faster), acceptance %.2f over %ld rounds, "
                "same text: %s\n",
                speculative.total_ms, alone.total_ms, speculative.total_ms > 0 ? alone.total_ms / speculative.total_ms : 0.0,
                speculative.acceptance, speculative.rounds, speculative.text == alone.text ? "yes" : "no");
  }
  std::printf("\n--- cloud requests until the budget runs out ---\n");
  for (int i = 0; i < (quick ? 6 : 8); ++i)
    run({"budget " + std::to_string(i + 1), {{"user", "Tell me a story about a friendly dragon and a brave knight."}},
         cloud_mode, 60},
        "budget");

  // The summary.
  std::map<std::string, std::vector<double>> ttft;
  std::map<std::string, int> answered_by;
  int lost = 0, escalations = 0, fallbacks = 0, retries = 0, redactions = 0;
  double cost = 0, all_cloud = 0;
  for (const auto& r : records) {
    if (!r.answered) ++lost;
    if (r.tiers.empty()) continue;
    answered_by[r.tiers[0]]++;
    ttft[r.tiers[0]].push_back(r.ttft_ms);
    escalations += r.escalated;
    fallbacks += r.fallback;
    retries += r.retries;
    redactions += r.redactions;
    cost += r.cost;
    all_cloud += (static_cast<double>(std::max<std::int64_t>(r.prompt_tokens, 0)) * 150 +
                  static_cast<double>(std::max<std::int64_t>(r.completion_tokens, 0)) * 600) * 1e-6;
  }
  std::printf("\n=== summary: %zu requests, %d lost ===\n", records.size(), lost);
  for (const auto& [tier, n] : answered_by)
    std::printf("  %-7s answered %2d (%3.0f%%), first token p50 %.1f ms, p95 %.1f ms\n", tier.c_str(), n,
                100.0 * n / static_cast<double>(records.size()), percentile(ttft[tier], 0.5), percentile(ttft[tier], 0.95));
  std::printf("  escalations %d, fallbacks %d, retries %d, redactions %d\n", escalations, fallbacks, retries, redactions);
  std::printf("  cost %.6f against %.6f all-cloud (the same tokens at the cloud's prices): %.0f%% saved\n", cost, all_cloud,
              all_cloud > 0 ? 100.0 * (1.0 - cost / all_cloud) : 0.0);
  write_svg(svg, records, outage_begin, outage_end);
  std::printf("  latency plot: %s\n", svg.c_str());
  return lost == 0 ? 0 : 1;
}
