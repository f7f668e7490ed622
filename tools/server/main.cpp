// hedge-server: an OpenAI-compatible HTTP endpoint for a hedge model (GGUF or llama2.c).
//
//   hedge-server -m MODEL [-z TOKENIZER] [--host 127.0.0.1] [--port 8080] [--threads N]
//                [--ctx-size N] [--queue N] [--alias NAME] [--chat-template NAME]
//
// Endpoints: POST /v1/chat/completions and /v1/completions (streamed as server-sent
// events, or not), GET /v1/models, /health and /metrics (Prometheus text). Once the socket
// listens it prints `listening on http://HOST:PORT` on stdout (--port 0: a free port).
// HTTP is cpp-httplib's: its thread pool reads and checks requests (tokenizing the prompt
// included), one worker thread runs the model (engine.hpp: one generation at a time, a
// bounded FIFO, 429 with Retry-After when full). Errors answer OpenAI's error body
// {"error": {"message", "type", "param", "code"}}. docs/cloud.md "hedge-server" has the
// contract. SIGINT or SIGTERM stops it: waiting requests get 503, the process exits 0.
// Exit status: 0 stopped, 1 a model or socket error, 2 a usage error.
#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <httplib.h>
#include <pthread.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "../common/load_model.hpp"
#include "engine.hpp"

