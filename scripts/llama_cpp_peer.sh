#!/usr/bin/env bash
# The llama.cpp peer: installs the npm package node-llama-cpp (a prebuilt llama.cpp) under
# build/llama-cpp-peer/ and runs scripts/llama_cpp_peer.mjs with it. Never a dependency of
# hedge and never run by CI: it computes reference data (token ids) that the tests commit.
#
#   scripts/llama_cpp_peer.sh tokenize MODEL.gguf TEXTS.jsonl > IDS.jsonl
#   scripts/llama_cpp_peer.sh greedy-logits MODEL.gguf N ID... > IDS_AND_LOGITS.txt
#   scripts/llama_cpp_peer.sh quant-reference > tests/quant/data/ggml_quant_reference.txt
#   scripts/llama_cpp_peer.sh quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0
#   scripts/llama_cpp_peer.sh perplexity -m MODEL.gguf -f TEXT [llama-perplexity's options]
#   scripts/llama_cpp_peer.sh ggml-gemm q4_0|q8_0|q4_k N K ROWS,... THREADS,... RUNS > JSON lines
#
# quant-reference runs scripts/ggml_quant_reference.py on the package's libggml-base.so:
# ggml's own reference quantizers' bytes for the format tests. quantize runs
# llama_model_quantize (llama-quantize's library call, no importance matrix) through a
# second small helper, build/llama-cpp-peer/bin/quantize. ggml-gemm times ggml's prefill GEMM
# (one ggml_mul_mat on the CPU backend, in each weight placement llama.cpp can use) through
# build/llama-cpp-peer/bin/ggml-gemm, built from scripts/ggml_gemm_peer.cpp (see there);
# scripts/compare-llamacpp.sh --gemm tables it against hedge's GEMM.
#
# JavaScript strings cannot carry invalid UTF-8, so texts given as bytes go through a small
# C++ helper (build/llama-cpp-peer/bin/tokenize-bytes) linked against the package's own
# libllama, compiled from the llama.cpp sources the package ships (llama/gitRelease.bundle).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
peer=$root/build/llama-cpp-peer
package=$peer/node_modules/node-llama-cpp

if [ ! -d "$package" ]; then
  mkdir -p "$peer"
  npm install --prefix "$peer" --no-audit --no-fund --ignore-scripts node-llama-cpp@3.22.1 >&2
fi

bins=$peer/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ "${1:-}" = quant-reference ]; then
  exec python3 "$root/scripts/ggml_quant_reference.py" "$bins/libggml-base.so"
fi
helper=$peer/bin/tokenize-bytes
# (re)built when absent or when the source below changed
if [ -d "$bins" ]; then
  if [ ! -d "$peer/llama.cpp" ]; then
    git clone --quiet "$package/llama/gitRelease.bundle" "$peer/llama.cpp" >&2
  fi
  mkdir -p "$peer/bin"
  library=$(ls "$bins"/libllama.v*.so | head -n 1)
  cat > "$peer/tokenize_bytes.cpp.new" <<'CPP'
// The llama.cpp peer's byte-exact tokenizer (this script builds it against the
// libllama that node-llama-cpp ships): JavaScript strings cannot hold invalid UTF-8.
//
//   tokenize-bytes MODEL.gguf [special] < lines of hex-encoded texts
//
// prints, per input line, the ids llama_tokenize gives (add_special = false,
// parse_special = false, or true with "special"), space-separated.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 2 && !(argc == 3 && std::string(argv[2]) == "special")) {
    std::fprintf(stderr, "usage: tokenize-bytes MODEL.gguf [special] < hex lines\n");
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string text;
    for (std::size_t i = 0; i + 1 < line.size(); i += 2) text.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
    std::vector<llama_token> ids(text.size() * 3 + 8);
    const int n = llama_tokenize(vocab, text.data(), static_cast<int>(text.size()), ids.data(), static_cast<int>(ids.size()), false, argc == 3);
    if (n < 0) {
      std::fprintf(stderr, "llama_tokenize failed (%d)\n", n);
      return 1;
    }
    for (int i = 0; i < n; ++i) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  }
  llama_model_free(model);
  return 0;
}
CPP
  if [ ! -x "$helper" ] || ! cmp -s "$peer/tokenize_bytes.cpp.new" "$peer/tokenize_bytes.cpp"; then
    mv "$peer/tokenize_bytes.cpp.new" "$peer/tokenize_bytes.cpp"
    g++ -std=c++17 -O2 -o "$helper" "$peer/tokenize_bytes.cpp" \
      -I "$peer/llama.cpp/include" -I "$peer/llama.cpp/ggml/include" \
      "$library" -Wl,-rpath,"$bins" >&2
  fi
