// hedge/route/calibration.hpp: choose the router threshold from scores on a calibration set.
//
// RouteLLM's quantile rule (Ong et al. 2024, "RouteLLM: Learning to Route LLMs with
// Preference Data"): to send a fraction f of traffic to the strong model, take the
// (1 - f) quantile of the router's scores on representative prompts as the threshold.
// The same rule re-calibrates on a user's own traffic log, and by quality target: the
// smallest cloud fraction whose measured quality reaches the target.
// Works in place on caller spans (reorders them); allocates nothing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <span>

#include "hedge/core/result.hpp"
#include "hedge/route/metrics.hpp"

namespace hedge::route {

/// Threshold t such that about `cloud_fraction` of `scores` are > t (score > t goes to the
/// cloud). `scores` is reordered.
inline result<double> threshold_for_cloud_fraction(std::span<double> scores, double cloud_fraction) noexcept {
  if (scores.empty()) return error{errc::invalid_argument} << "calibration needs at least one score";
  if (!(cloud_fraction >= 0.0 && cloud_fraction <= 1.0))
    return error{errc::invalid_argument} << "cloud fraction " << cloud_fraction << " outside [0, 1]";
  const auto n = scores.size();
  const auto k = static_cast<std::size_t>(std::lround(cloud_fraction * static_cast<double>(n)));
  if (k >= n) {
    const double lowest = *std::min_element(scores.begin(), scores.end());
    return std::nextafter(lowest, -HUGE_VAL);
  }
  // The (k+1)-th largest score: exactly the k scores above it go to the cloud (ties aside).
  std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k), scores.end(), std::greater<>{});
  return scores[k];
}

/// Fraction of `scores` that a threshold sends to the cloud (score > threshold).
inline double cloud_fraction_at(std::span<const double> scores, double threshold) noexcept {
  if (scores.empty()) return 0.0;
  std::size_t above = 0;
  for (double s : scores) above += s > threshold ? 1 : 0;
  return static_cast<double>(above) / static_cast<double>(scores.size());
}

/// Threshold reaching `target_quality` (mean outcome, as in metrics.hpp) with the fewest
/// cloud calls on labelled calibration rows; `rows` is sorted by descending score.
/// Fails with errc::unavailable when even all-cloud routing misses the target.
inline result<double> threshold_for_quality(std::span<scored_outcome> rows, double target_quality) noexcept {
  if (rows.empty()) return error{errc::invalid_argument} << "calibration needs at least one row";
  sort_by_score(rows);
  double total = 0.0;
  for (const auto& r : rows) total += r.weak;
  const auto n = static_cast<double>(rows.size());
  if (total / n >= target_quality) return rows.front().score;  // nothing needs the cloud
  for (std::size_t k = 0; k < rows.size(); ++k) {
    total += rows[k].strong - rows[k].weak;
    if (total / n >= target_quality)
      return k + 1 < rows.size() ? rows[k + 1].score : std::nextafter(rows[k].score, -HUGE_VAL);
  }
  return error{errc::unavailable} << "quality target " << target_quality << " above all-cloud quality " << total / n;
}

}  // namespace hedge::route
