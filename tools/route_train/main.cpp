// hedge-route-train: fits the complexity scorer on labelled CSV files and writes a weights
// file (format: hedge/route/complexity_model.hpp), plus the threshold for a target cloud
// fraction calibrated on the training prompts (quantile rule; hedge-route-calibrate redoes
// it on a deployment's own traffic).
//
//   hedge-route-train --out WEIGHTS [--target-fraction F] [--epochs N] [--learning-rate X]
//                     [--l2 X] [--label weak_wrong|strong_better] [--hash-seed S] FILES...
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/calibration.hpp"
#include "hedge/route/evaluation.hpp"

int main(int argc, char** argv) {
  using namespace hedge::route;
  constexpr std::size_t buckets = complexity_model<>::buckets;
  std::string out;
  std::vector<std::string> files;
  evaluation_options opt;
  std::uint64_t hash_seed = 0;
  // A value that does not parse whole as a number is an error, not 0 (as std::atof reads "abc").
  const auto bad = [](std::string_view option) {
    return std::fprintf(stderr, "hedge-route-train: bad value for %.*s\n", static_cast<int>(option.size()), option.data()), 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool value = i + 1 < argc;
    if (a == "--out" && value) {
      out = argv[++i];
    } else if (a == "--target-fraction" && value) {
      if (!detail::parse_number(argv[++i], opt.target_cloud_fraction)) return bad(a);
    } else if (a == "--epochs" && value) {
      if (!detail::parse_number(argv[++i], opt.fit.epochs)) return bad(a);
    } else if (a == "--learning-rate" && value) {
      if (!detail::parse_number(argv[++i], opt.fit.learning_rate)) return bad(a);
    } else if (a == "--l2" && value) {
      if (!detail::parse_number(argv[++i], opt.fit.l2)) return bad(a);
    } else if (a == "--hash-seed" && value) {
      if (!detail::parse_number(argv[++i], hash_seed)) return bad(a);
    } else if (a == "--label" && value) {
      const std::string_view v = argv[++i];
      if (v == "weak_wrong") opt.target = training_target::weak_wrong;
      else if (v == "strong_better") opt.target = training_target::strong_better;
      else return bad(a);
    } else if (a.substr(0, 2) != "--") {
      files.emplace_back(a);
    } else {
      return std::fprintf(stderr, "hedge-route-train: unknown or incomplete option %s\n", argv[i]), 2;
    }
  }
  if (out.empty() || files.empty())
    return std::fprintf(stderr, "usage: hedge-route-train --out WEIGHTS [--target-fraction F] [--epochs N] "
                                "[--learning-rate X] [--l2 X] [--label weak_wrong|strong_better] [--hash-seed S] FILES...\n"), 2;
  std::vector<labelled_domain> domains;
  std::size_t rows = 0;
  for (const auto& f : files) {
    auto loaded = hedge::os::load_labelled_csv(f);
    if (!loaded) return std::fprintf(stderr, "hedge-route-train: %s\n", loaded.error().c_str()), 1;
    domains.push_back({f, std::move(*loaded), {}});
    compute_features<buckets>(domains.back(), hash_seed);
    rows += domains.back().rows.size();
  }
  std::vector<const labelled_domain*> train;
  for (const auto& d : domains) train.push_back(&d);
  const auto model = detail::train_on<buckets>(train, opt);
  auto scores = detail::calibration_scores<buckets>(train, *model, opt);
  const auto threshold = threshold_for_cloud_fraction(scores, opt.target_cloud_fraction);
  if (!threshold) return std::fprintf(stderr, "hedge-route-train: %s\n", threshold.error().c_str()), 1;
  char comment[160];
  std::snprintf(comment, sizeof comment, "trained on %zu rows from %zu files; logit threshold for cloud fraction %.3f: %.6f",
                rows, files.size(), opt.target_cloud_fraction, *threshold);
  if (auto w = hedge::os::write_complexity_weights(*model, out, comment); !w)
    return std::fprintf(stderr, "hedge-route-train: %s\n", w.error().c_str()), 1;
  std::printf("%s\nwrote %s\n", comment, out.c_str());
  // A threshold carried over from the training domains can miss the target by several
  // points on other traffic (docs/routing.md, "Calibration"): say how to redo it.
  std::printf("re-calibrate on your own prompts: hedge-route-calibrate --weights %s --target-fraction %.3f LOG.csv\n",
              out.c_str(), opt.target_cloud_fraction);
  std::printf("threshold_logit=%.6f\n", *threshold);
  return 0;
}
