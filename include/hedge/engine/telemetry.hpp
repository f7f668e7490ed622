// hedge/engine/telemetry.hpp: the Observer concept and the default sink, per-tier counters
// and latency histograms, readable as a struct, as JSON and as Prometheus text.
//
// An Observer gets every engine_event and every engine_outcome on the calling thread; it
// must not block. `telemetry` counts them per tier (the edge, each cloud): requests, tokens,
// escalations, hand-offs, fallbacks, retries, breaker transitions, redactions, errors;
// histograms of time to first token and of total time (fixed millisecond buckets, so the
// hot path is an increment); cost, and cost saved against sending everything to cloud 0
// at its prices (the same tokens at the first cloud's prices, minus what was paid).
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "hedge/engine/budget.hpp"
#include "hedge/engine/events.hpp"

namespace hedge::engine {

template <class O>
concept Observer = requires(O& o, const engine_event& e, const engine_outcome& out) {
  { o.on_event(e) };
  { o.on_outcome(out) };
};

/// An Observer that ignores everything.
struct null_observer {
  constexpr void on_event(const engine_event&) noexcept {}
  constexpr void on_outcome(const engine_outcome&) noexcept {}
};

/// Counts per bucket of a fixed set of upper bounds in milliseconds (the last is +Inf).
struct latency_histogram {
  static constexpr std::array<double, 12> bounds_ms{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000};
  std::array<std::uint64_t, bounds_ms.size() + 1> counts{};
  double sum_ms = 0.0;
  std::uint64_t count = 0;

  constexpr void add(double ms) noexcept {
    std::size_t b = 0;
    while (b < bounds_ms.size() && ms > bounds_ms[b]) ++b;
    ++counts[b];
    sum_ms += ms;
    ++count;
  }
};

struct tier_counters {
  std::uint64_t requests = 0;       ///< requests this tier produced text for
  std::uint64_t calls = 0;          ///< attempts made at it
  std::uint64_t input_tokens = 0, output_tokens = 0;
  std::uint64_t escalations = 0;    ///< edge: answers the verifier escalated
  std::uint64_t handoffs_out = 0, handoffs_in = 0;
  std::uint64_t fallbacks_out = 0, fallbacks_in = 0;
  std::uint64_t retries = 0;
  std::uint64_t breaker_opened = 0, breaker_half_opened = 0, breaker_closed = 0;
  double cost = 0.0;
  latency_histogram time_to_first_token, total;
};

class telemetry {
 public:
  std::uint64_t requests = 0, failed = 0, redactions = 0, model_pii = 0;
  double cost = 0.0, cost_all_cloud = 0.0;
  std::array<tier_counters, tier_slots> tiers{};
  tier_prices all_cloud_prices{};  ///< the prices "all-cloud" is counted at (set to cloud 0's)

  void on_event(const engine_event& e) noexcept {
    switch (e.kind) {
      case event_kind::routed:
      case event_kind::token: break;
      case event_kind::handoff:
        ++tiers[e.from.slot()].handoffs_out;
        ++tiers[e.tier.slot()].handoffs_in;
        break;
      case event_kind::fallback:
        ++tiers[e.from.slot()].fallbacks_out;
        ++tiers[e.tier.slot()].fallbacks_in;
        break;
      case event_kind::retry: ++tiers[e.tier.slot()].retries; break;
      case event_kind::breaker:
        if (e.transition == breaker_transition::opened) ++tiers[e.tier.slot()].breaker_opened;
        if (e.transition == breaker_transition::half_opened) ++tiers[e.tier.slot()].breaker_half_opened;
        if (e.transition == breaker_transition::closed) ++tiers[e.tier.slot()].breaker_closed;
        break;
    }
  }

  void on_outcome(const engine_outcome& o) noexcept {
    ++requests;
    if (!o.ok()) ++failed;
    redactions += o.redactions;
    model_pii += o.model_pii;
    cost += o.cost;
    std::uint64_t input = 0;
    for (std::size_t s = 0; s < tier_slots; ++s) {
      const tier_report& r = o.tiers[s];
      if (!r.used) continue;
      tier_counters& c = tiers[s];
      c.calls += r.attempts;
      c.input_tokens += r.input_tokens;
      c.output_tokens += r.output_tokens;
      c.cost += r.cost;
      if (r.input_tokens > input) input = r.input_tokens / (r.attempts ? r.attempts : 1);
      if (r.delivered_tokens > 0) {
        ++c.requests;
        if (r.time_to_first_token) c.time_to_first_token.add(ms(*r.time_to_first_token));
        c.total.add(ms(o.total));
      }
    }
    if (o.escalated) ++tiers[0].escalations;
    cost_all_cloud += all_cloud_prices.cost(input, o.tokens);
  }

  [[nodiscard]] double cost_saved() const noexcept { return cost_all_cloud - cost; }

