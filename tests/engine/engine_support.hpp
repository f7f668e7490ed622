// Fakes of the engine tests: an edge that answers from a script on simulated time, a
// Transport that injects every cloud fault on simulated time and records every byte sent
// (the privacy tests read it), and a concurrent scripted cloud for races.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/cloud/client.hpp"
#include "hedge/engine/backend.hpp"
#include "hedge/engine/clock.hpp"

namespace hedge::engine::test {

using namespace std::chrono_literals;
using sim_clock = simulated_clock;

/// One scripted token: its text and log-prob.
struct scripted_token {
  std::string text;
  float logprob = -0.05f;
};

inline std::vector<scripted_token> tokens_of(std::initializer_list<std::string_view> pieces, float logprob = -0.05f) {
  std::vector<scripted_token> t;
  for (auto p : pieces) t.push_back({std::string(p), logprob});
  return t;
}

/// An EdgeBackend answering from scripts: `answer` for a fresh request, `continued` after a
/// continuation, `summary` when asked to summarize (the last message is the instruction).
struct fake_edge {
  bool loaded = true;
  std::uint32_t context = 4096;
  std::vector<scripted_token> answer, continued, summary;
  sim_clock clock;
  std::chrono::milliseconds prefill{20ms}, per_token{10ms};
  std::optional<std::size_t> fail_at;  ///< fail with capacity_exceeded after this many tokens
  std::string summary_instruction = "Summarize";

  // What it was asked.
  int calls = 0;
  std::vector<std::string> continuations;
  std::vector<std::string> prompts;  ///< every message's content (or the prompt), joined by '\n'

  explicit fake_edge(sim_clock c) : clock(c) {}

  [[nodiscard]] bool ready() const noexcept { return loaded; }
  [[nodiscard]] std::uint32_t context_tokens() const noexcept { return context; }

