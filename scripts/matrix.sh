#!/usr/bin/env bash
# The compile matrix: hedge's tests, benchmarks, examples and tools compiled with
# -Wall -Wextra -Werror by every compiler and target a user has:
#   g++ 12, clang++-14 and the newest clang++-N installed (Debian 12: clang-22 from
#   bookworm-security) x -march= x86-64, x86-64-v3, x86-64-v4, znver4, alderlake (AVX-VNNI
#   without AVX-512), sapphirerapids, native;
#   aarch64 (g++ and each clang with --target=aarch64-linux-gnu) x armv8-a, armv8.2-a+dotprod;
#   the arm-none-eabi firmware example (examples/firmware/check.cmake: built, linked, heap-free).
# To fit CI's time budget each cell compiles translation units to objects and
# links nothing (the aarch64 cells have no aarch64 GoogleTest or Google Benchmark to
# link against; release and asan link and run theirs). g++ cells compile at -O1
# -DNDEBUG: g++'s flow-based warnings (-Wmaybe-uninitialized, g++ 12's AVX-512 false
# positive, -Warray-bounds) and its target-attribute inlining errors need the optimiser
# and the inliner, and -O1 costs about 0.7x of -O2. clang cells compile at -O0 -DNDEBUG:
# clang's warnings come from its front end and are the same at every -O, and -O0 still
# generates code, where clang reports an always-inline intrinsic that needs a target
# feature the function lacks; -O0 takes a quarter to a third of -O1's time here.
# g++ at -O3 is built by the release step, at -O1 with sanitizers by the asan step.
# Which translation units: every one in the first -march of each compiler and architecture
# (x86-64, armv8-a; g++ x86-64 in CI: the asan step; in CI aarch64 armv8-a only for g++),
# and in the other -march cells the
# targets of the headers whose code depends on the target (SIMD_TARGETS: the kernels,
# attention, router, core dispatch and header tests and benchmarks, which instantiate every
# arch variant of every format). The rest (model, cloud, OS, verifier tests, tools,
# examples) reach SIMD code only through those headers, so another -march changes nothing
# in them that the SIMD targets do not compile; they build for every compiler at the
# baseline and, in CI, at -march=native (release) too.
# (Code generation dominates; the model tests that instantiate the forward pass are one
# unity group, tests/CMakeLists.txt, which generates it once instead of five times.)
# Compilers that do not know -march=znver4 (g++ 12.2, clang 14) get what their
# -march=native gives on a Zen 4: znver3 plus Zen 4's AVX-512 extensions.
# Prints one line per cell (compiler, target, seconds, ok/FAIL/skip) and exits
# non-zero when any cell fails. Logs: build/matrix/<cell>.log.
# Usage: ./scripts/matrix.sh [--ci] [regex]
#   regex: only the cells whose "compiler target" matches, e.g. 'clang\+\+-22 x86-64$'
#   --ci:  every cell that compiles code no other step or cell compiles (see ci_covered);
#          a skipped cell prints what covers it.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
if [ "${1:-}" = --ci ]; then ci=1; shift; fi
filter="${1:-}"
./scripts/deps.sh
jobs="${HEDGE_MATRIX_JOBS:-$(nproc)}"
root="build/matrix"
mkdir -p "$root"

newest_clang=$(compgen -c clang++- | grep -E '^clang\+\+-[0-9]+$' | sort -t- -k2 -n | tail -1 || true)
x86_compilers=(g++)
for c in clang++-14 "$newest_clang"; do
  [ -n "$c" ] && ! [[ " ${x86_compilers[*]} " == *" $c "* ]] && x86_compilers+=("$c")
done
x86_marches=(x86-64 x86-64-v3 x86-64-v4 znver4 alderlake sapphirerapids native)
arm_marches=(armv8-a armv8.2-a+dotprod)
zen4_without_znver4="-march=znver3 -mavx512f -mavx512dq -mavx512ifma -mavx512cd -mavx512bw -mavx512vl
  -mavx512bf16 -mavx512vbmi -mavx512vbmi2 -mavx512vnni -mavx512bitalg -mavx512vpopcntdq -mgfni -mvaes -mvpclmulqdq"

