// tools/server/config.hpp: hedge-server's settings, and the JSON config file (`--config FILE`)
// that holds all of them. The schema is docs/cloud.md "The config file"; examples/gateway.json
// is a complete example. Flags given with --config override the file's values.
//
// The file never holds an API key: it may name the environment variable (`api_key_env`) or
// the file (`api_key_file`) that does, as hedge-cloud-chat's flags may. A key the file does
// not know, a value of the wrong type or out of range is an error naming it by its path
// ("clouds[1].price.output").
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "gateway.hpp"
#include "hedge/model/chat_template.hpp"
#include "json.hpp"
#include "request.hpp"

namespace hedge::server {

struct server_options {
  std::string model, tokenizer, host = "127.0.0.1", alias;
  std::optional<model::chat_format> format;
  int port = 8080;
  std::size_t threads = 1, context = 0, queue = 16;
  std::size_t parallel = 1;  ///< the model's slots: generations batched together
  gateway_options gateway;
  unsigned token_delay_ms = 0;
  unsigned round_trip_ms = 0;  ///< an emulated network round trip before each request's first output
  std::string api_key_env, api_key_file;  ///< where the clouds' key is (empty: load_api_key's places)
};

namespace detail {

/// Reads one JSON object's members against a list of known keys.
class config_reader {
 public:
  explicit config_reader(std::string& failure) : failure_(&failure) {}

  [[nodiscard]] bool failed() const noexcept { return !failure_->empty(); }
  bool fail(const std::string& path, const std::string& message) {
    if (failure_->empty()) *failure_ = "'" + path + "' " + message;
    return false;
  }
  /// Every member of `object` at `path`, each handed to `read(key, value, its path)`, which
  /// returns false for a key it does not know.
  template <class Read>
  bool members(const json::value& object, const std::string& path, Read&& read) {
    if (!object.is_object()) return fail(path.empty() ? "(the file)" : path, "must be an object");
    for (const auto& [key, value] : object.members()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (!read(key, value, at)) return failed() ? false : fail(at, "is not a setting (docs/cloud.md lists them)");
    }
    return !failed();
  }
  bool text(const json::value& v, const std::string& path, std::string& out) {
    if (!v.is_string() || v.as_string().empty()) return fail(path, "must be a non-empty string");
    out = v.as_string();
    return true;
  }
  template <class T>
  bool whole(const json::value& v, const std::string& path, T& out, std::int64_t low, std::int64_t high) {
    if (!v.is_int64() || v.as_int64() < low || v.as_int64() > high)
      return fail(path, "must be an integer from " + std::to_string(low) + " to " + std::to_string(high));
    out = static_cast<T>(v.as_int64());
    return true;
  }
  template <class T>
  bool number(const json::value& v, const std::string& path, T& out) {
    if (!v.is_number() || !(v.as_double() >= 0.0)) return fail(path, "must be a number >= 0");
    out = static_cast<T>(v.as_double());
    return true;
  }
  bool milliseconds(const json::value& v, const std::string& path, std::chrono::milliseconds& out) {
    std::int64_t ms = 0;
    if (!whole(v, path, ms, 0, 86'400'000)) return false;
    out = std::chrono::milliseconds(ms);
    return true;
  }
  bool prices(const json::value& v, const std::string& path, engine::tier_prices& out) {
    return members(v, path, [&](const std::string& key, const json::value& m, const std::string& at) {
      if (key == "input") return number(m, at, out.input_per_million);
      if (key == "output") return number(m, at, out.output_per_million);
      return false;
    });
  }

 private:
  std::string* failure_;
};

/// An entity's name in the config file: the placeholder's, lower case (email, phone, card, ...).
inline route::pii_entity entity_named(std::string_view name) {
  for (std::uint16_t bit = 1; bit < static_cast<std::uint16_t>(route::pii_entity::all); bit <<= 1) {
    const auto e = static_cast<route::pii_entity>(bit);
    std::string lower(engine::placeholder_name(e));
    for (char& c : lower) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower == name) return e;
  }
  return route::pii_entity::none;
}

}  // namespace detail

