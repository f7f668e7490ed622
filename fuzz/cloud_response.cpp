// libFuzzer target: the response reader (cloud/response.hpp) on arbitrary bytes parsed in
// place, with every view inside the buffer; then the request writer (cloud/request.hpp)
// with the bytes as a message: it must refuse exactly the invalid UTF-8 inputs, and what it
// writes must read back (rapidjson, in place) as the same string.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "hedge/cloud/request.hpp"
#include "hedge/cloud/response.hpp"

namespace {

void check_inside(std::string_view v, const char* low, const char* high) {
  if (!v.empty() && (v.data() < low || v.data() + v.size() > high)) std::abort();
}

// Finds the string value of the first "content" member.
struct content_finder : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, content_finder> {
  std::string_view key, content;
  bool found = false;
  bool Key(const char* s, rapidjson::SizeType n, bool) { return key = {s, n}, true; }
  bool String(const char* s, rapidjson::SizeType n, bool) {
    if (!found && key == "content") found = true, content = {s, n};
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static hedge::cloud::response_reader<3> reader;
  const std::string_view input{reinterpret_cast<const char*>(data), size};
  std::vector<char> buffer(input.begin(), input.end());
  buffer.push_back('\0');
  const char* low = buffer.data();
  const char* high = low + buffer.size();
  auto r = reader.parse(buffer.data(), size, [&](const hedge::cloud::choice_delta& d) {
    check_inside(d.text, low, high);
    check_inside(d.role, low, high);
    check_inside(d.refusal, low, high);
    // llama.cpp's native bodies get a finish reason from a constant ("stop", "length")
    if (d.finish_reason != "stop" && d.finish_reason != "length") check_inside(d.finish_reason, low, high);
    for (const auto& t : d.tokens) {
      check_inside(t.token, low, high);
      for (const auto& a : t.top_logprobs()) check_inside(a.token, low, high);
    }
    return true;
  });
  if (r) {
    check_inside(r->object, low, high);
    check_inside(r->error.message, low, high);
    check_inside(r->error.type, low, high);
  }

  const hedge::cloud::chat_message messages[] = {{"user", input}};
  std::vector<char> out(64 + 6 * size);
  auto written = hedge::cloud::write_chat_request(out, "m", messages, {});
  const bool valid = hedge::cloud::valid_utf8_prefix(input) == input.size();
  if (written.ok() != valid) std::abort();
  if (written) {
    std::vector<char> copy(written->begin(), written->end());
    copy.push_back('\0');
    content_finder finder;
    bool stopped = false;
    if (!hedge::cloud::json::parse_in_situ(copy.data(), copy.size() - 1, finder, stopped)) std::abort();
    if (!finder.found || finder.content != input) std::abort();
  }
  return 0;
}
