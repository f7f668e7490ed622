// hedge/cloud/response.hpp: OpenAI-compatible response bodies, read without a DOM.
//
// One reader covers the shapes an OpenAI-compatible server sends, streamed or not:
// - chat: `chat.completion` (choices[].message) and `chat.completion.chunk`
//   (choices[].delta), with choices[].logprobs.content[] = {token, logprob, bytes,
//   top_logprobs[] = {token, logprob, bytes}} (OpenAI API reference, "The chat completion
//   object" and "The chat completion chunk object");
// - the legacy `text_completion` (choices[].text) with the parallel arrays
//   logprobs.{tokens, token_logprobs, top_logprobs[{token: logprob}], text_offset}
//   (OpenAI API reference, "The completion object"; vLLM returns it with `echo` for prompt
//   scoring);
// - `usage` {prompt_tokens, completion_tokens, total_tokens}, also on the last chunk of a
//   stream with stream_options.include_usage (choices is then empty);
// - llama.cpp server's native /completion body: `content` and `stop` at the top level and
//   `completion_probabilities[]` as {token, logprob, top_logprobs[]} (current) or
//   {content, probs[] = {tok_str, prob}} (before 2024-12), per tools/server/README.md;
// - error bodies: OpenAI's and llama.cpp's {"error": {"message", "type", "code"}}, vLLM's
//   older top-level {"object": "error", "message", "type", "code"}, TGI's
//   {"error": "...", "error_type": "..."}, Ollama's {"error": "..."}, also as a streamed
//   event.
// Everything else is skipped whatever its type (OpenAI's system_fingerprint, service_tier,
// refusal arrays, tool_calls; vLLM's stop_reason and prompt_logprobs; llama.cpp's timings;
// reasoning_content, ...). A field hedge reads with the wrong type is a parse_error naming it
// ("choices[].delta.content: expected a string"); null counts as absent everywhere.
//
// The reader works in place in a NUL-terminated writable buffer (json_reader.hpp); every
// string it reports is a view into that buffer. Per choice it collects up to TokenCapacity
// token log-probs, each with up to max_top_logprobs alternatives, in fixed arrays, and hands
// them to a callback at the end of the choice; a chat choice with more tokens than that is
// handed over in several deltas (the text comes with the last). The legacy parallel arrays
// cannot be split that way, so more tokens than TokenCapacity there is a capacity_exceeded
// error: score long prompts with a response_reader of a larger capacity.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>

#include "hedge/cloud/json_reader.hpp"
#include "hedge/core/result.hpp"

namespace hedge::cloud {

/// OpenAI's upper bound on top_logprobs; alternatives beyond it are dropped.
inline constexpr std::size_t max_top_logprobs = 20;
/// Token bytes kept per token; longer byte lists are cut (bytes_truncated).
inline constexpr std::size_t max_token_bytes = 32;

struct top_logprob {
  std::string_view token;
  double logprob = 0;
};

/// One generated (or, with echo, prompt) token and its log-prob. logprob is NaN where the
/// server sent null (the first prompt token of an echo).
struct token_logprob {
  std::string_view token;
  double logprob = std::numeric_limits<double>::quiet_NaN();
  std::array<std::uint8_t, max_token_bytes> bytes{};
  std::uint8_t bytes_size = 0;
  bool has_bytes = false;
  bool bytes_truncated = false;
  std::uint8_t top_size = 0;
  std::array<top_logprob, max_top_logprobs> top{};

