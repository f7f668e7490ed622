// hedge-route-calibrate: re-calibrates the complexity policy's threshold on a traffic log,
// the supported procedure for a new deployment (docs/routing.md, "Calibration"): a threshold
// carried over from the training domains can miss the target cloud fraction by several
// points on unseen traffic, the quantile rule on the deployment's own prompts does not.
//
//   hedge-route-calibrate --weights FILE --target-fraction F LOG...
//   hedge-route-calibrate --weights FILE --target-quality Q LABELLED...
//
// LOG: CSV with a header row and the prompt in the first column (other columns ignored).
// LABELLED: the training CSV layout (prompt, weak outcome, strong outcome), for a quality
// target: the fewest cloud calls whose mean outcome reaches Q.
// Prints the threshold as a logit (complexity_policy::set_threshold_logit), as a probability
// (the policy's constructor argument), and what it gives on the log; the last line is
// `threshold_logit=<t> cloud_fraction=<f> prompts=<n>` (plus `quality=<q>` when labelled).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/calibration.hpp"
#include "hedge/route/metrics.hpp"
#include "hedge/route/training.hpp"

namespace {

int usage(const char* message) {
  std::fprintf(stderr,
               "hedge-route-calibrate: %s\nusage: hedge-route-calibrate --weights FILE "
               "(--target-fraction F | --target-quality Q) FILES...\n",
               message);
  return 2;
}

int fail(const hedge::error& e) {
  std::fprintf(stderr, "hedge-route-calibrate: %s\n", e.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge::route;
  std::string weights;
  double fraction = -1.0, quality = -1.0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool value = i + 1 < argc;
    if (a == "--weights" && value) weights = argv[++i];
    else if (a == "--target-fraction" && value) {
      if (!detail::parse_number(argv[++i], fraction) || fraction < 0.0) return usage("bad --target-fraction");
    } else if (a == "--target-quality" && value) {
      if (!detail::parse_number(argv[++i], quality) || quality < 0.0) return usage("bad --target-quality");
    }
    else if (a.substr(0, 2) != "--") files.emplace_back(a);
    else return usage("unknown or incomplete option");
  }
  if (weights.empty() || files.empty()) return usage("needs --weights and at least one file");
  if ((fraction >= 0.0) == (quality >= 0.0)) return usage("give exactly one of --target-fraction and --target-quality");
  if (fraction > 1.0 || quality > 1.0) return usage("targets are fractions in [0, 1]");

  auto model = std::make_unique<complexity_model<>>();
  auto text = hedge::os::read_text_file(weights);
  if (!text) return fail(text.error());
  if (auto parsed = parse_complexity_weights(*text, *model); !parsed) return fail(parsed.error());

  std::vector<double> scores;
  std::vector<scored_outcome> labelled;
  for (const auto& file : files) {
    if (quality >= 0.0) {
      auto rows = hedge::os::load_labelled_csv(file);
      if (!rows) return fail(rows.error());
      for (const auto& r : *rows) {
        const double s = model->logit(r.prompt);
        scores.push_back(s);
        labelled.push_back({s, r.weak, r.strong});
      }
    } else {
      auto prompts = hedge::os::load_prompt_log(file);
      if (!prompts) return fail(prompts.error());
      for (const auto& p : *prompts) scores.push_back(model->logit(p));
    }
  }
  if (scores.empty()) return fail(hedge::error{hedge::errc::invalid_argument} << "no prompts in the given files");

  // The quantile rule reorders the scores; the cloud fraction below is a count, so any order does.
  auto threshold = quality >= 0.0 ? threshold_for_quality(labelled, quality)
                                  : threshold_for_cloud_fraction(scores, fraction);
  if (!threshold) return fail(threshold.error());
  const double t = *threshold;
  const double cloud = cloud_fraction_at(scores, t);
  std::printf("prompts: %zu from %zu file(s)\n", scores.size(), files.size());
  std::printf("threshold: logit %.6g (probability %.6g)\n", t, 1.0 / (1.0 + std::exp(-t)));
  std::printf("cloud fraction on this log: %.4f\n", cloud);
  if (quality >= 0.0) {
    double total = 0.0;
    for (const auto& r : labelled) total += r.score > t ? r.strong : r.weak;
    std::printf("threshold_logit=%.9g cloud_fraction=%.4f prompts=%zu quality=%.4f\n", t, cloud, scores.size(),
                total / static_cast<double>(labelled.size()));
  } else {
    std::printf("threshold_logit=%.9g cloud_fraction=%.4f prompts=%zu\n", t, cloud, scores.size());
  }
  return 0;
}
