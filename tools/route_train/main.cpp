// hedge-route-train: fits the complexity scorer on labelled CSV files and writes a weights
// file (format: hedge/route/complexity_model.hpp), plus the threshold for a target cloud
// fraction calibrated on the training prompts (quantile rule; hedge-route-calibrate redoes
// it on a deployment's own traffic).
//
// Exit status: 0 done (--help included), 1 an input, the fit or the output failed (the
// message names the file and the reason), 2 a usage error (the usage follows it).
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/calibration.hpp"
#include "hedge/route/evaluation.hpp"
#include "../common/cli.hpp"

namespace {

constexpr const char* usage_text =
    "usage: hedge-route-train --out WEIGHTS [--target-fraction F] [--epochs N] [--learning-rate X] [--l2 X]\n"
    "                         [--label weak_wrong|strong_better] [--hash-seed S] FILES...\n"
    "  FILES     labelled CSV files: a header row, then prompt, weak outcome, strong outcome\n"
    "  --out     the weights file to write\n"
    "  --target-fraction F  cloud fraction the printed threshold targets, in [0, 1] (default 0.5)\n"
    "  --epochs N           passes over the data, 1 to 100000 (default 3)\n"
    "  --learning-rate X    AdaGrad step, finite and > 0 (default 0.1)\n"
    "  --l2 X               L2 penalty, finite and >= 0 (default 0.03)\n"
    "  --label L            what the scorer predicts (default strong_better)\n"
    "  --hash-seed S        feature hash seed the weights are trained with (default 0)\n";

constexpr hedge::tools::cli cli{"hedge-route-train", usage_text};

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge::route;
  constexpr std::size_t buckets = complexity_model<>::buckets;
  std::string out;
  std::vector<std::string> files;
  evaluation_options opt;
  std::uint64_t hash_seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return cli.help();
    if (a.substr(0, 2) != "--") {
      files.emplace_back(a);
      continue;
    }
    const bool known = a == "--out" || a == "--target-fraction" || a == "--epochs" || a == "--learning-rate" ||
                       a == "--l2" || a == "--hash-seed" || a == "--label";
    if (!known) return cli.usage_error("unknown option " + std::string(a));
    if (i + 1 == argc) return cli.usage_error("option " + std::string(a) + " needs a value");
    const std::string_view v = argv[++i];
    // A value that does not parse whole as a number is an error, not 0 (as std::atof reads "abc").
    bool parsed = true;
    if (a == "--out") out = v;
    else if (a == "--target-fraction") parsed = hedge::parse_number(v, opt.target_cloud_fraction) &&
                                                opt.target_cloud_fraction >= 0.0 && opt.target_cloud_fraction <= 1.0;
    else if (a == "--epochs") parsed = hedge::parse_number(v, opt.fit.epochs);
    else if (a == "--learning-rate") parsed = hedge::parse_number(v, opt.fit.learning_rate);
    else if (a == "--l2") parsed = hedge::parse_number(v, opt.fit.l2);
    else if (a == "--hash-seed") parsed = hedge::parse_number(v, hash_seed);
    else if (v == "weak_wrong") opt.target = training_target::weak_wrong;
    else if (v == "strong_better") opt.target = training_target::strong_better;
    else parsed = false;
    if (!parsed) return cli.usage_error("bad value for " + std::string(a) + ": '" + std::string(v) + "'");
  }
  if (out.empty()) return cli.usage_error("no --out file");
  if (files.empty()) return cli.usage_error("no input files");
  // Before reading any file: a learning rate of 1e30 or 0 epochs is a usage error.
  if (auto checked = check_logistic_options(opt.fit); !checked)
    return cli.usage_error(std::string("bad fit parameters: ") + checked.error().c_str());
  std::vector<labelled_domain> domains;
  std::size_t rows = 0;
  for (const auto& f : files) {
    auto loaded = hedge::os::load_labelled_csv(f);
    if (!loaded) return cli.fail(loaded.error());
    domains.push_back({f, std::move(*loaded), {}});
    compute_features<buckets>(domains.back(), hash_seed);
    rows += domains.back().rows.size();
  }
  std::vector<const labelled_domain*> train;
  for (const auto& d : domains) train.push_back(&d);
  // A diverged fit (NaN or unbounded weights) is an error before anything is written.
  const auto model = detail::train_on<buckets>(train, opt);
  if (!model) return cli.fail(model.error());
  auto scores = detail::calibration_scores<buckets>(train, **model, opt);
  if (!scores) return cli.fail(scores.error());
  const auto threshold = threshold_for_cloud_fraction(*scores, opt.target_cloud_fraction);
  if (!threshold) return cli.fail(threshold.error());
  char comment[160];
  std::snprintf(comment, sizeof comment, "trained on %zu rows from %zu files; logit threshold for cloud fraction %.3f: %.6f",
                rows, files.size(), opt.target_cloud_fraction, *threshold);
  if (auto w = hedge::os::write_complexity_weights(**model, out, comment); !w) return cli.fail(w.error());
  std::printf("%s\nwrote %s\n", comment, out.c_str());
  // A threshold carried over from the training domains can miss the target by several
  // points on other traffic (docs/routing.md, "Calibration"): say how to redo it.
  std::printf("re-calibrate on your own prompts: hedge-route-calibrate --weights %s --target-fraction %.3f LOG.csv\n",
              out.c_str(), opt.target_cloud_fraction);
  std::printf("threshold_logit=%.6f\n", *threshold);
  return 0;
}
