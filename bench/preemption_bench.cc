// tenax bench preemption: what training on preemptible workers costs and
// how fast it finishes (issue 10, "Numbers"). Every run is a `tenax run` of
// the cnn with the same workers, per-worker batch, SGD and epochs, priced
// with the same provider's table (examples/prices/, docs/cost.md):
//  - baseline:    sync, no faults, every role on demand;
//  - preemptible: async vc_asgd, every role at preemptible (Spot) prices,
//                 random SIGKILLs of workers (exponential lifetimes), each
//                 replaced after a delay; it is also priced with the
//                 coordinator and servers on demand (cost_control_on_demand),
//                 from the same process-seconds;
//  - elastic:     sync elastic under the same kill process and prices;
//  - vc_asgd_p1:  the preemptible run with staleness_power 1 (the rule's
//                 default is 0.5), to show what the exponent does;
//  - vc_asgd_alpha05: the preemptible run with alpha 0.5 (a fresh result
//                 averaged with the server's model; the default takes it
//                 whole), to show what averaging costs on this job;
//  - vc_asgd_last: the preemptible run with async.average_tail = 0 (the
//                 final model alone; the default evaluates the mean of the
//                 models pulled over the last 10% of the job);
//  - delta, asgd: async with the other merge rules, same faults and prices.
// Each reports wall_seconds (launcher), cost (summary.json's cost.total),
// final_test_accuracy, and where they apply preemptions and units_reissued.
// Ratios are against the baseline of the same run.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench_common.h"
#include "tenax/core/files.h"
#include "tenax/job/price_table.h"

