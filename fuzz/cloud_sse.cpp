// libFuzzer target: the SSE reader and the streamed-chunk reader (cloud/stream.hpp) on
// arbitrary bytes. The input's first byte picks a piece size; the stream is read whole and
// in those pieces, and both runs must report the same deltas, events and status (the
// reader's result may not depend on where the transport split the body). Every view a
// delta carries must lie inside the event buffer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "hedge/cloud/stream.hpp"

namespace {

using stream_type = hedge::cloud::completion_stream<512, 3>;

struct run_result {
  std::string deltas;
  std::string status;
};

void check_inside(std::string_view v, const char* low, const char* high) {
  if (!v.empty() && (v.data() < low || v.data() + v.size() > high)) std::abort();
}

run_result run(stream_type& stream, std::string_view body, std::size_t piece) {
  stream.reset();
  run_result out;
  const char* low = reinterpret_cast<const char*>(&stream);
  const char* high = low + sizeof(stream_type);
  auto on = [&](const hedge::cloud::choice_delta& d) {
    check_inside(d.text, low, high);
    check_inside(d.role, low, high);
    // llama.cpp's native bodies get a finish reason from a constant ("stop", "length")
    if (d.finish_reason != "stop" && d.finish_reason != "length") check_inside(d.finish_reason, low, high);
    out.deltas += std::to_string(d.index) + "|" + std::string(d.text) + "|" + std::string(d.finish_reason) + "|";
    for (const auto& t : d.tokens) {
      check_inside(t.token, low, high);
      if (t.top_logprobs().size() > hedge::cloud::max_top_logprobs) std::abort();
      for (const auto& a : t.top_logprobs()) check_inside(a.token, low, high);
      out.deltas += std::string(t.token) + ",";
    }
    out.deltas += "\n";
    return true;
  };
  hedge::result<void> status;
  for (std::size_t at = 0; at < body.size() && status; at += piece) status = stream.feed(body.substr(at, piece), on);
  out.status = status ? "ok" : std::string(status.error().message());
  out.status += " done=" + std::to_string(stream.done()) + " tokens=" + std::to_string(stream.tokens()) +
                " events=" + std::to_string(stream.events());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static auto stream = std::make_unique<stream_type>();
  const std::size_t piece = 1 + data[0] % 16;
  const std::string_view body{reinterpret_cast<const char*>(data) + 1, size - 1};
  const run_result whole = run(*stream, body, body.size() + 1);
  const run_result split = run(*stream, body, piece);
  if (whole.deltas != split.deltas || whole.status != split.status) std::abort();
  return 0;
}
