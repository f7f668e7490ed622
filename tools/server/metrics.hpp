// tools/server/metrics.hpp: the server's counters, rendered in Prometheus' text exposition
// format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/):
//   hedge_requests_total{endpoint,status}      counter, every answered request
//   hedge_prompt_tokens_total                  counter, prompt tokens run
//   hedge_generated_tokens_total               counter, tokens sampled
//   hedge_requests_cancelled_total             counter, generations a client left
//   hedge_time_to_first_token_seconds          histogram, from the request's arrival
//   hedge_decode_tokens_per_second             histogram, per generation
//   hedge_queue_depth                          gauge, requests waiting for the model
//   hedge_requests_running                     gauge, generations running (0 to --parallel)
// One mutex guards them: a few updates per request, never per token.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace hedge::server {

class metrics {
 public:
  void request(const std::string& endpoint, int status) {
    std::lock_guard lock(mutex_);
    ++requests_[{endpoint, status}];
  }

  void generation(std::uint64_t prompt_tokens, std::uint64_t generated, double ttft_seconds, double tokens_per_second) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += prompt_tokens;
    generated_tokens_ += generated;
    if (ttft_seconds >= 0) ttft_.observe(ttft_seconds);
    if (tokens_per_second > 0) tok_s_.observe(tokens_per_second);
  }

  void cancelled() {
    std::lock_guard lock(mutex_);
    ++cancelled_;
  }

  /// The Prometheus text, with the queue's state read by the caller.
  std::string render(std::size_t queue_depth, std::size_t running) const {
    std::lock_guard lock(mutex_);
    std::string out;
    out += "# HELP hedge_requests_total Requests answered, by endpoint and HTTP status.\n"
           "# TYPE hedge_requests_total counter\n";
    for (const auto& [key, n] : requests_)
      out += "hedge_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
    counter(out, "hedge_prompt_tokens_total", "Prompt tokens run through the model.", prompt_tokens_);
    counter(out, "hedge_generated_tokens_total", "Tokens generated (sampled).", generated_tokens_);
    counter(out, "hedge_requests_cancelled_total", "Generations cancelled by a client that left.", cancelled_);
    ttft_.render(out, "hedge_time_to_first_token_seconds",
                 "Time from a request's arrival to its first generated token.");
    tok_s_.render(out, "hedge_decode_tokens_per_second", "Decode rate of each generation, tokens per second.");
    gauge(out, "hedge_queue_depth", "Requests waiting for the model.", queue_depth);
    gauge(out, "hedge_requests_running", "Requests the model is serving.", running);
    return out;
  }

 private:
  template <std::size_t N>
  struct histogram {
    std::array<double, N> bounds;
    std::array<std::uint64_t, N> counts{};
    std::uint64_t count = 0;
    double sum = 0;

    void observe(double v) {
      for (std::size_t i = 0; i < N; ++i)
        if (v <= bounds[i]) ++counts[i];
      ++count;
      sum += v;
    }

    void render(std::string& out, const char* name, const char* help) const {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
      char line[160];
      for (std::size_t i = 0; i < N; ++i) {
        std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[i],
                      static_cast<unsigned long long>(counts[i]));
        out += line;
      }
      std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name,
                    static_cast<unsigned long long>(count), name, sum, name, static_cast<unsigned long long>(count));
      out += line;
    }
  };

  static void counter(std::string& out, const char* name, const char* help, std::uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " +
           std::to_string(v) + "\n";
  }

  static void gauge(std::string& out, const char* name, const char* help, std::size_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
           std::to_string(v) + "\n";
  }

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::uint64_t prompt_tokens_ = 0, generated_tokens_ = 0, cancelled_ = 0;
  histogram<12> ttft_{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10}};
  histogram<12> tok_s_{{1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 2500, 10000, 100000}};
};

}  // namespace hedge::server
