// The arch variants the attention benchmarks run: every tag this build compiles
// (arch::compiled) that this CPU supports, then `best`, the entry points' default,
// which runs one of them through the run-time dispatch (core/dispatch.hpp).
#pragma once

#include <cstddef>

#include "hedge/core/arch.hpp"
#include "hedge/core/dispatch.hpp"

namespace hedge::bench::attention {

/// The shape the attention benchmarks run: 32 query heads on 8 KV heads (GQA group 4) of
/// 128 values, as Llama 3 8B's.
inline constexpr std::size_t q_heads = 32, kv_heads = 8, head_dim = 128;

/// Calls f(tag) for each supported tag of arch::compiled, best first, then f(arch::best{}).
template <class F>
void for_each_variant(F&& f) {
  [&]<class... Tags>(arch::tag_list<Tags...>) { ((Tags::supported() ? f(Tags{}) : void()), ...); }(arch::compiled{});
  f(arch::best{});
}

}  // namespace hedge::bench::attention
