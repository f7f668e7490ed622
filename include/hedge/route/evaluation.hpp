// hedge/route/evaluation.hpp: train -> calibrate -> score -> RouteLLM metrics, for a
// train/test split or leave-domain-out over labelled domains (hedge-route-eval and tests).
//
// Protocol (RouteLLM, Ong et al. 2024): the router sees only the prompt. Leave-domain-out:
// for each domain, the scorer is trained on all the other domains, the threshold for the
// target cloud fraction is calibrated on the training domains' scores (quantile rule), and
// the held-out domain is scored. Metrics are computed on the pooled held-out scores.
// Offline only: it uses the heap (std::vector, std::string), but touches no file.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/model/random.hpp"
#include "hedge/route/calibration.hpp"
#include "hedge/route/complexity_model.hpp"
#include "hedge/route/metrics.hpp"
#include "hedge/route/training.hpp"

namespace hedge::route {

/// Labelled prompts of one domain (e.g. one MMLU subject), with precomputed features.
struct labelled_domain {
  std::string name;
  std::vector<labelled_prompt> rows;
  std::vector<sparse_features> features;
  std::uint64_t hash_seed = 0;  ///< the feature hash seed `features` were computed with
};

/// What the scorer is trained to predict.
enum class training_target : std::uint8_t {
  weak_wrong,     ///< 1 when the weak model's answer is wrong
  strong_better,  ///< (strong - weak + 1) / 2: 1 when only the strong model is right, 0.5 on ties
};

struct evaluation_options {
  /// The complexity scorer's fit: L2 3e-2, ten times the trainer's default, ranks unseen
  /// domains better (leave-domain-out sweep in docs/perf-journal.md, routing).
  logistic_options fit{.l2 = 3e-2};
  training_target target = training_target::strong_better;
  double target_cloud_fraction = 0.5;  ///< calibration target
  int random_seeds = 10;               ///< random-router baseline runs
  /// Calibrate on the held-out block's own prompts (scores only, no labels, as a deployment
  /// does on its unlabelled traffic with hedge-route-calibrate): the threshold comes from
  /// the even rows of the block and the cloud fraction is measured on its odd rows. The
  /// model never sees the block. False: transfer a threshold from the training domains
  /// (calibration_folds), which misses the target by 5-11 points on unseen MMLU domains
  /// (docs/routing.md).
  bool calibrate_on_held_out_prompts = true;
  /// For transfer calibration: split the training domains into this many groups, score each
  /// group with a model trained without it, and take the quantile of those scores.
  /// In-sample scores of the final model are more extreme than its scores on an unseen
  /// domain, so 0 or 1 (in-sample calibration) misses the target by even more.
  int calibration_folds = 3;
};

/// Checks the options before any training: every count and rate in its range. (A learning
/// rate can pass and still diverge: training then fails with check_trained_model's error.)
inline result<void> check_options(const evaluation_options& opt) {
  if (!(opt.target_cloud_fraction >= 0.0 && opt.target_cloud_fraction <= 1.0))
    return error{errc::invalid_argument} << "target cloud fraction " << opt.target_cloud_fraction << " outside [0, 1]";
  HEDGE_TRY(check_logistic_options(opt.fit));
  if (opt.calibration_folds < 0)
    return error{errc::invalid_argument} << "calibration folds " << opt.calibration_folds << " below 0";
  if (opt.random_seeds < 0) return error{errc::invalid_argument} << "random seeds " << opt.random_seeds << " below 0";
  return ok();
}

/// One held-out block's result (a domain, or the whole test set).
struct held_out_result {
  std::string name;
  std::size_t n = 0;
  double cloud_fraction = 0.0;  ///< fraction above its calibrated threshold
  double apgr = 0.0;            ///< within the block (0 when the strong model is not better there)
  bool apgr_defined = false;
};

struct evaluation_report {
  routing_metrics router{};
  routing_metrics oracle{};
  double random_apgr = 0.0;  ///< mean over seeds
  double held_out_cloud_fraction = 0.0;  ///< pooled, at the calibrated thresholds
  std::size_t cloud_fraction_rows = 0;    ///< rows the fraction is measured on
  std::vector<held_out_result> blocks;
  std::vector<scored_outcome> scored;  ///< pooled held-out rows (router score)
};

/// Features for every row of a domain, hashed with `hash_seed` (call once per seed; folds
/// reuse them). A model trained on them scores with the same seed (complexity_model::hash_seed).
template <std::size_t Buckets>
void compute_features(labelled_domain& d, std::uint64_t hash_seed = 0) {
  d.hash_seed = hash_seed;
  d.features.clear();
  d.features.reserve(d.rows.size());
  for (const auto& r : d.rows) d.features.push_back(sparse_features_of<Buckets>(r.prompt, hash_seed));
}

namespace detail {
inline float target_of(const labelled_prompt& r, training_target t) {
  return t == training_target::weak_wrong ? 1.0f - r.weak : (r.strong - r.weak + 1.0f) / 2.0f;
}

/// Model logit of precomputed sparse features (same value as complexity_model::logit).
template <std::size_t Buckets>
double logit_of(const complexity_model<Buckets>& model, const sparse_features& f) {
  double z = model.bias;
  for (std::size_t j = 0; j < f.index.size(); ++j) {
    const auto i = f.index[j];
    const std::size_t g = (i - dense_feature_count) / Buckets;
    const float w = i < dense_feature_count
                        ? model.dense[i]
                        : model.scale[g] * static_cast<float>(model.hashed[g][(i - dense_feature_count) % Buckets]);
    z += static_cast<double>(w) * f.value[j];
  }
  return z;
}

/// All domains' features were hashed with one seed: a model trained on some and scored on
/// others (or deployed) would otherwise look its features up in the wrong buckets.
inline result<void> check_hash_seeds(const std::vector<const labelled_domain*>& domains) {
  for (const auto* d : domains)
    if (d->hash_seed != domains.front()->hash_seed)
      return error{errc::invalid_argument} << "features of " << d->name << " were hashed with seed " << d->hash_seed
                                           << ", those of " << domains.front()->name << " with seed "
                                           << domains.front()->hash_seed;
  return ok();
}

template <std::size_t Buckets>
result<std::unique_ptr<complexity_model<Buckets>>> train_on(const std::vector<const labelled_domain*>& train,
                                                            const evaluation_options& opt) {
  std::vector<const sparse_features*> x;
  std::vector<float> y, weight;
  for (const auto* d : train)
    for (std::size_t k = 0; k < d->rows.size(); ++k) {
      x.push_back(&d->features[k]);
      y.push_back(target_of(d->rows[k], opt.target));
      weight.push_back(1.0f);
    }
  auto model = std::make_unique<complexity_model<Buckets>>();
  model->hash_seed = train.empty() ? 0 : train.front()->hash_seed;  // one seed: check_hash_seeds
  HEDGE_TRY(train_complexity_model(x, y, weight, opt.fit, *model));
  return model;
}

/// Scores to calibrate on (see evaluation_options::calibration_folds).
template <std::size_t Buckets>
result<std::vector<double>> calibration_scores(const std::vector<const labelled_domain*>& train,
                                               const complexity_model<Buckets>& model, const evaluation_options& opt) {
  std::vector<double> scores;
  const auto folds = static_cast<std::size_t>(opt.calibration_folds);
  if (folds < 2 || train.size() < folds) {
    for (const auto* d : train)
      for (const auto& f : d->features) scores.push_back(logit_of(model, f));
    return scores;
  }
  for (std::size_t g = 0; g < folds; ++g) {
    std::vector<const labelled_domain*> inner_train, inner_test;
    for (std::size_t k = 0; k < train.size(); ++k) (k % folds == g ? inner_test : inner_train).push_back(train[k]);
    const auto inner = train_on<Buckets>(inner_train, opt);
    if (!inner) return inner.error();
    for (const auto* d : inner_test)
      for (const auto& f : d->features) scores.push_back(logit_of(**inner, f));
  }
  return scores;
}

/// Trains on `train`, calibrates, scores `test`; appends to the report.
template <std::size_t Buckets>
result<void> run_fold(const std::vector<const labelled_domain*>& train, const std::vector<const labelled_domain*>& test,
              const evaluation_options& opt, evaluation_report& report, std::string name) {
  const auto trained = train_on<Buckets>(train, opt);
  if (!trained) return error{trained.error().code()} << "held-out block " << name << ": " << trained.error().message();
  const auto& model = *trained;
  const auto logit = [&](const sparse_features& f) { return logit_of(*model, f); };
  held_out_result block;
  block.name = std::move(name);
  std::vector<scored_outcome> rows;
  for (const auto* d : test)
    for (std::size_t k = 0; k < d->rows.size(); ++k) rows.push_back({logit(d->features[k]), d->rows[k].weak, d->rows[k].strong});
  std::vector<double> calibration;
  if (opt.calibrate_on_held_out_prompts) {
    for (std::size_t k = 0; k < rows.size(); k += 2) calibration.push_back(rows[k].score);
  } else {
    auto scores = calibration_scores<Buckets>(train, *model, opt);
    if (!scores) return scores.error();
    calibration = std::move(*scores);
  }
  const auto threshold = threshold_for_cloud_fraction(calibration, opt.target_cloud_fraction);
  if (!threshold) return threshold.error();
  const std::size_t first = opt.calibrate_on_held_out_prompts ? 1 : 0, step = opt.calibrate_on_held_out_prompts ? 2 : 1;
  std::size_t measured = 0;
  for (std::size_t k = first; k < rows.size(); k += step, ++measured)
    block.cloud_fraction += rows[k].score > *threshold ? 1.0 : 0.0;
  block.n = rows.size();
  report.held_out_cloud_fraction += block.cloud_fraction;
  report.cloud_fraction_rows += measured;
  block.cloud_fraction /= static_cast<double>(measured == 0 ? 1 : measured);
  report.scored.insert(report.scored.end(), rows.begin(), rows.end());
  if (auto m = evaluate_routing(rows)) block.apgr = m->apgr, block.apgr_defined = true;
  report.blocks.push_back(std::move(block));
  return ok();
}

inline result<void> finish(evaluation_report& report, const evaluation_options& opt) {
  report.held_out_cloud_fraction /= static_cast<double>(report.cloud_fraction_rows == 0 ? 1 : report.cloud_fraction_rows);
  std::vector<scored_outcome> pooled = report.scored;
  auto router = evaluate_routing(pooled);
  if (!router) return router.error();
  report.router = *router;
  report.scored = std::move(pooled);
  std::vector<scored_outcome> oracle = report.scored;
  for (auto& r : oracle) r.score = r.strong - r.weak;
  report.oracle = *evaluate_routing(oracle);
  double random_sum = 0.0;
  for (int seed = 0; seed < opt.random_seeds; ++seed) {
    model::seeded_random rng{static_cast<std::uint64_t>(seed) + 1};
    for (auto& r : oracle) r.score = rng.uniform();
    random_sum += evaluate_routing(oracle)->apgr;
  }
  report.random_apgr = opt.random_seeds > 0 ? random_sum / opt.random_seeds : 0.0;
  return ok();
}
}  // namespace detail

/// Trains on `train`, evaluates on `test` (the test set is one held-out block).
template <std::size_t Buckets>
result<evaluation_report> evaluate_split(const std::vector<const labelled_domain*>& train,
                                         const std::vector<const labelled_domain*>& test,
                                         const evaluation_options& opt) {
  std::vector<const labelled_domain*> all = train;
  all.insert(all.end(), test.begin(), test.end());
  HEDGE_TRY(check_options(opt));
  HEDGE_TRY(detail::check_hash_seeds(all));
  evaluation_report report;
  HEDGE_TRY(detail::run_fold<Buckets>(train, test, opt, report, "test"));
  HEDGE_TRY(detail::finish(report, opt));
  return report;
}

/// Leave-domain-out cross-validation over `domains` (features already computed).
template <std::size_t Buckets>
result<evaluation_report> evaluate_leave_domain_out(const std::vector<labelled_domain>& domains,
                                                    const evaluation_options& opt) {
  if (domains.size() < 2) return error{errc::invalid_argument} << "leave-domain-out needs at least 2 domains";
  HEDGE_TRY(check_options(opt));
  std::vector<const labelled_domain*> all;
  for (const auto& d : domains) all.push_back(&d);
  HEDGE_TRY(detail::check_hash_seeds(all));
  evaluation_report report;
  for (std::size_t held = 0; held < domains.size(); ++held) {
    std::vector<const labelled_domain*> train, test{&domains[held]};
    for (std::size_t k = 0; k < domains.size(); ++k)
      if (k != held) train.push_back(&domains[k]);
    HEDGE_TRY(detail::run_fold<Buckets>(train, test, opt, report, domains[held].name));
  }
  HEDGE_TRY(detail::finish(report, opt));
  return report;
}

}  // namespace hedge::route
