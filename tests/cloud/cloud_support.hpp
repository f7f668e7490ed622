// Helpers of the cloud tests: fixture files, a canonical text form of parsed deltas (to
// compare runs over different chunk splits), a fake clock and a fault-injecting transport.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/cloud/response.hpp"
#include "hedge/cloud/transport.hpp"
#include "support/alloc_counter.hpp"

namespace hedge::cloud::test {

inline std::string fixture(std::string_view name) {
  const std::string path = std::string(hedge::test::source_dir()) + "/tests/cloud/fixtures/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// One line per delta, with every field, so two runs compare as strings.
inline std::string describe(const choice_delta& d) {
  // Appends only: g++ 12 reports a false -Wrestrict on chains of std::string operator+.
  std::string s = "choice ";
  s.append(std::to_string(d.index));
  auto add = [&s](std::string_view label, std::string_view value) { s.append(label).append(value); };
  if (!d.role.empty()) add(" role=", d.role);
  add(" text=[", d.text);
  s.append("]");
  if (!d.refusal.empty()) add(" refusal=", d.refusal);
  if (!d.finish_reason.empty()) add(" finish=", d.finish_reason);
  if (!d.final_part) s.append(" (part)");
  char lp[32];
  for (const token_logprob& t : d.tokens) {
    std::snprintf(lp, sizeof lp, "%.9g", t.logprob);
    add(" {", t.token);
    add(":", lp);
    if (t.has_bytes) {
      s.append(" bytes");
      for (auto b : t.byte_values()) add(" ", std::to_string(b));
    }
    for (const top_logprob& a : t.top_logprobs()) {
      std::snprintf(lp, sizeof lp, "%.9g", a.logprob);
      add(" |", a.token);
      add(":", lp);
    }
    s.append("}");
  }
  s.append("\n");
  return s;
}

/// A clock that advances 1 ms at every reading.
struct fake_clock {
  using time_point = std::chrono::steady_clock::time_point;
  std::chrono::milliseconds* now_ms;
  time_point now() noexcept { return time_point{} + (*now_ms += std::chrono::milliseconds(1)); }
};

/// A Transport that answers from a script and records the request.
struct fake_transport {
  enum class fault { none, cut, timeout, end };  // end: the body just ends, without error

  // The answer.
  int status = 200;
  std::string content_type = "text/event-stream";
  std::optional<std::chrono::seconds> retry_after;
  std::string body;
  std::size_t piece = 7;                      // bytes per on_body call
  fault after_body = fault::none;             // what happens once `deliver` bytes went out
  std::size_t deliver = std::string::npos;    // bytes of body delivered before the fault
  bool no_head = false;                       // fail before any response (connect timeout)
  bool record = true;                         // copy the request (allocates)

  // What was sent.
  int calls = 0;
  std::string method, path, request_body;
  std::vector<std::pair<std::string, std::string>> headers;
  transport_limits limits_seen{};

  result<void> send(const http_request& request, const transport_limits& limits, response_sink sink) {
    ++calls;
    limits_seen = limits;
    if (record) {
      method = std::string(request.method);
      path = std::string(request.path);
      request_body = std::string(request.body);
      headers.clear();
      for (const http_header& h : request.headers) headers.emplace_back(std::string(h.name), std::string(h.value));
    }
    if (no_head) return error{errc::timeout} << "connect timeout (10000 ms)";
    http_response_head head;
    head.status = status;
    head.content_type = content_type;
    head.retry_after = retry_after;
    if (!sink.on_head(head)) return error{errc::rejected} << "cancelled";
    const std::size_t end = deliver < body.size() ? deliver : body.size();
    for (std::size_t at = 0; at < end;) {
      if (sink.cancel != nullptr && sink.cancel->load()) return error{errc::rejected} << "cancelled";
      const std::size_t n = piece < end - at ? piece : end - at;
      if (!sink.on_body(std::string_view(body).substr(at, n))) return error{errc::rejected} << "cancelled";
      at += n;
    }
    switch (after_body) {
      case fault::cut: return error{errc::unavailable} << "the connection closed before the last chunk";
      case fault::timeout: return error{errc::timeout} << "no data for 30000 ms (between_chunks)";
      default: return ok();
    }
  }
};

}  // namespace hedge::cloud::test