fi

# greedy-logits MODEL.gguf N ID...: llama.cpp's greedy continuation of the token ids ID...
# (fed as they are, no tokenizer), N ids on the first line, then the logits after the
# prompt and after each generated id but the last, one line each (tests/model/data/README.md).
greedy=$peer/bin/greedy-logits
if [ ! -x "$greedy" ] && [ -d "$bins" ]; then
  library=$(ls "$bins"/libllama.v*.so | head -n 1)
  cat > "$peer/greedy_logits.cpp" <<'CPP'
// The llama.cpp peer's greedy decoder over token ids (this script builds it against the
// libllama that node-llama-cpp ships): the model's trained context, one thread, CPU.
//
//   greedy-logits MODEL.gguf N ID...
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: greedy-logits MODEL.gguf N ID...\n");
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  ggml_backend_load_all_from_path(HEDGE_PEER_BACKENDS);  // the package's CPU backends, loaded at run time
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const int n = std::atoi(argv[2]);
  std::vector<llama_token> prompt;
  for (int i = 3; i < argc; ++i) prompt.push_back(std::atoi(argv[i]));
  llama_context_params params = llama_context_default_params();
  params.n_ctx = static_cast<uint32_t>(llama_model_n_ctx_train(model));
  params.n_batch = params.n_ctx;
  params.n_threads = params.n_threads_batch = 1;
  llama_context* context = llama_init_from_model(model, params);
  if (context == nullptr) {
    std::fprintf(stderr, "cannot make a context\n");
    return 1;
  }
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<llama_token> ids;
  std::vector<std::vector<float>> steps;
  llama_batch batch = llama_batch_get_one(prompt.data(), static_cast<int32_t>(prompt.size()));
  llama_token next = 0;
  for (int step = 0; step < n; ++step) {
    if (llama_decode(context, batch) != 0) {
      std::fprintf(stderr, "llama_decode failed at step %d\n", step);
      return 1;
    }
    const float* logits = llama_get_logits_ith(context, -1);
    steps.emplace_back(logits, logits + vocab);
    next = 0;
    for (int j = 1; j < vocab; ++j)
      if (logits[j] > logits[next]) next = j;
    ids.push_back(next);
    batch = llama_batch_get_one(&next, 1);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %d" : "%d", ids[i]);
  std::printf("\n");
  for (const auto& row : steps) {
    for (std::size_t j = 0; j < row.size(); ++j) std::printf(j ? " %.7g" : "%.7g", row[j]);
    std::printf("\n");
  }
  llama_free(context);
  llama_model_free(model);
  return 0;
}
CPP
  g++ -std=c++17 -O2 -o "$greedy" "$peer/greedy_logits.cpp" -DHEDGE_PEER_BACKENDS="\"$bins\"" \
    -I "$peer/llama.cpp/include" -I "$peer/llama.cpp/ggml/include" \
    "$library" "$(ls "$bins"/libggml.v*.so | head -n 1)" -Wl,-rpath,"$bins" >&2
fi
if [ "${1:-}" = greedy-logits ]; then
  shift
  exec "$greedy" "$@"