version_of() {  # "g++-12", "clang++-22": the compiler as the summary names it
  local major
  major=$("$1" -dumpversion 2>/dev/null | cut -d. -f1) || true
  case "$1" in
    *clang*) echo "clang++-$("$1" --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)" ;;
    aarch64-linux-gnu-g++) echo "aarch64-g++-$major" ;;
    *) echo "g++-$major" ;;
  esac
}

failed=0
summary=()
report() {  # compiler target seconds status
  local line
  line=$(printf 'matrix: %-20s %-24s %4ss %s' "$1" "$2" "$3" "$4")
  echo "$line"
  summary+=("$line")
}

# The targets compiled in every -march cell (see the comment at the top), as object paths.
SIMD_TARGETS='^(tests/CMakeFiles/hedge_test_(kernels|attention|route|core|headers|quant|kv)|bench/CMakeFiles/hedge_bench_(kernels|attention|route))\.dir/'
# In CI the x86 -march cells and clang's aarch64 armv8-a cells compile the SIMD test targets
# without the benchmarks (scope simd_tests; the benchmarks were half of a SIMD cell's compile
# time). Every x86 build compiles the same kernels whatever its -march (arch::compiled), so the
# benchmarks' kernel instantiations are the x86-64 cells' (g++: the asan step; clang: its
# whole-tree cells), and the tests those cells keep compile the -march-dependent code (the
# native tag, a static arch::best); clang's armv8-a benchmarks are g++'s aarch64 armv8-a
# whole-tree cell's code. The dot-product cells keep the benchmarks: their neon_dotprod
# instantiations exist only in builds for the dot-product extension.
SIMD_TEST_TARGETS='^tests/CMakeFiles/hedge_test_(kernels|attention|route|core|headers|quant|kv)\.dir/'
# In CI, g++'s aarch64 dot-product cell compiles only the SIMD tests that cross.aarch64_neon
# (./scripts/test.sh release: the quant, kernel, KV and attention tests, g++ at -O2, run under
# qemu) does not; its benchmarks' neon_dotprod instantiations are clang's dot-product cell's.
CROSS_REST_TARGETS='^tests/CMakeFiles/hedge_test_(route|core|headers)\.dir/'

# build_cell <name> <label-compiler> <label-target> <all|simd|simd_tests|cross_rest> <cmake args...>: configure,
# then compile every object, the SIMD targets' objects, or the SIMD test targets' objects.
build_cell() {
  local name="$1" compiler="$2" target="$3" scope="$4"; shift 4
  local dir="$root/$name" log="$root/$name.log" start rc=0 optimise="-O1"
  [[ "$compiler" == clang* ]] && optimise="-O0"
  start=$(date +%s)
  {
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEDGE_WERROR=ON \
      -DHEDGE_BUILD_TESTS=ON -DHEDGE_BUILD_BENCH=ON -DHEDGE_BUILD_EXAMPLES=ON -DHEDGE_INSTALL=OFF \
      -DCMAKE_CXX_FLAGS_RELEASE="$optimise -DNDEBUG" "$@" &&
    mapfile -t objects < <(ninja -C "$dir" -t targets all | sed -n 's/^\(.*\.o\): CXX_COMPILER.*/\1/p' |
                           case "$scope" in simd) grep -E "$SIMD_TARGETS" ;; simd_tests) grep -E "$SIMD_TEST_TARGETS" ;;
                             cross_rest) grep -E "$CROSS_REST_TARGETS" ;; *) cat ;; esac) &&
    [ "${#objects[@]}" -gt 0 ] &&
    ninja -C "$dir" -k 0 -j "$jobs" "${objects[@]}"
  } >"$log" 2>&1 || rc=$?
  [ "$scope" = simd ] && target="$target (SIMD targets)"
  [ "$scope" = simd_tests ] && target="$target (SIMD tests)"
  [ "$scope" = cross_rest ] && target="$target (SIMD tests not in cross.aarch64_neon)"
  if [ "$rc" -eq 0 ]; then
    report "$compiler" "$target" "$(( $(date +%s) - start ))" ok
  else
    report "$compiler" "$target" "$(( $(date +%s) - start ))" "FAIL (log: $log)"
    grep -E 'error:|FAILED:' "$log" | sed 's/^/    /' | sort -u | head -40
    failed=1
  fi
}

