// hedge-cloud-chat: one chat (or completion) request to an OpenAI-compatible endpoint through
// hedge's cloud client (cloud/client.hpp) over the libcurl transport (os/http_transport.hpp).
// The text streams to stdout as it arrives; on stderr one line
// `first token: X ms, decode: N tokens, Y tok/s, finish: REASON` (and the usage the server reported).
// --extra passes a JSON object's members through to the request, e.g. '{"ignore_eos":true}'.
//
//   hedge-cloud-chat --url URL [-i PROMPT] [--system TEXT] [--model NAME] [-n MAX_TOKENS]
//                    [-t TEMPERATURE] [-p TOPP] [-s SEED] [--logprobs N] [--completion]
//                    [--no-stream] [--connect-timeout MS] [--first-byte-timeout MS]
//                    [--gap-timeout MS] [--timeout MS] [--extra JSON] [--ca-file PEM] [--no-api-key]
//
// URL is the server's root ("http://127.0.0.1:8080", "https://api.openai.com"); the client
// adds /v1. The API key comes from $HEDGE_API_KEY, $OPENAI_API_KEY or the file named by
// $HEDGE_API_KEY_FILE (os/api_key.hpp), never from a flag; without one no Authorization
// header is sent. Without -i the prompt is read from stdin.
// Everything printed that came from the server has its control characters escaped
// (cloud::escape_control; the answer's text keeps its line breaks and tabs), so a hostile server
// cannot drive the terminal. The call completes at `[DONE]`, open connection or not.
// Exit status: 0 the answer completed, 1 an error (the message says which, after the text
// received before it, which stays on stdout), 2 a usage error.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/cloud/client.hpp"
#include "hedge/os/api_key.hpp"
#include "hedge/os/http_transport.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge;

constexpr const char* usage_text =
    "usage: hedge-cloud-chat --url URL [-i PROMPT] [--system TEXT] [--model NAME] [-n MAX_TOKENS]\n"
    "                        [-t TEMPERATURE] [-p TOPP] [-s SEED] [--logprobs N] [--completion]\n"
    "                        [--no-stream] [--connect-timeout MS] [--first-byte-timeout MS]\n"
    "                        [--gap-timeout MS] [--timeout MS] [--extra JSON] [--ca-file PEM] [--no-api-key]\n"
    "  --url URL        the server's root, e.g. http://127.0.0.1:8080 (the client adds /v1)\n"
    "  -i PROMPT        the user message (default: stdin)\n"
    "  --completion     POST /v1/completions with the prompt instead of a chat\n"
    "  --logprobs N     ask for N alternatives per token; printed after the text\n"
    "  --extra JSON     members of this object are added to the request, e.g. '{\"ignore_eos\":true}'\n"
    "  API key: $HEDGE_API_KEY, $OPENAI_API_KEY or the file named by $HEDGE_API_KEY_FILE\n"
    "exit status: 0 done, 1 a request error (the text received before it is kept), 2 a usage error\n";

constexpr hedge::tools::cli cli{"hedge-cloud-chat", usage_text};

struct options {
  std::string url, prompt, system, model, ca_file, extra;
  bool has_prompt = false, completion = false, stream = true, use_key = true;
  cloud::request_options generation;
  cloud::transport_limits limits;
};

bool parse_ms(std::string_view s, std::chrono::milliseconds& out) {
  std::int64_t ms = 0;
  if (!parse_number(s, ms) || ms < 0) return false;
  out = std::chrono::milliseconds(ms);
  return true;
}

/// Parses argv into o; returns an empty string or the usage error.
std::string parse_args(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    const auto value = [&]() -> std::string_view { return argv[++i]; };
    if (a == "--completion") o.completion = true;
    else if (a == "--no-stream") o.stream = false;
    else if (a == "--no-api-key") o.use_key = false;
    else if (!has_value) return "option " + std::string(a) + " needs a value or is unknown";
    else if (a == "--url") o.url = value();
    else if (a == "-i") o.prompt = value(), o.has_prompt = true;
    else if (a == "--system") o.system = value();
    else if (a == "--model") o.model = value();
    else if (a == "--ca-file") o.ca_file = value();
    else if (a == "--extra") o.extra = value();
    else if (a == "-n") {
      std::int64_t n = 0;
      if (!parse_number(value(), n) || n < 1) return "-n needs a positive integer";
      o.generation.max_tokens = n;
    } else if (a == "-t" || a == "-p") {
      double v = 0;
      if (!parse_number(value(), v) || !(v >= 0)) return std::string(a) + " needs a non-negative number";
      (a == "-t" ? o.generation.temperature : o.generation.top_p) = v;
    } else if (a == "-s") {
      std::int64_t seed = 0;
      if (!parse_number(value(), seed)) return "-s needs an integer";
      o.generation.seed = seed;
    } else if (a == "--logprobs") {
      std::int64_t n = 0;
      if (!parse_number(value(), n) || n < 0 || n > 20) return "--logprobs needs an integer from 0 to 20";
      o.generation.top_logprobs = n;
    } else if (a == "--connect-timeout") {
      if (!parse_ms(value(), o.limits.connect)) return "--connect-timeout needs milliseconds";
    } else if (a == "--first-byte-timeout") {
      if (!parse_ms(value(), o.limits.first_byte)) return "--first-byte-timeout needs milliseconds";
    } else if (a == "--gap-timeout") {
      if (!parse_ms(value(), o.limits.between_chunks)) return "--gap-timeout needs milliseconds";
    } else if (a == "--timeout") {
      if (!parse_ms(value(), o.limits.total)) return "--timeout needs milliseconds";
    } else {
      return "unknown option " + std::string(a);
    }
  }
  if (o.url.empty()) return "--url is required";
  o.generation.extra = o.extra;
  return {};
}

