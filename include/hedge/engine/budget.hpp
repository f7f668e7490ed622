// hedge/engine/budget.hpp: what tokens cost per tier, and how much may be spent per period.
//
// Prices are per million tokens, input and output apart, per tier (the edge's may be its
// energy cost, or zero). The budget is an amount per period (an hour, a day) that resets at
// each period boundary measured from the first use; the engine charges every attempt
// (retries, fallbacks, a race's losing tier) and the router's cost policy reads what is
// left (route_context::budget_remaining).
#pragma once

#include <chrono>
#include <cstdint>

#include "hedge/engine/clock.hpp"

namespace hedge::engine {

/// Price of one tier, per million tokens.
struct tier_prices {
  double input_per_million = 0.0;
  double output_per_million = 0.0;

  [[nodiscard]] constexpr double cost(std::uint64_t input_tokens, std::uint64_t output_tokens) const noexcept {
    return (static_cast<double>(input_tokens) * input_per_million +
            static_cast<double>(output_tokens) * output_per_million) * 1e-6;
  }
};

struct budget_options {
  double per_period = -1.0;  ///< negative: no budget
  std::chrono::seconds period{3600};
};

/// \tparam C a Clock
template <Clock C>
class budget {
 public:
  explicit budget(C clock, budget_options options = {}) noexcept : clock_(clock), options_(options) {}

  /// Money left in the current period; negative means unlimited.
  [[nodiscard]] double remaining() noexcept {
    if (options_.per_period < 0.0) return -1.0;
    roll();
    const double left = options_.per_period - spent_;
    return left > 0.0 ? left : 0.0;
  }

  void charge(double amount) noexcept {
    roll();
    spent_ += amount;
    total_ += amount;
  }

  [[nodiscard]] double spent_this_period() noexcept {
    roll();
    return spent_;
  }
  [[nodiscard]] double spent_total() const noexcept { return total_; }
  [[nodiscard]] const budget_options& options() const noexcept { return options_; }

 private:
  void roll() noexcept {
    const auto now = clock_.now();
    if (!started_) {
      started_ = true;
      period_start_ = now;
      return;
    }
    const auto period = std::chrono::duration_cast<typename C::duration>(options_.period);
    if (period.count() <= 0 || now - period_start_ < period) return;
    const auto periods = (now - period_start_) / period;
    period_start_ += period * periods;
    spent_ = 0.0;
  }

  C clock_;
  budget_options options_;
  bool started_ = false;
  typename C::time_point period_start_{};
  double spent_ = 0.0;
  double total_ = 0.0;
};

}  // namespace hedge::engine