  result<edge_summary> generate(const edge_call& call, function_ref<bool(const edge_token&)> on_token) {
    ++calls;
    continuations.emplace_back(call.continuation);
    std::string joined(call.prompt);
    for (const auto& m : call.messages) joined.append(m.content).append("\n");
    prompts.push_back(joined);
    const bool summarizing = !call.messages.empty() && call.messages.back().content.starts_with(summary_instruction);
    const auto& script = summarizing ? summary : call.continuation.empty() ? answer : continued;
    clock.advance(prefill);
    edge_summary s;
    s.prompt_tokens = (joined.size() + call.continuation.size() + 3) / 4;
    for (std::size_t i = 0; i < script.size() && i < call.max_tokens; ++i) {
      if (fail_at && i == *fail_at) return error{errc::capacity_exceeded} << "the KV cache is full";
      clock.advance(per_token);
      ++s.generated;
      if (!on_token(edge_token{script[i].text, static_cast<std::int32_t>(100 + i), script[i].logprob, 0.5f})) return s;
    }
    s.length_limited = script.size() >= call.max_tokens;
    return s;
  }
};

/// An SSE body of chat chunks, one per piece, a finish reason and [DONE].
inline std::string sse_chat(std::initializer_list<std::string_view> pieces, bool done = true) {
  std::string body;
  for (auto p : pieces) {
    body.append("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
    for (char c : p) {
      if (c == '"' || c == '\\') body.push_back('\\');
      body.push_back(c);
    }
    body.append("\"}}]}\n\n");
  }
  if (done) body.append("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
  return body;
}

/// A Transport that answers each call from the next scripted response, on simulated time,
/// and records every request. A response's fault happens after `cut_after` body bytes.
struct fault_transport {
  enum class fault { none, refused, first_byte_timeout, cut, stall };
  struct response {
    response(int s = 200, std::string b = {}, fault f = fault::none) : status(s), body(std::move(b)), what(f) {}
    int status = 200;
    std::string body;
    fault what = fault::none;
    std::size_t cut_after = std::string::npos;
    std::optional<std::chrono::seconds> retry_after;
    std::chrono::milliseconds first_byte{50ms};
    std::chrono::milliseconds per_piece{5ms};
    std::size_t piece_bytes = 16;
    std::string content_type = "text/event-stream";
  };

  sim_clock clock;
  std::deque<response> script;
  response otherwise{503, "{\"error\":{\"message\":\"no script\",\"type\":\"server_error\"}}", fault::none};

  // Every request, whole.
  std::vector<std::string> sent;
  std::vector<cloud::transport_limits> limits_seen;

  explicit fault_transport(sim_clock c) : clock(c) {}

  result<void> send(const cloud::http_request& request, const cloud::transport_limits& limits, cloud::response_sink sink) {
    std::string record(request.path);
    for (const auto& h : request.headers) record.append("\n").append(h.name).append(": ").append(h.value);
    record.append("\n\n").append(request.body);
    sent.push_back(std::move(record));
    limits_seen.push_back(limits);
    response r = script.empty() ? otherwise : std::move(script.front());
    if (!script.empty()) script.pop_front();
    if (r.what == fault::refused) {
      clock.advance(1ms);
      return error{errc::unavailable} << "connection refused";
    }
    if (r.what == fault::first_byte_timeout || (limits.first_byte.count() > 0 && r.first_byte > limits.first_byte)) {
      clock.advance(limits.first_byte.count() > 0 ? limits.first_byte : 120'000ms);
      return error{errc::timeout} << "no first byte within " << limits.first_byte.count() << " ms (first_byte)";
    }
    clock.advance(r.first_byte);
    cloud::http_response_head head;
    head.status = r.status;
    head.content_type = r.content_type;
    head.retry_after = r.retry_after;
    if (!sink.on_head(head)) return error{errc::rejected} << "cancelled";
    const std::size_t end = r.cut_after < r.body.size() ? r.cut_after : r.body.size();
    for (std::size_t at = 0; at < end;) {
      if (sink.cancel != nullptr && sink.cancel->load()) return error{errc::rejected} << "cancelled";
      clock.advance(r.per_piece);
      const std::size_t n = r.piece_bytes < end - at ? r.piece_bytes : end - at;
      if (!sink.on_body(std::string_view(r.body).substr(at, n))) return error{errc::rejected} << "cancelled";
      at += n;
    }
    if (r.what == fault::cut) return error{errc::unavailable} << "the connection closed before the last chunk";
    if (r.what == fault::stall) {
      clock.advance(limits.between_chunks);
      return error{errc::timeout} << "no data for " << limits.between_chunks.count() << " ms (between_chunks)";
    }
    return ok();
  }
};

/// A concurrent CloudBackend whose pieces arrive at scripted times after begin().
struct scripted_cloud {
  static constexpr bool concurrent = true;
  struct piece {
    std::chrono::milliseconds at;
    std::string text;
  };
  sim_clock clock;
  std::vector<piece> pieces;
  bool fail_at_end = false;
  std::vector<std::string> begun;  ///< each call's messages (or prompt), joined
  int cancels = 0;

  explicit scripted_cloud(sim_clock c) : clock(c) {}

  result<void> begin(const cloud_call& call) {
    std::string joined(call.prompt);
    for (const auto& m : call.messages) joined.append(m.content).append("\n");
    joined.append(call.continuation);
    begun.push_back(joined);
    start_ = clock.now();
    next_ = 0;
    return ok();
  }
  cloud_poll poll(function_ref<bool(const cloud_piece&)> on_piece, std::chrono::milliseconds wait) {
    cloud_poll out;
    const auto deadline = clock.now() + wait;
    for (;;) {
      while (next_ < pieces.size() && start_ + pieces[next_].at <= clock.now()) on_piece(cloud_piece{pieces[next_++].text});
      if (next_ == pieces.size()) {
        out.state = fail_at_end ? cloud_state::failed : cloud_state::finished;
        if (fail_at_end) out.status = error{errc::unavailable} << "stream cut";
        return out;
      }
      const auto due = start_ + pieces[next_].at;
      if (due > deadline) {
        if (deadline > clock.now()) clock.advance(deadline - clock.now());
        return out;
      }
      clock.advance(due - clock.now());
    }
  }
  void cancel() { ++cancels; }

 private:
  sim_clock::time_point start_{};
  std::size_t next_ = 0;
};

}  // namespace hedge::engine::test
