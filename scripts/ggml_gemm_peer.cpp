// ggml's prefill GEMM, timed: one ggml_mul_mat of an N x K weight (Q4_0, Q8_0 or Q4_K) by M
// F32 activation rows on ggml's CPU backend, as llama.cpp runs a prefill. scripts/llama_cpp_peer.sh
// builds it against the libggml of node-llama-cpp 3.22.1 (never part of hedge's build):
//
//   ggml-gemm TYPE N K ROWS THREADS RUNS      e.g. ggml-gemm q4_0 4096 4096 64,512 1,2 5
//
// The CPU backend is the variant ggml_backend_load_all_from_path picks for this CPU (the
// package ships one per x86 level). Each weight is placed where llama.cpp can place it when it
// loads a model: in the plain CPU buffer (mul_mat then runs llamafile's tinyBLAS where it takes
// the type, else ggml's vec_dot loop) and in each of the CPU backend's extra buffer types
// (CPU_REPACK: ggml's interleaved AArch64/x86 GEMM; AMX where the CPU has it) that supports the
// op. For each placement, row count and thread count it prints one JSON line with the GFLOP/s
// (2 M N K over the wall time of ggml_backend_graph_compute) of each of RUNS runs after one
// warm-up, and at 1 thread the same over the calling thread's CPU time (the CPU backend computes
// on the caller there; with more threads the workers' time is not counted, so it is omitted).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

