// hedge/route/training.hpp: fitting the complexity model and writing its weights file, and
// parsing labelled routing data (CSV: prompt, weak correct, strong correct; e.g. RouteLLM's
// MMLU responses). Offline only (the hedge-route-train and hedge-route-eval tools, tests),
// never on the decision path: it uses the heap (std::vector, std::string), but touches no
// file; os/csv_files.hpp reads and writes them.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hedge/core/parse_number.hpp"
#include "hedge/core/result.hpp"
#include "hedge/model/random.hpp"
#include "hedge/route/complexity_model.hpp"
#include "hedge/route/csv.hpp"

namespace hedge::route {

/// One labelled prompt: how well the weak (edge) and strong (cloud) model answered.
struct labelled_prompt {
  std::string prompt;
  float weak = 0.0f;
  float strong = 0.0f;
};

namespace detail {
inline bool parse_outcome(std::string_view s, float& out) {
  if (s == "True" || s == "true" || s == "1") return out = 1.0f, true;
  if (s == "False" || s == "false" || s == "0") return out = 0.0f, true;
  return parse_number(s, out) && out >= 0.0f && out <= 1.0f;
}
}  // namespace detail

namespace detail {
/// Calls on_record(fields, count, line) for every record after the header row, blank lines
/// skipped: the first Columns fields unescaped into `fields`, `count` the number the record
/// had. on_record returns result<void>; its first error stops the reading.
template <std::size_t Columns, class OnRecord>
result<void> for_each_csv_record(std::string_view text, std::string_view source, OnRecord&& on_record) {
  csv_cursor cursor{text};
  bool header = true;
  while (!cursor.done()) {
    std::array<std::string, Columns> fields;
    std::size_t count = 0;
    const std::size_t line = cursor.line();
    while (true) {
      auto f = cursor.next();
      if (!f) return error{errc::parse_error} << source << ": " << f.error().message();
      // Reserved at the raw size (unescaping only shortens): a 50 MB field is then held
      // once beside the text, not up to twice more while a growing string reallocates.
      if (count < fields.size()) {
        fields[count].reserve(f->raw.size());
        csv_unescape(*f, [&](char c) { fields[count].push_back(c); });
      }
      ++count;
      if (f->ends_record) break;
    }
    if (count == 1 && fields[0].empty()) continue;  // blank line
    if (header) {
      header = false;
      continue;
    }
    HEDGE_TRY(on_record(fields, count, line));
  }
  if (header) return error{errc::parse_error} << source << ": empty file (no header row)";
  return ok();
}
}  // namespace detail

/// Parses labelled CSV text: a header row, then rows of exactly three fields
/// (prompt, weak outcome, strong outcome); outcomes are True/False, 1/0 or a score in [0, 1].
inline result<std::vector<labelled_prompt>> parse_labelled_csv(std::string_view text, std::string_view source = "csv") {
  std::vector<labelled_prompt> rows;
  auto read = detail::for_each_csv_record<3>(
      text, source, [&](std::array<std::string, 3>& fields, std::size_t count, std::size_t line) -> result<void> {
        if (count != 3)
          return error{errc::parse_error} << source << " line " << line << ": expected 3 columns, got " << count;
        labelled_prompt row;
        if (!detail::parse_outcome(fields[1], row.weak) || !detail::parse_outcome(fields[2], row.strong))
          return error{errc::parse_error} << source << " line " << line
                                          << ": outcome is not True/False or a number in [0, 1]";
        row.prompt = std::move(fields[0]);
        rows.push_back(std::move(row));
        return ok();
      });
  if (!read) return read.error();
  return rows;
}

/// Parses a traffic log for calibration: a header row, then records whose first field is
/// the prompt (any further fields, e.g. timestamps or outcomes, are ignored).
inline result<std::vector<std::string>> parse_prompt_log(std::string_view text, std::string_view source = "csv") {
  std::vector<std::string> prompts;
  auto read = detail::for_each_csv_record<1>(
      text, source, [&](std::array<std::string, 1>& fields, std::size_t, std::size_t) -> result<void> {
        prompts.push_back(std::move(fields[0]));
        return ok();
      });
  if (!read) return read.error();
  return prompts;
}

/// A prompt's features as a sparse vector over [dense | words buckets | chars buckets].
struct sparse_features {
  std::vector<std::uint32_t> index;
  std::vector<float> value;
};

/// Feature vector of one prompt, duplicates merged, in the layout train_logistic expects:
/// a hashed feature's value is its count times its group's scale. Counted in a table of one
/// count per bucket, so the memory is 2 x Buckets counts however long the prompt (a list of
/// the reported buckets would take 4 bytes per byte of a 50 MB prompt, 25 M 4-grams).
/// \tparam Buckets the model's bucket count
/// \param hash_seed the model's complexity_model::hash_seed
template <std::size_t Buckets>
sparse_features sparse_features_of(std::string_view prompt, std::uint64_t hash_seed = 0) {
  std::vector<std::uint64_t> counts(hashed_group_count * Buckets, 0);
  const auto summary = complexity_features<Buckets>::extract(
      prompt, [&](hashed_group g, std::uint32_t b) noexcept { ++counts[static_cast<std::size_t>(g) * Buckets + b]; },
      feature_hash_keys::of_seed(hash_seed));
  sparse_features out;
  for (std::uint32_t k = 0; k < dense_feature_count; ++k) {
    out.index.push_back(k);
    out.value.push_back(summary.dense[k]);
  }
  for (std::size_t g = 0; g < hashed_group_count; ++g) {
    const float scale = summary.group_scale(static_cast<hashed_group>(g));
    for (std::size_t b = 0; b < Buckets; ++b)
      if (const std::uint64_t n = counts[g * Buckets + b]; n != 0) {
        out.index.push_back(static_cast<std::uint32_t>(dense_feature_count + g * Buckets + b));
        out.value.push_back(static_cast<float>(n) * scale);
      }
  }
  return out;
}

struct logistic_options {
  int epochs = 3;
  double learning_rate = 0.1;  ///< AdaGrad base step
  double l2 = 3e-3;            ///< ridge penalty per step on touched weights
  std::uint64_t seed = 1;      ///< example order

