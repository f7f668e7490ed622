// hedge/route/metrics.hpp: RouteLLM's routing metrics on labelled data.
//
// Definitions (Ong et al. 2024, RouteLLM, section 5): a router scores every prompt; the
// prompts with the highest scores go to the strong (cloud) model. At cloud fraction c,
// quality(c) is the mean correctness of the answers chosen. With weak = quality(0) and
// strong = quality(1):
//   PGR(c)  = (quality(c) - weak) / (strong - weak)     performance gap recovered
//   APGR    = area under PGR(c) for c in [0, 1]         (random router: 0.5 in expectation)
//   CPT(x)  = smallest c with PGR(c) >= x               call-performance threshold
// Here c runs over every k/n (k prompts to the cloud), the area is the trapezoid rule.
// Everything works in place on caller spans and allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "hedge/core/result.hpp"

namespace hedge::route {

/// A prompt's router score and how good each tier's answer was (1 correct, 0 wrong).
struct scored_outcome {
  double score = 0.0;
  float weak = 0.0f;
  float strong = 0.0f;
};

/// Sorts rows so the ones sent to the cloud first (highest score) come first. Equal scores
/// end in an unspecified order (std::sort; std::stable_sort could allocate), so give
/// tied routers a tie-breaking score when the order matters.
inline void sort_by_score(std::span<scored_outcome> rows) noexcept {
  std::sort(rows.begin(), rows.end(), [](const scored_outcome& a, const scored_outcome& b) {
    return a.score > b.score;
  });
}

struct routing_metrics {
  double weak_quality = 0.0;
  double strong_quality = 0.0;
  double apgr = 0.0;
  double cpt50 = 1.0;
  double cpt80 = 1.0;
  std::size_t n = 0;
};

/// Computes the metrics and calls point(cloud_fraction, quality, pgr) for each of the
/// n + 1 points of the curve (pass a no-op to skip). `rows` is sorted by descending score.
/// Fails when the strong tier is not better than the weak one on these rows.
/// \tparam PointVisitor callable as point(double, double, double)
template <class PointVisitor>
result<routing_metrics> evaluate_routing(std::span<scored_outcome> rows, PointVisitor&& point) noexcept {
  if (rows.empty()) return error{errc::invalid_argument} << "no rows to evaluate";
  sort_by_score(rows);
  routing_metrics m;
  m.n = rows.size();
  const auto n = static_cast<double>(rows.size());
  double weak_total = 0.0, strong_total = 0.0;
  for (const auto& r : rows) weak_total += r.weak, strong_total += r.strong;
  m.weak_quality = weak_total / n;
  m.strong_quality = strong_total / n;
  const double gap = m.strong_quality - m.weak_quality;
  if (!(gap > 0.0))
    return error{errc::invalid_argument} << "strong quality " << m.strong_quality << " not above weak " << m.weak_quality;
  double total = weak_total, previous_pgr = 0.0, area = 0.0;
  bool hit50 = false, hit80 = false;
  for (std::size_t k = 0; k <= rows.size(); ++k) {
    if (k > 0) total += rows[k - 1].strong - rows[k - 1].weak;
    const double c = static_cast<double>(k) / n, quality = total / n, pgr = (quality - m.weak_quality) / gap;
    if (k > 0) area += (previous_pgr + pgr) / 2.0 / n;
    previous_pgr = pgr;
    if (!hit50 && pgr >= 0.5 - 1e-12) m.cpt50 = c, hit50 = true;
    if (!hit80 && pgr >= 0.8 - 1e-12) m.cpt80 = c, hit80 = true;
    point(c, quality, pgr);
  }
  m.apgr = area;
  return m;
}

inline result<routing_metrics> evaluate_routing(std::span<scored_outcome> rows) noexcept {
  return evaluate_routing(rows, [](double, double, double) noexcept {});
}

}  // namespace hedge::route