namespace {

using namespace hedge;
using namespace hedge::server;

constexpr const char* usage_text =
    "usage: hedge-server -m MODEL [-z TOKENIZER] [--host HOST] [--port PORT] [--threads N] [--ctx-size N]\n"
    "                    [--queue N] [--alias NAME] [--chat-template NAME]\n"
    "  -m MODEL        a GGUF file, or a llama2.c .bin (then -z TOKENIZER, its tokenizer.bin)\n"
    "  --host HOST     address to listen on (default 127.0.0.1)\n"
    "  --port PORT     port (default 8080; 0 picks a free one)\n"
    "  --threads N     threads of the model (default 1)\n"
    "  --ctx-size N    positions per request, prompt included (default: the model's trained context;\n"
    "                  more is allowed, with a warning)\n"
    "  --queue N       requests waiting for the model before 429 (default 16)\n"
    "  --alias NAME    the model's name in responses and /v1/models (default: the file's name)\n"
    "  --chat-template plain|chatml|llama3|llama2|zephyr\n"
    "                  the chat format (default: recognised from the GGUF's template, else plain)\n"
    "prints 'listening on http://HOST:PORT' once it accepts connections\n"
    "exit status: 0 stopped by SIGINT/SIGTERM, 1 a model or socket error, 2 a usage error\n";

constexpr std::size_t max_body_bytes = 8u << 20;

int usage_error(const std::string& message) {
  std::fprintf(stderr, "hedge-server: %s\n%s", message.c_str(), usage_text);
  return 2;
}

template <class T>
bool parse(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

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

void send_error(httplib::Response& res, const api_error& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
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
  server_app(std::unique_ptr<engine> e, std::string model_name, std::size_t queue_bound, server::metrics& m)
      : engine_(std::move(e)), model_name_(std::move(model_name)), queue_bound_(queue_bound), metrics_(&m) {}

  void install(httplib::Server& http) {
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, true); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { complete(req, res, false); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { models(res); });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_->render(engine_->queue_depth(), engine_->running()), "text/plain; version=0.0.4");
    });
    // A known path with another method: 405 with Allow; any other path: 404 (the error
    // handler writes the body).
    const auto fallback = [](const httplib::Request& req, httplib::Response& res) {
      const std::string_view allow = allowed(req.path);
      if (allow.empty()) {
        res.status = 404;
        return;
      }
      res.set_header("Allow", std::string(allow));
      send_error(res, {405, "method " + req.method + " is not allowed on " + req.path + " (" + std::string(allow) + ")",
                       {}, "method_not_allowed"});
    };
    http.Get(".*", fallback);
    http.Post(".*", fallback);
    http.Put(".*", fallback);
    http.Patch(".*", fallback);
    http.Delete(".*", fallback);
    http.Options(".*", fallback);
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      api_error e{res.status, "HTTP " + std::to_string(res.status), {}, {}};
      if (res.status == 404) e = {404, "no such path: " + req.path, {}, "not_found"};
      if (res.status == 413)
        e = {413, "the request body exceeds " + std::to_string(max_body_bytes) + " bytes", {}, "payload_too_large"};
      // cpp-httplib caps a form-urlencoded body at 8 KiB (curl -d sends that type).
      if (res.status == 413 && req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0)
        e.message = "a body sent as application/x-www-form-urlencoded is limited to 8192 bytes: send "
                    "Content-Type: application/json";
      send_error(res, e);
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics_->request(allowed(req.path).empty() ? "other" : req.path, res.status);
    });
  }

 private:
  static std::string_view allowed(const std::string& path) {
    if (path == "/v1/chat/completions" || path == "/v1/completions") return "POST";
    if (path == "/v1/models" || path == "/health" || path == "/metrics") return "GET, HEAD";
    return {};
  }

  void models(httplib::Response& res) const {
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
    w.Uint64(engine_->context());
    w.EndObject();
    w.EndArray();
    w.EndObject();
    res.set_content(std::string(b.GetString(), b.GetSize()), "application/json");
  }

  /// Checks the request, tokenizes its prompt and queues it.
  void complete(const httplib::Request& req, httplib::Response& res, bool chat) {
    auto j = std::make_shared<job>();
    if (auto e = parse_request(req.body, chat, j->request)) return send_error(res, *e);
    const parsed_request& r = j->request;
    const auto& tok = engine_->tokenizer();
    if (chat) {
      auto ids = engine_->renderer().render(r.messages);
      if (!ids) return send_error(res, {400, std::string(ids.error().message()), "messages", {}});
      j->prompt = std::move(*ids);
    } else if (r.prompt_is_ids) {
      for (std::size_t i = 0; i < r.prompt_ids.size(); ++i)
        if (!tok.vocab().contains(r.prompt_ids[i]))
          return send_error(res, {400, "prompt token " + std::to_string(i) + " is " + std::to_string(r.prompt_ids[i]) +
                                           ", outside the vocabulary of " + std::to_string(tok.vocab().size()),
                                  "prompt", {}});
      j->prompt = r.prompt_ids;
    } else {
      auto ids = tok.encode(r.prompt);
      if (!ids) return send_error(res, {400, std::string(ids.error().message()), "prompt", {}});
      j->prompt = std::move(*ids);
    }
    if (j->prompt.empty()) j->prompt.push_back(tok.vocab().settings().bos);
    // The prompt and at least one generated token fit the context (the prompt alone
    // when only scored): positions = prompt + generated - 1.
    const std::size_t context = engine_->context();
    const bool score_only = r.max_tokens && *r.max_tokens == 0;
    if (j->prompt.size() > context)
      return send_error(res, {400,
                              "the prompt has " + std::to_string(j->prompt.size()) + " tokens, more than the context of " +
                                  std::to_string(context),
                              chat ? "messages" : "prompt", "context_length_exceeded"});
    const std::size_t room = context - j->prompt.size() + 1;
    j->max_tokens = score_only ? 0 : r.max_tokens ? std::min<std::size_t>(room, static_cast<std::size_t>(*r.max_tokens)) : room;
    response_head head{(chat ? "chatcmpl-hedge-" : "cmpl-hedge-") + std::to_string(++next_id_),
                       r.model.empty() ? model_name_ : r.model, static_cast<std::int64_t>(std::time(nullptr)), chat};
    if (!engine_->submit(j)) {
      res.set_header("Retry-After", "1");
      return send_error(res, {429, "the server is busy: " + std::to_string(queue_bound_) +
                                       " requests already wait for the model; retry later",
                              {}, "rate_limit_exceeded", "rate_limit_error"});
    }
    if (r.stream) return stream(res, j, std::move(head));
    std::unique_lock lock(j->mutex);
    j->changed.wait(lock, [&] { return j->done; });
    if (j->error) return send_error(res, *j->error);
    res.set_content(whole_response(*j, head), "application/json");
  }

  /// The prompt's text as echoed.
  std::string echo_text(const job& j) const {
    if (!j.request.prompt_is_ids) return j.request.prompt;
    auto text = engine_->tokenizer().decode(j.prompt);
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
    if (h.chat) {
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

  /// Streams the job's events as they come; a failed write cancels the generation.
  void stream(httplib::Response& res, std::shared_ptr<job> j, response_head head) {
    struct state {
      std::size_t next = 0;      // events sent
      std::size_t offset = 0;    // text_offset of the next token (completions)
      bool opened = false;       // the role chunk (chat) or the echo (completions) sent
      bool finished = false;
    };
    auto st = std::make_shared<state>();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, j, head = std::move(head), st](std::size_t, httplib::DataSink& sink) {
          const parsed_request& r = j->request;
          std::string out;
          std::vector<piece_event> fresh;
          bool done = false;
          std::optional<api_error> error;
          std::vector<token_report> prompt_reports;
          {
            std::unique_lock lock(j->mutex);
            const bool scoring = r.echo && r.logprobs;
            j->changed.wait(lock, [&] {
              return j->done || j->events.size() > st->next || (!st->opened && (j->scored || !scoring));
            });
            if (!st->opened && !(r.echo && r.logprobs && !j->scored)) prompt_reports = j->prompt_logprobs;
            fresh.assign(j->events.begin() + static_cast<std::ptrdiff_t>(st->next), j->events.end());
            st->next = j->events.size();
            done = j->done;
            error = j->error;
          }
          if (error) {
            // The status line is sent: the error travels as an event, as OpenAI streams it.
            out = "data: " + error_body(*error) + "\n\n";
            st->finished = true;
          } else {
            if (!st->opened && (j->scored || !r.echo || !r.logprobs)) {
              st->opened = true;
              if (head.chat) {
                out += chunk(head, r, "", true, {}, 0, nullptr);
              } else if (r.echo) {
                std::vector<const token_report*> tokens;
                for (const auto& t : prompt_reports) tokens.push_back(&t);
                const std::string text = echo_text(*j);
                out += chunk(head, r, text, false, tokens, 0, nullptr);
                st->offset = text.size();
              } else {
                st->offset = echo_text(*j).size();
              }
            }
            for (const auto& e : fresh) {
              std::vector<const token_report*> tokens;
              if (e.token) tokens.push_back(&*e.token);
              if (e.text.empty() && tokens.empty()) continue;
              out += chunk(head, r, e.text, false, tokens, st->offset, nullptr);
              if (e.token) st->offset += e.token->text.size();
            }
            if (done) {
              std::string reason;
              {
                std::lock_guard lock(j->mutex);
                reason = j->finish_reason;
              }
              out += chunk(head, r, "", false, {}, 0, reason.c_str());
              if (r.include_usage) out += usage_chunk(head, *j);
              st->finished = true;
            }
          }
          if (st->finished) out += "data: [DONE]\n\n";
          if (!out.empty() && !sink.write(out.data(), out.size())) {
            j->cancelled = true;
            return false;
          }
          if (st->finished) sink.done();
          return true;
        },
        [j](bool success) {
          if (!success) j->cancelled = true;
        });
  }

  std::unique_ptr<engine> engine_;
  std::string model_name_;
  std::size_t queue_bound_;
  server::metrics* metrics_;
  std::int64_t started_ = static_cast<std::int64_t>(std::time(nullptr));
  std::atomic<std::uint64_t> next_id_{0};
};

