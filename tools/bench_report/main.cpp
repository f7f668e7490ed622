// hedge-bench-report: turns the Google Benchmark JSON of hedge bench binaries
// into bench-report/<cpu>.md, <cpu>.json, <cpu>.svg and <cpu>-scaling.svg (see scripts/bench.sh).
//
//   hedge-bench-report --out DIR [--command TEXT] RESULT.json...
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "../common/cli.hpp"
#include "render.hpp"
#include "results.hpp"

namespace {

constexpr const char* usage_text = "usage: hedge-bench-report --out DIR [--command TEXT] RESULT.json...\n";
constexpr hedge::tools::cli cli{"hedge-bench-report", usage_text};

/// The usage text alone on standard error; returns 2.
int usage() {
  std::fputs(usage_text, stderr);
  return 2;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge::tools::bench_report;
  std::string out_dir, command = "./scripts/bench.sh";
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (std::strcmp(argv[i], "--command") == 0 && i + 1 < argc) {
      command = argv[++i];
    } else if (argv[i][0] == '-') {
      return usage();
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  if (out_dir.empty() || inputs.empty()) return usage();

  report_builder builder;
  for (const auto& path : inputs) {
    std::ifstream in(path);
    const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!builder.add(doc)) return cli.fail(path + " is not Google Benchmark JSON output");
  }
  const report r = std::move(builder).finish();
  const std::string base = out_dir + "/" + slug(r.machine.cpu_name);
  if (!write_file(base + ".md", to_markdown(r, command)) || !write_file(base + ".json", to_json(r).dump(2) + "\n") ||
      !write_file(base + ".svg", to_svg(r)) || !write_file(base + "-scaling.svg", to_scaling_svg(r)))
    return cli.fail("cannot write " + base + ".{md,json,svg} or " + base + "-scaling.svg");
  std::size_t cases = 0;
  for (const auto& k : r.kernels) cases += k.cases.size();
  std::printf("hedge-bench-report: %zu kernels, %zu cases -> %s.md, %s.json, %s.svg\n", r.kernels.size(), cases,
              base.c_str(), base.c_str(), base.c_str());
  return 0;
}