/// Server text with its control characters escaped (line breaks kept when `text`).
std::string printable(std::string_view s, bool text = false) {
  std::string out;
  cloud::escape_control(s, text, [&](std::string_view piece) { out.append(piece); });
  return out;
}

/// Prints each token's log-prob and alternatives, one line per token (the --logprobs report).
void print_logprobs(const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  std::printf("\nlogprobs:\n");
  for (const auto& line : lines) std::printf("%s\n", line.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help") return cli.help();
  }
  options o;
  if (const auto message = parse_args(argc, argv, o); !message.empty()) return cli.usage_error(message);
  if (!o.has_prompt) o.prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());

  std::optional<os::api_key> key;
  if (o.use_key && os::api_key_configured()) {
    auto loaded = os::load_api_key();
    if (!loaded) return cli.fail(loaded.error());
    key = std::move(*loaded);
  }

  os::curl_transport transport(os::curl_transport_options{.base_url = o.url, .ca_file = o.ca_file});
  const cloud::endpoint endpoint{.model = o.model, .api_key = key ? key->reveal() : std::string_view{},
                                 .limits = o.limits};
  // The client's buffers are members (no allocation per call): a large object, so not on the stack.
  auto client = std::make_unique<cloud::cloud_client<os::curl_transport>>(transport, endpoint);

  std::vector<std::string> logprob_lines;
  const auto on_delta = [&](const cloud::choice_delta& d) {
    if (!d.text.empty()) {
      const std::string text = printable(d.text, true);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    if (o.generation.top_logprobs) {
      for (const auto& t : d.tokens) {
        std::string line = printable(t.token);
        line.append("\t").append(std::to_string(t.logprob));
        for (const auto& alt : t.top_logprobs())
          line.append("\t").append(printable(alt.token)).append("=").append(std::to_string(alt.logprob));
        logprob_lines.push_back(std::move(line));
      }
    }
    return true;
  };

  std::vector<cloud::chat_message> messages;
  if (!o.system.empty()) messages.push_back({"system", o.system});
  messages.push_back({"user", o.prompt});
  o.generation.include_usage = o.stream;
  std::vector<char> body(1 << 20);
  cloud::call_outcome outcome;
  if (o.completion) {
    outcome = o.stream ? client->stream_completion(o.prompt, o.generation, on_delta)
                       : client->completion(o.prompt, o.generation, body, on_delta);
  } else {
    outcome = o.stream ? client->stream_chat(messages, o.generation, on_delta)
                       : client->chat(messages, o.generation, body, on_delta);
  }
  std::printf("\n");
  print_logprobs(logprob_lines);
  std::fflush(stdout);

  const double first_ms =
      outcome.time_to_first_token ? std::chrono::duration<double, std::milli>(*outcome.time_to_first_token).count() : 0;
  // Without streaming every token arrives at once: there is no decode rate to report.
  const std::string finish = outcome.finish_reason.view().empty() ? "none" : printable(outcome.finish_reason.view());
  if (o.stream)
    std::fprintf(stderr, "first token: %.1f ms, decode: %zu tokens, %.1f tok/s, finish: %s", first_ms,
                 outcome.tokens, outcome.tokens_per_second, finish.c_str());
  else
    std::fprintf(stderr, "answer: %.1f ms, %zu tokens, finish: %s",
                 std::chrono::duration<double, std::milli>(outcome.duration).count(), outcome.tokens, finish.c_str());
  if (outcome.usage.present())
    std::fprintf(stderr, ", usage: %lld prompt + %lld completion tokens",
                 static_cast<long long>(outcome.usage.prompt_tokens), static_cast<long long>(outcome.usage.completion_tokens));
  std::fprintf(stderr, "\n");
  if (!outcome.ok()) {
    return cli.fail(printable(outcome.status.error().message()) + " (HTTP " + std::to_string(outcome.http_status) +
                    ", after " + std::to_string(outcome.tokens) + " tokens and " + std::to_string(outcome.text_bytes) +
                    " bytes of text)");
  }
  return 0;
}
