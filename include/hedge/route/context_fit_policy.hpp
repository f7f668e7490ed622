// hedge/route/context_fit_policy.hpp: prompt + expected output must fit the edge model's
// context window and the free KV cache, else only the cloud can serve the request.
#pragma once

#include <cstdint>
#include <string_view>

#include "hedge/route/policy.hpp"
#include "hedge/route/request.hpp"

namespace hedge::route {

class context_fit_policy {
 public:
  static constexpr std::string_view name = "context_fit";

  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context& context) const noexcept {
    const std::uint64_t need = std::uint64_t{prompt_token_estimate(request)} + request.expected_output_tokens;
    if (need > context.edge_context_tokens) return verdict::cloud_only(reason::exceeds_edge_context);
    if (need > context.edge_kv_free_tokens) return verdict::cloud_only(reason::exceeds_edge_kv);
    return verdict::abstain(reason::fits_edge);
  }
};

}  // namespace hedge::route
