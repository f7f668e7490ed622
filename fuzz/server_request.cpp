// libFuzzer target: hedge-server's request reader (tools/server/json.hpp, request.hpp) on
// arbitrary bodies, as chat (first byte odd) or completion requests. Whatever the bytes, it
// answers a parsed request or an error body with a 4xx status and a message; a parsed one
// holds only what the checks allow (valid UTF-8 text, at most the alternatives the sampler
// gives, temperature and top-p in range).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "../tools/server/request.hpp"

namespace {

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool chat = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  hedge::server::parsed_request request;
  if (const auto failure = hedge::server::parse_request(body, chat, request)) {
    if (failure->status < 400 || failure->status > 499 || failure->message.empty()) std::abort();
    return 0;
  }
  if (request.top_logprobs > hedge::server::max_top_logprobs) std::abort();
  if (!(request.temperature >= 0.0f) || !(request.top_p >= 0.0f && request.top_p <= 1.0f)) std::abort();
  if (request.max_tokens && *request.max_tokens < 0) std::abort();
  for (const auto& m : request.messages)
    if (!valid_utf8(m.content)) std::abort();
  if (!valid_utf8(request.prompt)) std::abort();
  for (const auto& s : request.stop)
    if (!valid_utf8(s)) std::abort();
  return 0;
}