  /// The counters as one JSON object.
  void write_json(std::string& out) const {
    char n[64];
    auto num = [&](double v) {
      std::snprintf(n, sizeof n, "%.9g", v);
      out.append(n);
    };
    out.append("{\"requests\":");
    num(static_cast<double>(requests));
    out.append(",\"failed\":");
    num(static_cast<double>(failed));
    out.append(",\"redactions\":");
    num(static_cast<double>(redactions));
    out.append(",\"model_pii\":");
    num(static_cast<double>(model_pii));
    out.append(",\"cost\":");
    num(cost);
    out.append(",\"cost_all_cloud\":");
    num(cost_all_cloud);
    out.append(",\"cost_saved\":");
    num(cost_saved());
    out.append(",\"tiers\":[");
    for (std::size_t s = 0; s < tier_slots; ++s) {
      const tier_counters& c = tiers[s];
      if (s) out.push_back(',');
      out.append("{\"tier\":\"");
      out.append(slot_name(s));
      out.push_back('"');
      for (const auto& [name, value] : counters(c)) {
        out.append(",\"").append(name).append("\":");
        num(static_cast<double>(value));
      }
      out.append(",\"cost\":");
      num(c.cost);
      for (const auto& [name, h] : {std::pair<std::string_view, const latency_histogram*>{"ttft_ms", &c.time_to_first_token},
                                    {"total_ms", &c.total}}) {
        out.append(",\"").append(name).append("\":{\"count\":");
        num(static_cast<double>(h->count));
        out.append(",\"sum\":");
        num(h->sum_ms);
        out.append(",\"buckets\":[");
        for (std::size_t b = 0; b < h->counts.size(); ++b) {
          if (b) out.push_back(',');
          num(static_cast<double>(h->counts[b]));
        }
        out.append("]}");
      }
      out.push_back('}');
    }
    out.append("]}");
  }

  /// The counters in Prometheus' text exposition format (version 0.0.4).
  void write_prometheus(std::string& out) const {
    char n[64];
    auto line = [&](std::string_view name, std::string_view labels, double v) {
      out.append(name);
      if (!labels.empty()) out.push_back('{'), out.append(labels), out.push_back('}');
      std::snprintf(n, sizeof n, " %.9g\n", v);
      out.append(n);
    };
    out.append("# TYPE hedge_engine_requests_total counter\n");
    line("hedge_engine_requests_total", {}, static_cast<double>(requests));
    out.append("# TYPE hedge_engine_failed_total counter\n");
    line("hedge_engine_failed_total", {}, static_cast<double>(failed));
    out.append("# TYPE hedge_engine_redactions_total counter\n");
    line("hedge_engine_redactions_total", {}, static_cast<double>(redactions));
    out.append("# TYPE hedge_engine_cost_total counter\n");
    line("hedge_engine_cost_total", {}, cost);
    out.append("# TYPE hedge_engine_cost_saved_total gauge\n");
    line("hedge_engine_cost_saved_total", {}, cost_saved());
    std::string labels;
    for (std::size_t s = 0; s < tier_slots; ++s) {
      const tier_counters& c = tiers[s];
      labels.assign("tier=\"").append(slot_name(s)).append("\"");
      for (const auto& [name, value] : counters(c)) {
        std::string metric = "hedge_engine_tier_";
        metric.append(name).append("_total");
        line(metric, labels, static_cast<double>(value));
      }
      line("hedge_engine_tier_cost_total", labels, c.cost);
      // Prometheus' conventions: histograms in seconds (the struct and the JSON keep ms).
      for (const auto& [name, h] : {std::pair<std::string_view, const latency_histogram*>{"ttft", &c.time_to_first_token},
                                    {"duration", &c.total}}) {
        std::string metric = "hedge_engine_tier_";
        metric.append(name).append("_seconds");
        std::uint64_t cumulative = 0;
        for (std::size_t b = 0; b < h->counts.size(); ++b) {
          cumulative += h->counts[b];
          std::string le = labels;
          if (b < latency_histogram::bounds_ms.size()) {
            std::snprintf(n, sizeof n, ",le=\"%g\"", latency_histogram::bounds_ms[b] / 1000.0);
            le.append(n);
          } else {
            le.append(",le=\"+Inf\"");
          }
          line(metric + "_bucket", le, static_cast<double>(cumulative));
        }
        line(metric + "_sum", labels, h->sum_ms / 1000.0);
        line(metric + "_count", labels, static_cast<double>(h->count));
      }
    }
  }

  static constexpr std::string_view slot_name(std::size_t s) noexcept {
    constexpr std::array<std::string_view, tier_slots> names{"edge", "cloud0", "cloud1", "cloud2", "cloud3"};
    return s < names.size() ? names[s] : "unknown";
  }

 private:
  static double ms(std::chrono::nanoseconds d) noexcept { return std::chrono::duration<double, std::milli>(d).count(); }

  static std::array<std::pair<std::string_view, std::uint64_t>, 13> counters(const tier_counters& c) noexcept {
    return {{{"requests", c.requests},
             {"calls", c.calls},
             {"input_tokens", c.input_tokens},
             {"output_tokens", c.output_tokens},
             {"escalations", c.escalations},
             {"handoffs_out", c.handoffs_out},
             {"handoffs_in", c.handoffs_in},
             {"fallbacks_out", c.fallbacks_out},
             {"fallbacks_in", c.fallbacks_in},
             {"retries", c.retries},
             {"breaker_opened", c.breaker_opened},
             {"breaker_half_opened", c.breaker_half_opened},
             {"breaker_closed", c.breaker_closed}}};
  }
};

}  // namespace hedge::engine