/// Reads the config file's JSON text into `o`; the error names the setting and why.
inline std::optional<std::string> read_config(std::string text, server_options& o) {
  json::value root;
  if (auto failure = json::parse(std::move(text), root)) return failure->message;
  std::string failure;
  detail::config_reader in(failure);
  auto& g = o.gateway;
  auto& e = g.engine;
  const auto classes = [&](const json::value& v, const std::string& path, route::data_class& out) {
    if (!v.is_array()) return in.fail(path, "must be an array of data classes");
    std::uint32_t bits = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint32_t bit = v[i].is_string() ? data_class_named(v[i].as_string()) : 0;
      if (bit == 0)
        return in.fail(path + "[" + std::to_string(i) + "]", "must be public, internal, contractual, regulated, personal or private");
      bits |= bit;
    }
    out = static_cast<route::data_class>(bits);
    return true;
  };
  const auto entities = [&](const json::value& v, const std::string& path, route::pii_entity& out) {
    if (!v.is_array()) return in.fail(path, "must be an array of entity names");
    std::uint16_t bits = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const route::pii_entity bit = v[i].is_string() ? detail::entity_named(v[i].as_string()) : route::pii_entity::none;
      if (bit == route::pii_entity::none)
        return in.fail(path + "[" + std::to_string(i) + "]", "must be email, phone, card, iban, ssn, ipv4, ipv6, mac or dob");
      bits = static_cast<std::uint16_t>(bits | static_cast<std::uint16_t>(bit));
    }
    out = static_cast<route::pii_entity>(bits);
    return true;
  };
  in.members(root, "", [&](const std::string& key, const json::value& v, const std::string& at) -> bool {
    if (key == "model") return in.text(v, at, o.model);
    if (key == "tokenizer") return in.text(v, at, o.tokenizer);
    if (key == "host") return in.text(v, at, o.host);
    if (key == "port") return in.whole(v, at, o.port, 0, 65535);
    if (key == "threads") return in.whole(v, at, o.threads, 1, 1024);
    if (key == "ctx_size") return in.whole(v, at, o.context, 1, 1 << 24);
    if (key == "queue") return in.whole(v, at, o.queue, 0, 4096);
    if (key == "parallel") return in.whole(v, at, o.parallel, 1, 64);
    if (key == "alias") return in.text(v, at, o.alias);
    if (key == "token_delay_ms") return in.whole(v, at, o.token_delay_ms, 0, 10'000);
    if (key == "chat_template") {
      std::string name;
      if (!in.text(v, at, name)) return false;
      o.format = model::chat_format_named(name);
      return o.format ? true : in.fail(at, "must be plain, chatml, llama3, llama2 or zephyr");
    }
    if (key == "api_key_env") return in.text(v, at, o.api_key_env);
    if (key == "api_key_file") return in.text(v, at, o.api_key_file);
    if (key == "workers") return in.whole(v, at, g.workers, 1, 256);
    if (key == "delivery") {
      if (v.is_int64() && v.as_int64() >= 0 && v.as_int64() <= 1'000'000) return g.delivery = std::to_string(v.as_int64()), true;
      if (v.is_string() && (v.as_string() == "immediate" || v.as_string() == "verified")) return g.delivery = v.as_string(), true;
      return in.fail(at, "must be immediate, verified or a count of tokens to hold");
    }
    if (key == "deadline_ms") return in.milliseconds(v, at, e.default_deadline);
    if (key == "edge_price") return in.prices(v, at, e.edge_prices);
    if (key == "clouds") {
      if (!v.is_array() || v.items().empty() || v.size() > engine::max_clouds)
        return in.fail(at, "must be an array of 1 to " + std::to_string(engine::max_clouds) + " clouds");
      g.clouds.clear();
      g.cloud_models.clear();
      for (std::size_t c = 0; c < v.size(); ++c) {
        const std::string path = at + "[" + std::to_string(c) + "]";
        std::string url, name;
        const bool good = in.members(v[c], path, [&](const std::string& k, const json::value& m, const std::string& p) {
          if (k == "url") return in.text(m, p, url) && (url.starts_with("http") || in.fail(p, "must be an http(s) URL"));
          if (k == "model") return in.text(m, p, name);
          if (k == "price") return in.prices(m, p, e.cloud_prices[c]);
          return false;
        });
        if (!good) return false;
        if (url.empty()) return in.fail(path + ".url", "is required");
        g.clouds.push_back(url);
        g.cloud_models.push_back(name);
      }
      return true;
    }
    if (key == "budget") {
      double amount = -1.0;
      std::string period = "hour";
      const bool good = in.members(v, at, [&](const std::string& k, const json::value& m, const std::string& p) {
        if (k == "amount") return in.number(m, p, amount);
        if (k == "period") return in.text(m, p, period) && (period == "hour" || period == "day" || in.fail(p, "must be hour or day"));
        return false;
      });
      if (!good) return false;
      if (amount < 0) return in.fail(at + ".amount", "is required");
      e.budget.per_period = amount;
      e.budget.period = std::chrono::seconds(period == "day" ? 86400 : 3600);
      return true;
    }
    if (key == "router") {
      return in.members(v, at, [&](const std::string& k, const json::value& m, const std::string& p) {
        if (k == "threshold") {
          if (!m.is_number()) return in.fail(p, "must be a number");
          return g.router_threshold = m.as_double(), true;
        }
        if (k == "race_margin") return in.number(m, p, e.race_margin);
        if (k == "deferral_bias") {
          if (!m.is_number()) return in.fail(p, "must be a number");
          return g.deferral.bias = static_cast<float>(m.as_double()), true;
        }
        if (k == "deferral_threshold") return in.number(m, p, g.deferral.threshold);
        if (k == "deferral_weights") {
          if (!m.is_array() || m.size() != g.deferral.weights.size())
            return in.fail(p, "must be an array of " + std::to_string(g.deferral.weights.size()) + " numbers");
          for (std::size_t i = 0; i < m.size(); ++i) {
            if (!m[i].is_number()) return in.fail(p + "[" + std::to_string(i) + "]", "must be a number");
            g.deferral.weights[i] = static_cast<float>(m[i].as_double());
          }
          return true;
        }
        return false;
      });
    }
    if (key == "privacy") {
      return in.members(v, at, [&](const std::string& k, const json::value& m, const std::string& p) {
        if (k == "stay_on_device") return classes(m, p, e.privacy.restricted);
        if (k == "redact") return entities(m, p, e.privacy.redact);
        if (k == "keep_on_device") return entities(m, p, e.privacy.keep_on_device);
        return false;
      });
    }
    if (key == "retry") {
      return in.members(v, at, [&](const std::string& k, const json::value& m, const std::string& p) {
        if (k == "max_attempts") return in.whole(m, p, e.retry.max_attempts, 1, 10);
        if (k == "base_delay_ms") return in.milliseconds(m, p, e.retry.base_delay);
        if (k == "max_delay_ms") return in.milliseconds(m, p, e.retry.max_delay);
        return false;
      });
    }
    if (key == "breaker") {
      return in.members(v, at, [&](const std::string& k, const json::value& m, const std::string& p) {
        if (k == "failure_threshold") return in.whole(m, p, e.breaker.failure_threshold, 1, 1000);
        if (k == "cooldown_ms") return in.milliseconds(m, p, e.breaker.cooldown);
        if (k == "max_cooldown_ms") return in.milliseconds(m, p, e.breaker.max_cooldown);
        return false;
      });
    }
    return false;
  });
  if (!failure.empty()) return failure;
  return std::nullopt;
}

/// Reads the config file at `path` into `o`.
inline std::optional<std::string> load_config(const std::string& path, server_options& o) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return "cannot read the config file " + path;
  std::ostringstream text;
  text << file.rdbuf();
  if (text.str().size() > (1u << 20)) return "the config file " + path + " is larger than 1 MiB";
  if (auto e = read_config(text.str(), o)) return path + ": " + *e;
  return std::nullopt;
}

}  // namespace hedge::server