# In CI, a cell is skipped when another step or cell compiles the same code: the
# compile-time `arch::native` tag (core/arch.hpp) is the only thing -march changes in
# hedge's sources, and znver4, sapphirerapids and an AVX-512 VNNI host's native all give
# avx512vnni. The newest clang compiles the target-independent code (x86-64), the newest
# x86 ISA and the aarch64 dot-product kernels; clang 14 and g++ take the other cells.
# x86-64-v3 is alderlake's code: every x86 -march compiles the same kernels (arch::compiled,
# each under its own target attribute); -march=alderlake enables all of x86-64-v3 (AVX2, FMA,
# F16C, BMI, MOVBE) plus AVX-VNNI, and its native tag avxvnni derives from avx2 with no kernels
# of its own, so it resolves every overload to avx2's as x86-64-v3 does, and both dispatch
# `arch::best` at run time.
declare -A ci_covered=(
  ["g++ x86-64-v3"]="alderlake (a superset of x86-64-v3; native avxvnni runs avx2's kernels)"
  ["clang++ x86-64-v3"]="alderlake (a superset of x86-64-v3; native avxvnni runs avx2's kernels)"
  ["g++ x86-64"]="./scripts/test.sh asan (-march=x86-64)"
  ["g++ native"]="./scripts/test.sh release"
  ["g++ sapphirerapids"]="znver4 (avx512vnni)"
  ["clang++ sapphirerapids"]="znver4 (avx512vnni)"
  ["clang++ native"]="znver4 (avx512vnni)"
  ["arm-none-eabi-g++ cortex-m7"]="./scripts/test.sh release (firmware.cortex_m7)"
)
if g++ -march=native -dM -E -x c++ /dev/null 2>/dev/null | grep __AVX512VNNI__ > /dev/null; then  # no -q: pipefail and SIGPIPE
  ci_covered["g++ znver4"]="./scripts/test.sh release (this CPU's native: avx512vnni)"
fi
newest_label=""
[ -n "$newest_clang" ] && [ "$newest_clang" != clang++-14 ] && newest_label=$(version_of "$newest_clang")
# selected <compiler> <target>: whether to build the cell; prints the skip line when not.
selected() {
  local cell="$1 $2" generic
  [ -z "$filter" ] || [[ "$cell" =~ $filter ]] || return 1
  [ "$ci" -eq 1 ] || return 0
  generic="$(echo "$1" | sed 's/-[0-9]*$//') $2"
  if [ -n "${ci_covered[$generic]:-}" ]; then
    report "$1" "$2" 0 "skip (covered by ${ci_covered[$generic]})"
    return 1
  fi
  if [ "$1" = "$newest_label" ]; then
    case "$2" in
      x86-64|znver4|"aarch64 armv8.2-a+dotprod") ;;
      *) report "$1" "$2" 0 "skip (clang++-14 compiles this code)"; return 1 ;;
    esac
  fi
  # clang 14 at znver4: its x86-64 cell compiles every avx512vnni kernel already (under the
  # kernels' target attributes, the strictest case for clang's always-inline checks), and all
  # -march=znver4 adds is the static arch::best = avx512vnni, which the newest clang compiles.
  if [ -n "$newest_label" ] && [ "$1" = clang++-14 ] && [ "$2" = znver4 ]; then
    report "$1" "$2" 0 "skip ($newest_label compiles this code; clang++-14 x86-64 the avx512vnni kernels)"
    return 1
  fi
  return 0
}

