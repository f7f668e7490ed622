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
// A threshold cannot split prompts with equal scores (calibration.hpp): the cloud fraction
// printed is the one reached, and a note on standard error says when ties kept it off the
// target by more than one prompt.
// Exit status: 0 done (--help included), 1 an input failed or the target cannot be
// reached (the message names the file and the reason), 2 a usage error.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/calibration.hpp"
#include "hedge/route/metrics.hpp"
#include "hedge/route/training.hpp"
#include "../common/cli.hpp"

namespace {

constexpr const char* usage_text =
    "usage: hedge-route-calibrate --weights FILE --target-fraction F LOG...\n"
    "       hedge-route-calibrate --weights FILE --target-quality Q LABELLED...\n"
    "  F: the fraction of the prompts to send to the cloud, in [0, 1]\n"
    "  Q: the mean outcome to reach with the fewest cloud calls, in [0, 1]\n"
    "  LOG: CSV, header row, prompt in the first column; LABELLED: prompt, weak, strong\n"
    "exit status: 0 done, 1 an input failed or the target cannot be reached, 2 a usage error\n";

constexpr hedge::tools::cli cli{"hedge-route-calibrate", usage_text};

}  // namespace

int main(int argc, char** argv) {
  using namespace hedge::route;
  std::string weights;
  double target = 0.0;
  bool by_quality = false, has_target = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return cli.help();
    if (a.substr(0, 2) != "--") {
      if (a.empty()) return cli.usage_error("empty file name");
      files.emplace_back(a);
      continue;
    }
    if (a != "--weights" && a != "--target-fraction" && a != "--target-quality")
      return cli.usage_error("unknown option " + std::string(a));
    if (i + 1 == argc) return cli.usage_error(std::string(a) + " needs a value");
    const std::string_view v = argv[++i];
    if (a == "--weights") {
      if (v.empty()) return cli.usage_error("--weights needs a path, not an empty string");
      weights = v;
      continue;
    }
    if (has_target) return cli.usage_error("give one of --target-fraction and --target-quality, once");
    // A value that does not parse whole as a finite number is an error, not 0 (as atof reads "abc").
    if (!hedge::parse_number(v, target) || target < 0.0 || target > 1.0)
      return cli.usage_error("bad " + std::string(a) + " '" + std::string(v) + "': expected a number in [0, 1]");
    by_quality = a == "--target-quality";
    has_target = true;
  }
  if (weights.empty() || files.empty()) return cli.usage_error("needs --weights and at least one file");
  if (!has_target) return cli.usage_error("give one of --target-fraction and --target-quality");

  auto model = std::make_unique<complexity_model<>>();
  auto text = hedge::os::read_text_file(weights);
  if (!text) return cli.fail(text.error());
  if (auto parsed = parse_complexity_weights(*text, *model); !parsed)  // its message names the line, not the file
    return cli.fail(weights + ": " + std::string(parsed.error().message()));

  std::vector<double> scores;
  std::vector<scored_outcome> labelled;
  for (const auto& file : files) {
    if (by_quality) {
      auto rows = hedge::os::load_labelled_csv(file);
      if (!rows) return cli.fail(rows.error());
      for (const auto& r : *rows) {
        const double s = model->logit(r.prompt);
        scores.push_back(s);
        labelled.push_back({s, r.weak, r.strong});
      }
    } else {
      auto prompts = hedge::os::load_prompt_log(file);
      if (!prompts) return cli.fail(prompts.error());
      for (const auto& p : *prompts) scores.push_back(model->logit(p));
    }
  }
  if (scores.empty()) return cli.fail(hedge::error{hedge::errc::invalid_argument} << "no prompts in the given files");

  // The quantile rule reorders the scores; the cloud fraction below is a count, so any order does.
  auto threshold = by_quality ? threshold_for_quality(labelled, target) : threshold_for_cloud_fraction(scores, target);
  if (!threshold) return cli.fail(threshold.error());
  const double t = *threshold;
  const double cloud = cloud_fraction_at(scores, t);
  const auto n = static_cast<double>(scores.size());
  if (!by_quality && std::abs(cloud - target) * n > 1.0)
    std::fprintf(stderr, "hedge-route-calibrate: note: prompts with equal scores at the threshold cannot be split: "
                 "cloud fraction %.4f for the target %.4f\n", cloud, target);
  std::printf("prompts: %zu from %zu file(s)\n", scores.size(), files.size());
  std::printf("threshold: logit %.6g (probability %.6g)\n", t, 1.0 / (1.0 + std::exp(-t)));
  std::printf("cloud fraction on this log: %.4f\n", cloud);
  if (by_quality) {
    double total = 0.0;
    for (const auto& r : labelled) total += r.score > t ? r.strong : r.weak;
    std::printf("threshold_logit=%.9g cloud_fraction=%.4f prompts=%zu quality=%.4f\n", t, cloud, scores.size(),
                total / n);
  } else {
    std::printf("threshold_logit=%.9g cloud_fraction=%.4f prompts=%zu\n", t, cloud, scores.size());
  }
  // The threshold goes to standard output: a write that fails there (a full disk) fails the run.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    const char* reason = std::strerror(errno != 0 ? errno : EIO);  // before an allocation can change errno
    return cli.fail(std::string("cannot write standard output: ") + reason);
  }
  return 0;
}
