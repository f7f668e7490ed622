// libFuzzer target: the HTTP/1.1 request reader of os/http_server.hpp
// (os/http_request_parser.hpp) on arbitrary bytes, under small limits so every limit is hit.
// The first byte picks how the rest is cut into pieces (as a socket would deliver it). Whatever
// the bytes: every request read keeps the limits (body, header count, a method that is a token,
// a target without control bytes); a refusal has one of the statuses the reader documents and a
// message; and the requests and the refusal are the same whether the bytes came in one piece or
// in many (the reader's state carries across pieces exactly).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../include/hedge/os/http_request_parser.hpp"

namespace {

using hedge::os::http_request_parser;

constexpr hedge::os::http_request_limits limits{.max_header_bytes = 512, .max_header_count = 8, .max_body_bytes = 1024};

/// What reading `bytes` cut every `piece` bytes gives: each request, flattened, then the refusal.
std::vector<std::string> read_all(std::string_view bytes, std::size_t piece) {
  std::vector<std::string> out;
  http_request_parser parser(limits);
  while (!bytes.empty()) {
    std::string_view in = bytes.substr(0, piece);
    const std::size_t given = in.size();
    while (true) {
      const auto step = parser.feed(in);
      if (step == http_request_parser::step::failed) {
        const int s = parser.status();
        if ((s != 400 && s != 413 && s != 431 && s != 501 && s != 505) || parser.message().empty()) std::abort();
        out.push_back("failed " + std::to_string(s));
        return out;
      }
      if (step == http_request_parser::step::complete) {
        const auto r = parser.take();
        if (r.body.size() > limits.max_body_bytes || r.headers.size() > limits.max_header_count) std::abort();
        if (r.method.empty() || r.target.empty() || (r.minor_version != 0 && r.minor_version != 1)) std::abort();
        for (const char c : r.target)
          if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) std::abort();
        std::string flat = r.method + ' ' + r.target + ' ' + std::to_string(r.minor_version);
        for (const auto& h : r.headers) flat += '\n' + h.name + ':' + h.value;
        flat += "\n\n" + r.body;
        out.push_back(std::move(flat));
        continue;
      }
      if (!in.empty() && step == http_request_parser::step::need_more) std::abort();  // need_more eats all
      if (in.empty()) break;
    }
    bytes.remove_prefix(given);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = static_cast<std::size_t>(data[0] % 17) + 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (read_all(bytes, bytes.size() + 1) != read_all(bytes, piece)) std::abort();
  return 0;
}