namespace tenax::bench {
namespace {

struct PreemptionArgs {
  bool quick = false;
  std::string json_path;
  int64_t workers = 4;
  int64_t epochs = 0;  // 0 = 2 quick, 4 full
  int64_t batch_size = 64;
  double lr = 0.02;
  int64_t unit_steps = 10;
  double mean_lifetime_seconds = 0;  // 0 = 40 s quick (a kill every ~10 s among 4 workers), 120 s full
  double restart_delay_seconds = 3;
  std::string data_dir = kDefaultFashionMnistDir;
  std::string prices = BenchFile("gcp-c2-standard-8-us-central1.toml");
  std::string spot_workers_prices = BenchFile("gcp-c2-standard-8-us-central1-spot-workers.toml");
  std::string on_demand_prices = BenchFile("gcp-c2-standard-8-us-central1-on-demand.toml");
  int64_t timeout_seconds = 900;
  bool skip_rules = false;  // hidden: only baseline, preemptible, elastic
};

struct RunSpec {
  std::string name, mode, rule;
  bool faults = false, elastic = false, spot = false;
  double staleness_power = 0;  // 0 = the rule's default
  double alpha = -1;           // < 0 = the rule's default
  double average_tail = -1;    // < 0 = none set (tenax's default)
};

std::string JobText(const PreemptionArgs& a, const RunSpec& r) {
  const int64_t epochs = a.epochs > 0 ? a.epochs : (a.quick ? 2 : 4);
  const double lifetime = a.mean_lifetime_seconds > 0 ? a.mean_lifetime_seconds : (a.quick ? 40 : 120);
  std::string text = fmt::format(
      "mode = \"{}\"\n[cluster]\nworkers = {}\njob_id = \"bench-{}\"\npeer_timeout_seconds = 3\n"
      "step_timeout_seconds = 20\njoin_timeout_seconds = 120\n",
      r.mode, a.workers, r.name);
  if (r.elastic) text += "elastic = true\nmin_workers = 1\n";
  if (r.mode == "async") {
    text += fmt::format("[async]\nservers = 2\nunit_steps = {}\nlease_seconds = 10\nrule = \"{}\"\n", a.unit_steps,
                        r.rule);
    // Classic asynchronous SGD takes one step of the job's lr per pushed
    // gradient; a unit pushes the sum of unit_steps gradients, so the
    // server's lr is the job's divided by unit_steps (one step of the
    // unit's mean gradient). With the job's lr on the sum it diverges.
    if (r.staleness_power > 0) text += fmt::format("staleness_power = {}\n", r.staleness_power);
    if (r.alpha >= 0) text += fmt::format("alpha = {:.3f}\n", r.alpha);
    if (r.average_tail >= 0) text += fmt::format("average_tail = {:.3f}\n", r.average_tail);
    if (r.rule == "asgd") text += fmt::format("server_lr = {}\n", a.lr / static_cast<double>(a.unit_steps));
  }
  text += fmt::format(
      "[data]\ndir = \"{}\"\n[model]\nname = \"cnn\"\n"
      "[train]\nepochs = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\nmomentum = 0.9\nseed = 1\nthreads = 1\n"
      "[log]\nevery_steps = 100\n[cost]\nprices = \"{}\"\n",
      a.data_dir, epochs, a.batch_size, a.lr, r.spot ? a.prices : a.on_demand_prices);
  if (r.faults) {
    text += fmt::format(
        "[faults.random]\nmean_lifetime_seconds = {}\nseed = 11\naction = \"kill\"\nrestart_delay_seconds = {}\n"
        "max_faults = 1000\n",
        lifetime, a.restart_delay_seconds);
  }
  return text;
}

Result<nlohmann::json> RunOne(const PreemptionArgs& a, const std::string& tenax_bin, const std::string& work,
                              const RunSpec& r) {
  const std::string dir = work + "/" + r.name, job = dir + "/job.toml", out = dir + "/run";
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, JobText(a, r)));
  std::fprintf(stderr, "preemption: %s ...\n", r.name.c_str());
  auto run = RunToEnd("tenax run (" + r.name + ")", {tenax_bin, "run", job, "--out", out},
                      Deadline::After(std::chrono::seconds(a.timeout_seconds)));
  if (!run.ok()) {
    return Status(run.status().code(), "tenax run (" + r.name + ") failed: " + run.status().message() +
                                           " (its own error line is above)");
  }
  std::ifstream in(out + "/summary.json");
  auto s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object() || !s.contains("cost")) {
    return Internal("tenax run (" + r.name + "): summary.json unreadable or without cost");
  }
  nlohmann::json j = {{"mode", r.mode},
                      {"wall_seconds", s.value("launcher_wall_seconds", 0.0)},
                      {"cost", s["cost"].value("total", 0.0)},
                      {"cost_by_role", s["cost"].value("by_role", nlohmann::json::object())},
                      {"final_test_accuracy", s.value("final_test_accuracy", 0.0)},
                      {"steps", s.value("steps", 0)}};
  if (!r.rule.empty()) j["rule"] = r.rule;
  if (r.spot) {
    // The same process-seconds priced with only the workers preemptible.
    std::map<std::string, double> seconds;
    const nlohmann::json spent = s["cost"].value("process_seconds", nlohmann::json::object());
    for (const auto& [role, v] : spent.items()) {
      if (v.is_number()) seconds[role] = v.get<double>();
    }
    TENAX_ASSIGN_OR_RETURN(PriceTable cautious, LoadPriceTable(a.spot_workers_prices));
    TENAX_ASSIGN_OR_RETURN(CostReport c, ComputeCost(cautious, seconds));
    j["cost_control_on_demand"] = c.total;
  }
  int64_t kills = 0;
  for (const auto& f : s.value("faults", nlohmann::json::array())) {
    kills += f.value("event", "") == "fault" && f.value("action", "") == "kill";
  }
  if (r.faults) j["preemptions"] = kills;
  if (r.mode == "async") {
    j["units_reissued"] = s.value("units_reissued", 0);
    j["units_issued"] = s.value("units_issued", 0);
    j["results_rejected"] = s.value("results_rejected", 0);
  }
  std::fprintf(stderr, "preemption: %-11s %6.1f s  cost %.5f  accuracy %.4f%s\n", r.name.c_str(),
               j["wall_seconds"].get<double>(), j["cost"].get<double>(), j["final_test_accuracy"].get<double>(),
               r.faults ? fmt::format("  kills {}", kills).c_str() : "");
  return j;
}