struct options {
  std::string model, tokenizer, host = "127.0.0.1", alias;
  std::optional<model::chat_format> format;
  int port = 8080;
  std::size_t threads = 1, context = 0, queue = 16;
};

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return std::fputs(usage_text, stdout), 0;
    if (i + 1 >= argc) return usage_error(a.substr(0, 1) == "-" ? "option " + std::string(a) + " needs a value"
                                                                  : "unexpected argument '" + std::string(a) + "'");
    const std::string_view v = argv[++i];
    bool ok = true;
    if (a == "-m" || a == "--model") o.model = v;
    else if (a == "-z") o.tokenizer = v;
    else if (a == "--host") ok = !(o.host = v).empty();
    else if (a == "--port") ok = parse(v, o.port) && o.port >= 0 && o.port <= 65535;
    else if (a == "--threads" || a == "-t") ok = parse(v, o.threads) && o.threads >= 1 && o.threads <= 1024;
    else if (a == "--ctx-size" || a == "-c") ok = parse(v, o.context) && o.context >= 1;
    else if (a == "--queue") ok = parse(v, o.queue) && o.queue <= 4096;
    else if (a == "--alias") ok = !(o.alias = v).empty();
    else if (a == "--chat-template") ok = (o.format = model::chat_format_named(v)).has_value();
    else return usage_error("unknown option " + std::string(a));
    if (!ok) return usage_error("bad value for " + std::string(a) + ": '" + std::string(v) + "'");
  }
  if (o.model.empty()) return usage_error("no -m MODEL");

  auto m = tools::load_model({.model = o.model, .tokenizer = o.tokenizer, .quantize = {}});
  if (!m) return std::fprintf(stderr, "hedge-server: %s\n", m.error().c_str()), 1;
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
  auto e = engine::make(*m, format, context, o.threads, o.queue, metrics);
  if (!e) return std::fprintf(stderr, "hedge-server: %s\n", e.error().c_str()), 1;
  std::string name = o.alias;
  if (name.empty()) name = o.model.substr(o.model.find_last_of('/') + 1);
  server_app app(std::move(*e), name, o.queue, metrics);

  httplib::Server http;
  // The connection threads: enough that `--queue` requests can wait while others are
  // read, checked and refused with 429.
  const std::size_t connections = o.queue + 8;
  http.new_task_queue = [connections] { return new httplib::ThreadPool(connections); };
  http.set_payload_max_length(max_body_bytes);
  // Each streamed token goes out at once: no Nagle wait behind the previous chunk's ACK.
  http.set_tcp_nodelay(true);
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  app.install(http);
  int port = o.port;
  if (port == 0) {
    port = http.bind_to_any_port(o.host);
    if (port < 0) return std::fprintf(stderr, "hedge-server: cannot listen on %s\n", o.host.c_str()), 1;
  } else if (!http.bind_to_port(o.host, port)) {
    return std::fprintf(stderr, "hedge-server: cannot listen on %s:%d\n", o.host.c_str(), port), 1;
  }
  std::fprintf(stderr, "hedge-server: %s, context %zu, chat template %s, %zu thread(s), queue %zu\n", o.model.c_str(),
               context, std::string(model::to_string(format)).c_str(), o.threads, o.queue);
  const bool ipv6 = o.host.find(':') != std::string::npos;
  std::printf("listening on http://%s%s%s:%d\n", ipv6 ? "[" : "", o.host.c_str(), ipv6 ? "]" : "", port);
  std::fflush(stdout);

  std::atomic<bool> signalled{false};
  std::thread stopper([&] {
    int received = 0;
    sigwait(&stop_signals, &received);
    signalled = true;
    http.stop();
  });
  const bool listened = http.listen_after_bind();
  // Stopped by something other than a signal (a failed accept): end the stopper.
  if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  if (!signalled && !listened) return std::fprintf(stderr, "hedge-server: the listening socket failed\n"), 1;
  return 0;
}
