// tools/bench_report/render.hpp: the per-CPU report as Markdown, JSON and an
// SVG bar chart.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "results.hpp"

namespace hedge::tools::bench_report {

/// A file-name-safe form of the CPU name: lower case, runs of anything but
/// letters and digits turned into one '-' ("AMD EPYC 7R13" -> "amd-epyc-7r13").
inline std::string slug(const std::string& name) {
  std::string out;
  for (char ch : name) {
    const bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z');
    if (alnum) {
      out.push_back(ch >= 'A' && ch <= 'Z' ? char(ch - 'A' + 'a') : ch);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown-cpu" : out;
}

inline std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

inline std::string bandwidth_list(const std::map<std::size_t, double>& by_threads) {
  std::string out;
  for (const auto& [threads, bw] : by_threads) {
    out.append(out.empty() ? "" : ", ")
        .append(std::to_string(threads))
        .append(threads == 1 ? " thread " : " threads ")
        .append(format("%.2f GB/s", bw * 1e-9));
  }
  return out.empty() ? "not measured" : out;
}

/// `command` is how the figures were produced, printed in the header.
inline std::string to_markdown(const report& r, const std::string& command) {
  const auto& m = r.machine;
  std::string md = "# hedge benchmarks: " + m.cpu_name + "\n\n";
  md += "- arch tags supported by this CPU: " + m.arch_supported + " (native tag of the build: " + m.arch_native + ")\n";
  md += "- last-level cache: " + format("%.1f MiB", double(m.llc_bytes) / (1 << 20)) + "\n";
  md += "- read bandwidth at start-up: " + bandwidth_list(m.read_bandwidth) + "\n";
  md += "- run: " + m.date + ", `" + command + "`\n";
  if (m.load_average) {
    md += "- load average at start: " + format("%.2f", *m.load_average);
    if (*m.load_average > double(m.cpus)) {
      md += " (more than the " + std::to_string(m.cpus) + " CPUs: other processes competed for them, figures are noisy)";
    }
    md += "\n";
  }
  md += "- times are real time, the median of the repetitions; `bw_fraction` = bytes/s over the read bandwidth "
        "re-measured right before the kernel's family ran (at the same thread count); **best** marks the fastest "
        "variant of each case\n";
  for (const auto& k : r.kernels) {
    md += "\n## " + k.kernel + "\n\n";
    if (!k.family_bandwidth.empty()) md += "Read bandwidth before this family: " + bandwidth_list(k.family_bandwidth) + ".\n\n";
    md += "| case | variant | time (us) | GB/s | GFLOP/s | bw_fraction | |\n|---|---|---:|---:|---:|---:|---|\n";
    for (const auto& c : k.cases) {
      for (const auto& v : c.variants) {
        md += "| " + c.name + " | " + v.variant + " | " + format("%.2f", v.time_us) + " | " +
              (v.bytes_per_second ? format("%.2f", *v.bytes_per_second * 1e-9) : "") + " | " +
              (v.gflops ? format("%.1f", *v.gflops) : "") + " | " +
              (v.bw_fraction ? format("%.3f", *v.bw_fraction) : "") + " | " + (v.best ? "**best**" : "") + " |\n";
      }
    }
  }
  return md;
}

inline nlohmann::json to_json(const report& r) {
  const auto& m = r.machine;
  auto bandwidth = [](const std::map<std::size_t, double>& by_threads) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [threads, bw] : by_threads) out[std::to_string(threads)] = bw;
    return out;
  };
  auto optional = [](const std::optional<double>& value) { return value ? nlohmann::json(*value) : nlohmann::json(); };
  nlohmann::json doc = {{"cpu_name", m.cpu_name},
                        {"arch_supported", m.arch_supported},
                        {"arch_native", m.arch_native},
                        {"llc_bytes", m.llc_bytes},
                        {"read_bandwidth_bytes_per_second", bandwidth(m.read_bandwidth)},
                        {"date", m.date},
                        {"load_average", m.load_average ? nlohmann::json(*m.load_average) : nlohmann::json()},
                        {"kernels", nlohmann::json::array()}};
  for (const auto& k : r.kernels) {
    nlohmann::json kernel = {{"kernel", k.kernel},
                             {"family_read_bandwidth_bytes_per_second", bandwidth(k.family_bandwidth)},
                             {"cases", nlohmann::json::array()}};
    for (const auto& c : k.cases) {
      nlohmann::json variants = nlohmann::json::array();
      for (const auto& v : c.variants) {
        variants.push_back({{"variant", v.variant},
                            {"time_us", v.time_us},
                            {"bytes_per_second", optional(v.bytes_per_second)},
                            {"gflops", optional(v.gflops)},
                            {"bw_fraction", optional(v.bw_fraction)},
                            {"read_bw", optional(v.read_bw)},
                            {"best", v.best}});
      }
      kernel["cases"].push_back({{"case", c.name}, {"variants", std::move(variants)}});
    }
    doc["kernels"].push_back(std::move(kernel));
  }
  return doc;
}

/// A horizontal bar chart: one bar per variant and case, grouped by kernel.
/// Bars show bw_fraction on a 0..1 axis (a dashed line marks 1.0) when the
/// kernel reports it, else GFLOP/s relative to the kernel's fastest variant.
inline std::string to_svg(const report& r) {
  constexpr int label_width = 470, bar_width = 420, value_width = 120, row = 16, heading = 26, margin = 10;
  int rows = 0;
  for (const auto& k : r.kernels) {
    for (const auto& c : k.cases) rows += int(c.variants.size());
  }
  const int width = margin * 2 + label_width + bar_width + value_width;
  const int height = margin * 2 + 30 + rows * row + int(r.kernels.size()) * heading;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" font-family=\"monospace\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + std::to_string(margin) + "\" y=\"" + std::to_string(margin + 14) +
         "\" font-size=\"14\" font-weight=\"bold\">hedge benchmarks: " + r.machine.cpu_name +
         " (bars: bw_fraction, or GFLOP/s relative to the best; green = best variant)</text>\n";
  int y = margin + 30;
  const int x0 = margin + label_width;
  for (const auto& k : r.kernels) {
    bool fraction = false;
    double max_gflops = 0.0;
    for (const auto& c : k.cases) {
      for (const auto& v : c.variants) {
        fraction = fraction || v.bw_fraction.has_value();
        max_gflops = std::max(max_gflops, v.gflops.value_or(0.0));
      }
    }
    svg += "<text x=\"" + std::to_string(margin) + "\" y=\"" + std::to_string(y + 17) +
           "\" font-weight=\"bold\">" + k.kernel + (fraction ? "  (bw_fraction)" : "  (GFLOP/s)") + "</text>\n";
    y += heading;
    const int group_top = y;
    for (const auto& c : k.cases) {
      for (const auto& v : c.variants) {
        double share = 0.0;
        std::string value;
        if (fraction && v.bw_fraction) {
          share = *v.bw_fraction;
          value = format("%.3f", *v.bw_fraction);
        } else if (v.gflops && max_gflops > 0.0) {
          share = *v.gflops / max_gflops;
          value = format("%.1f GFLOP/s", *v.gflops);
        }
        const int length = int(std::clamp(share, 0.0, 1.05) * bar_width / 1.05);
        svg += "<text x=\"" + std::to_string(x0 - 6) + "\" y=\"" + std::to_string(y + 12) +
               "\" text-anchor=\"end\">" + c.name + "  " + v.variant + "</text>";
        svg += "<rect x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" +
               std::to_string(length) + "\" height=\"" + std::to_string(row - 4) + "\" fill=\"" +
               (v.best ? "#2e8b57" : "#7a9cc6") + "\"/>";
        svg += "<text x=\"" + std::to_string(x0 + length + 4) + "\" y=\"" + std::to_string(y + 12) + "\">" + value +
               "</text>\n";
        y += row;
      }
    }
    if (fraction) {
      const int one = x0 + int(bar_width / 1.05);
      svg += "<line x1=\"" + std::to_string(one) + "\" y1=\"" + std::to_string(group_top) + "\" x2=\"" +
             std::to_string(one) + "\" y2=\"" + std::to_string(y) +
             "\" stroke=\"#c0392b\" stroke-dasharray=\"3,3\"/>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hedge::tools::bench_report