Status RunPreemption(const PreemptionArgs& a) {
  TENAX_ASSIGN_OR_RETURN(std::string tenax_bin, FindProgram("tenax"));
  for (const auto& p : {a.prices, a.spot_workers_prices, a.on_demand_prices}) {
    if (!std::filesystem::exists(p)) {
      return NotFound("price table " + p + " (--prices / --spot-workers-prices / --on-demand-prices)");
    }
  }
  UseFreshSecret();
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-preemption"));
  std::vector<RunSpec> runs = {{"baseline", "sync", "", false, false, false},
                               {"preemptible", "async", "vc_asgd", true, false, true},
                               {"elastic", "sync", "", true, true, true}};
  if (!a.skip_rules) {
    // The shipped rule with the plain 1/(1+s) instead of 1/sqrt(1+s): what
    // the exponent buys (docs/async.md).
    runs.push_back({"vc_asgd_p1", "async", "vc_asgd", true, false, true, 1.0});
    // The shipped rule averaging a fresh result with the server's model
    // (alpha 0.5) instead of taking it whole: better for a noisy job (the
    // soak's), worse for this one (docs/async.md, "Why alpha = 0").
    runs.push_back({"vc_asgd_alpha05", "async", "vc_asgd", true, false, true, 0, 0.5});
    // The shipped rule without tail averaging: what the default's mean of
    // the last 10% gives this job (docs/async.md, "Tail averaging").
    runs.push_back({"vc_asgd_last", "async", "vc_asgd", true, false, true, 0, -1, 0.0});
    runs.push_back({"delta", "async", "delta", true, false, true});
    runs.push_back({"asgd", "async", "asgd", true, false, true});
  }
  nlohmann::json report = {{"benchmark", "preemption"}, {"quick", a.quick}, {"workers", a.workers}};
  for (const auto& r : runs) {
    auto j = RunOne(a, tenax_bin, work.path(), r);
    // The baseline and the async run under test must work; another run that
    // fails (the asgd baseline can diverge) is reported, not fatal.
    if (!j.ok() && (r.name == "baseline" || r.name == "preemptible" || j.status().code() == StatusCode::kCancelled)) {
      return j.status();
    }
    if (!j.ok()) std::fprintf(stderr, "preemption: %-11s failed: %s\n", r.name.c_str(), j.status().message().c_str());
    report[r.name] = j.ok() ? *j : nlohmann::json{{"failed", j.status().message()}};
  }
  const auto& base = report["baseline"];
  nlohmann::json ratios = nlohmann::json::object();
  for (const auto& r : runs) {
    if (r.name == "baseline" || report[r.name].contains("failed")) continue;
    const auto& x = report[r.name];
    ratios[r.name] = {
        {"wall_ratio", x["wall_seconds"].get<double>() / base["wall_seconds"].get<double>()},
        {"cost_ratio", x["cost"].get<double>() / base["cost"].get<double>()},
        {"cost_ratio_control_on_demand",
         x.value("cost_control_on_demand", x["cost"].get<double>()) / base["cost"].get<double>()},
        {"accuracy_gap_points",
         100 * (base["final_test_accuracy"].get<double>() - x["final_test_accuracy"].get<double>())}};
  }
  report["vs_baseline"] = ratios;
  const auto& p = ratios["preemptible"];
  report["targets"] = {{"accuracy_within_1_point", p["accuracy_gap_points"].get<double>() <= 1.0},
                       {"wall_at_most_1_3x", p["wall_ratio"].get<double>() <= 1.3},
                       {"cost_at_most_0_3x", p["cost_ratio"].get<double>() <= 0.3}};
  std::printf("%s\n", report.dump(2).c_str());
  return WriteJsonReport(a.json_path, report);
}

}  // namespace

void AddPreemptionBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<PreemptionArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "preemption",
      "Cost and speed on preemptible workers: sync on demand (baseline) vs async VC-ASGD on preemptible prices with "
      "random worker kills, vs elastic sync under the same kills, and the delta and asgd merge rules",
      "2 epochs and a kill every ~10 s among the workers (6 runs, about 2 minutes)", a->quick, a->json_path,
      [a] { return RunPreemption(*a); }, exit_code);
  cmd->add_option("--epochs", a->epochs, "Epochs per run (default 2 quick, 4 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--batch-size", a->batch_size, "Samples per step per worker")
      ->check(CLI::Range(int64_t{1}, int64_t{15000}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "SGD learning rate of every run")->check(CLI::Range(1e-6, 10.0))->capture_default_str();
  cmd->add_option("--unit-steps", a->unit_steps, "Local steps per async work unit")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  cmd->add_option("--mean-lifetime", a->mean_lifetime_seconds,
                  "Mean worker lifetime in seconds under faults (default 40 quick, 120 full)")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->add_option("--restart-delay", a->restart_delay_seconds, "Seconds before a killed worker is replaced")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--prices", a->prices, "Price table of the runs on preemptible capacity")->capture_default_str();
  cmd->add_option("--spot-workers-prices", a->spot_workers_prices,
                  "Price table with only the workers preemptible (the cautious re-pricing)")
      ->capture_default_str();
  cmd->add_option("--on-demand-prices", a->on_demand_prices, "Price table with every role on demand (baseline)")
      ->capture_default_str();
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd->add_option("--timeout", a->timeout_seconds, "Time limit of one run, seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
  cmd->add_option("--workers", a->workers, "Workers per job")->check(CLI::Range(int64_t{2}, int64_t{16}))->group("");
  cmd->add_flag("--skip-rules", a->skip_rules, "Skip the delta and asgd runs")->group("");
}

}  // namespace tenax::bench
