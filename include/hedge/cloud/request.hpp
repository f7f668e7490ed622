// hedge/cloud/request.hpp: OpenAI-compatible request bodies, written into a caller buffer.
//
// The fields follow OpenAI's API reference for POST /v1/chat/completions and the legacy
// POST /v1/completions (https://platform.openai.com/docs/api-reference/chat/create,
// .../completions/create), which vLLM, TGI, llama.cpp's server and Ollama accept too.
// The two endpoints ask for log-probs differently: chat takes `logprobs: true` plus
// `top_logprobs: N`, completions take `logprobs: N` (and `echo: true` to score the prompt).
// Anything else a server accepts (vLLM's `repetition_penalty`, `response_format`, ...)
// goes in `extra` as a JSON object whose members are copied verbatim after a syntax check.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "hedge/cloud/json_reader.hpp"
#include "hedge/cloud/json_writer.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/chat_message.hpp"

namespace hedge::cloud {

/// A conversation's message: model/chat_message.hpp's one type.
using model::chat_message;

/// Sampling and streaming options common to both endpoints. Unset optionals are not sent,
/// so the server's defaults apply.
struct request_options {
  std::optional<std::int64_t> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<std::int64_t> seed;
  std::span<const std::string_view> stop;  ///< one entry is sent as a string, several as a list
  bool stream = false;
  bool include_usage = false;              ///< stream_options.include_usage (with stream only)
  std::optional<std::int64_t> top_logprobs; ///< alternatives per token; 0 asks for the chosen token's log-prob only
  std::string_view extra;                   ///< a JSON object whose members are appended, e.g. {"min_p":0.05}
};

namespace detail {

inline void write_common(json_writer& w, std::string_view model, const request_options& o) noexcept {
  if (!model.empty()) w.key("model").string(model);
  if (o.max_tokens) w.key("max_tokens").integer(*o.max_tokens);
  if (o.temperature) w.key("temperature").number(*o.temperature);
  if (o.top_p) w.key("top_p").number(*o.top_p);
  if (o.seed) w.key("seed").integer(*o.seed);
  if (o.stop.size() == 1) {
    w.key("stop").string(o.stop[0]);
  } else if (!o.stop.empty()) {
    w.key("stop").begin_array();
    for (std::string_view s : o.stop) w.string(s);
    w.end_array();
  }
  if (o.stream) {
    w.key("stream").boolean(true);
    if (o.include_usage) w.key("stream_options").begin_object().key("include_usage").boolean(true).end_object();
  }
}

// Appends the members of the object o.extra, after checking its syntax in the spare buffer.
inline void write_extra(json_writer& w, std::string_view extra) noexcept {
  std::size_t b = 0, e = extra.size();
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (b < e && space(extra[b])) ++b;
  while (e > b && space(extra[e - 1])) --e;
  if (b == e || w.failed()) return;
  if (auto r = json::check_object(extra.substr(b, e - b), w.spare()); !r) {
    w.fail(r.error());
    return;
  }
  // The object's text without its braces: its members, or nothing for "{}".
  std::string_view members = extra.substr(b + 1, e - b - 2);
  std::size_t mb = 0, me = members.size();
  while (mb < me && space(members[mb])) ++mb;
  while (me > mb && space(members[me - 1])) --me;
  if (mb == me) return;
  w.raw_value(members.substr(mb, me - mb));
}

}  // namespace detail

/// The body of POST /chat/completions. Returns a view into `out`.
inline result<std::string_view> write_chat_request(std::span<char> out, std::string_view model,
                                                   std::span<const chat_message> messages,
                                                   const request_options& options) noexcept {
  if (messages.empty()) return error{errc::invalid_argument} << "a chat request needs at least one message";
  json_writer w(out);
  w.begin_object();
  detail::write_common(w, model, options);
  w.key("messages").begin_array();
  for (const chat_message& m : messages)
    w.begin_object().key("role").string(m.role).key("content").string(m.content).end_object();
  w.end_array();
  if (options.top_logprobs) {
    if (*options.top_logprobs < 0 || *options.top_logprobs > 20)
      return error{errc::invalid_argument} << "top_logprobs " << *options.top_logprobs << " is outside 0..20";
    w.key("logprobs").boolean(true);
    if (*options.top_logprobs > 0) w.key("top_logprobs").integer(*options.top_logprobs);
  }
  detail::write_extra(w, options.extra);
  w.end_object();
  return w.finish();
}

/// The body of POST /completions (the legacy text endpoint). `echo` returns the prompt's
/// tokens, with their log-probs when top_logprobs is set (continuation scoring).
inline result<std::string_view> write_completion_request(std::span<char> out, std::string_view model,
                                                         std::string_view prompt, const request_options& options,
                                                         bool echo = false) noexcept {
  json_writer w(out);
  w.begin_object();
  detail::write_common(w, model, options);
  w.key("prompt").string(prompt);
  if (options.top_logprobs) {
    if (*options.top_logprobs < 0 || *options.top_logprobs > 20)
      return error{errc::invalid_argument} << "logprobs " << *options.top_logprobs << " is outside 0..20";
    w.key("logprobs").integer(*options.top_logprobs);
  }
  if (echo) w.key("echo").boolean(true);
  detail::write_extra(w, options.extra);
  w.end_object();
  return w.finish();
}

}  // namespace hedge::cloud
