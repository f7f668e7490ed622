// hedge-server: an OpenAI-compatible HTTP endpoint for a hedge model (GGUF or llama2.c).
//
//   hedge-server -m MODEL [-z TOKENIZER] [--host 127.0.0.1] [--port 8080] [--threads N]
//                [--ctx-size N] [--queue N] [--alias NAME] [--chat-template NAME]
//
// Endpoints: POST /v1/chat/completions and /v1/completions (streamed as server-sent
// events, or not), GET /v1/models, /health and /metrics (Prometheus text). Once the socket
// listens it prints `listening on http://HOST:PORT` on stdout (--port 0: a free port).
// HTTP is hedge's own (os/http_server.hpp: one epoll loop, every limit named there); its
// handler threads read and check requests (tokenizing the prompt included, refused in memory
// bounded by the context), one worker thread runs the model (scheduler.hpp: one generation at
// a time, a bounded FIFO, 429 with Retry-After when full) and writes each response as it
// goes. Errors answer OpenAI's error body {"error": {"message", "type", "param", "code"}}.
// docs/cloud.md "hedge-server" has the contract. SIGINT or SIGTERM stops it: waiting requests
// get 503, open streams an error event and [DONE], the running generation is cancelled, and
// the process exits 0 within about a second.
// Exit status: 0 stopped, 1 a model or socket error, 2 a usage error.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <pthread.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "hedge/os/model_file.hpp"
#include "config.hpp"
#include "gateway.hpp"
#include "hedge/os/api_key.hpp"
#include "passthrough.hpp"
#include "hedge/os/http_server.hpp"
#include "scheduler.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge;
using namespace hedge::server;

constexpr const char* usage_text =
    "usage: hedge-server -m MODEL [-z TOKENIZER] [--host HOST] [--port PORT] [--threads N] [--ctx-size N]\n"
    "                    [--queue N] [--parallel N] [--alias NAME] [--chat-template NAME]\n"
    "                    [--cloud URL]... [--cloud-model NAME] [--cloud-price IN,OUT] [--edge-price IN,OUT]\n"
    "                    [--budget AMOUNT[/hour|/day]] [--gateway-workers N] [--config FILE]\n"
    "  -m MODEL        a GGUF file, or a llama2.c .bin (then -z TOKENIZER, its tokenizer.bin)\n"
    "  --host HOST     address to listen on (default 127.0.0.1)\n"
    "  --port PORT     port (default 8080; 0 picks a free one)\n"
    "  --threads N     threads of the model (default 1)\n"
    "  --ctx-size N    positions per request, prompt included (default: the model's trained context;\n"
    "                  more is allowed, with a warning)\n"
    "  --queue N       requests waiting for the model besides those running, before 429\n"
    "                  (default 16; 0: none waits)\n"
    "  --parallel N    generations run at once, batched into one pass over the weights per token\n"
    "                  (continuous batching; default 1, at most 64)\n"
    "  --alias NAME    the model's name in responses and /v1/models (default: the file's name)\n"
    "  --chat-template plain|chatml|llama3|llama2|zephyr\n"
    "                  the chat format (default: recognised from the GGUF's template, else plain)\n"
    "  --cloud URL     gateway mode: every request runs through the hybrid engine, the model as its\n"
    "                  edge, URL (an OpenAI-compatible base, e.g. http://10.0.0.2:8000) as a cloud;\n"
    "                  repeated: fallbacks in order (at most 4). Key: $HEDGE_API_KEY, $OPENAI_API_KEY\n"
    "                  or the file named by $HEDGE_API_KEY_FILE\n"
    "  --cloud-model NAME  the model name sent to the clouds\n"
    "  --cloud-price IN,OUT / --edge-price IN,OUT  prices per million tokens (router, budget, telemetry)\n"
    "  --budget AMOUNT[/hour|/day]  cloud spending per period (default: none)\n"
    "  --gateway-workers N  gateway requests run at once (default 8)\n"
    "  --config FILE   every setting above and more (per-cloud models and prices, router, privacy,\n"
    "                  retries, breaker, default delivery) as JSON, docs/cloud.md; flags override it\n"
    "  --token-delay-ms N   wait N ms per forward pass: before each generated token and once per echo\n"
    "                       scoring pass (an emulated slower model, for demos and benchmarks)\n"
    "  --round-trip-ms N    wait N ms before a request's first output (an emulated network round trip)\n"
    "prints 'listening on http://HOST:PORT' once it accepts connections\n"
    "exit status: 0 stopped by SIGINT/SIGTERM, 1 a model or socket error, 2 a usage error\n";

constexpr tools::cli cli{"hedge-server", usage_text};

/// The longest `model` a request may name: it is echoed in every streamed chunk.
constexpr std::size_t max_model_name_bytes = 256;

using json_writer = rapidjson::Writer<rapidjson::StringBuffer>;

/// Writes text as a JSON string, invalid UTF-8 replaced by U+FFFD (a model can emit byte
/// tokens that form no character; JSON must be UTF-8, RFC 8259 section 8.1).
void put_text(json_writer& w, std::string_view s) {
  std::string clean;
  clean.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    bool valid = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (valid && n == 3) {
      const auto c = static_cast<unsigned char>(s[i + 1]);
      valid = !(b == 0xE0 && c < 0xA0) && !(b == 0xED && c >= 0xA0);
    }
    if (valid && n == 4) {
      const auto c = static_cast<unsigned char>(s[i + 1]);
      valid = !(b == 0xF0 && c < 0x90) && !(b == 0xF4 && c >= 0x90);
    }
    if (valid) {
      clean.append(s.substr(i, n));
      i += n;
    } else {
      clean.append("\xEF\xBF\xBD");
      ++i;
    }
  }
  w.String(clean.data(), static_cast<rapidjson::SizeType>(clean.size()));
}

void put_key(json_writer& w, const char* key) { w.Key(key); }

std::string error_body(const api_error& e) {
  rapidjson::StringBuffer b;
  json_writer w(b);
  w.StartObject();
  put_key(w, "error");
  w.StartObject();
  put_key(w, "message");
  put_text(w, e.message);
  put_key(w, "type");
  put_text(w, e.type);
  put_key(w, "param");
  e.param.empty() ? w.Null() : (put_text(w, e.param), true);
  put_key(w, "code");
  e.code.empty() ? w.Null() : (put_text(w, e.code), true);
  w.EndObject();
  w.EndObject();
  return std::string(b.GetString(), b.GetSize());
}

/// What one response has in common: its id, creation time, model name.
struct response_head {
  std::string id, model;
  std::int64_t created = 0;
  bool chat = false;
};

void start_object(json_writer& w, const response_head& h, const char* object) {
  w.StartObject();
  put_key(w, "id");
  put_text(w, h.id);
  put_key(w, "object");
  w.String(object);
  put_key(w, "created");
  w.Int64(h.created);
  put_key(w, "model");
  put_text(w, h.model);
}