  [[nodiscard]] std::span<const top_logprob> top_logprobs() const noexcept { return {top.data(), top_size}; }
  [[nodiscard]] std::span<const std::uint8_t> byte_values() const noexcept { return {bytes.data(), bytes_size}; }
};

/// What one choice of one response or chunk carries; views into the parsed buffer.
struct choice_delta {
  std::uint32_t index = 0;
  std::string_view role;           ///< empty when absent
  std::string_view text;           ///< content (chat) or text (completions); empty when absent
  std::string_view refusal;        ///< OpenAI's refusal message, when the model refused
  std::string_view finish_reason;  ///< empty while the choice goes on
  std::span<const token_logprob> tokens;
  bool final_part = true;          ///< false for an early hand-over of a long token list
};

struct token_usage {
  std::int64_t prompt_tokens = -1;
  std::int64_t completion_tokens = -1;
  std::int64_t total_tokens = -1;
  [[nodiscard]] bool present() const noexcept { return prompt_tokens >= 0 || completion_tokens >= 0; }
};

/// An error body's fields. code holds the text of a string code or of a numeric one.
struct error_body {
  bool present = false;
  std::string_view message;
  std::string_view type;
  std::string_view code;
};

/// Top-level facts about one parsed document (views into its buffer).
struct response_info {
  std::string_view object;  ///< "chat.completion.chunk", "text_completion", ... or empty
  std::string_view model;
  token_usage usage;
  error_body error;
  std::size_t choices = 0;  ///< choice objects seen (0 on a usage-only chunk)
};

/// Reads one response or chunk. TokenCapacity bounds the token log-probs held per choice.
template <std::size_t TokenCapacity = 16>
class response_reader {
  static_assert(TokenCapacity > 0);

 public:
  /// Parses json[0..size) in place (json[size] must be '\0'), calling
  /// on_delta(const choice_delta&) -> bool for each choice (false stops with errc::rejected).
  template <class F>
  result<response_info> parse(char* json, std::size_t size, F&& on_delta) noexcept {
    handler<F> h(*this, on_delta);
    bool stopped = false;
    auto r = json::parse_in_situ(json, size, h, stopped);
    if (!r) {
      if (stopped && h.failed) return h.failure;
      if (stopped) return error{errc::parse_error} << "JSON parse stopped";
      return r.error();
    }
    if (h.failed) return h.failure;
    return h.info;
  }

 private:
  // Where the reader stands: the object or array being read.
  enum class at : unsigned char {
    skip, root, choices, choice, delta, logprobs, lp_content, lp_token, lp_bytes, lp_top, lp_top_item,
    legacy_tokens, legacy_values, legacy_top, legacy_top_item, usage, error, llama_probs, llama_prob, llama_top,
    llama_top_item,
  };

  // A scalar value as rapidjson reports it.
  struct value {
    enum class kind : unsigned char { null, boolean, integer, real, string };
    kind type = kind::null;
    bool b = false;
    std::int64_t i = 0;
    bool fits_int = false;
    double d = 0;
    std::string_view s;
    [[nodiscard]] bool is_number() const noexcept { return type == kind::integer || type == kind::real; }
  };

  template <class F>
  struct handler {
    handler(response_reader& reader, F& callback) noexcept : self(reader), on_delta(callback) {}

    response_reader& self;
    F& on_delta;
    response_info info{};
    bool failed = false;
    error failure{};

    std::array<at, json::max_depth + 1> stack{};
    std::size_t depth = 0;
    std::string_view key;
    // The choice being read.
    choice_delta choice{};
    std::size_t tokens = 0;   // filled entries of self.tokens_
    std::size_t legacy = 0;   // legacy parallel-array positions: tokens, values, tops
    std::size_t legacy_values = 0;
    std::size_t legacy_tops = 0;
    bool llama = false;       // a llama.cpp native body (content / completion_probabilities at the top)
    bool llama_stop = false;
    std::string_view llama_stop_type;
    std::string_view root_message, root_type, root_code;
    bool root_is_error = false;
    char code_text[24] = {};

    token_logprob& token() noexcept { return self.tokens_[tokens]; }

    bool fail(error e) noexcept {
      if (!failed) failed = true, failure = e;
      return false;
    }
    bool type_error(std::string_view field, std::string_view expected) noexcept {
      return fail(error{errc::parse_error} << field << ": expected " << expected);
    }

