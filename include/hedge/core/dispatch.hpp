// hedge/core/dispatch.hpp: run-time choice of a kernel variant.
//
// `arch::best` is the default arch of every kernel entry point. It stands for the
// best tag of `arch::compiled` this CPU supports:
//
//   - a build whose -march already covers every compiled variant (-march=native on
//     an AVX-512 machine, any AArch64 build, a firmware build) resolves it at compile
//     time to `arch::native`: no dispatch cost, kernels inline as before;
//   - otherwise (a baseline x86-64 binary, the portable build a distribution ships)
//     the CPU's features are read once, on first use, into the index of the best
//     supported tag, and every call is one load and a compare chain (a switch) that
//     calls the variant for that tag. bench/kernels measures its cost (`dispatch/`).
//
// An entry point takes the arch as a template parameter and calls
// `arch::visit<A>(f)`: f receives a tag object (the concrete tag when A is one, the
// chosen tag when A is `best`) and calls the tag's overload, so a kernel family
// pays the dispatch once per call, above its row or head loop.
#pragma once

#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>

#include "hedge/core/arch.hpp"

namespace hedge::arch {

/// Placeholder tag: the best compiled variant this CPU runs (see file comment).
/// It has no kernels of its own; entry points resolve it with `visit`.
struct best {
  static constexpr std::string_view name = "best";
  static bool supported() noexcept { return true; }
};

namespace detail {

template <class... Tags>
std::size_t first_supported(tag_list<Tags...>) noexcept {
  std::size_t index = 0;
  (void)((Tags::supported() ? true : (++index, false)) || ...);
  return index;
}

template <class F, class Head, class... Tail>
decltype(auto) call_at(std::size_t index, F& f, tag_list<Head, Tail...>) {
  if constexpr (sizeof...(Tail) == 0) {
    return f(Head{});
  } else {
    if (index == 0) return f(Head{});
    return call_at(index - 1, f, tag_list<Tail...>{});
  }
}

template <class First, class... Rest>
constexpr bool covers_first(tag_list<First, Rest...>) noexcept {
  return std::is_base_of_v<First, native>;
}

}  // namespace detail

/// True when `best` is `native` at compile time: the build targets the best
/// compiled variant (or a more specific tag derived from it).
inline constexpr bool best_is_static = detail::covers_first(compiled{});

/// The index in `compiled` of the tag `best` runs, read from the CPU once.
inline std::size_t best_index() noexcept {
  static const std::size_t index = detail::first_supported(compiled{});
  return index;
}

/// The name of the tag `best` runs on this CPU.
inline std::string_view best_name() noexcept {
  if constexpr (best_is_static) {
    return native::name;
  } else {
    auto name = [](auto tag) { return decltype(tag)::name; };
    return detail::call_at(best_index(), name, compiled{});
  }
}

/// f(tag): with a concrete tag A, f(A{}); with `best`, f(native{}) where that is
/// static, else f of the best compiled tag this CPU supports.
template <class A, class F>
decltype(auto) visit(F&& f) {
  if constexpr (!std::is_same_v<A, best>) {
    return f(A{});
  } else if constexpr (best_is_static) {
    return f(native{});
  } else {
    return detail::call_at(best_index(), f, compiled{});
  }
}

}  // namespace hedge::arch
