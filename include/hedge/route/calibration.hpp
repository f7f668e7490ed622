// hedge/route/calibration.hpp: choose the router threshold from scores on a calibration set.
//
// RouteLLM's quantile rule (Ong et al. 2024, "RouteLLM: Learning to Route LLMs with
// Preference Data"): to send a fraction f of traffic to the strong model, take the
// (1 - f) quantile of the router's scores on representative prompts as the threshold.
// The same rule re-calibrates on a user's own traffic log, and by quality target: the
// smallest cloud fraction whose measured quality reaches the target.
//
// A threshold routes score > t to the cloud, so it cannot split prompts with equal scores
// (the same prompt twice, or prompts the scorer cannot tell apart): a tie group goes to
// the cloud whole or not at all. Both rules choose among the cuts a threshold can make,
// and return a score of the calibration set, or one a whole unit below them all: printed
// with 9 significant digits (a float logit's precision), the threshold routes the same
// prompts.
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

namespace detail {
/// A threshold below every score, so that all of them go to the cloud: a whole unit (or
/// the score's magnitude) below the lowest, not the next double, which printing would
/// round back to the lowest score and so keep that prompt on the edge.
inline double threshold_below(double lowest) noexcept { return lowest - std::max(1.0, std::abs(lowest)); }
}  // namespace detail

/// Threshold t such that the fraction of `scores` above it (score > t goes to the cloud) is
/// the one nearest `cloud_fraction` that a threshold can make: when the quantile falls
/// inside a group of equal scores, the whole group goes to the cloud or none of it,
/// whichever lands nearer (fewer cloud calls when both are as near). The fraction reached
/// is cloud_fraction_at(scores, t); with ties it can differ from the target by more than
/// one prompt. `scores` is reordered. Fails on an empty span, a fraction outside [0, 1]
/// or a non-finite score.
inline result<double> threshold_for_cloud_fraction(std::span<double> scores, double cloud_fraction) noexcept {
  if (scores.empty()) return error{errc::invalid_argument} << "calibration needs at least one score";
  if (!(cloud_fraction >= 0.0 && cloud_fraction <= 1.0))
    return error{errc::invalid_argument} << "cloud fraction " << cloud_fraction << " outside [0, 1]";
  for (double s : scores)  // NaN has no order, and no threshold lies below -inf
    if (!std::isfinite(s)) return error{errc::invalid_argument} << "calibration score " << s << " is not finite";
  const auto n = scores.size();
  const double wanted = cloud_fraction * static_cast<double>(n);  // prompts to send out
  const auto k = static_cast<std::size_t>(std::lround(wanted));
  if (k >= n) return detail::threshold_below(*std::min_element(scores.begin(), scores.end()));
  // The (k+1)-th largest score v: threshold v sends the scores above v, threshold "just
  // below v" sends those equal to v as well; without ties, above = k.
  std::nth_element(scores.begin(), scores.begin() + static_cast<std::ptrdiff_t>(k), scores.end(), std::greater<>{});
  const double v = scores[k];
  std::size_t above = 0, at_least = 0;
  double next_lower = v;  // the largest score below v, if any
  bool has_lower = false;
  for (double s : scores) {
    above += s > v ? 1 : 0;
    at_least += s >= v ? 1 : 0;
    if (s < v && (!has_lower || s > next_lower)) next_lower = s, has_lower = true;
  }
  const bool take_group = static_cast<double>(at_least) - wanted < wanted - static_cast<double>(above);
  if (!take_group) return v;
  return has_lower ? next_lower : detail::threshold_below(v);
}

/// Fraction of `scores` that a threshold sends to the cloud (score > threshold).
inline double cloud_fraction_at(std::span<const double> scores, double threshold) noexcept {
  if (scores.empty()) return 0.0;
  std::size_t above = 0;
  for (double s : scores) above += s > threshold ? 1 : 0;
  return static_cast<double>(above) / static_cast<double>(scores.size());
}

/// Threshold reaching `target_quality` (mean outcome, as in metrics.hpp) with the fewest
/// cloud calls on labelled calibration rows; `rows` is sorted by descending score. A group
/// of equal scores goes to the cloud whole (the quality after it does not depend on how
/// the sort ordered the group), so the quality reached can exceed the target.
/// Fails with errc::unavailable when even all-cloud routing misses the target, and with
/// errc::invalid_argument on no rows, a non-finite target or a non-finite score.
inline result<double> threshold_for_quality(std::span<scored_outcome> rows, double target_quality) noexcept {
  if (rows.empty()) return error{errc::invalid_argument} << "calibration needs at least one row";
  if (!std::isfinite(target_quality))
    return error{errc::invalid_argument} << "quality target " << target_quality << " is not finite";
  for (const auto& r : rows)
    if (!std::isfinite(r.score)) return error{errc::invalid_argument} << "calibration score " << r.score << " is not finite";
  sort_by_score(rows);
  double total = 0.0;
  for (const auto& r : rows) total += r.weak;
  const auto n = static_cast<double>(rows.size());
  if (total / n >= target_quality) return rows.front().score;  // nothing needs the cloud
  for (std::size_t k = 0; k < rows.size(); ++k) {
    total += rows[k].strong - rows[k].weak;
    const bool last = k + 1 == rows.size();
    if (!last && rows[k + 1].score == rows[k].score) continue;  // a threshold cannot cut inside a tie
    if (total / n >= target_quality) return last ? detail::threshold_below(rows[k].score) : rows[k + 1].score;
  }
  return error{errc::unavailable} << "quality target " << target_quality << " above all-cloud quality " << total / n;
}

}  // namespace hedge::route