    // ---- containers -------------------------------------------------------------------
    bool open(bool object) noexcept {
      const at parent = depth == 0 ? at::skip : stack[depth - 1];
      at next = at::skip;
      if (depth == 0) {
        if (!object) return type_error("response", "a JSON object");
        next = at::root;
      } else {
        next = child(parent, object);
        if (failed) return false;
      }
      if (depth == json::max_depth) return fail(error{errc::parse_error} << "JSON nests deeper than " << json::max_depth);
      stack[depth++] = next;
      if (next == at::choice) begin_choice();
      if (next == at::lp_token || next == at::llama_prob) begin_token();
      if ((next == at::lp_top_item || next == at::llama_top_item) && token().top_size < max_top_logprobs)
        token().top[token().top_size] = {};
      return true;
    }

    // The context of a container opened inside `parent` (under `key` in an object).
    at child(at parent, bool object) noexcept {
      auto want = [&](bool want_object, at ctx, std::string_view field) {
        if (object == want_object) return ctx;
        type_error(field, want_object ? "an object" : "an array");
        return at::skip;
      };
      switch (parent) {
        case at::root:
          if (key == "choices") return want(false, at::choices, "choices");
          if (key == "usage") return want(true, at::usage, "usage");
          if (key == "error") return want(true, at::error, "error");
          if (key == "completion_probabilities") return llama = true, want(false, at::llama_probs, "completion_probabilities");
          return at::skip;
        case at::choices: return want(true, at::choice, "choices[]");
        case at::choice:
          if (key == "delta" || key == "message") return want(true, at::delta, "choices[].delta");
          if (key == "logprobs") return want(true, at::logprobs, "choices[].logprobs");
          return at::skip;
        case at::logprobs:
          if (key == "content") return want(false, at::lp_content, "choices[].logprobs.content");
          if (key == "tokens") return want(false, at::legacy_tokens, "choices[].logprobs.tokens");
          if (key == "token_logprobs") return want(false, at::legacy_values, "choices[].logprobs.token_logprobs");
          if (key == "top_logprobs") return want(false, at::legacy_top, "choices[].logprobs.top_logprobs");
          return at::skip;
        case at::lp_content: return want(true, at::lp_token, "choices[].logprobs.content[]");
        case at::lp_token:
          if (key == "bytes") return want(false, at::lp_bytes, "logprobs.content[].bytes");
          if (key == "top_logprobs") return want(false, at::lp_top, "logprobs.content[].top_logprobs");
          return at::skip;
        case at::lp_top: return want(true, at::lp_top_item, "logprobs.content[].top_logprobs[]");
        case at::legacy_top:
          if (!object) return type_error("choices[].logprobs.top_logprobs[]", "an object"), at::skip;
          if (legacy_tops >= TokenCapacity) return too_many("choices[].logprobs.top_logprobs"), at::skip;
          if (legacy_tops >= legacy && legacy_tops >= legacy_values) begin_legacy(legacy_tops);
          self.tokens_[legacy_tops].top_size = 0;
          return at::legacy_top_item;
        case at::llama_probs: return want(true, at::llama_prob, "completion_probabilities[]");
        case at::llama_prob:
          if (key == "top_logprobs" || key == "probs") return want(false, at::llama_top, "completion_probabilities[].top_logprobs");
          if (key == "bytes") return want(false, at::lp_bytes, "completion_probabilities[].bytes");
          return at::skip;
        case at::llama_top: return want(true, at::llama_top_item, "completion_probabilities[].top_logprobs[]");
        case at::lp_bytes:
          type_error("logprobs.content[].bytes[]", "an integer");
          return at::skip;
        case at::legacy_tokens:
        case at::legacy_values:
          type_error("choices[].logprobs token arrays", "strings or numbers");
          return at::skip;
        default: return at::skip;  // inside skipped values, delta, usage, error, items
      }
    }

    void too_many(std::string_view field) noexcept {
      fail(error{errc::capacity_exceeded} << field << " has more than " << TokenCapacity
                                          << " entries: use a response_reader with a larger capacity");
    }

