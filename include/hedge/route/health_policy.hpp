// hedge/route/health_policy.hpp: no network or an open circuit breaker -> edge.
#pragma once

#include <string_view>

#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

class health_policy {
 public:
  static constexpr std::string_view name = "health";

  [[nodiscard]] constexpr verdict evaluate(const route_request&, const route_context& context) const noexcept {
    if (context.offline) return verdict::edge_only(reason::offline);
    if (context.cloud_circuit == circuit::open) return verdict::edge_only(reason::circuit_open);
    return verdict::abstain();
  }
};

}  // namespace hedge::route