/// A whole answer's text: {"message": {"role", "content"}} for chat, "text" for completions.
void put_answer(json_writer& w, bool chat, std::string_view text) {
  if (chat) {
    put_key(w, "message");
    w.StartObject();
    put_key(w, "role");
    w.String("assistant");
    put_key(w, "content");
    put_text(w, text);
    w.EndObject();
  } else {
    put_key(w, "text");
    put_text(w, text);
  }
}

void put_usage(json_writer& w, std::size_t prompt, std::size_t completion) {
  put_key(w, "usage");
  w.StartObject();
  put_key(w, "prompt_tokens");
  w.Uint64(prompt);
  put_key(w, "completion_tokens");
  w.Uint64(completion);
  put_key(w, "total_tokens");
  w.Uint64(prompt + completion);
  w.EndObject();
}

void put_bytes(json_writer& w, std::string_view s) {
  put_key(w, "bytes");
  w.StartArray();
  for (const char c : s) w.Uint(static_cast<unsigned char>(c));
  w.EndArray();
}

/// Chat log-probs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}...]}.
void put_chat_logprobs(json_writer& w, const std::vector<const token_report*>& tokens) {
  w.StartObject();
  put_key(w, "content");
  w.StartArray();
  for (const token_report* t : tokens) {
    w.StartObject();
    put_key(w, "token");
    put_text(w, t->text);
    put_key(w, "logprob");
    w.Double(*t->logprob);
    put_bytes(w, t->text);
    put_key(w, "top_logprobs");
    w.StartArray();
    for (const auto& [text, lp] : t->top) {
      w.StartObject();
      put_key(w, "token");
      put_text(w, text);
      put_key(w, "logprob");
      w.Double(lp);
      put_bytes(w, text);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

/// Legacy completion log-probs: tokens, token_logprobs, top_logprobs, text_offset.
void put_completion_logprobs(json_writer& w, const std::vector<const token_report*>& tokens, std::size_t offset) {
  w.StartObject();
  put_key(w, "tokens");
  w.StartArray();
  for (const auto* t : tokens) put_text(w, t->text);
  w.EndArray();
  put_key(w, "token_logprobs");
  w.StartArray();
  for (const auto* t : tokens) t->logprob ? w.Double(*t->logprob) : w.Null();
  w.EndArray();
  put_key(w, "top_logprobs");
  w.StartArray();
  for (const auto* t : tokens) {
    if (!t->logprob) {
      w.Null();
      continue;
    }
    w.StartObject();
    for (const auto& [text, lp] : t->top) {
      put_text(w, text);  // a key: the same string rules
      w.Double(lp);
    }
    w.EndObject();
  }
  w.EndArray();
  put_key(w, "text_offset");
  w.StartArray();
  for (const auto* t : tokens) {
    w.Uint64(offset);
    offset += t->text.size();
  }
  w.EndArray();
  w.EndObject();
}

class server_app {
 public:
  server_app(std::unique_ptr<scheduler> s, std::string model_name, std::size_t queue_bound, server::metrics& m)
      : scheduler_(std::move(s)), model_name_(std::move(model_name)), queue_bound_(queue_bound), metrics_(&m) {}

  /// Gateway mode: chat and completion requests run through the hybrid engine.
  void enable_gateway(gateway_options options) { gateway_ = std::make_unique<gateway>(*scheduler_, std::move(options)); }
  [[nodiscard]] std::size_t gateway_clouds() const noexcept { return gateway_ ? gateway_->options().clouds.size() : 0; }

  /// Answers one request (on an HTTP handler thread; never blocks on the model).
  void handle(os::http_request&& req, os::http_response res) {
    const std::string path(req.path());
    const std::string_view allow = allowed(path);
    const std::string endpoint = allow.empty() ? "other" : path;
    const bool get = req.method == "GET" || req.method == "HEAD";
    if (allow.empty()) return send_error(res, endpoint, {404, "no such path: " + path.substr(0, 256), {}, "not_found"});
    if (allow == "POST" && req.method == "POST") {
      if (gateway_) return complete_hybrid(req, std::move(res), endpoint, path == "/v1/chat/completions");
      return complete(req, std::move(res), endpoint, path == "/v1/chat/completions");
    }
    if (allow != "POST" && get) {
      if (path == "/health")
        return send(res, endpoint, 200, "application/json", gateway_ ? gateway_->health() : "{\"status\":\"ok\"}");
      if (path == "/metrics")
        return send(res, endpoint, 200, "text/plain; version=0.0.4",
                    metrics_->render(scheduler_->queue_depth(), scheduler_->running()) +
                        (gateway_ ? gateway_->metrics() : std::string()));
      return send(res, endpoint, 200, "application/json", models());
    }
    const os::http_response_header allow_header[] = {{"Allow", allow}};
    send_error(res, endpoint,
               {405, "method " + req.method.substr(0, 32) + " is not allowed on " + path + " (" + std::string(allow) + ")",
                {}, "method_not_allowed"},
               allow_header);
  }

  /// The body of a response the HTTP layer refuses itself (413, 431, 408, 400, ...), counted.
  std::string refusal(int status, std::string_view target, std::string_view message) {
    const std::string path(target.substr(0, target.find('?')));
    metrics_->request(allowed(path).empty() ? "other" : path, status);
    const char* code = status == 413 ? "payload_too_large" : status == 431 ? "request_header_fields_too_large"
                       : status == 408 ? "request_timeout" : status == 503 ? "service_unavailable" : "";
    return error_body({status, std::string(message), {}, code, status >= 500 ? "server_error" : "invalid_request_error"});
  }

  server_app(const server_app&) = delete;
  server_app& operator=(const server_app&) = delete;
  /// The worker writes through this object: it ends before any member does.
  ~server_app() { scheduler_->shutdown(); }

  /// Waiting requests get 503, the running generation is cancelled (its stream ends with an
  /// error event and [DONE]); the model's worker writes these soon after this returns. The
  /// gateway's waiting requests are dropped (503) and its workers finish their streams.
  void stop() {
    {
      std::lock_guard lock(active_mutex_);
      for (const auto& w : active_)
        if (auto flag = w.lock()) *flag = true;
    }
    scheduler_->stop();
    if (gateway_) gateway_->stop();
  }

 private:
  static std::string_view allowed(const std::string& path) {
    if (path == "/v1/chat/completions" || path == "/v1/completions") return "POST";
    if (path == "/v1/models" || path == "/health" || path == "/metrics") return "GET, HEAD";
    return {};
  }

  void send(os::http_response& res, const std::string& endpoint, int status, std::string_view type,
            std::string_view body, std::span<const os::http_response_header> headers = {}) {
    metrics_->request(endpoint, status);
    res.send(status, type, body, headers);
  }

  /// An error response; a 429 without headers of its own says Retry-After: 1.
  void send_error(os::http_response& res, const std::string& endpoint, const api_error& e,
                  std::span<const os::http_response_header> headers = {}) {
    static const os::http_response_header retry[] = {{"Retry-After", "1"}};
    if (e.status == 429 && headers.empty()) headers = retry;
    send(res, endpoint, e.status, "application/json", error_body(e), headers);
  }

  std::string models() const {
    rapidjson::StringBuffer b;
    json_writer w(b);
    w.StartObject();
    put_key(w, "object");
    w.String("list");
    put_key(w, "data");
    w.StartArray();
    w.StartObject();
    put_key(w, "id");
    put_text(w, model_name_);
    put_key(w, "object");
    w.String("model");
    put_key(w, "created");
    w.Int64(started_);
    put_key(w, "owned_by");
    w.String("hedge");
    put_key(w, "context_length");
    w.Uint64(scheduler_->context());
    w.EndObject();
    if (gateway_) {
      for (const auto& url : gateway_->options().clouds) {
        w.StartObject();
        put_key(w, "id");
        const std::string& name = gateway_->cloud_model(static_cast<std::size_t>(&url - gateway_->options().clouds.data()));
        put_text(w, name.empty() ? url : name);
        put_key(w, "object");
        w.String("model");
        put_key(w, "owned_by");
        put_text(w, url);
        w.EndObject();
      }
    }
    w.EndArray();
    w.EndObject();
    return std::string(b.GetString(), b.GetSize());
  }

  api_error too_long(bool chat, const std::string& message) const {
    return {400, message + ": more than the context of " + std::to_string(scheduler_->context()) + " tokens",
            chat ? "messages" : "prompt", "context_length_exceeded"};
  }

  /// Checks the request, tokenizes its prompt (in memory bounded by the context) and queues
  /// it; the worker answers it.
  void complete(os::http_request& req, os::http_response res, const std::string& endpoint, bool chat) {
    auto j = std::make_shared<job>();
    if (auto e = parse_request(std::move(req.body), chat, j->request)) return send_error(res, endpoint, *e);
    const parsed_request& r = j->request;
    if (r.cloud_only_part)
      return send_error(res, endpoint, {400, "only text content parts are supported (with --cloud, others go to the cloud)",
                                        r.cloud_only, {}});
    if (r.model.size() > max_model_name_bytes)
      return send_error(res, endpoint, {400, "'model' has " + std::to_string(r.model.size()) + " bytes, more than " +
                                                 std::to_string(max_model_name_bytes), "model", {}});
    const auto& tok = scheduler_->tokenizer();
    const std::size_t context = scheduler_->context();
    if (chat) {
      // Each message's text makes at least size / max_bytes_per_id ids, template aside.
      std::size_t at_least = 0;
      for (const auto& m : r.messages) at_least += m.content.size() / tok.max_bytes_per_id();
      if (at_least > context)
        return send_error(res, endpoint, too_long(chat, "the messages make at least " + std::to_string(at_least) + " tokens"));
      auto ids = scheduler_->renderer().render(r.message_views());
      if (!ids) return send_error(res, endpoint, {400, std::string(ids.error().message()), "messages", {}});
      j->prompt = std::move(*ids);
    } else if (r.prompt_is_ids) {
      if (r.prompt_ids.size() > context)
        return send_error(res, endpoint, too_long(chat, "the prompt has " + std::to_string(r.prompt_ids.size()) + " tokens"));
      for (std::size_t i = 0; i < r.prompt_ids.size(); ++i)
        if (!tok.vocab().contains(r.prompt_ids[i]))
          return send_error(res, endpoint,
                            {400, "prompt token " + std::to_string(i) + " is " + std::to_string(r.prompt_ids[i]) +
                                      ", outside the vocabulary of " + std::to_string(tok.vocab().size()),
                             "prompt", {}});
      j->prompt = r.prompt_ids;
    } else {
      auto ids = tok.encode_at_most(r.prompt, context);
      if (!ids && ids.error().code() == errc::capacity_exceeded)
        return send_error(res, endpoint, too_long(chat, "the prompt of " + std::to_string(r.prompt.size()) + " bytes makes "
                                                           "more tokens"));
      if (!ids) return send_error(res, endpoint, {400, std::string(ids.error().message()), "prompt", {}});
      j->prompt = std::move(*ids);
    }
    if (j->prompt.empty()) j->prompt.push_back(tok.vocab().settings().bos);
    // The prompt and at least one generated token fit the context (the prompt alone
    // when only scored): positions = prompt + generated - 1.
    const bool score_only = r.max_tokens && *r.max_tokens == 0;
    if (j->prompt.size() > context)
      return send_error(res, endpoint, too_long(chat, "the prompt has " + std::to_string(j->prompt.size()) + " tokens"));
    const std::size_t room = context - j->prompt.size() + 1;
    j->max_tokens = score_only ? 0 : r.max_tokens ? std::min<std::size_t>(room, static_cast<std::size_t>(*r.max_tokens)) : room;
    response_head head{(chat ? "chatcmpl-hedge-" : "cmpl-hedge-") + std::to_string(++next_id_),
                       r.model.empty() ? model_name_ : r.model, static_cast<std::int64_t>(std::time(nullptr)), chat};
    // The worker writes the response as the job changes; a client that leaves cancels it.
    j->changed = [this, res, head = std::move(head), endpoint, st = stream_state{}](job& changed) mutable {
      deliver(changed, res, head, endpoint, st);
    };
    res.on_client_gone([weak = std::weak_ptr<job>(j)] {
      if (auto p = weak.lock()) p->cancelled = true;
    });
    switch (scheduler_->submit(j)) {
      case scheduler::admission::queued: return;
      case scheduler::admission::busy: {
        const os::http_response_header retry[] = {{"Retry-After", "1"}};
        return send_error(res, endpoint,
                          {429, "the server is busy: " + std::to_string(queue_bound_) +
                                    " requests already wait for the model besides those running; retry later",
                           {}, "rate_limit_exceeded", "rate_limit_error"},
                          retry);
      }
      case scheduler::admission::stopping:
        return send_error(res, endpoint, {503, "the server is shutting down", {}, {}, "server_error"});
    }
  }

  /// A gateway request: checked here, run by a gateway worker through the engine, which
  /// writes the response as the engine's events come (routed: the head; tokens: chunks).
  void complete_hybrid(os::http_request& req, os::http_response res, const std::string& endpoint, bool chat) {
    auto r = std::make_shared<parsed_request>();
    if (auto e = parse_request(req.body, chat, *r)) return send_error(res, endpoint, *e);
    if (r->model.size() > max_model_name_bytes)
      return send_error(res, endpoint, {400, "'model' has " + std::to_string(r->model.size()) + " bytes, more than " +
                                                 std::to_string(max_model_name_bytes), "model", {}});
    if (!r->cloud_only.empty() || !edge_serves(r->model))
      return pass_to_cloud(std::move(req.body), std::move(r), std::move(res), endpoint);
    if (r->echo || r->prompt_is_ids || (r->max_tokens && *r->max_tokens == 0))
      return send_error(res, endpoint, {400, "echo, token-id prompts and scoring are served without --cloud only", {}, {}});
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    res.on_client_gone([cancel] { *cancel = true; });
    {
      // stop() cancels every gateway request still running.
      std::lock_guard lock(active_mutex_);
      std::erase_if(active_, [](const std::weak_ptr<std::atomic<bool>>& w) { return w.expired(); });
      active_.push_back(cancel);
    }
    response_head head{(chat ? "chatcmpl-hedge-" : "cmpl-hedge-") + std::to_string(++next_id_), model_name_,
                       static_cast<std::int64_t>(std::time(nullptr)), chat};
    auto run = [this, r, res, cancel, head, endpoint](gateway::engine_type& hybrid) mutable {
      serve_hybrid(hybrid, *r, res, *cancel, head, endpoint);
    };
    if (!gateway_->submit(std::move(run))) {
      const os::http_response_header retry[] = {{"Retry-After", "1"}};
      return send_error(res, endpoint,
                        {429, "the gateway is busy: " + std::to_string(gateway_->options().queue) +
                                  " requests already wait; retry later", {}, "rate_limit_exceeded", "rate_limit_error"},
                        retry);
    }
  }

  /// A model name the gateway's engine serves: none, the edge's (its alias, or the file's name
  /// without its extension) or the clouds' --cloud-model. Others go to the cloud as named.
  bool edge_serves(const std::string& model) const {
    const std::string_view edge(model_name_);
    bool cloud = false;
    for (std::size_t c = 0; c < gateway_->options().clouds.size(); ++c) cloud = cloud || model == gateway_->cloud_model(c);
    return model.empty() || model == edge || model == edge.substr(0, edge.rfind('.')) || cloud;
  }

  /// What the edge cannot serve (request.hpp's cloud_only, or a model it does not serve) goes
  /// to the clouds whole (passthrough.hpp), after the same privacy rule as the engine's cloud
  /// path: a data class kept on the device, or an entity kept there, is refused (403) and
  /// nothing is sent.
  void pass_to_cloud(std::string raw, std::shared_ptr<parsed_request> r, os::http_response res, const std::string& endpoint) {
    const engine::privacy_options& privacy = gateway_->options().engine.privacy;
    const std::string reason = r->cloud_only.empty() ? "model" : r->cloud_only;
    const std::string why = r->cloud_only.empty() ? "model '" + r->model + "'" : "'" + r->cloud_only + "'";
    if (r->hedge.mode == "edge")
      return send_error(res, endpoint, {400, why + " needs a cloud, and 'hedge.mode' is edge", "hedge.mode", {}});
    const auto classes = static_cast<route::data_class>(r->hedge.data_classes);
    if ((classes & privacy.restricted) != route::data_class{})
      return send_error(res, endpoint, {403, why + " needs a cloud, and the request's data class stays on the device; "
                                             "nothing was sent", "hedge.data_class", "policy_refused"});
    const route::pii_detector kept(privacy.keep_on_device);
    bool kept_found = privacy.keep_on_device != route::pii_entity::none && kept.first(r->prompt).has_value();
    for (const auto& m : r->messages) kept_found = kept_found || (privacy.keep_on_device != route::pii_entity::none &&
                                                                  kept.first(m.content).has_value());
    if (kept_found)
      return send_error(res, endpoint, {403, why + " needs a cloud, and the messages hold data that stays on the "
                                             "device; nothing was sent", "messages", "policy_refused"});
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    res.on_client_gone([cancel] { *cancel = true; });
    {
      std::lock_guard lock(active_mutex_);
      std::erase_if(active_, [](const std::weak_ptr<std::atomic<bool>>& w) { return w.expired(); });
      active_.push_back(cancel);
    }
    auto body = std::make_shared<std::string>(std::move(raw));
    auto run = [this, r, body, res, cancel, endpoint, reason](std::span<gateway::curl_client* const> clouds,
                                                              gateway::engine_type& hybrid) mutable {
      serve_passthrough(clouds, hybrid, *body, *r, res, *cancel, endpoint, reason);
    };
    if (!gateway_->submit(gateway::pass_task(std::move(run)))) {
      const os::http_response_header retry[] = {{"Retry-After", "1"}};
      return send_error(res, endpoint,
                        {429, "the gateway is busy: " + std::to_string(gateway_->options().queue) +
                                  " requests already wait; retry later", {}, "rate_limit_exceeded", "rate_limit_error"},
                        retry);
    }
  }

  /// The largest non-streamed answer a passthrough request takes from a cloud.
  static constexpr std::size_t max_passthrough_answer = 8u << 20;

  /// Runs a passthrough request on a gateway worker: the clouds in order (an open breaker is
  /// skipped while another cloud is left), each within the worker's share of the period budget
  /// (its prompt estimated at 4 bytes a token beforehand, charged by its usage afterwards, as
  /// the engine charges its own calls); a cloud that fails before the client got a byte
  /// hands the request to the next; a cut after that ends the client's stream with an error
  /// event and one [DONE] (the next cloud cannot continue a tool call it did not start).
  void serve_passthrough(std::span<gateway::curl_client* const> clouds, gateway::engine_type& hybrid,
                         const std::string& raw, const parsed_request& r, os::http_response& res,
                         const std::atomic<bool>& cancel, const std::string& endpoint, const std::string& reason) {
    // One vault for every cloud's body: a value gets the same placeholder in each.
    engine::privacy_vault vault;
    std::size_t redactions = 0;
    double cost = 0.0;
    answer_restorer restore(vault, r.chat);
    const std::string_view path = r.chat ? "/chat/completions" : "/completions";
    std::unique_ptr<char[]> answer;
    if (!r.stream) answer.reset(new char[max_passthrough_answer]);
    bool started = false, gone = false, malformed = false, fell_back = false;
    std::string tier, whole;
    const std::string route_header = "passthrough; " + reason;
    api_error failure{503, "no cloud endpoint", {}, "tier_unavailable", "server_error"};
    const auto hedge_object = [&] {
      return R"({"mode":"passthrough","route":"cloud","reason":)" + json_literal(reason) + R"(,"spans":[{"tier":)" +
             json_literal(tier) + R"(}],"escalated":false,"fallback":)" + (fell_back ? "true" : "false") +
             R"(,"handoff_at_token":null,"redactions":)" + std::to_string(redactions) + R"(,"cost":)" + std::to_string(cost) + "}";
    };
    for (std::size_t c = 0; c < clouds.size() && !cancel; ++c) {
      if (c + 1 < clouds.size() && hybrid.breaker_state(c) == route::circuit::open) continue;
      tier = "cloud" + std::to_string(c);
      fell_back = c > 0;
      // The cloud's own model where the client named the edge's or none; else the client's.
      auto forwarded = forward_body(raw, edge_serves(r.model) ? std::string_view(gateway_->cloud_model(c)) : std::string_view(),
                                    gateway_->options().engine.privacy, vault);
      if (!forwarded) return send_error(res, endpoint, {400, std::string(forwarded.error().message()), {}, {}});
      redactions = forwarded->redactions;
      const engine::tier_prices& prices = gateway_->options().engine.cloud_prices[c];
      const std::uint64_t prompt_estimate = forwarded->body.size() / 4;
      if (const double left = hybrid.spending().remaining(); left >= 0 && prices.cost(prompt_estimate, 0) > left) {
        failure = {403, tier + ": over the period budget (" + std::to_string(left) + " left), and the edge cannot serve " +
                            reason, {}, "policy_refused", "invalid_request_error"};
        continue;
      }
      auto observe = [&](std::string_view data) {
        if (!r.stream) return whole.assign(data), void();
        std::string out = restore.event(data);
        if (out.empty()) return malformed = true, void();
        if (!started) {
          metrics_->request(endpoint, 200);
          const os::http_response_header headers[] = {
              {"Cache-Control", "no-cache"}, {"x-hedge-tier", tier}, {"x-hedge-route", route_header}};
          res.start(200, "text/event-stream", headers);
          started = true;
        }
        if (!gone && !res.write(out)) gone = true;
      };
      const function_ref<void(std::string_view)> observer(observe);
      gateway::curl_client& client = *clouds[c];
      client.set_limits(cloud::transport_limits{});
      client.observe_events(&observer);
      const auto ignore = [](const cloud::choice_delta&) { return true; };
      const cloud::call_outcome out =
          r.stream ? client.send_stream(path, forwarded->body, ignore, &cancel)
                   : client.send_once(path, forwarded->body, std::span<char>(answer.get(), max_passthrough_answer), ignore,
                                      &cancel);
      client.observe_events(nullptr);
      // What the call cost, charged whatever its end (the cloud counts the tokens it sent).
      const std::uint64_t sent = out.usage.prompt_tokens >= 0 ? static_cast<std::uint64_t>(out.usage.prompt_tokens) : prompt_estimate;
      const std::uint64_t got = out.usage.completion_tokens >= 0 ? static_cast<std::uint64_t>(out.usage.completion_tokens)
                                                                 : out.tokens;
      if (out.http_status >= 200 && out.http_status < 300) {
        cost += prices.cost(sent, got);
        hybrid.spending().charge(prices.cost(sent, got));
      }
      if (out.ok() && !malformed) {
        if (!r.stream) {
          std::string body = restore.whole(whole);
          const std::size_t close = body.rfind('}');
          if (close != std::string::npos) body.insert(close, R"(,"hedge":)" + hedge_object());
          const os::http_response_header headers[] = {{"x-hedge-tier", tier}, {"x-hedge-route", route_header}};
          return send(res, endpoint, 200, "application/json", body, headers);
        }
        if (!started) {  // a stream of no events: [DONE] alone
          metrics_->request(endpoint, 200);
          res.start(200, "text/event-stream");
          started = true;
        }
        const std::string object = r.chat ? "chat.completion.chunk" : "text_completion";
        res.write(restore.flush() + R"(data: {"object":")" + object + R"(","choices":[],"hedge":)" + hedge_object() +
                  "}\n\ndata: [DONE]\n\n");
        res.end();
        return;
      }
      const std::string message = out.ok() ? std::string("the cloud sent an event that is not JSON")
                                            : std::string(out.status.error().message());
      const bool refused = out.http_status >= 400 && out.http_status < 500 && out.http_status != 408 && out.http_status != 429;
      failure = {refused ? out.http_status : 502, tier + ": " + message, {},
                 refused ? "upstream_refused" : "tier_unavailable", refused ? "invalid_request_error" : "server_error"};
      if (started) {
        // The client has the cloud's bytes: no other cloud can continue them (a tool call's
        // arguments included), so the stream ends here, with the error and one [DONE].
        res.write("data: " + error_body(failure) + "\n\ndata: [DONE]\n\n");
        res.end();
        return;
      }
      if (refused) break;  // the request itself was refused: another cloud would refuse it too
    }
    send_error(res, endpoint, failure);
  }

  /// The request's delivery, or the gateway's default (`delivery` in the config file).
  engine::delivery delivery_of(const parsed_request::hedge_controls& h) const {
    std::string_view d = h.delivery.empty() ? std::string_view(gateway_->options().delivery) : std::string_view(h.delivery);
    std::uint32_t hold = h.hold_tokens;
    if (!d.empty() && d[0] >= '0' && d[0] <= '9' && parse_number(d, hold)) d = "buffer";
    return d == "verified" ? engine::delivery::verified()
           : d == "buffer" ? engine::delivery::buffer(hold)
                           : engine::delivery::immediate();
  }

  static engine::mode mode_named(const std::string& m) {
    if (m == "edge") return engine::mode::edge_only;
    if (m == "cloud") return engine::mode::cloud_first;
    if (m == "race") return engine::mode::race;
    if (m == "speculative") return engine::mode::speculative;
    return engine::mode::automatic;
  }

  void serve_hybrid(gateway::engine_type& hybrid, const parsed_request& r, os::http_response& res,
                    const std::atomic<bool>& cancel, const response_head& head, const std::string& endpoint) {
    std::vector<cloud::chat_message> messages;
    for (const auto& m : r.messages) messages.push_back({m.role, m.content});
    std::vector<std::string_view> stops(r.stop.begin(), r.stop.end());
    engine::engine_request q;
    q.messages = messages;
    q.prompt = r.prompt;
    q.extra = r.unread;
    q.classes = static_cast<route::data_class>(r.hedge.data_classes);
    q.ttft_slo_ms = r.hedge.ttft_slo_ms;
    q.max_cost = r.hedge.max_cost;
    q.requested = mode_named(r.hedge.mode);
    if (q.requested == engine::mode::cloud_first && !r.hedge.fallback) q.requested = engine::mode::cloud_only;
    q.fallback = r.hedge.fallback && q.requested != engine::mode::edge_only;  // `edge`: the edge only, never spilled
    q.hold = delivery_of(r.hedge);
    q.sampling.max_tokens = r.max_tokens ? static_cast<std::uint32_t>(std::min<std::int64_t>(*r.max_tokens, 1 << 20)) : 256u;
    q.sampling.temperature = r.temperature;
    q.sampling.top_p = r.top_p;
    if (r.seed) q.sampling.seed = static_cast<std::int64_t>(*r.seed);
    q.sampling.stop = stops;
    q.cancel = &cancel;
    bool started = false, gone = false;
    std::string text, tier_header_, route_header_;
    // The head goes out with the first text, so a request no tier could take (the edge's queue
    // full, where the policy keeps it there) still gets its own status (429), not an event.
    const auto open_stream = [&] {
      if (started) return;
      metrics_->request(endpoint, 200);
      const os::http_response_header headers[] = {
          {"Cache-Control", "no-cache"}, {"x-hedge-tier", tier_header_}, {"x-hedge-route", route_header_}};
      res.start(200, "text/event-stream", headers);
      started = true;
      if (head.chat) gone = !res.write(chunk(head, r, "", true, {}, 0, nullptr));
    };
    auto on_event = [&](const engine::engine_event& e) {
      if (e.kind == engine::event_kind::routed) {
        tier_header_ = std::string(engine::telemetry::slot_name(e.tier.slot()));
        route_header_ = std::string(engine::to_string(e.ran)) + "; " + std::string(route::to_string(e.route_reason));
        return;
      }
      if (e.kind != engine::event_kind::token || e.text.empty()) return;
      if (!r.stream) return text.append(e.text), void();
      open_stream();
      if (!gone && !res.write(chunk(head, r, e.text, false, {}, 0, nullptr))) gone = true;
    };
    const engine::engine_outcome out = hybrid.run(q, on_event);
    const std::string hedge = hedge_object(out);
    if (r.stream && out.ok()) open_stream();  // an answer of no text
    if (!r.stream || !started) {
      if (!out.ok()) return send_error(res, endpoint, api_error_of(out));
      const os::http_response_header headers[] = {{"x-hedge-tier", tier_header_}, {"x-hedge-route", route_header_}};
      return send(res, endpoint, 200, "application/json", hybrid_whole(head, out, hybrid.delivered(), hedge), headers);
    }
    std::string last;
    if (!out.ok()) {
      last = "data: " + error_body(api_error_of(out)) + "\n\n";
    } else {
      std::string final_chunk = chunk(head, r, "", false, {}, 0, std::string(out.finish_reason).c_str());
      // The hedge object rides on the last chunk: `..."choices":[...]}\n\n` gets `,"hedge":{...}}`.
      const std::size_t close = final_chunk.rfind('}');
      final_chunk.insert(close, ",\"hedge\":" + hedge);
      last = final_chunk;
      if (r.include_usage) {
        rapidjson::StringBuffer b;
        json_writer w(b);
        start_object(w, head, head.chat ? "chat.completion.chunk" : "text_completion");
        put_key(w, "choices");
        w.StartArray();
        w.EndArray();
        put_usage(w, prompt_tokens_of(out), out.tokens);
        w.EndObject();
        last += "data: " + std::string(b.GetString(), b.GetSize()) + "\n\n";
      }
    }
    last += "data: [DONE]\n\n";
    res.write(last);
    res.end();
  }

  /// Prompt tokens as the tier that wrote the first text counted them (one attempt's worth).
  static std::uint64_t prompt_tokens_of(const engine::engine_outcome& out) {
    if (out.span_count == 0) return 0;
    const auto& t = out.report(out.spans[0].tier);
    return t.attempts > 0 ? t.input_tokens / t.attempts : t.input_tokens;
  }

  static api_error api_error_of(const engine::engine_outcome& out) {
    const error& e = out.status.error();
    if (e.code() == errc::unavailable && e.message().find(edge_queue_full) != std::string_view::npos)
      return {429, std::string(e.message()) + "; the policy keeps this request on the edge; retry later", {},
              "rate_limit_exceeded", "rate_limit_error"};
    switch (e.code()) {
      case errc::capacity_exceeded: return {400, std::string(e.message()), {}, "context_length_exceeded"};
      case errc::invalid_argument: return {400, std::string(e.message()), {}, {}};
      case errc::timeout: return {504, std::string(e.message()), {}, "timeout", "server_error"};
      case errc::rejected: return {403, std::string(e.message()), {}, "policy_refused", "invalid_request_error"};
      default: return {503, std::string(e.message()), {}, "tier_unavailable", "server_error"};
    }
  }

  /// What the engine did, as the `hedge` object of the response.
  static std::string hedge_object(const engine::engine_outcome& out) {
    rapidjson::StringBuffer b;
    json_writer w(b);
    w.StartObject();
    put_key(w, "mode");
    put_text(w, engine::to_string(out.ran));
    put_key(w, "route");
    put_text(w, route::to_string(out.routed));
    put_key(w, "reason");
    put_text(w, route::to_string(out.route_reason));
    put_key(w, "spans");
    w.StartArray();
    for (std::size_t i = 0; i < out.span_count; ++i) {
      w.StartObject();
      put_key(w, "tier");
      put_text(w, engine::telemetry::slot_name(out.spans[i].tier.slot()));
      put_key(w, "begin");
      w.Uint64(out.spans[i].begin);
      put_key(w, "end");
      w.Uint64(out.spans[i].end);
      w.EndObject();
    }
    w.EndArray();
    put_key(w, "escalated");
    w.Bool(out.escalated);
    put_key(w, "fallback");
    w.Bool(out.fell_back);
    put_key(w, "handoff_at_token");
    out.handoff_at_token ? w.Uint64(*out.handoff_at_token) : w.Null();
    put_key(w, "retries");
    w.Uint(out.retries);
    put_key(w, "redactions");
    w.Uint64(out.redactions);
    put_key(w, "verdict");
    out.verified ? w.String(out.verdict.action == verify::verify_action::accept ? "accept" : "escalate") : w.Null();
    put_key(w, "cost");
    w.Double(out.cost);
    if (out.ran == engine::mode::speculative) {
      const engine::speculation_report& sr = out.speculation;
      put_key(w, "speculation");
      w.StartObject();
      put_key(w, "unsupported");
      w.Bool(sr.unsupported);
      put_key(w, "rounds");
      w.Uint64(sr.rounds);
      put_key(w, "drafted");
      w.Uint64(sr.drafted);
      put_key(w, "accepted");
      w.Uint64(sr.accepted);
      put_key(w, "acceptance");
      w.Double(sr.acceptance());
      put_key(w, "cloud_tokens");
      w.Uint64(sr.cloud_tokens);
      put_key(w, "scored");
      w.Uint64(sr.scored);
      put_key(w, "approximated");
      w.Uint64(sr.approximated);
      w.EndObject();
    }
    w.EndObject();
    return std::string(b.GetString(), b.GetSize());
  }

  static std::string hybrid_whole(const response_head& h, const engine::engine_outcome& out, std::string_view text,
                                  const std::string& hedge) {
    rapidjson::StringBuffer b;
    json_writer w(b);
    start_object(w, h, h.chat ? "chat.completion" : "text_completion");
    put_key(w, "choices");
    w.StartArray();
    w.StartObject();
    put_key(w, "index");
    w.Uint(0);
    put_answer(w, h.chat, text);
    put_key(w, "logprobs");
    w.Null();
    put_key(w, "finish_reason");
    put_text(w, out.finish_reason);
    w.EndObject();
    w.EndArray();
    put_usage(w, prompt_tokens_of(out), out.tokens);
    put_key(w, "hedge");
    w.RawValue(hedge.data(), hedge.size(), rapidjson::kObjectType);
    w.EndObject();
    return std::string(b.GetString(), b.GetSize());
  }

  /// The prompt's text as echoed.
  std::string echo_text(const job& j) const {
    if (!j.request.prompt_is_ids) return j.request.prompt;
    auto text = scheduler_->tokenizer().decode(j.prompt);
    return text ? *text : std::string();
  }

  std::string whole_response(const job& j, const response_head& h) const {
    const parsed_request& r = j.request;
    std::string text = r.echo ? echo_text(j) : std::string();
    std::vector<const token_report*> tokens;
    if (r.echo && r.logprobs)
      for (const auto& t : j.prompt_logprobs) tokens.push_back(&t);
    for (const auto& e : j.events) {
      text += e.text;
      if (e.token) tokens.push_back(&*e.token);
    }
    rapidjson::StringBuffer b;
    json_writer w(b);
    start_object(w, h, h.chat ? "chat.completion" : "text_completion");
    put_key(w, "choices");
    w.StartArray();
    w.StartObject();
    put_key(w, "index");
    w.Uint(0);
    put_answer(w, h.chat, text);
    put_key(w, "logprobs");
    if (!r.logprobs) w.Null();
    else if (h.chat) put_chat_logprobs(w, tokens);
    else put_completion_logprobs(w, tokens, r.echo ? 0 : echo_text(j).size());
    put_key(w, "finish_reason");
    put_text(w, j.finish_reason);
    w.EndObject();
    w.EndArray();
    put_usage(w, j.prompt.size(), j.completion_tokens);
    w.EndObject();
    return std::string(b.GetString(), b.GetSize());
  }

  /// One SSE chunk: `data: {...}\n\n`, with text and/or a finish reason.
  static std::string chunk(const response_head& h, const parsed_request& r, std::string_view text, bool role,
                           const std::vector<const token_report*>& tokens, std::size_t offset, const char* finish) {
    rapidjson::StringBuffer b;
    json_writer w(b);
    start_object(w, h, h.chat ? "chat.completion.chunk" : "text_completion");
    put_key(w, "choices");
    w.StartArray();
    w.StartObject();
    put_key(w, "index");
    w.Uint(0);
    if (h.chat) {
      put_key(w, "delta");
      w.StartObject();
      if (role) {
        put_key(w, "role");
        w.String("assistant");
      }
      if (!finish) {
        put_key(w, "content");
        put_text(w, text);
      }
      w.EndObject();
    } else {
      put_key(w, "text");
      put_text(w, text);
    }
    put_key(w, "logprobs");
    if (!r.logprobs || tokens.empty()) w.Null();
    else if (h.chat) put_chat_logprobs(w, tokens);
    else put_completion_logprobs(w, tokens, offset);
    put_key(w, "finish_reason");
    finish ? w.String(finish) : w.Null();
    w.EndObject();
    w.EndArray();
    if (r.include_usage) {
      put_key(w, "usage");
      w.Null();
    }
    w.EndObject();
    return "data: " + std::string(b.GetString(), b.GetSize()) + "\n\n";
  }

  static std::string usage_chunk(const response_head& h, const job& j) {
    rapidjson::StringBuffer b;
    json_writer w(b);
    start_object(w, h, h.chat ? "chat.completion.chunk" : "text_completion");
    put_key(w, "choices");
    w.StartArray();
    w.EndArray();
    put_usage(w, j.prompt.size(), j.completion_tokens);
    w.EndObject();
    return "data: " + std::string(b.GetString(), b.GetSize()) + "\n\n";
  }

  /// How far a stream has gone.
  struct stream_state {
    bool started = false;      // the HTTP head is sent
    bool opened = false;       // the role chunk (chat) or the echo (completions) sent
    std::size_t offset = 0;    // text_offset of the next token (completions)
  };

  /// Writes what the job has produced since the last call (on the worker thread). A stream's
  /// head goes out with its first event; an error before it is a plain error response, an
  /// error after it an error event, then [DONE]. A failed write cancels the generation.
  void deliver(job& j, os::http_response& res, const response_head& head, const std::string& endpoint,
               stream_state& st) {
    const parsed_request& r = j.request;
    if (!r.stream) {
      if (!j.done) return;
      if (j.error) return send_error(res, endpoint, *j.error);
      return send(res, endpoint, 200, "application/json", whole_response(j, head));
    }
    if (!st.started) {
      if (j.done && j.error) return send_error(res, endpoint, *j.error);
      metrics_->request(endpoint, 200);
      const os::http_response_header no_cache[] = {{"Cache-Control", "no-cache"}};
      res.start(200, "text/event-stream", no_cache);
      st.started = true;
    }
    std::string out;
    if (j.error) {
      // The status line is sent: the error travels as an event, as OpenAI streams it.
      out = "data: " + error_body(*j.error) + "\n\ndata: [DONE]\n\n";
    } else {
      if (!st.opened && (j.scored || !r.echo || !r.logprobs)) {
        st.opened = true;
        if (head.chat) {
          out += chunk(head, r, "", true, {}, 0, nullptr);
        } else if (r.echo) {
          std::vector<const token_report*> tokens;
          for (const auto& t : j.prompt_logprobs) tokens.push_back(&t);
          const std::string text = echo_text(j);
          out += chunk(head, r, text, false, tokens, 0, nullptr);
          st.offset = text.size();
        } else {
          st.offset = echo_text(j).size();
        }
      }
      for (const auto& e : j.events) {
        std::vector<const token_report*> tokens;
        if (e.token) tokens.push_back(&*e.token);
        if (e.text.empty() && tokens.empty()) continue;
        out += chunk(head, r, e.text, false, tokens, st.offset, nullptr);
        if (e.token) st.offset += e.token->text.size();
      }
      j.events.clear();  // sent: a long stream holds no history
      if (j.done) {
        out += chunk(head, r, "", false, {}, 0, j.finish_reason.c_str());
        if (r.include_usage) out += usage_chunk(head, j);
        out += "data: [DONE]\n\n";
      }
    }
    if (!out.empty() && !res.write(out)) j.cancelled = true;
    if (j.done) res.end();
  }

  std::unique_ptr<scheduler> scheduler_;
  std::unique_ptr<gateway> gateway_;
  std::mutex active_mutex_;
  std::vector<std::weak_ptr<std::atomic<bool>>> active_;  ///< gateway requests' cancel flags
  std::string model_name_;
  std::size_t queue_bound_;
  server::metrics* metrics_;
  std::int64_t started_ = static_cast<std::int64_t>(std::time(nullptr));
  std::atomic<std::uint64_t> next_id_{0};
};

/// "IN,OUT": prices per million input and output tokens.
bool parse_prices(std::string_view v, engine::tier_prices& p) {
  const auto comma = v.find(',');
  return comma != std::string_view::npos && parse_number(v.substr(0, comma), p.input_per_million) &&
         parse_number(v.substr(comma + 1), p.output_per_million) && p.input_per_million >= 0 &&
         p.output_per_million >= 0;
}

/// "AMOUNT" per hour, or "AMOUNT/hour", "AMOUNT/day".
bool parse_budget(std::string_view v, engine::budget_options& b) {
  const auto slash = v.find('/');
  const std::string_view period = slash == std::string_view::npos ? "hour" : v.substr(slash + 1);
  if (period != "hour" && period != "day") return false;
  b.period = std::chrono::seconds(period == "day" ? 86400 : 3600);
  return parse_number(v.substr(0, slash), b.per_period) && b.per_period >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  server_options o;
  int cloud_flags = 0;
  // The config file first: the flags override what it says, wherever --config stands.
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--config")
      if (auto e = load_config(argv[i + 1], o)) return cli.usage_error(*e);
  const auto option = [&](std::string_view a, std::string_view v) {
    bool ok = true;
    if (a == "--config") return tools::cli::option::taken;
    if (a == "-m" || a == "--model") o.model = v;
    else if (a == "-z") o.tokenizer = v;
    else if (a == "--host") ok = !(o.host = v).empty();
    else if (a == "--port") ok = parse_number(v, o.port) && o.port >= 0 && o.port <= 65535;
    else if (a == "--threads" || a == "-t") ok = parse_number(v, o.threads) && o.threads >= 1 && o.threads <= 1024;
    else if (a == "--ctx-size" || a == "-c") ok = parse_number(v, o.context) && o.context >= 1;
    else if (a == "--queue") ok = parse_number(v, o.queue) && o.queue <= 4096;
    else if (a == "--parallel" || a == "-np") ok = parse_number(v, o.parallel) && o.parallel >= 1 && o.parallel <= 64;
    else if (a == "--alias") ok = !(o.alias = v).empty();
    else if (a == "--chat-template") ok = (o.format = model::chat_format_named(v)).has_value();
    else if (a == "--cloud") {
      if (!cloud_flags++) o.gateway.clouds.clear(), o.gateway.cloud_models.clear();  // the flags replace the file's list
      ok = o.gateway.clouds.size() < engine::max_clouds && v.starts_with("http") && (o.gateway.clouds.emplace_back(v), true);
    }
    else if (a == "--cloud-model") ok = !(o.gateway.cloud_model = v).empty() && (o.gateway.cloud_models.clear(), true);
    else if (a == "--cloud-price") {
      ok = parse_prices(v, o.gateway.engine.cloud_prices[0]);
      for (auto& p : o.gateway.engine.cloud_prices) p = o.gateway.engine.cloud_prices[0];
    }
    else if (a == "--edge-price") ok = parse_prices(v, o.gateway.engine.edge_prices);
    else if (a == "--budget") ok = parse_budget(v, o.gateway.engine.budget);
    else if (a == "--token-delay-ms") ok = parse_number(v, o.token_delay_ms) && o.token_delay_ms <= 10'000;
    else if (a == "--round-trip-ms") ok = parse_number(v, o.round_trip_ms) && o.round_trip_ms <= 10'000;
    else if (a == "--gateway-workers")
      ok = parse_number(v, o.gateway.workers) && o.gateway.workers >= 1 && o.gateway.workers <= 256;
    else return tools::cli::option::unknown;
    return tools::cli::checked(ok);
  };
  if (const auto status = cli.parse_options(argc, argv, tools::no_flags, option)) return *status;
  if (o.model.empty()) return cli.usage_error("no -m MODEL");

  auto m = os::load_model({.model = o.model, .tokenizer = o.tokenizer, .quantize = model::load_quantization::none});
  if (!m) return cli.fail(m.error());
  const std::size_t trained = m->weights.config.context_length;
  // A context past the trained one is allowed, as llama.cpp's server allows it: RoPE goes on
  // to further positions, but the model never saw them, so text there may degrade.
  const std::size_t context = o.context == 0 ? trained : o.context;
  if (context > trained)
    std::fprintf(stderr, "hedge-server: warning: --ctx-size %zu is past the %zu positions the model was trained on\n",
                 context, trained);
  const model::chat_format format = o.format ? *o.format : model::detect_chat_format(m->chat_template);

  // SIGINT and SIGTERM go to one thread that stops the server; every thread made after
  // this inherits the blocked mask. A write to a closed socket is an error, not SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::metrics metrics;
  auto e = scheduler::make(*m, format, context, o.threads, o.queue, metrics, o.parallel);
  if (!e) return cli.fail(e.error());
  std::string name = o.alias;
  if (name.empty()) name = o.model.substr(o.model.find_last_of('/') + 1);
  (*e)->set_token_delay(std::chrono::milliseconds(o.token_delay_ms));
  (*e)->set_round_trip(std::chrono::milliseconds(o.round_trip_ms));
  server_app app(std::move(*e), name, o.queue, metrics);
  if (!o.gateway.clouds.empty()) {
    // A key for the clouds comes from the environment or a file, never a flag (os/api_key.hpp).
    std::optional<os::api_key> key;
    if (!o.api_key_env.empty() || !o.api_key_file.empty() || os::api_key_configured()) {
      auto k = !o.api_key_env.empty()  ? os::api_key_from_env(o.api_key_env.c_str())
               : !o.api_key_file.empty() ? os::api_key_from_file(o.api_key_file)
                                        : os::load_api_key();
      if (!k) return cli.fail(k.error());
      key = std::move(*k);
      o.gateway.api_key = std::string(key->reveal());
    }
    o.gateway.queue = std::max<std::size_t>(o.queue, 1) * 4;
    if (!o.gateway.cloud_models.empty()) o.gateway.cloud_models.resize(o.gateway.clouds.size());
    app.enable_gateway(std::move(o.gateway));
    std::fprintf(stderr, "hedge-server: gateway to %zu cloud endpoint(s)%s\n", app.gateway_clouds(),
                 key ? " (API key from the environment or a key file)" : "");
  }

  // Every limit is http_server_options' default (os/http_server.hpp; docs/cloud.md lists them).
  os::http_server_options http_options;
  http_options.host = o.host;
  http_options.port = static_cast<std::uint16_t>(o.port);
  // Room for every connection the server may hold (the soft limit is often 1024).
  os::raise_open_file_limit(http_options.max_connections + 64);
  auto http = os::http_server::listen(
      http_options, [&app](os::http_request&& req, os::http_response res) { app.handle(std::move(req), std::move(res)); },
      [&app](int status, std::string_view target, std::string_view message) { return app.refusal(status, target, message); },
      "application/json");
  if (!http) return cli.fail(http.error());
  std::fprintf(stderr, "hedge-server: %s, context %zu, chat template %s, %zu thread(s), %zu slot(s), queue %zu\n",
               o.model.c_str(), context, std::string(model::to_string(format)).c_str(), o.threads, o.parallel, o.queue);
  const bool ipv6 = o.host.find(':') != std::string::npos;
  std::printf("listening on http://%s%s%s:%d\n", ipv6 ? "[" : "", o.host.c_str(), ipv6 ? "]" : "", (*http)->port());
  std::fflush(stdout);

  // On a signal: the model stops (waiting requests get 503, the running stream its error event,
  // written by its worker), and the HTTP server, still sending, closes within a second; a
  // client that reads nothing cannot hold the worker past that (its connection closes, so its
  // writes fail at once).
  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int received = 0;
    sigwait(&stop_signals, &received);
    signalled = true;
    app.stop();
    (*http)->stop(std::chrono::milliseconds(1000));
  });
  const auto served = (*http)->run();
  // Stopped by something other than a signal (a failed epoll_wait): end the stopper.
  if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!signalled && !served) return cli.fail(served.error());
  return 0;
}
