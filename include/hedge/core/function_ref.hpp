// hedge/core/function_ref.hpp: a non-owning reference to a callable.
//
// Type erasure without allocation (std::function may allocate and needs RTTI
// for target()): two pointers, valid only while the referenced callable lives.
// Used where a callable crosses a non-template boundary, e.g. into a thread pool.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace hedge {

template <class Signature>
class function_ref;

template <class R, class... Args>
class function_ref<R(Args...)> {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, function_ref> && std::is_invocable_r_v<R, F&, Args...>)
  constexpr function_ref(F&& f) noexcept  // NOLINT: implicit by design, like std::function_ref
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace hedge
