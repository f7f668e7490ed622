// bench/common/cpu.hpp: what a benchmark report says about the CPU it ran on.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>

#include "hedge/core/arch.hpp"

namespace hedge::bench {

/// The CPU model name from /proc/cpuinfo ("model name" on x86, "Model" or
/// "Hardware" on Arm boards), or "unknown-cpu".
inline std::string cpu_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key == "model name" || key == "Model" || key == "Hardware") {
      std::size_t start = colon + 1;
      while (start < line.size() && line[start] == ' ') ++start;
      if (start < line.size()) return line.substr(start);
    }
  }
  return "unknown-cpu";
}

/// The hedge arch tags this CPU supports, space-separated, best last.
inline std::string supported_arch_names() {
  std::string names;
  auto add = [&names]<class A>(A) {
    if (A::supported()) names.append(names.empty() ? "" : " ").append(A::name);
  };
  add(arch::scalar{});
  add(arch::avx2{});
  add(arch::avxvnni{});
  add(arch::avx512bw{});
  add(arch::avx512vnni{});
  add(arch::neon{});
  add(arch::neon_dotprod{});
  return names;
}

}  // namespace hedge::bench