fi

if [ "${1:-}" = ggml-gemm ]; then
  gemm=$peer/bin/ggml-gemm
  if [ ! -x "$gemm" ] || [ "$root/scripts/ggml_gemm_peer.cpp" -nt "$gemm" ]; then
    mkdir -p "$peer/bin"
    g++ -std=c++17 -O2 -o "$gemm" "$root/scripts/ggml_gemm_peer.cpp" -DHEDGE_PEER_BACKENDS="\"$bins\"" \
      -I "$peer/llama.cpp/ggml/include" \
      "$bins/libggml-base.so" "$(ls "$bins"/libggml.v*.so | head -n 1)" -Wl,-rpath,"$bins" >&2
  fi
  shift
  exec "$gemm" "$@"
fi

quantizer=$peer/bin/quantize
if [ "${1:-}" = quantize ]; then
  if [ ! -x "$quantizer" ]; then
    cat > "$peer/quantize.cpp" <<'CPP'
// The llama.cpp peer's quantizer: llama_model_quantize with llama-quantize's defaults.
//   quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0
#include <cstdio>
#include <cstring>

#include "llama.h"

int main(int argc, char** argv) {
  const struct { const char* name; llama_ftype ftype; } mixes[] = {
      {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
      {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0}, {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0}};
  llama_model_quantize_params params = llama_model_quantize_default_params();
  bool known = false;
  for (const auto& m : mixes) {
    if (argc == 4 && std::strcmp(argv[3], m.name) == 0) {
      params.ftype = m.ftype;
      known = true;
    }
  }
  if (!known) {
    std::fprintf(stderr, "usage: quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0\n");
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  params.nthread = 1;
  return llama_model_quantize(argv[1], argv[2], &params) == 0 ? 0 : 1;
}
CPP
    g++ -std=c++17 -O2 -o "$quantizer" "$peer/quantize.cpp" \
      -I "$peer/llama.cpp/include" -I "$peer/llama.cpp/ggml/include" \
      "$(ls "$bins"/libllama.v*.so | head -n 1)" -Wl,-rpath,"$bins" >&2
  fi
  shift
  exec "$quantizer" "$@"
fi

# perplexity: llama.cpp's own llama-perplexity, its tools/perplexity/perplexity.cpp from the
# shipped source built against the package's libllama-common, with the package's CPU
# backends loaded first (its libggml finds none by itself).
perplexity_tool=$peer/bin/llama-perplexity
if [ "${1:-}" = perplexity ]; then
  if [ ! -x "$perplexity_tool" ]; then
    cat > "$peer/perplexity_main.cpp" <<'CPP'
#include "ggml-backend.h"
int llama_perplexity(int argc, char** argv);
int main(int argc, char** argv) {
  ggml_backend_load_all_from_path(HEDGE_PEER_BACKENDS);
  return llama_perplexity(argc, argv);
}
CPP
    g++ -std=c++17 -O2 -o "$perplexity_tool" "$peer/perplexity_main.cpp" "$peer/llama.cpp/tools/perplexity/perplexity.cpp" \
      -DHEDGE_PEER_BACKENDS="\"$bins\"" -I "$peer/llama.cpp/common" -I "$peer/llama.cpp/include" \
      -I "$peer/llama.cpp/ggml/include" -I "$peer/llama.cpp/vendor" "$bins/libllama-common.so" \
      "$(ls "$bins"/libllama.v*.so | head -n 1)" "$(ls "$bins"/libggml.v*.so | head -n 1)" "$bins/libggml-base.so" \
      -Wl,-rpath,"$bins" -lpthread >&2
  fi
  shift
  exec "$perplexity_tool" "$@"
fi

export HEDGE_LLAMA_CPP_TOKENIZE_BYTES=$helper
exec node "$root/scripts/llama_cpp_peer.mjs" "$@"