    bool close() noexcept {
      const at ended = stack[--depth];
      switch (ended) {
        case at::lp_token:
        case at::llama_prob: return end_token();
        case at::choice: return end_choice();
        case at::root: return end_root();
        case at::legacy_top_item: ++legacy_tops; return true;
        case at::lp_top_item:
        case at::llama_top_item:
          if (token().top_size < max_top_logprobs) ++token().top_size;
          return true;
        default: return true;
      }
    }

    void begin_choice() noexcept {
      choice = choice_delta{};
      choice.index = static_cast<std::uint32_t>(info.choices++);
      tokens = 0;
      legacy = legacy_values = legacy_tops = 0;
    }
    void begin_token() noexcept {
      token_logprob& t = token();
      t.token = {};
      t.logprob = std::numeric_limits<double>::quiet_NaN();
      t.bytes_size = 0;
      t.has_bytes = t.bytes_truncated = false;
      t.top_size = 0;
    }
    bool end_token() noexcept {
      if (++tokens == TokenCapacity) return flush();
      return true;
    }
    // Hands the tokens collected so far over before the choice ends.
    bool flush() noexcept {
      choice_delta part{};
      part.index = choice.index;
      part.role = choice.role;
      part.tokens = {self.tokens_.data(), tokens};
      part.final_part = false;
      tokens = 0;
      return deliver(part);
    }
    bool deliver(const choice_delta& d) noexcept {
      if (!on_delta(d)) return fail(error{errc::rejected} << "cancelled by the delta callback");
      return true;
    }
    bool end_choice() noexcept {
      // tokens stays below TokenCapacity (end_token flushes at it), so it always indexes a
      // free slot; the legacy counts are bounded by the checks where they grow.
      std::size_t n = tokens;
      if (legacy > n) n = legacy;
      if (legacy_values > n) n = legacy_values;
      if (legacy_tops > n) n = legacy_tops;
      choice.tokens = {self.tokens_.data(), n};
      choice.final_part = true;
      tokens = legacy = legacy_values = legacy_tops = 0;
      return deliver(choice);
    }
    bool end_root() noexcept {
      if (root_is_error) {
        info.error.present = true;
        info.error.message = root_message;
        info.error.type = root_type;
        info.error.code = root_code;
      }
      if (!llama) return true;
      choice.index = 0;
      choice.tokens = {self.tokens_.data(), tokens};
      choice.final_part = true;
      if (llama_stop) {
        choice.finish_reason = llama_stop_type == "limit" ? std::string_view("length") : std::string_view("stop");
      }
      return deliver(choice);
    }

    // ---- scalars ------------------------------------------------------------------------
    bool string_field(std::string_view& out, const value& v, std::string_view field) noexcept {
      if (v.type == value::kind::null) return true;
      if (v.type != value::kind::string) return type_error(field, "a string");
      out = v.s;
      return true;
    }
    bool number_field(double& out, const value& v, std::string_view field) noexcept {
      if (v.type == value::kind::null) return true;
      if (!v.is_number()) return type_error(field, "a number");
      out = v.d;
      return true;
    }
    bool count_field(std::int64_t& out, const value& v, std::string_view field) noexcept {
      if (v.type == value::kind::null) return true;
      if (v.type != value::kind::integer || v.i < 0) return type_error(field, "a non-negative integer");
      out = v.i;
      return true;
    }
    bool code_field(std::string_view& out, const value& v) noexcept {
      if (v.type == value::kind::string) out = v.s;
      else if (v.type == value::kind::integer) {
        char digits[20];
        std::size_t n = 0, size = 0;
        std::uint64_t m = v.i < 0 ? ~static_cast<std::uint64_t>(v.i) + 1 : static_cast<std::uint64_t>(v.i);
        do digits[n++] = static_cast<char>('0' + m % 10), m /= 10;
        while (m != 0);
        if (v.i < 0) code_text[size++] = '-';
        while (n > 0) code_text[size++] = digits[--n];
        out = {code_text, size};
      } else if (v.type != value::kind::null) {
        return type_error("error.code", "a string or an integer");
      }
      return true;
    }
    bool add_top(token_logprob& t, std::string_view tok, double lp) noexcept {
      if (t.top_size < max_top_logprobs) t.top[t.top_size++] = {tok, lp};
      return true;
    }

