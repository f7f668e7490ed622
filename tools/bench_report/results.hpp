// tools/bench_report/results.hpp: reads Google Benchmark JSON written by hedge
// bench binaries into per-kernel tables of arch variants.
//
// The naming and counter conventions are those of bench/common/report.hpp:
// `<kernel>/<variant>/<case...>` where the variant is the first segment naming
// an arch tag (optionally `_suffix`), `<family>/bandwidth` entries carry the
// bandwidth a family was compared to, and counters are bytes_per_second,
// bw_fraction, GFLOPs and read_bw. Benchmarks named otherwise are listed
// with the variant "-". With --benchmark_repetitions the median
// aggregate is used; without, the single run.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/core/parse_number.hpp"

namespace hedge::tools::bench_report {

/// One benchmark's result (median over repetitions when there were several).
struct variant_result {
  std::string variant;
  double time_us = 0.0;
  std::optional<double> bytes_per_second;
  std::optional<double> bw_fraction;
  std::optional<double> gflops;
  std::optional<double> read_bw;
  bool best = false;
};

/// Every variant of one kernel measured on the same case (shape, residency, threads).
struct case_results {
  std::string name;
  std::vector<variant_result> variants;
};

/// One kernel (e.g. `gemv/q4_0`): its cases in first-seen order, and the
/// bandwidth re-measured before its family ran (threads -> bytes/s).
struct kernel_results {
  std::string kernel;
  std::vector<case_results> cases;
  std::map<std::size_t, double> family_bandwidth;
};

/// What the bench binaries said about the machine.
struct machine_info {
  std::string cpu_name = "unknown-cpu";
  std::string arch_supported;
  std::string arch_native;
  std::size_t llc_bytes = 0;
  std::map<std::size_t, double> read_bandwidth;  ///< at start-up: threads -> bytes/s
  std::string date;
  std::optional<double> load_average;  ///< 1-minute load when the (first) binary started
  std::size_t cpus = 0;                ///< logical CPUs Google Benchmark saw
};

struct report {
  machine_info machine;
  std::vector<kernel_results> kernels;
};

/// Benchmark's own name suffixes (`/real_time`, `/iterations:1`, ...), not part of a case.
inline bool is_library_suffix(std::string_view segment) {
  constexpr std::array<std::string_view, 6> prefixes = {"real_time", "manual_time", "process_time",
                                                        "iterations:", "repeats:", "min_time:"};
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return segment.starts_with(p); });
}

/// Whether `segment` names an arch variant: a hedge arch tag, or one followed by `_suffix`.
inline bool is_variant(std::string_view segment) {
  constexpr std::array<std::string_view, 8> tags = {"scalar",     "avx2", "avxvnni",      "avx512bw",
                                                    "avx512vnni", "neon", "neon_dotprod", "amx"};
  return std::any_of(tags.begin(), tags.end(), [&](std::string_view tag) {
    return segment == tag || (segment.starts_with(tag) && segment.size() > tag.size() && segment[tag.size()] == '_');
  });
}

inline std::vector<std::string> split_name(std::string_view name) {
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view segment = name.substr(start, slash - start);
    if (!is_library_suffix(segment)) segments.emplace_back(segment);
    start = slash + 1;
  }
  return segments;
}

inline std::string join(const std::vector<std::string>& segments, std::size_t first, std::size_t last) {
  std::string out;
  for (std::size_t i = first; i < last; ++i) out.append(i == first ? "" : "/").append(segments[i]);
  return out;
}

