// hedge-route-eval: RouteLLM metrics of the learned complexity scorer on labelled data.
//
//   hedge-route-eval --train FILES... --test FILES... [options]
//   hedge-route-eval --leave-domain-out DIR [options]
// Options: --target-fraction F (calibration target, default 0.5), --epochs N,
//   --learning-rate X, --l2 X, --calibration-folds K (0: in-sample), --label weak_wrong|strong_better, --limit N (first N domains),
//   --calibrate-on held-out-prompts|training (threshold from the even rows of each held-out block, prompts
//   only, the fraction then measured on its odd rows: the default, as hedge-route-calibrate does on a
//   deployment's own traffic; or transferred from out-of-fold scores of the training domains),
//   --csv PATH (default route_eval.csv), --svg PATH (default route_eval.svg),
//   --hash-seeds K (default 5: the whole evaluation once per feature hash seed 0..K-1).
// Evaluates every seed, then prints a per-block table, curve and calibration for hash seed
// 0, the metrics per hash seed and, as the last line, their means over the seeds:
//   APGR=<x> CPT50=<y> CPT80=<z> random_APGR=<r> n=<rows>
// Which features share a hash bucket changes with the seed, and APGR with it by about 0.02
// on MMLU: one seed's figure is one draw, the mean is the method's.
// Exit status: 0 done (--help included), 1 an input, evaluation or output failed (the
// message names the file and the reason), 2 a usage error (the usage follows it).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "hedge/os/csv_files.hpp"
#include "hedge/route/evaluation.hpp"
#include "../common/cli.hpp"

namespace {

using namespace hedge::route;
constexpr std::size_t buckets = complexity_model<>::buckets;

constexpr const char* usage_text =
    "usage: hedge-route-eval --train FILES... --test FILES... [options]\n"
    "       hedge-route-eval --leave-domain-out DIR [options]\n"
    "options:\n"
    "  --target-fraction F    calibration target cloud fraction in [0, 1] (default 0.5)\n"
    "  --epochs N             training epochs, at least 1\n"
    "  --learning-rate X      AdaGrad base step, positive\n"
    "  --l2 X                 ridge penalty, at least 0\n"
    "  --label weak_wrong|strong_better              what the scorer predicts (default strong_better)\n"
    "  --calibrate-on held-out-prompts|training      where the threshold comes from (default held-out-prompts)\n"
    "  --calibration-folds K  folds for --calibrate-on training (0: in-sample; default 3)\n"
    "  --limit N              the first N domains of DIR (0: all)\n"
    "  --csv PATH, --svg PATH the curve files (default route_eval.csv, route_eval.svg)\n"
    "  --hash-seeds K         evaluate with feature hash seeds 0..K-1 (default 5)\n"
    "exit status: 0 done, 1 an input, evaluation or output failed, 2 a usage error\n";

constexpr hedge::tools::cli cli{"hedge-route-eval", usage_text};

/// Appends printf-formatted text (the curve files are built whole, then written by
/// os::write_text_file, which checks every step of the write).
[[gnu::format(printf, 2, 3)]] void append(std::string& out, const char* format, ...) {
  char line[512];
  std::va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n > 0) out.append(line, std::min(static_cast<std::size_t>(n), sizeof line - 1));
}

hedge::result<labelled_domain> load_domain(const std::string& path) {
  auto rows = hedge::os::load_labelled_csv(path);
  if (!rows) return rows.error();
  labelled_domain d;
  d.name = std::filesystem::path(path).stem().string();
  d.rows = std::move(*rows);
  return d;
}

/// The three curves on a grid of 101 cloud fractions.
struct curve_points {
  std::vector<double> router, random, oracle;
};

std::vector<double> quality_grid(std::vector<scored_outcome> rows) {
  std::vector<double> all;
  (void)evaluate_routing(rows, [&](double, double quality, double) { all.push_back(quality); });
  std::vector<double> grid;
  for (int k = 0; k <= 100; ++k) grid.push_back(all[static_cast<std::size_t>(k / 100.0 * (all.size() - 1) + 0.5)]);
  return grid;
}

curve_points curves(const evaluation_report& report) {
  curve_points c;
  c.router = quality_grid(report.scored);
  auto rows = report.scored;
  for (auto& r : rows) r.score = r.strong - r.weak;
  c.oracle = quality_grid(rows);
  // Random router in expectation: a straight line from weak to strong quality.
  for (int k = 0; k <= 100; ++k)
    c.random.push_back(report.router.weak_quality + k / 100.0 * (report.router.strong_quality - report.router.weak_quality));
  return c;
}

