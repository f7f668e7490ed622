// hedge/kv/shape.hpp: the geometry of a KV cache (layers x kv_heads x head_dim).
//
// A shape is either fixed at compile time (`kv_static_shape<L, H, D>`, whose
// byte counts are constant expressions, so firmware can size a static array
// from them) or read from a model file at run time (`kv_dynamic_shape`). The
// token capacity is not part of the shape: it is a run-time `kv_config` choice.
//
//   bytes per token = 2 (K and V) x layers x kv_heads x bytes(one head vector)
#pragma once

#include <concepts>
#include <cstddef>

#include "hedge/kv/element.hpp"

namespace hedge::kv {

/// What kv_cache needs from a shape: the three extents, callable on a const object.
template <class S>
concept KvShape = std::copyable<S> && requires(const S& s) {
  { s.layers() } -> std::convertible_to<std::size_t>;
  { s.kv_heads() } -> std::convertible_to<std::size_t>;
  { s.head_dim() } -> std::convertible_to<std::size_t>;
};

/// A shape fixed at compile time.
/// \tparam Layers   transformer layers
/// \tparam KvHeads  key/value heads per layer (fewer than query heads under GQA/MQA)
/// \tparam HeadDim  values per head vector
template <std::size_t Layers, std::size_t KvHeads, std::size_t HeadDim>
struct kv_static_shape {
  static_assert(Layers > 0 && KvHeads > 0 && HeadDim > 0, "a KV shape has no zero extent");
  static constexpr std::size_t layers() noexcept { return Layers; }
  static constexpr std::size_t kv_heads() noexcept { return KvHeads; }
  static constexpr std::size_t head_dim() noexcept { return HeadDim; }
};

/// A shape known at run time (from a model header).
struct kv_dynamic_shape {
  std::size_t layers_ = 1;
  std::size_t kv_heads_ = 1;
  std::size_t head_dim_ = 1;
  constexpr std::size_t layers() const noexcept { return layers_; }
  constexpr std::size_t kv_heads() const noexcept { return kv_heads_; }
  constexpr std::size_t head_dim() const noexcept { return head_dim_; }
};

/// K and V bytes one token occupies across all layers and heads.
/// \tparam Elem the element format
template <KvElement Elem, KvShape Shape>
constexpr std::size_t kv_bytes_per_token(const Shape& shape) noexcept {
  return 2 * shape.layers() * shape.kv_heads() * kv_vector_bytes<Elem>(shape.head_dim());
}

static_assert(KvShape<kv_static_shape<1, 1, 1>> && KvShape<kv_dynamic_shape>);

}  // namespace hedge::kv