inline std::optional<double> number_field(const nlohmann::json& entry, const char* key) {
  const auto it = entry.find(key);
  if (it == entry.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

/// Microseconds per `time_unit` (Google Benchmark writes ns, us, ms or s).
inline double to_microseconds(double value, const std::string& unit) {
  if (unit == "ns") return value * 1e-3;
  if (unit == "ms") return value * 1e3;
  if (unit == "s") return value * 1e6;
  return value;
}

class report_builder {
 public:
  /// Adds one bench binary's JSON; returns false (and adds nothing) when it is not benchmark output.
  bool add(const nlohmann::json& doc) {
    if (!doc.is_object() || !doc.contains("benchmarks") || !doc["benchmarks"].is_array()) return false;
    read_context(doc.value("context", nlohmann::json::object()));
    // Runs repeated with aggregates: keep the median only.
    std::map<std::string, bool> has_median;
    for (const auto& entry : doc["benchmarks"]) {
      if (entry.value("run_type", "") == "aggregate" && entry.value("aggregate_name", "") == "median") {
        has_median[entry.value("run_name", "")] = true;
      }
    }
    for (const auto& entry : doc["benchmarks"]) {
      if (!entry.is_object() || entry.value("error_occurred", false)) continue;
      const std::string run_name = entry.value("run_name", entry.value("name", ""));
      const bool aggregate = entry.value("run_type", "") == "aggregate";
      if (aggregate ? entry.value("aggregate_name", "") != "median" : has_median.count(run_name) != 0) continue;
      add_entry(split_name(run_name), entry);
    }
    return true;
  }

  /// The report with the best variant of every case marked (highest bytes/s, else GFLOP/s).
  report finish() && {
    for (auto& kernel : report_.kernels) {
      for (auto& c : kernel.cases) {
        variant_result* best = nullptr;
        for (auto& v : c.variants) {
          if (!best || score(v) > score(*best)) best = &v;
        }
        if (best) best->best = true;
      }
    }
    std::erase_if(report_.kernels, [](const kernel_results& k) { return k.cases.empty(); });
    return std::move(report_);
  }

 private:
  static double score(const variant_result& v) {
    if (v.bytes_per_second) return *v.bytes_per_second;
    if (v.gflops) return *v.gflops;
    return v.time_us > 0.0 ? 1.0 / v.time_us : 0.0;
  }

  void read_context(const nlohmann::json& context) {
    if (!context.is_object()) return;
    auto& m = report_.machine;
    m.cpu_name = context.value("hedge_cpu_name", m.cpu_name);
    m.arch_supported = context.value("hedge_arch_supported", m.arch_supported);
    m.arch_native = context.value("hedge_arch_native", m.arch_native);
    m.date = context.value("date", m.date);
    if (context.contains("num_cpus") && context["num_cpus"].is_number()) m.cpus = context["num_cpus"].get<std::size_t>();
    const auto load = context.find("load_avg");
    if (!m.load_average && load != context.end() && load->is_array() && !load->empty() && (*load)[0].is_number()) {
      m.load_average = (*load)[0].get<double>();
    }
    // Numbers the bench binaries wrote as text; one that does not parse is left out (std::stoull
    // would end the program: the tools are built without exceptions).
    if (std::size_t llc = 0; parse_number(context.value("hedge_llc_bytes", ""), llc)) m.llc_bytes = llc;
    constexpr std::string_view bw_key = "hedge_read_bw_threads:";
    for (const auto& [key, value] : context.items()) {
      if (key.starts_with(bw_key) && value.is_string()) {
        std::size_t threads = 0;
        double bandwidth = 0;
        if (!parse_number(std::string_view(key).substr(bw_key.size()), threads) ||
            !parse_number(value.get<std::string>(), bandwidth))
          continue;
        // Several binaries each measured at start-up: keep the best figure.
        m.read_bandwidth[threads] = std::max(m.read_bandwidth[threads], bandwidth);
      }
    }
  }

  kernel_results& kernel(const std::string& name) {
    for (auto& k : report_.kernels) {
      if (k.kernel == name) return k;
    }
    report_.kernels.push_back({name, {}, {}});
    return report_.kernels.back();
  }

  void add_entry(const std::vector<std::string>& segments, const nlohmann::json& entry) {
    if (segments.size() >= 2 && segments.back() == "bandwidth") {
      auto& k = kernel(join(segments, 0, segments.size() - 1));
      constexpr std::string_view counter = "read_bw_threads:";
      for (const auto& [key, value] : entry.items()) {
        if (key.starts_with(counter) && value.is_number()) {
          k.family_bandwidth[std::stoull(key.substr(counter.size()))] = value.get<double>();
        }
      }
      return;
    }
    if (segments.empty()) return;
    const auto variant = std::find_if(segments.begin(), segments.end(), [](const std::string& s) { return is_variant(s); });
    // A benchmark without an arch segment (e.g. router overhead) is its own
    // case, `<kernel>/<case>`, with the single variant "-".
    const bool has_variant = variant != segments.end();
    const std::size_t at = has_variant ? std::size_t(variant - segments.begin()) : segments.size() - 1;
    auto& k = kernel(at == 0 ? segments[0] : join(segments, 0, at));
    const std::string case_name = at == 0 ? std::string("-") : join(segments, has_variant ? at + 1 : at, segments.size());
    auto c = std::find_if(k.cases.begin(), k.cases.end(), [&](const case_results& r) { return r.name == case_name; });
    if (c == k.cases.end()) {
      k.cases.push_back({case_name, {}});
      c = k.cases.end() - 1;
    }
    variant_result r;
    r.variant = has_variant ? *variant : "-";
    r.time_us = to_microseconds(number_field(entry, "real_time").value_or(0.0), entry.value("time_unit", "ns"));
    r.bytes_per_second = number_field(entry, "bytes_per_second");
    r.bw_fraction = number_field(entry, "bw_fraction");
    r.gflops = number_field(entry, "GFLOPs");
    r.read_bw = number_field(entry, "read_bw");
    c->variants.push_back(std::move(r));
  }

  report report_;
};

}  // namespace hedge::tools::bench_report
