// hedge/compiler/intrinsics.hpp: the SIMD intrinsic headers, included in one place.
//
// g++ 12 reports a false -Wuninitialized / -Wmaybe-uninitialized inside
// avx512fintrin.h (its `_mm512_undefined_*` helpers initialise a variable with itself,
// `__m512i __Y = __Y;`) whenever an AVX-512 intrinsic that uses one is inlined (GCC bug
// 105593, fixed in g++ 13). The diagnostic is located in the header, so silencing that
// one warning, in its two forms, around this one include is enough; -Werror stays on for
// every other line. Include
// this header, never <immintrin.h> directly, or the header may be read first without it.
#pragma once

#include "hedge/compiler/attributes.hpp"

#if HEDGE_SIMD_X86
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif

#if HEDGE_SIMD_NEON
#include <arm_neon.h>
#endif
