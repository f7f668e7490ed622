// hedge/core/config.hpp: build configuration shared by every header.
//
// HEDGE_HAS_XSIMD is 1 when xsimd is usable: it is on the include path, it has an
// instruction set for the target (not, e.g., for i686 without SSE2, where its API is
// incomplete), and the build did not define HEDGE_NO_SIMD. xsimd
// provides the float batch types of the NEON elementwise kernels; it never chooses
// the arch (core/arch.hpp and core/dispatch.hpp do).
// HEDGE_ASSERT checks preconditions (view bounds, shapes) in debug builds only,
// so release kernels carry no branches for them; it never throws.
#pragma once

#include "hedge/compiler/attributes.hpp"

#if !defined(HEDGE_NO_SIMD) && defined(__has_include)
#if __has_include(<xsimd/xsimd.hpp>)
#include <xsimd/config/xsimd_config.hpp>
#if !defined(XSIMD_NO_SUPPORTED_ARCHITECTURE)
#define HEDGE_HAS_XSIMD 1
#endif
#endif
#endif
#ifndef HEDGE_HAS_XSIMD
#define HEDGE_HAS_XSIMD 0
#endif

#if defined(NDEBUG) && !defined(HEDGE_DEBUG_CHECKS)
#define HEDGE_ASSERT(cond) ((void)0)
#else
#include <cstdlib>
#define HEDGE_ASSERT(cond) ((cond) ? (void)0 : ::hedge::detail::assert_fail(#cond, __FILE__, __LINE__))
namespace hedge::detail {
// Debug-only precondition failure: abort (no exceptions, no iostreams) so a
// bad index is caught at the faulting call in tests and sanitizer runs.
[[noreturn]] inline void assert_fail(const char*, const char*, int) noexcept { std::abort(); }
}  // namespace hedge::detail
#endif


namespace hedge {
// Every storage policy aligns to a cache line: SIMD loads never split lines and
// a worker thread's slice never shares a line with its neighbour's.
inline constexpr unsigned cache_line_bytes = 64;
}  // namespace hedge