for cxx in "${x86_compilers[@]}"; do
  label=$(version_of "$cxx")
  for march in "${x86_marches[@]}"; do
    selected "$label" "$march" || continue
    flags="-march=$march"
    target="$march"
    if ! "$cxx" "-march=$march" -x c++ -c /dev/null -o /dev/null 2>/dev/null; then
      if [ "$march" = znver4 ]; then
        flags=$(echo $zen4_without_znver4)
        target="znver4(znver3+avx512)"
      else
        report "$label" "$march" 0 "skip (-march=$march unknown)"
        continue
      fi
    fi
    scope=simd
    [ "$ci" -eq 1 ] && scope=simd_tests
    [ "$march" = "${x86_marches[0]}" ] && scope=all
    build_cell "${label}-${march}" "$label" "$target" "$scope" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags"
  done
done

if command -v aarch64-linux-gnu-g++ >/dev/null; then
  for cxx in aarch64-linux-gnu-g++ "${x86_compilers[@]:1}"; do
    label=$(version_of "$cxx")
    for march in "${arm_marches[@]}"; do
      selected "$label" "aarch64 $march" || continue
      if [ "$cxx" = aarch64-linux-gnu-g++ ]; then
        toolchain=(-DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake)
      else
        toolchain=(-DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu-clang.cmake -DCMAKE_CXX_COMPILER="$cxx")
      fi
      # Compiled against the host's (architecture-independent) GoogleTest, Google
      # Benchmark and Eigen headers; nothing is linked.
      # In CI the clang cells compile the SIMD targets only: their target-independent code is
      # clang's x86-64 cells' and, for aarch64 (unsigned char, its predefined macros), g++'s.
      scope=simd
      [ "$ci" -eq 1 ] && [ "$march" = "${arm_marches[0]}" ] && scope=simd_tests
      [ "$march" = "${arm_marches[0]}" ] && { [ "$ci" -eq 0 ] || [ "$cxx" = aarch64-linux-gnu-g++ ]; } && scope=all
      [ "$ci" -eq 1 ] && [ "$march" != "${arm_marches[0]}" ] && [ "$cxx" = aarch64-linux-gnu-g++ ] && scope=cross_rest
      build_cell "${label}-aarch64-${march}" "$label" "aarch64 $march" "$scope" "${toolchain[@]}" \
        -DCMAKE_CXX_FLAGS="-march=$march" \
        -DGTest_DIR=/usr/lib/x86_64-linux-gnu/cmake/GTest \
        -Dbenchmark_DIR=/usr/lib/x86_64-linux-gnu/cmake/benchmark \
        -DEigen3_DIR=/usr/share/eigen3/cmake \
        -DHEDGE_XSIMD_INCLUDE_DIR=/usr/include
    done
  done
else
  report aarch64-g++ "aarch64" 0 "skip (aarch64-linux-gnu-g++ missing: scripts/deps.sh installs it)"
fi

label="arm-none-eabi-g++-$(arm-none-eabi-g++ -dumpversion 2>/dev/null | cut -d. -f1)"
if selected "$label" cortex-m7; then
  if command -v arm-none-eabi-g++ >/dev/null; then
    start=$(date +%s)
    log="$root/firmware.log"
    if cmake -DHEDGE_ROOT="$PWD" -DBINARY="$PWD/$root/firmware" -P examples/firmware/check.cmake >"$log" 2>&1; then
      report "$label" "cortex-m7" "$(( $(date +%s) - start ))" ok
      grep -E 'text|data|bss' "$log" | sed 's/^/    /' || true
    else
      report "$label" "cortex-m7" "$(( $(date +%s) - start ))" "FAIL (log: $log)"
      grep -E 'error:|Error' "$log" | sed 's/^/    /' | sort -u | head -40
      failed=1
    fi
  else
    report arm-none-eabi-g++ cortex-m7 0 "skip (arm-none-eabi-g++ missing: scripts/deps.sh installs it)"
  fi
fi

echo "matrix summary:"
printf '%s\n' "${summary[@]}"
exit "$failed"
