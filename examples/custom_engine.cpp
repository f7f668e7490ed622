// A complete hybrid engine from user-written parts: an edge that answers from a phrase book
// and a cloud that fails its first call. Everything else is hedge's (router, verifier, retry,
// breaker, telemetry). docs/engine.md walks through it; ctest runs it (examples.custom_engine).
#include <cstdio>
#include <span>
#include <string_view>

#include "hedge/engine/hybrid_engine.hpp"
#include "hedge/os/steady_clock.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/verify/deferral.hpp"

using namespace hedge;
using namespace hedge::engine;

struct phrase_book_edge {  // an EdgeBackend: ready, context size, tokens with log-probs
  bool ready() const { return true; }
  std::uint32_t context_tokens() const { return 2048; }
  result<edge_summary> generate(const edge_call&, function_ref<bool(const edge_token&)> on_token) {
    for (std::string_view word : {"Paris", " is", " the", " capital."})
      if (!on_token({word, 1, -0.1f, 0.2f})) break;
    return edge_summary{8, 4, false};
  }
};

struct flaky_cloud {  // a CloudBackend: begin, poll, cancel; blocking, so never raced
  static constexpr bool concurrent = false;
  int calls = 0;
  result<void> begin(const cloud_call&) { return ok(); }
  cloud_poll poll(function_ref<bool(const cloud_piece&)> on_piece, std::chrono::milliseconds) {
    cloud_poll p;
    if (++calls == 1) return p.state = cloud_state::failed, p.status = error{errc::unavailable, "HTTP 503"}, p;
    on_piece({"The capital of France is Paris."});
    return p.state = cloud_state::finished, p;
  }
  void cancel() {}
};

int main() {
  phrase_book_edge edge;
  flaky_cloud cloud;
  flaky_cloud* clouds[] = {&cloud};
  hybrid_engine<phrase_book_edge, flaky_cloud, route::router<route::privacy_policy, route::health_policy>,
                verify::logistic_verifier, os::steady_clock>
      hybrid(edge, std::span<flaky_cloud* const>(clouds), {}, verify::logistic_verifier{{}}, {});
  for (mode m : {mode::edge_first, mode::cloud_first}) {
    engine_request request;
    request.prompt = "What is the capital of France?";
    request.requested = m;
    const auto out = hybrid.run(request, [](const engine_event& e) {
      if (e.kind == event_kind::retry) std::printf("  (retry after %lld ms)\n", static_cast<long long>(e.delay.count()));
    });
    std::printf("%s: \"%s\" (%zu tokens, %u retries)\n", to_string(out.ran).data(), std::string(hybrid.delivered()).c_str(),
                out.tokens, out.retries);
  }
}