  static constexpr int max_epochs = 100000;
};

/// Checks a fit's parameters before training: epochs in [1, max_epochs], a finite positive
/// learning rate, a finite non-negative L2 penalty. A learning rate that passes can still
/// diverge on the data: check_trained_model catches that after the fit.
inline result<void> check_logistic_options(const logistic_options& opt) {
  if (opt.epochs < 1 || opt.epochs > logistic_options::max_epochs)
    return error{errc::invalid_argument} << "epochs " << opt.epochs << " outside [1, " << logistic_options::max_epochs
                                         << "]";
  if (!(std::isfinite(opt.learning_rate) && opt.learning_rate > 0.0))
    return error{errc::invalid_argument} << "learning rate " << opt.learning_rate << " is not a finite positive number";
  if (!(std::isfinite(opt.l2) && opt.l2 >= 0.0))
    return error{errc::invalid_argument} << "L2 penalty " << opt.l2 << " is not a finite non-negative number";
  return ok();
}

/// Fits weights w (size = feature count, bias separate) by AdaGrad (Duchi et al. 2011) on
/// the log-loss of labels in [0, 1] with per-example weights; deterministic for a seed.
inline void train_logistic(const std::vector<const sparse_features*>& x, const std::vector<float>& label,
                           const std::vector<float>& weight, const logistic_options& opt, std::vector<float>& w,
                           float& bias) {
  std::vector<float> g2(w.size(), 1e-6f);
  float bias_g2 = 1e-6f;
  std::vector<std::size_t> order(x.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  model::seeded_random rng{opt.seed};
  const auto lr = static_cast<float>(opt.learning_rate), l2 = static_cast<float>(opt.l2);
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    rng.shuffle(std::span<std::size_t>(order));
    for (std::size_t e : order) {
      const auto& f = *x[e];
      float z = bias;
      for (std::size_t j = 0; j < f.index.size(); ++j) z += w[f.index[j]] * f.value[j];
      const float p = 1.0f / (1.0f + std::exp(-z));
      const float g = (p - label[e]) * weight[e];
      bias_g2 += g * g;
      bias -= lr * g / std::sqrt(bias_g2);
      for (std::size_t j = 0; j < f.index.size(); ++j) {
        const auto i = f.index[j];
        const float gi = g * f.value[j] + l2 * w[i];
        g2[i] += gi * gi;
        w[i] -= lr * gi / std::sqrt(g2[i]);
      }
    }
  }
}

/// Rounds float weights of one hashed group to the model's integer steps (step = max|w| /
/// 32767, so the largest weight keeps its value and every weight is within half a step). A
/// NaN or infinite weight (a diverged fit) makes the step, the group's scale, non-finite,
/// which check_trained_model refuses.
template <std::size_t Buckets>
void quantize_hashed_weights(const float* w, complexity_model<Buckets>& model, hashed_group group) {
  const auto g = static_cast<std::size_t>(group);
  float largest = 0.0f;
  for (std::size_t b = 0; b < Buckets; ++b)
    if (!(std::abs(w[b]) <= largest)) largest = std::abs(w[b]);  // NaN included
  const float step = largest == 0.0f ? 1.0f : largest / complexity_model<Buckets>::max_hashed_weight;
  model.scale[g] = step;
  for (std::size_t b = 0; b < Buckets; ++b)
    model.hashed[g][b] = static_cast<typename complexity_model<Buckets>::hashed_weight>(
        std::clamp(std::lround(w[b] / step), -long{complexity_model<Buckets>::max_hashed_weight},
                   long{complexity_model<Buckets>::max_hashed_weight}));
}

/// Checks a trained model before it is used or written: every weight finite and the score
/// bounded within the float range (complexity_model::max_abs_logit). A fit whose step is too
/// large diverges to inf and NaN weights (AdaGrad at learning rate 1e30); those must not be
/// written, nor scored.
template <std::size_t Buckets>
result<void> check_trained_model(const complexity_model<Buckets>& model) {
  bool finite = std::isfinite(model.bias);
  for (const float w : model.dense) finite = finite && std::isfinite(w);
  for (const float step : model.scale) finite = finite && std::isfinite(step) && step > 0.0f;
  if (!finite)
    return error{errc::invalid_argument} << "the fit diverged: the trained weights are not finite (lower the learning rate)";
  if (!(model.max_abs_logit() <= static_cast<double>(std::numeric_limits<float>::max())))
    return error{errc::invalid_argument} << "the fit diverged: the trained weights bound no finite score (lower the "
                                            "learning rate)";
  return ok();
}

/// Trains a complexity model on prompts with labels in [0, 1] (1 = send to the cloud).
/// `x` holds features hashed with model.hash_seed (sparse_features_of(prompt, model.hash_seed)).
/// Fails before training on options out of range (check_logistic_options) and after it on
/// a fit that diverged (check_trained_model): a model it returns ok is usable and writable.
/// \tparam Buckets the model's bucket count
template <std::size_t Buckets>
result<void> train_complexity_model(const std::vector<const sparse_features*>& x, const std::vector<float>& label,
                            const std::vector<float>& weight, const logistic_options& opt,
                            complexity_model<Buckets>& model) {
  HEDGE_TRY(check_logistic_options(opt));
  std::vector<float> w(dense_feature_count + hashed_group_count * Buckets, 0.0f);
  float bias = 0.0f;
  train_logistic(x, label, weight, opt, w, bias);
  model.bias = bias;
  std::copy_n(w.begin(), dense_feature_count, model.dense.begin());
  for (std::size_t g = 0; g < hashed_group_count; ++g)
    quantize_hashed_weights(w.data() + dense_feature_count + g * Buckets, model, static_cast<hashed_group>(g));
  return check_trained_model(model);
}

/// A model as the text of a weights file (format: complexity_model.hpp; non-zero buckets
/// only), with `comment` as a comment line after the magic.
template <std::size_t Buckets>
std::string complexity_weights_text(const complexity_model<Buckets>& model, std::string_view comment = {}) {
  std::string text;
  char line[160];
  std::size_t records = 0;  // for the 'end' record: every line put is one record
  const auto put = [&](int n) {
    text.append(line, static_cast<std::size_t>(n));
    records += static_cast<std::size_t>(std::count(line, line + n, '\n'));
  };
  put(std::snprintf(line, sizeof line, "hedge-complexity %u\n", static_cast<unsigned>(complexity_weights_version)));
  if (!comment.empty()) text.append("# ").append(comment).append("\n");
  put(std::snprintf(line, sizeof line, "buckets %zu\nhash_seed %llu\nbias %.9g\n", Buckets,
                    static_cast<unsigned long long>(model.hash_seed), static_cast<double>(model.bias)));
  for (std::size_t k = 0; k < dense_feature_count; ++k)
    put(std::snprintf(line, sizeof line, "dense %.*s %.9g\n", static_cast<int>(dense_feature_names[k].size()),
                      dense_feature_names[k].data(), static_cast<double>(model.dense[k])));
  for (std::size_t g = 0; g < hashed_group_count; ++g)
    put(std::snprintf(line, sizeof line, "scale %s %.9g\n", g == 0 ? "words" : "chars", static_cast<double>(model.scale[g])));
  for (std::size_t g = 0; g < hashed_group_count; ++g)
    for (std::size_t b = 0; b < Buckets; ++b)
      if (model.hashed[g][b] != 0)
        put(std::snprintf(line, sizeof line, "%s %zu %d\n", g == 0 ? "words" : "chars", b,
                          static_cast<int>(model.hashed[g][b])));
  put(std::snprintf(line, sizeof line, "end %zu\n", records));
  return text;
}

}  // namespace hedge::route
