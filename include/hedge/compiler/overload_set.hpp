// hedge/compiler/overload_set.hpp: HEDGE_OVERLOAD_SET(name) declares `name` in the
// current namespace so that a qualified call to it in a requires-expression is valid
// on every target, also where no arch defines an overload (an aarch64 build of an
// x86-only kernel): the requirement is then false instead of an error.
//
// The declaration is a deleted template, not a deleted plain function: Clang 14
// resolves a qualified call whose lookup finds a single plain function when it parses
// the template, and rejects it there as deleted even inside a requires-expression.
#pragma once

#define HEDGE_OVERLOAD_SET(name) \
  template <class = void>        \
  void name() = delete
