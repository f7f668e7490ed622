// hedge/compiler/unroll.hpp: HEDGE_UNROLL(n) before a loop asks for it to be unrolled
// n times (1: not at all). GCC and Clang both read `#pragma GCC unroll`; other
// compilers ignore the hint.
#pragma once

#define HEDGE_PRAGMA(text) _Pragma(#text)
#if defined(__GNUC__) || defined(__clang__)
#define HEDGE_UNROLL(n) HEDGE_PRAGMA(GCC unroll n)
#else
#define HEDGE_UNROLL(n)
#endif