namespace {

double seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::vector<long> numbers(const char* list) {
  std::vector<long> out;
  for (const char* p = list; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v <= 0 || (*end != ',' && *end != '\0')) return {};
    out.push_back(v);
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

// The CPU backend library the loader chose (libggml-cpu-<level>.so), from this process's maps.
std::string cpu_variant() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "?";
  char line[4096];
  std::string found = "?";
  while (std::fgets(line, sizeof line, maps)) {
    const char* at = std::strstr(line, "libggml-cpu");
    if (at != nullptr) {
      found.assign(at);
      found.erase(found.find_last_not_of("\n") + 1);
      break;
    }
  }
  std::fclose(maps);
  return found;
}

// xorshift floats in [-1, 1): speed does not depend on the values.
std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::vector<float> out(n);
  for (auto& v : out) {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    v = float(seed >> 8) / float(1u << 23) - 1.0f;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: ggml-gemm q4_0|q8_0|q4_k N K ROWS,... THREADS,... RUNS\n");
    return 2;
  }
  const std::string name = argv[1];
  const ggml_type type = name == "q4_0" ? GGML_TYPE_Q4_0 : name == "q8_0" ? GGML_TYPE_Q8_0
                         : name == "q4_k" ? GGML_TYPE_Q4_K : GGML_TYPE_COUNT;
  const long n = std::atol(argv[2]), k = std::atol(argv[3]), runs = std::atol(argv[6]);
  const auto rows = numbers(argv[4]), threads = numbers(argv[5]);
  if (type == GGML_TYPE_COUNT || n <= 0 || k <= 0 || k % 256 != 0 || runs <= 0 || rows.empty() || threads.empty()) {
    std::fprintf(stderr, "ggml-gemm: bad arguments (type q4_0|q8_0|q4_k, K a multiple of 256)\n");
    return 2;
  }
  ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  ggml_backend_load_all_from_path(HEDGE_PEER_BACKENDS);
  ggml_backend_dev_t device = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (device == nullptr) {
    std::fprintf(stderr, "ggml-gemm: no CPU backend under %s\n", HEDGE_PEER_BACKENDS);
    return 1;
  }
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(device);
  auto set_threads = (ggml_backend_set_n_threads_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
  auto extra_bufts =
      (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
  auto features = (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
  std::string feature_list;
  for (auto* f = features ? features(reg) : nullptr; f && f->name; ++f) {
    if (std::strcmp(f->value, "1") == 0) feature_list += (feature_list.empty() ? "" : " ") + std::string(f->name);
  }
  ggml_backend_t backend = ggml_backend_dev_init(device, nullptr);
  if (backend == nullptr || set_threads == nullptr) {
    std::fprintf(stderr, "ggml-gemm: cannot start the CPU backend\n");
    return 1;
  }

  // 16 distinct quantized rows, tiled, as hedge's benchmark fixtures do.
  const std::size_t row_bytes = ggml_row_size(type, k);
  constexpr long distinct = 16;
  const auto floats = random_floats(std::size_t(distinct * k), 7);
  std::vector<std::uint8_t> quantized(std::size_t(n) * row_bytes);
  ggml_quantize_chunk(type, floats.data(), quantized.data(), 0, distinct, k, nullptr);
  for (long r = distinct; r < n; ++r)
    std::memcpy(quantized.data() + r * row_bytes, quantized.data() + (r % distinct) * row_bytes, row_bytes);

  std::vector<ggml_backend_buffer_type_t> placements{ggml_backend_dev_buffer_type(device)};
  for (auto* b = extra_bufts ? extra_bufts(device) : nullptr; b && *b; ++b) placements.push_back(*b);

  const std::string variant = cpu_variant();
  for (ggml_backend_buffer_type_t buft : placements) {
    ggml_init_params weight_params{ggml_tensor_overhead(), nullptr, true};
    ggml_context* weight_ctx = ggml_init(weight_params);
    ggml_tensor* w = ggml_new_tensor_2d(weight_ctx, type, k, n);
    ggml_backend_buffer_t weight_buffer = ggml_backend_alloc_ctx_tensors_from_buft(weight_ctx, buft);
    bool loaded = false;
    for (long m : rows) {
      ggml_init_params graph_params{3 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
      ggml_context* graph_ctx = ggml_init(graph_params);
      ggml_tensor* x = ggml_new_tensor_2d(graph_ctx, GGML_TYPE_F32, k, m);
      ggml_tensor* y = ggml_mul_mat(graph_ctx, w, x);
      // An extra buffer type takes the op only where it has a kernel for this type on this
      // CPU (CPU_REPACK has none for Q8_0 on x86): then llama.cpp keeps the weight in the plain buffer.
      if (weight_buffer == nullptr || !ggml_backend_dev_supports_op(device, y)) {
        std::printf("{\"type\":\"%s\",\"placement\":\"%s\",\"supported\":false}\n", name.c_str(), ggml_backend_buft_name(buft));
        ggml_free(graph_ctx);
        break;
      }
      if (!loaded) {
        ggml_backend_tensor_set(w, quantized.data(), 0, quantized.size());  // CPU_REPACK repacks here
        loaded = true;
      }
      ggml_cgraph* graph = ggml_new_graph(graph_ctx);
      ggml_build_forward_expand(graph, y);
      ggml_backend_buffer_t activations = ggml_backend_alloc_ctx_tensors(graph_ctx, backend);
      const auto xs = random_floats(std::size_t(m * k), 5);
      ggml_backend_tensor_set(x, xs.data(), 0, xs.size() * sizeof(float));
      const double flops = 2.0 * double(m) * double(n) * double(k);
      for (long t : threads) {
        set_threads(backend, int(t));
        if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
          std::fprintf(stderr, "ggml-gemm: graph compute failed\n");
          return 1;
        }
        std::string wall = "[", cpu = "[";
        for (long r = 0; r < runs; ++r) {
          const double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
          ggml_backend_graph_compute(backend, graph);
          const double c1 = seconds(CLOCK_THREAD_CPUTIME_ID), w1 = seconds(CLOCK_MONOTONIC);
          char cell[64];
          std::snprintf(cell, sizeof cell, "%s%.3f", r ? "," : "", flops / (w1 - w0) * 1e-9);
          wall += cell;
          std::snprintf(cell, sizeof cell, "%s%.3f", r ? "," : "", flops / (c1 - c0) * 1e-9);
          cpu += cell;
        }
        std::printf("{\"type\":\"%s\",\"placement\":\"%s\",\"supported\":true,\"m\":%ld,\"n\":%ld,\"k\":%ld,"
                    "\"threads\":%ld,\"gflops\":%s],\"cpu_gflops\":%s],\"variant\":\"%s\",\"features\":\"%s\"}\n",
                    name.c_str(), ggml_backend_buft_name(buft), m, n, k, t, wall.c_str(),
                    t == 1 ? cpu.c_str() : "[", variant.c_str(), feature_list.c_str());
        std::fflush(stdout);
      }
      ggml_backend_buffer_free(activations);
      ggml_free(graph_ctx);
    }
    if (weight_buffer != nullptr) ggml_backend_buffer_free(weight_buffer);
    ggml_free(weight_ctx);
  }
  ggml_backend_free(backend);
  return 0;
}