    bool scalar(const value& v) noexcept {
      if (depth == 0) return type_error("response", "a JSON object");
      switch (stack[depth - 1]) {
        case at::root:
          if (key == "object") {
            if (!string_field(info.object, v, "object")) return false;
            root_is_error = root_is_error || info.object == "error";
            return true;
          }
          if (key == "model") return string_field(info.model, v, "model");
          if (key == "error") {
            // TGI's and Ollama's {"error": "message"}
            if (v.type == value::kind::null) return true;
            if (v.type != value::kind::string) return type_error("error", "an object or a string");
            info.error.present = true;
            info.error.message = v.s;
            return true;
          }
          if (key == "error_type") return string_field(info.error.type, v, "error_type");
          if (key == "message") return v.type == value::kind::string ? (root_message = v.s, true) : true;
          if (key == "type") return v.type == value::kind::string ? (root_type = v.s, true) : true;
          if (key == "code") return code_field(root_code, v);
          if (key == "content") return llama = true, string_field(choice.text, v, "content");
          if (key == "stop") {
            if (v.type == value::kind::boolean) llama_stop = v.b;
            return true;
          }
          if (key == "stop_type") return v.type == value::kind::string ? (llama_stop_type = v.s, true) : true;
          return true;
        case at::choice:
          if (key == "index") {
            std::int64_t i = 0;
            if (v.type == value::kind::null) return true;
            if (!count_field(i, v, "choices[].index")) return false;
            choice.index = static_cast<std::uint32_t>(i);
            return true;
          }
          if (key == "text") return string_field(choice.text, v, "choices[].text");
          if (key == "finish_reason") return string_field(choice.finish_reason, v, "choices[].finish_reason");
          return true;
        case at::delta:
          if (key == "content") return string_field(choice.text, v, "choices[].delta.content");
          if (key == "role") return string_field(choice.role, v, "choices[].delta.role");
          if (key == "refusal") return string_field(choice.refusal, v, "choices[].delta.refusal");
          return true;
        case at::lp_token:
        case at::llama_prob:
          if (key == "token" || key == "content") return string_field(token().token, v, "logprobs.content[].token");
          if (key == "logprob") return number_field(token().logprob, v, "logprobs.content[].logprob");
          return true;
        case at::lp_bytes: {
          if (v.type != value::kind::integer || v.i < 0 || v.i > 255)
            return type_error("logprobs.content[].bytes[]", "an integer in 0..255");
          token_logprob& t = token();
          t.has_bytes = true;
          if (t.bytes_size < max_token_bytes) t.bytes[t.bytes_size++] = static_cast<std::uint8_t>(v.i);
          else t.bytes_truncated = true;
          return true;
        }
        case at::lp_top_item:
        case at::llama_top_item: {
          token_logprob& t = token();
          if (t.top_size == max_top_logprobs) return true;
          if (key == "token" || key == "tok_str") return string_field(t.top[t.top_size].token, v, "top_logprobs[].token");
          if (key == "logprob") return number_field(t.top[t.top_size].logprob, v, "top_logprobs[].logprob");
          if (key == "prob") {
            // llama.cpp before 2024-12 sent probabilities
            double p = 0;
            if (!number_field(p, v, "probs[].prob")) return false;
            t.top[t.top_size].logprob = std::log(p);
          }
          return true;
        }
        case at::legacy_tokens:
          if (legacy >= TokenCapacity) return too_many("choices[].logprobs.tokens"), false;
          if (legacy >= legacy_values && legacy >= legacy_tops) begin_legacy(legacy);
          if (!string_field(self.tokens_[legacy].token, v, "choices[].logprobs.tokens[]")) return false;
          ++legacy;
          return true;
        case at::legacy_values:
          if (legacy_values >= TokenCapacity) return too_many("choices[].logprobs.token_logprobs"), false;
          if (legacy_values >= legacy && legacy_values >= legacy_tops) begin_legacy(legacy_values);
          if (!number_field(self.tokens_[legacy_values].logprob, v, "choices[].logprobs.token_logprobs[]")) return false;
          ++legacy_values;
          return true;
        case at::legacy_top:
          // null: no alternatives for this position (the first echoed prompt token)
          if (v.type != value::kind::null) return type_error("choices[].logprobs.top_logprobs[]", "an object");
          if (legacy_tops >= TokenCapacity) return too_many("choices[].logprobs.top_logprobs"), false;
          if (legacy_tops >= legacy && legacy_tops >= legacy_values) begin_legacy(legacy_tops);
          self.tokens_[legacy_tops].top_size = 0;
          ++legacy_tops;
          return true;
        case at::legacy_top_item: {
          if (!v.is_number()) return type_error("choices[].logprobs.top_logprobs[]{}", "numbers");
          return add_top(self.tokens_[legacy_tops], key, v.d);
        }
        case at::usage:
          if (key == "prompt_tokens") return count_field(info.usage.prompt_tokens, v, "usage.prompt_tokens");
          if (key == "completion_tokens") return count_field(info.usage.completion_tokens, v, "usage.completion_tokens");
          if (key == "total_tokens") return count_field(info.usage.total_tokens, v, "usage.total_tokens");
          return true;
        case at::error:
          info.error.present = true;
          if (key == "message") return string_field(info.error.message, v, "error.message");
          if (key == "type") return string_field(info.error.type, v, "error.type");
          if (key == "code") return code_field(info.error.code, v);
          return true;
        case at::choices:
          if (v.type == value::kind::null) return true;
          return type_error("choices[]", "an object");
        case at::lp_content:
        case at::lp_top:
        case at::llama_probs:
        case at::llama_top:
          if (v.type == value::kind::null) return true;
          return type_error("logprobs lists", "objects");
        default: return true;
      }
    }