std::string curve_csv(const curve_points& c, const evaluation_report& r) {
  std::string f;
  const double gap = r.router.strong_quality - r.router.weak_quality;
  append(f, "cloud_fraction,quality_router,pgr_router,quality_random,quality_oracle\n");
  for (std::size_t k = 0; k < c.router.size(); ++k)
    append(f, "%.2f,%.5f,%.5f,%.5f,%.5f\n", k / 100.0, c.router[k], (c.router[k] - r.router.weak_quality) / gap,
           c.random[k], c.oracle[k]);
  return f;
}

std::string curve_svg(const curve_points& c, const evaluation_report& r) {
  std::string f;
  const double w = 640, h = 420, left = 60, right = 160, top = 30, bottom = 50;
  double lo = 1.0, hi = 0.0;
  for (const auto* v : {&c.router, &c.random, &c.oracle})
    for (double q : *v) lo = std::min(lo, q), hi = std::max(hi, q);
  lo = std::max(0.0, lo - 0.02), hi = std::min(1.0, hi + 0.02);
  const auto x = [&](double frac) { return left + frac * (w - left - right); };
  const auto y = [&](double q) { return top + (hi - q) / (hi - lo) * (h - top - bottom); };
  append(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%g' height='%g' font-family='sans-serif' font-size='12'>\n", w, h);
  append(f, "<rect width='100%%' height='100%%' fill='white'/>\n");
  append(f, "<text x='%g' y='18'>Quality vs cloud-call fraction (APGR %.3f, random %.3f, n=%zu)</text>\n", left,
         r.router.apgr, r.random_apgr, r.router.n);
  append(f, "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", left, h - bottom, w - right, h - bottom);
  append(f, "<line x1='%g' y1='%g' x2='%g' y2='%g' stroke='black'/>\n", left, top, left, h - bottom);
  for (int k = 0; k <= 4; ++k) {
    const double frac = k / 4.0, q = lo + k / 4.0 * (hi - lo);
    append(f, "<text x='%g' y='%g' text-anchor='middle'>%.2f</text>\n", x(frac), h - bottom + 16, frac);
    append(f, "<text x='%g' y='%g' text-anchor='end'>%.2f</text>\n", left - 4, y(q) + 4, q);
  }
  append(f, "<text x='%g' y='%g' text-anchor='middle'>fraction of prompts sent to the strong (cloud) model</text>\n",
         (left + w - right) / 2, h - 12);
  const struct { const std::vector<double>* v; const char* color; const char* label; } lines[] = {
      {&c.oracle, "#2a9d8f", "oracle"}, {&c.router, "#e76f51", "complexity scorer"}, {&c.random, "#888888", "random"}};
  int row = 0;
  for (const auto& l : lines) {
    append(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", l.color);
    for (std::size_t k = 0; k < l.v->size(); ++k) append(f, "%.1f,%.1f ", x(k / 100.0), y((*l.v)[k]));
    append(f, "'/>\n<text x='%g' y='%d' fill='%s'>%s</text>\n", w - right + 8, 50 + 18 * row++, l.color, l.label);
  }
  append(f, "</svg>\n");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> train_files, test_files;
  std::string dir, csv_path = "route_eval.csv", svg_path = "route_eval.svg";
  evaluation_options opt;
  std::size_t limit = 0;
  std::uint64_t hash_seeds = 5;
  std::vector<std::string>* list = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return cli.help();
    if (a == "--train" || a == "--test") {
      list = a == "--train" ? &train_files : &test_files;
      continue;
    }
    if (a.substr(0, 2) != "--") {
      if (list == nullptr) return cli.usage_error("unexpected argument '" + std::string(a) + "'");
      if (a.empty()) return cli.usage_error("empty file name after --train or --test");
      list->emplace_back(a);
      continue;
    }
    list = nullptr;
    static constexpr std::string_view valued[] = {"--leave-domain-out", "--target-fraction", "--epochs",
                                                  "--learning-rate", "--l2", "--calibration-folds", "--calibrate-on",
                                                  "--limit", "--label", "--hash-seeds", "--csv", "--svg"};
    if (std::find(std::begin(valued), std::end(valued), a) == std::end(valued))
      return cli.usage_error("unknown option " + std::string(a));
    if (i + 1 == argc) return cli.usage_error(std::string(a) + " needs a value");
    const std::string_view v = argv[++i];
    // A value that does not parse whole as a finite number is an error, not 0 (as atof reads "abc").
    const auto number = [&](auto& out) { return hedge::parse_number(v, out); };
    const auto bad = [&](const char* expected) {
      return cli.usage_error("bad " + std::string(a) + " '" + std::string(v) + "': expected " + expected);
    };
    if (a == "--leave-domain-out" || a == "--csv" || a == "--svg") {
      if (v.empty()) return cli.usage_error(std::string(a) + " needs a path, not an empty string");
      (a == "--leave-domain-out" ? dir : a == "--csv" ? csv_path : svg_path) = v;
    } else if (a == "--target-fraction") {
      if (!number(opt.target_cloud_fraction) || opt.target_cloud_fraction < 0.0 || opt.target_cloud_fraction > 1.0)
        return bad("a number in [0, 1]");
    } else if (a == "--epochs") {
      if (!number(opt.fit.epochs) || opt.fit.epochs < 1) return bad("a whole number of at least 1");
    } else if (a == "--learning-rate") {
      if (!number(opt.fit.learning_rate) || !(opt.fit.learning_rate > 0.0)) return bad("a positive number");
    } else if (a == "--l2") {
      if (!number(opt.fit.l2) || opt.fit.l2 < 0.0) return bad("a number of at least 0");
    } else if (a == "--calibration-folds") {
      if (!number(opt.calibration_folds) || opt.calibration_folds < 0) return bad("a whole number of at least 0");
    } else if (a == "--calibrate-on") {
      if (v == "training") opt.calibrate_on_held_out_prompts = false;
      else if (v == "held-out-prompts") opt.calibrate_on_held_out_prompts = true;
      else return bad("training or held-out-prompts");
    } else if (a == "--limit") {
      if (!number(limit)) return bad("a whole number of at least 0 (0: every domain)");
    } else if (a == "--label") {
      if (v == "weak_wrong") opt.target = training_target::weak_wrong;
      else if (v == "strong_better") opt.target = training_target::strong_better;
      else return bad("weak_wrong or strong_better");
    } else if (a == "--hash-seeds") {
      if (!number(hash_seeds) || hash_seeds == 0) return bad("a whole number of at least 1");
    }
  }
  if (dir.empty() && (train_files.empty() || test_files.empty()))
    return cli.usage_error("give --train and --test, or --leave-domain-out");
  if (!dir.empty() && !(train_files.empty() && test_files.empty()))
    return cli.usage_error("give --leave-domain-out or --train and --test, not both");
  if (csv_path == svg_path) return cli.usage_error("--csv and --svg name the same file");
  // The curve CSV must not land in the directory being evaluated: the next leave-domain-out
  // run would read it as a domain and fail on its columns (the default path is the current
  // directory, so running the tool inside a data directory did exactly that).
  if (!dir.empty()) {
    std::error_code ec;
    const auto csv_dir = std::filesystem::absolute(csv_path, ec).parent_path();
    if (!ec && std::filesystem::equivalent(csv_dir, dir, ec))
      return cli.usage_error("--csv would write into the --leave-domain-out directory; give another path");
  }

  // Leave-domain-out: every domain in `train`.
  std::vector<labelled_domain> train, test;
  const auto load_all = [](const std::vector<std::string>& files, std::vector<labelled_domain>& out) -> bool {
    for (const auto& f : files) {
      auto d = load_domain(f);
      if (!d) return cli.fail(d.error()), false;
      out.push_back(std::move(*d));
    }
    return true;
  };
  if (!dir.empty()) {
    auto listed = hedge::os::csv_files_in(dir);
    if (!listed) return cli.fail(listed.error());
    auto& files = *listed;
    if (limit != 0 && files.size() > limit) files.resize(limit);
    if (files.size() < 2)
      return cli.fail(dir + " holds " + std::to_string(files.size()) +
                      " .csv file(s) to use; leave-domain-out needs at least 2");
    if (!load_all(files, train)) return 1;
  } else if (!load_all(train_files, train) || !load_all(test_files, test)) {
    return 1;
  }
  const auto evaluate = [&](std::uint64_t seed) {
    for (auto* domains : {&train, &test})
      for (auto& d : *domains) compute_features<buckets>(d, seed);
    if (!dir.empty()) return evaluate_leave_domain_out<buckets>(train, opt);
    std::vector<const labelled_domain*> tr, te;
    for (const auto& d : train) tr.push_back(&d);
    for (const auto& d : test) te.push_back(&d);
    return evaluate_split<buckets>(tr, te, opt);
  };
  // Every seed before any output: a failing seed leaves no partial report.
  const auto report = evaluate(0);
  if (!report) return cli.fail(report.error());
  const auto& r = *report;
  std::vector<routing_metrics> per_seed{r.router};
  for (std::uint64_t seed = 1; seed < hash_seeds; ++seed) {
    const auto other = evaluate(seed);
    if (!other) return cli.fail("hash seed " + std::to_string(seed) + ": " + std::string(other.error().message()));
    per_seed.push_back(other->router);
  }

  std::printf("feature hash seed 0:\n%-40s %6s %8s %8s\n", "held-out block", "n", "cloud%", "APGR");
  double abs_dev = 0.0;
  for (const auto& b : r.blocks) {
    std::printf("%-40s %6zu %8.1f %8s\n", b.name.c_str(), b.n, 100.0 * b.cloud_fraction,
                b.apgr_defined ? std::to_string(b.apgr).substr(0, 6).c_str() : "n/a");
    abs_dev += std::abs(b.cloud_fraction - opt.target_cloud_fraction);
  }
  std::printf("\nrows %zu  weak %.4f  strong %.4f\n", r.router.n, r.router.weak_quality, r.router.strong_quality);
  std::printf("router  APGR %.4f  CPT50 %.4f  CPT80 %.4f (hash seed 0)\n", r.router.apgr, r.router.cpt50, r.router.cpt80);
  std::printf("random  APGR %.4f (mean of %d seeds)\n", r.random_apgr, opt.random_seeds);
  std::printf("oracle  APGR %.4f  CPT50 %.4f  CPT80 %.4f\n", r.oracle.apgr, r.oracle.cpt50, r.oracle.cpt80);
  std::printf("calibration (hash seed 0): target cloud fraction %.3f, held-out pooled %.4f, mean |block - target| %.4f\n",
              opt.target_cloud_fraction, r.held_out_cloud_fraction, abs_dev / static_cast<double>(r.blocks.size()));
  const auto c = curves(r);
  const auto wrote_csv = hedge::os::write_text_file(csv_path, curve_csv(c, r));
  if (!wrote_csv) cli.fail(wrote_csv.error());
  const auto wrote_svg = hedge::os::write_text_file(svg_path, curve_svg(c, r));
  if (!wrote_svg) cli.fail(wrote_svg.error());
  if (!wrote_csv || !wrote_svg) return 1;
  std::printf("wrote %s and %s (hash seed 0)\n", csv_path.c_str(), svg_path.c_str());
  std::printf("\nrouter per feature hash seed:\n");
  double apgr = 0.0, cpt50 = 0.0, cpt80 = 0.0, apgr_min = r.router.apgr, apgr_max = r.router.apgr;
  for (std::size_t seed = 0; seed < per_seed.size(); ++seed) {
    const routing_metrics& m = per_seed[seed];
    std::printf("  seed %zu: APGR %.4f  CPT50 %.4f  CPT80 %.4f\n", seed, m.apgr, m.cpt50, m.cpt80);
    apgr += m.apgr, cpt50 += m.cpt50, cpt80 += m.cpt80;
    apgr_min = std::min(apgr_min, m.apgr);
    apgr_max = std::max(apgr_max, m.apgr);
  }
  const auto k = static_cast<double>(hash_seeds);
  std::printf("  mean of %llu: APGR %.4f (%.4f to %.4f)  CPT50 %.4f  CPT80 %.4f\n",
              static_cast<unsigned long long>(hash_seeds), apgr / k, apgr_min, apgr_max, cpt50 / k, cpt80 / k);
  std::printf("APGR=%.4f CPT50=%.4f CPT80=%.4f random_APGR=%.4f n=%zu\n", apgr / k, cpt50 / k, cpt80 / k, r.random_apgr,
              r.router.n);
  // The report goes to standard output: a write that fails there (a full disk) fails the run too.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    const char* reason = std::strerror(errno != 0 ? errno : EIO);  // before an allocation can change errno
    return cli.fail(std::string("cannot write standard output: ") + reason);
  }
  return 0;
}
