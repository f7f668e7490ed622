// tools/bench_report/render.hpp: the per-CPU report as Markdown, JSON, an SVG bar
// chart, and an SVG of how each case scales with threads.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

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

/// How one case (a kernel's case less its thread count) scales: its best variant's rate
/// (bytes/s, else GFLOP/s) at each thread count measured.
struct scaling_row {
  std::string name;  ///< kernel and case, "threads:N" taken out
  bool bytes = false;
  std::map<std::size_t, double> rate;  ///< threads -> the best variant's rate
};

/// The cases measured at two or more thread counts.
inline std::vector<scaling_row> scaling(const report& r) {
  std::vector<scaling_row> rows;
  for (const auto& k : r.kernels) {
    for (const auto& c : k.cases) {
      const auto at = c.name.find("threads:");
      if (at == std::string::npos) continue;
      const std::size_t threads = std::strtoul(c.name.c_str() + at + 8, nullptr, 10);
      std::string base = c.name.substr(0, at);
      if (const auto end = c.name.find('/', at); end != std::string::npos) base += c.name.substr(end + 1);
      while (!base.empty() && base.back() == '/') base.pop_back();
      const std::string name = k.kernel + "/" + base;
      auto row = std::find_if(rows.begin(), rows.end(), [&](const scaling_row& x) { return x.name == name; });
      if (row == rows.end()) row = rows.insert(rows.end(), scaling_row{name, false, {}});
      for (const auto& v : c.variants) {
        const std::optional<double> rate = v.bytes_per_second ? v.bytes_per_second : v.gflops;
        if (!rate || threads == 0) continue;
        row->bytes = v.bytes_per_second.has_value();
        row->rate[threads] = std::max(row->rate[threads], *rate);
      }
    }
  }
  std::erase_if(rows, [](const scaling_row& x) { return x.rate.size() < 2 || !x.rate.contains(1); });
  return rows;
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
  const auto rows = scaling(r);
  if (!rows.empty()) {
    md += "\n## Scaling with threads\n\nEach case's best variant at each thread count, over its rate at 1 thread "
          "(the bound: the read bandwidth at start-up, over its 1-thread figure). Plot: `<cpu>-scaling.svg`.\n\n"
          "| case | threads | rate | speed-up | bound's speed-up |\n|---|---:|---:|---:|---:|\n";
    for (const auto& row : rows) {
      for (const auto& [threads, rate] : row.rate) {
        const auto bound = m.read_bandwidth.find(threads), one = m.read_bandwidth.find(1);
        md += "| " + row.name + " | " + std::to_string(threads) + " | " +
              (row.bytes ? format("%.2f GB/s", rate * 1e-9) : format("%.1f GFLOP/s", rate)) + " | " +
              format("%.2f", rate / row.rate.at(1)) + " | " +
              (row.bytes && bound != m.read_bandwidth.end() && one != m.read_bandwidth.end()
                   ? format("%.2f", bound->second / one->second)
                   : "") +
              " |\n";
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

/// The start of an SVG chart: the svg element, a white background and the bold title.
inline std::string svg_chart(int width, int height, int margin, const std::string& title) {
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
                    std::to_string(height) + "\" font-family=\"monospace\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + std::to_string(margin) + "\" y=\"" + std::to_string(margin + 14) +
         "\" font-size=\"14\" font-weight=\"bold\">" + title + "</text>\n";
  return svg;
}

/// One bar of a chart, a row `row` pixels high from y: its label right-aligned before x0,
/// the bar from x0, `length` long, then `marks` (drawn over the bar) and the value text at
/// value_x; the texts' baseline at y + baseline.
inline std::string svg_bar(int x0, int y, int row, int baseline, const std::string& label, int length,
                           const char* fill, const std::string& marks, int value_x, const std::string& value) {
  return "<text x=\"" + std::to_string(x0 - 6) + "\" y=\"" + std::to_string(y + baseline) + "\" text-anchor=\"end\">" +
         label + "</text>" + "<rect x=\"" + std::to_string(x0) + "\" y=\"" + std::to_string(y + 2) + "\" width=\"" +
         std::to_string(length) + "\" height=\"" + std::to_string(row - 4) + "\" fill=\"" + fill + "\"/>" + marks +
         "<text x=\"" + std::to_string(value_x) + "\" y=\"" + std::to_string(y + baseline) + "\">" + value +
         "</text>\n";
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
  std::string svg = svg_chart(width, height, margin,
                              "hedge benchmarks: " + r.machine.cpu_name +
                                  " (bars: bw_fraction, or GFLOP/s relative to the best; green = best variant)");
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
        svg += svg_bar(x0, y, row, 12, c.name + "  " + v.variant, length, v.best ? "#2e8b57" : "#7a9cc6", "",
                       x0 + length + 4, value);
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

/// The scaling plot: per case, its speed-up over 1 thread against the thread count (a bar
/// per thread count, a tick at the ideal N and, for bandwidth-bound cases, a red one at the
/// read bandwidth's own speed-up).
inline std::string to_scaling_svg(const report& r) {
  const auto rows = scaling(r);
  std::size_t most_threads = 1;
  for (const auto& row : rows) most_threads = std::max(most_threads, row.rate.rbegin()->first);
  constexpr int label_width = 470, bar_width = 420, value_width = 80, row_height = 14, gap = 8, margin = 10;
  int height = margin * 2 + 30;
  for (const auto& row : rows) height += int(row.rate.size()) * row_height + gap;
  const int width = margin * 2 + label_width + bar_width + value_width;
  const double scale = bar_width / (double(most_threads) * 1.1);
  std::string svg = svg_chart(width, height, margin,
                              "hedge scaling: " + r.machine.cpu_name +
                                  " (bars: speed-up over 1 thread; black tick: N; red tick: the read bandwidth's)");
  int y = margin + 30;
  const int x0 = margin + label_width;
  const auto tick = [&](double speedup, const char* colour) {
    const int x = x0 + int(speedup * scale);
    return "<line x1=\"" + std::to_string(x) + "\" y1=\"" + std::to_string(y + 1) + "\" x2=\"" + std::to_string(x) +
           "\" y2=\"" + std::to_string(y + row_height - 1) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"/>";
  };
  const auto& bw = r.machine.read_bandwidth;
  for (const auto& row : rows) {
    for (const auto& [threads, rate] : row.rate) {
      const double speedup = rate / row.rate.at(1);
      std::string ticks = tick(double(threads), "black");
      if (row.bytes && bw.contains(threads) && bw.contains(1)) ticks += tick(bw.at(threads) / bw.at(1), "#c0392b");
      svg += svg_bar(x0, y, row_height, 11, row.name + "  threads:" + std::to_string(threads),
                     int(std::max(0.0, speedup) * scale), "#7a9cc6", ticks,
                     x0 + int(double(most_threads) * 1.1 * scale) + 4, format("%.2fx", speedup));
      y += row_height;
    }
    y += gap;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace hedge::tools::bench_report