    // A legacy position seen for the first time in any of the three arrays.
    void begin_legacy(std::size_t i) noexcept {
      token_logprob& t = self.tokens_[i];
      t.token = {};
      t.logprob = std::numeric_limits<double>::quiet_NaN();
      t.bytes_size = 0;
      t.has_bytes = t.bytes_truncated = false;
      t.top_size = 0;
    }

    // ---- rapidjson's handler interface ------------------------------------------------
    bool Null() { return scalar(value{}); }
    bool Bool(bool b) { value v;
      v.type = value::kind::boolean; v.b = b; return scalar(v); }
    bool Int(int i) { return Int64(i); }
    bool Uint(unsigned u) { return Int64(u); }
    bool Int64(std::int64_t i) {
      value v;
      v.type = value::kind::integer;
      v.i = i;
      v.d = static_cast<double>(i);
      return scalar(v);
    }
    bool Uint64(std::uint64_t u) {
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return Double(static_cast<double>(u));
      return Int64(static_cast<std::int64_t>(u));
    }
    bool Double(double d) { value v;
      v.type = value::kind::real; v.d = d; return scalar(v); }
    bool RawNumber(const char*, rapidjson::SizeType, bool) { return true; }
    bool String(const char* s, rapidjson::SizeType n, bool) {
      value v;
      v.type = value::kind::string;
      v.s = {s, n};
      return scalar(v);
    }
    bool Key(const char* s, rapidjson::SizeType n, bool) {
      key = {s, n};
      return true;
    }
    bool StartObject() { return open(true); }
    bool EndObject(rapidjson::SizeType) { return close(); }
    bool StartArray() { return open(false); }
    bool EndArray(rapidjson::SizeType) { return close(); }
  };

  std::array<token_logprob, TokenCapacity> tokens_{};
};

/// Reads an error body (any of the shapes above) from a non-2xx response; returns the
/// message, empty when the body is not JSON or holds no error. Parses `body` in place.
template <std::size_t TokenCapacity>
error_body read_error_body(response_reader<TokenCapacity>& reader, char* body, std::size_t size) noexcept {
  auto r = reader.parse(body, size, [](const choice_delta&) { return true; });
  if (!r) return {};
  return r->error;
}

}  // namespace hedge::cloud
