// tenax bench sched: network-aware placement against Kubernetes' schedulers
// (issue 13, "Numbers"; docs/placement.md, "tenax bench sched").
//
// Simulated part (sched_sim.h): 3 zones x 8 nodes of 4 slots, links drawn
// from published cloud ranges, a Poisson stream of cnn and ResNet-50 jobs
// of 2/4/8 workers (some with parameter servers, a hard zone constraint or
// their data on one node), and during the run three NICs turn lossy and
// slow for two hours while one zone pair congests for half an hour. Each
// policy places the same jobs:
//   network_aware            tenax's PlaceGang/Replace on probe-fed links
//   networkoverhead          scheduler-plugins' NetworkOverhead, static zone costs
//   default                  kube-scheduler: LeastAllocated + PodTopologySpread
//   default_least_allocated  kube-scheduler for pods no Service/RS selects
//   random                   a random node with a free slot per pod
// Per policy: mean and p95 job completion time (the mean over --seeds seeds
// of each seed's 150 jobs; --quick runs the same scenario over fewer
// seeds), waiting, running, slowdown against the compute alone, jobs across
// zones, migrations. Targets: network_aware mean JCT <= 0.67x default and
// <= 0.9x networkoverhead.
//
// Latency: one pod on 5,000 nodes in 10 zones (links from a hash of the
// node ids): the first pod of a job (PlaceGang), and a pod whose 7 peers are
// placed (Replace of one slot; ScoreNodes over every node, what an
// extender's prioritize does). The median of each; the largest is
// schedule_latency_ms_5000_nodes. Target <= 10 ms.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "bench_common.h"
#include "sched_real.h"
#include "sched_sim.h"
#include "tenax/core/signals.h"
#include "tenax/sched/place/scorer.h"

namespace tenax::bench {
namespace {

using namespace schedsim;

struct SchedArgs {
  bool quick = false;
  std::string json_path;
  uint64_t seed = 1;
  int64_t seeds = 0;  // 0 = 3 quick, 10 full
  int64_t jobs = 150;  // per seed: quick and full run the same scenario, full over more seeds
  double load = 0.5;
  int64_t degraded_nodes = 3;
  double nic_loss_lo = 0.01, nic_loss_hi = 0.03;
  double nic_seconds = 7200;
  bool no_congestion = false;
  double migration_seconds = 30;
  double half_life_seconds = 60;
  double max_slowdown = 3;
  double probe_interval_seconds = 2;
  int64_t latency_nodes = 5000;
  int64_t latency_zones = 10;
  int64_t latency_repetitions = 0;  // 0 = 50 quick, 300 full
  bool no_real = false;
  RealPlacementArgs real;
};

struct PolicyTotals {
  std::string policy;
  std::vector<Summary> per_seed;
};

double MeanOf(const std::vector<Summary>& v, double Summary::*field) {
  double sum = 0;
  for (const Summary& s : v) sum += s.*field;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

int SumOf(const std::vector<Summary>& v, int Summary::*field) {
  int sum = 0;
  for (const Summary& s : v) sum += s.*field;
  return sum;
}

nlohmann::json ScenarioJson(const Scenario& s, const std::vector<uint64_t>& seeds, const RunResult& first) {
  nlohmann::json models = nlohmann::json::array();
  for (const ModelClass& m : s.mix.models) {
    models.push_back({{"name", m.name},
                      {"parameters", m.parameters},
                      {"gradient_bytes", 4 * m.parameters},
                      {"share", m.share},
                      {"compute_seconds_per_step", {m.compute_lo, m.compute_hi}},
                      {"steps", {m.steps_lo, m.steps_hi}},
                      {"input_bytes_per_step", m.input_bytes}});
  }
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerShare& w : s.mix.workers) workers.push_back({{"workers", w.workers}, {"share", w.share}});
  const LinkRanges& l = s.links;
  const Degradation& d = s.degradation;
  const Probing& p = s.probing;
  return {
      {"seeds", seeds},
      {"zones", s.zones},
      {"nodes_per_zone", s.nodes_per_zone},
      {"slots_per_node", s.slots_per_node},
      {"jobs_per_seed", s.jobs},
      {"load", s.load},
      {"arrivals_per_hour", 3600 * ArrivalRate(s)},
      {"links",
       {{"intra_zone_rtt_ms", {l.intra_rtt_ms_lo, l.intra_rtt_ms_hi}},
        {"cross_zone_rtt_ms", {l.cross_rtt_ms_lo, l.cross_rtt_ms_hi}},
        {"intra_zone_gbps", {l.intra_gbps_lo, l.intra_gbps_hi}},
        {"cross_zone_gbps", {l.cross_gbps_lo, l.cross_gbps_hi}},
        {"intra_zone_loss", 0.0},
        {"cross_zone_loss", {0.0, l.cross_loss_hi}},
        {"cross_zone_ping_tail", {{"probability", l.tail_probability}, {"factor", {l.tail_factor_lo, l.tail_factor_hi}}}}}},
      {"jobs",
       {{"models", models},
        {"workers", workers},
        {"with_parameter_servers", s.mix.server_share},
        {"zone_hard", s.mix.hard_share},
        {"with_storage_node", s.mix.storage_share}}},
      {"degradation",
       {{"nic_nodes", d.nodes},
        {"nic_loss", {d.loss_lo, d.loss_hi}},
        {"nic_bandwidth_factor", d.bandwidth_factor},
        {"at_share_of_arrival_window", d.at_fraction},
        {"nic_repaired_after_seconds", d.nic_seconds},
        {"congested_zone_pair", d.congest_zone_pair},
        {"congestion_rtt_factor", d.congestion_rtt_factor},
        {"congestion_bandwidth_factor", d.congestion_bandwidth_factor},
        {"congestion_seconds", d.congestion_seconds},
        {"first_seed_degrade_at_seconds", first.degrade_at_seconds},
        {"first_seed_nic_repair_seconds", first.nic_repair_seconds},
        {"first_seed_congestion_end_seconds", first.congestion_end_seconds},
        {"first_seed_congested_zones", first.congested_zones}}},
      {"network_aware",
       {{"probe_interval_seconds", p.interval_seconds},
        {"probe_pings", p.pings},
        {"probe_throughput_bytes", p.throughput_bytes},
        {"half_life_seconds", p.half_life_seconds},
        {"replace_check_seconds", p.replace_check_seconds},
        {"migration_seconds", p.migration_seconds},
        {"max_slowdown", p.max_slowdown},
        {"degraded_thresholds",
         {{"max_loss", p.thresholds.max_loss},
          {"max_rtt_ms", p.thresholds.max_rtt_ms},
          {"min_throughput_gbps", p.thresholds.min_throughput_gbps}}}}},
      {"step_model",
       "max(compute, input read from the storage node) + RingAllreduceSeconds(workers, gradient bytes, worst true "
       "link among the workers); parameter-server jobs: 2 x workers x gradient bytes / servers over the worst link "
       "among all pods; no compute/communication overlap"},
  };
}

// ------------------------------------------------------------ latency

double MedianMs(const std::vector<double>& seconds) { return 1e3 * Median(seconds); }

template <typename F>
Result<double> TimeMedianMs(int64_t reps, F&& once) {
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(reps));
  for (int64_t i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TENAX_RETURN_IF_ERROR(once());
    samples.push_back(Seconds(std::chrono::steady_clock::now() - t0).count());
  }
  return MedianMs(samples);
}

Result<nlohmann::json> MeasureLatency(const SchedArgs& a, const LinkRanges& ranges, int64_t reps) {
  const int per_zone = static_cast<int>(a.latency_nodes / a.latency_zones);
  if (per_zone < 3) {
    return InvalidArgument("--latency-nodes " + std::to_string(a.latency_nodes) + " over --latency-zones " +
                           std::to_string(a.latency_zones) + " leaves fewer than 3 nodes per zone; use fewer zones");
  }
  std::vector<sched::NodeState> nodes = MakeNodes(static_cast<int>(a.latency_zones), per_zone, 4);
  Rng rng(a.seed, "latency");
  for (sched::NodeState& n : nodes) n.used = rng.Index(5);  // 0..4 of 4 slots used: half the cluster busy
  const HashedLinks links(per_zone, ranges, a.seed);

  sched::GangRequest first;
  first.job = "first-pod";
  first.workers = 1;
  sched::GangRequest gang = first;
  gang.job = "gang";
  gang.workers = 8;
  gang.gradient_bytes = 4.0 * 25557032;

  // Seven peers placed: the gang's placement with its last slot moving.
  TENAX_ASSIGN_OR_RETURN(sched::Placement p8, sched::PlaceGang(nodes, links, gang));
  std::vector<sched::NodeState> with_peers = nodes;
  std::vector<int> peers;
  for (size_t i = 0; i + 1 < p8.slots.size(); ++i) {
    ++with_peers[static_cast<size_t>(p8.slots[i].node)].used;
    peers.push_back(p8.slots[i].node);
  }
  std::vector<int> candidates;
  for (size_t i = 0; i < with_peers.size(); ++i) {
    if (with_peers[i].free() > 0) candidates.push_back(static_cast<int>(i));
  }
  const int last = static_cast<int>(p8.slots.size()) - 1;

  std::fprintf(stderr, "sched: latency on %zu nodes in %lld zones, %lld repetitions each\n", nodes.size(),
               static_cast<long long>(a.latency_zones), static_cast<long long>(reps));
  TENAX_ASSIGN_OR_RETURN(double first_ms, TimeMedianMs(reps, [&]() -> Status {
                           return sched::PlaceGang(nodes, links, first).status();
                         }));
  TENAX_ASSIGN_OR_RETURN(double replace_ms, TimeMedianMs(reps, [&]() -> Status {
                           return sched::Replace(with_peers, links, gang, p8, {last}).status();
                         }));
  TENAX_ASSIGN_OR_RETURN(double score_ms, TimeMedianMs(reps, [&]() -> Status {
                           const std::vector<sched::ScoredNode> s =
                               sched::ScoreNodes(with_peers, candidates, peers, links, sched::ScoreWeights{});
                           const auto best = std::max_element(s.begin(), s.end(), [](const auto& x, const auto& y) {
                             return x.score < y.score;
                           });
                           return best == s.end() ? Internal("no candidate scored") : Status::Ok();
                         }));
  TENAX_ASSIGN_OR_RETURN(double gang_ms, TimeMedianMs(std::max<int64_t>(1, reps / 5), [&]() -> Status {
                           return sched::PlaceGang(nodes, links, gang).status();
                         }));
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  const double headline = std::max({first_ms, replace_ms, score_ms});
  std::fprintf(stderr,
               "sched: one pod on %zu nodes: first pod %.3f ms, 7 peers placed: replace %.3f ms, score all %zu "
               "candidates %.3f ms (8-worker gang %.3f ms); load average %.2f\n",
               nodes.size(), first_ms, replace_ms, candidates.size(), score_ms, gang_ms, load[0]);
  return nlohmann::json{{"schedule_latency_ms_5000_nodes", headline},
                        {"schedule_latency",
                         {{"nodes", nodes.size()},
                          {"zones", a.latency_zones},
                          {"repetitions", reps},
                          {"first_pod_place_gang_ms", first_ms},
                          {"pod_with_7_peers_replace_ms", replace_ms},
                          {"pod_with_7_peers_score_all_nodes_ms", score_ms},
                          {"candidates_scored", candidates.size()},
                          {"gang_of_8_workers_place_gang_ms", gang_ms},
                          {"load_average_1m", load[0]},
                          {"statistic", "median of the repetitions; the headline is the largest of the three per-pod "
                                        "medians (the 8-worker gang is informative)"}}}};
}

// ------------------------------------------------------------ the run

void PrintTable(const std::vector<PolicyTotals>& totals) {
  std::fprintf(stderr, "\n%-24s %11s %11s %9s %9s %9s %11s %10s %10s\n", "policy", "mean JCT s", "p95 JCT s",
               "wait s", "run s", "slowdown", "cross-zone", "migrations", "makespan s");
  for (const PolicyTotals& t : totals) {
    std::fprintf(stderr, "%-24s %11.1f %11.1f %9.1f %9.1f %9.2f %11d %10d %10.0f\n", t.policy.c_str(),
                 MeanOf(t.per_seed, &Summary::mean_jct), MeanOf(t.per_seed, &Summary::p95_jct),
                 MeanOf(t.per_seed, &Summary::mean_wait), MeanOf(t.per_seed, &Summary::mean_run),
                 MeanOf(t.per_seed, &Summary::mean_slowdown), SumOf(t.per_seed, &Summary::cross_zone_jobs),
                 SumOf(t.per_seed, &Summary::migrations), MeanOf(t.per_seed, &Summary::makespan));
  }
  std::fprintf(stderr, "\n");
}

Status RunSched(const SchedArgs& a) {
  Scenario scenario;
  scenario.jobs = static_cast<int>(a.jobs);
  scenario.load = a.load;
  scenario.degradation.nodes = static_cast<int>(a.degraded_nodes);
  if (a.nic_loss_hi < a.nic_loss_lo) {
    return InvalidArgument("--nic-loss-hi " + std::to_string(a.nic_loss_hi) + " is below --nic-loss-lo " +
                           std::to_string(a.nic_loss_lo) + ": give the range low to high");
  }
  scenario.degradation.loss_lo = a.nic_loss_lo;
  scenario.degradation.loss_hi = a.nic_loss_hi;
  scenario.degradation.congest_zone_pair = !a.no_congestion;
  scenario.degradation.nic_seconds = a.nic_seconds;
  scenario.probing.migration_seconds = a.migration_seconds;
  scenario.probing.half_life_seconds = a.half_life_seconds;
  scenario.probing.max_slowdown = a.max_slowdown;
  scenario.probing.interval_seconds = a.probe_interval_seconds;
  TENAX_RETURN_IF_ERROR(ValidateScenario(scenario));
  const int64_t seed_count = a.seeds > 0 ? a.seeds : (a.quick ? 3 : 10);
  std::vector<uint64_t> seeds;
  for (int64_t i = 0; i < seed_count; ++i) seeds.push_back(a.seed + static_cast<uint64_t>(i));

  // ---- simulated part
  std::vector<PolicyTotals> totals;
  for (Policy p : AllPolicies()) totals.push_back(PolicyTotals{PolicyName(p), {}});
  RunResult first_run;
  for (uint64_t seed : seeds) {
    scenario.seed = seed;
    const std::vector<Policy> policies = AllPolicies();
    for (size_t i = 0; i < policies.size(); ++i) {
      if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
      const auto t0 = std::chrono::steady_clock::now();
      TENAX_ASSIGN_OR_RETURN(RunResult run, Simulate(scenario, policies[i]));
      const Summary s = Summarize(run);
      totals[i].per_seed.push_back(s);
      std::fprintf(stderr,
                   "sched: seed %llu %-24s mean JCT %8.1f s  p95 %8.1f s  wait %7.1f s  cross-zone %3d  "
                   "migrations %3d  (%.1f s)\n",
                   static_cast<unsigned long long>(seed), run.policy.c_str(), s.mean_jct, s.p95_jct, s.mean_wait,
                   s.cross_zone_jobs, s.migrations, Seconds(std::chrono::steady_clock::now() - t0).count());
      if (seed == seeds.front() && i == 0) first_run = run;
    }
  }
  PrintTable(totals);

  nlohmann::json results = nlohmann::json::array();
  for (const PolicyTotals& t : totals) {
    nlohmann::json seeds_json = nlohmann::json::array();
    for (size_t k = 0; k < t.per_seed.size(); ++k) {
      const Summary& s = t.per_seed[k];
      seeds_json.push_back({{"seed", seeds[k]},
                            {"mean_jct_seconds", s.mean_jct},
                            {"p95_jct_seconds", s.p95_jct},
                            {"mean_wait_seconds", s.mean_wait},
                            {"migrations", s.migrations}});
    }
    results.push_back({{"policy", t.policy},
                       {"mean_jct_seconds", MeanOf(t.per_seed, &Summary::mean_jct)},
                       {"p95_jct_seconds", MeanOf(t.per_seed, &Summary::p95_jct)},
                       {"jobs", SumOf(t.per_seed, &Summary::jobs)},
                       {"mean_wait_seconds", MeanOf(t.per_seed, &Summary::mean_wait)},
                       {"mean_run_seconds", MeanOf(t.per_seed, &Summary::mean_run)},
                       {"mean_slowdown", MeanOf(t.per_seed, &Summary::mean_slowdown)},
                       {"cross_zone_jobs", SumOf(t.per_seed, &Summary::cross_zone_jobs)},
                       {"migrations", SumOf(t.per_seed, &Summary::migrations)},
                       {"makespan_seconds", MeanOf(t.per_seed, &Summary::makespan)},
                       {"per_seed", seeds_json}});
  }
  auto mean_jct = [&](const std::string& policy) {
    for (const PolicyTotals& t : totals) {
      if (t.policy == policy) return MeanOf(t.per_seed, &Summary::mean_jct);
    }
    return 0.0;
  };
  // Per seed as well: the mean hides how much one scenario's queue differs
  // from another's.
  auto per_seed_ratio = [&](const std::string& peer) {
    const PolicyTotals *mine = nullptr, *theirs = nullptr;
    for (const PolicyTotals& t : totals) {
      if (t.policy == "network_aware") mine = &t;
      if (t.policy == peer) theirs = &t;
    }
    std::vector<double> out;
    for (size_t k = 0; k < seeds.size(); ++k) out.push_back(mine->per_seed[k].mean_jct / theirs->per_seed[k].mean_jct);
    return out;
  };
  const double na = mean_jct("network_aware");
  const double vs_default = na / mean_jct("default");
  const double vs_no = na / mean_jct("networkoverhead");
  nlohmann::json report = {{"benchmark", "sched"},
                           {"quick", a.quick},
                           {"scenario", ScenarioJson(scenario, seeds, first_run)},
                           {"results", results},
                           {"ratios",
                            {{"network_aware_vs_default", vs_default},
                             {"network_aware_vs_networkoverhead", vs_no},
                             {"network_aware_vs_default_least_allocated", na / mean_jct("default_least_allocated")},
                             {"network_aware_vs_random", na / mean_jct("random")},
                             {"network_aware_vs_default_per_seed", per_seed_ratio("default")},
                             {"network_aware_vs_networkoverhead_per_seed", per_seed_ratio("networkoverhead")}}}};
  report["targets"] = {{"network_aware_mean_jct_at_most_0_67x_default", vs_default <= 0.67},
                       {"network_aware_mean_jct_at_most_0_9x_networkoverhead", vs_no <= 0.9}};

  // ---- latency of one pod on 5,000 nodes
  const int64_t reps = a.latency_repetitions > 0 ? a.latency_repetitions : (a.quick ? 50 : 300);
  TENAX_ASSIGN_OR_RETURN(nlohmann::json latency, MeasureLatency(a, scenario.links, reps));
  for (auto& [key, value] : latency.items()) report[key] = value;
  report["targets"]["schedule_latency_at_most_10_ms"] = latency["schedule_latency_ms_5000_nodes"].get<double>() <= 10.0;

  // ---- real part: a 4-worker job on emulated zones, network-aware vs spread
  if (!a.no_real) {
    RealPlacementArgs real = a.real;
    real.quick = a.quick;
    TENAX_ASSIGN_OR_RETURN(nlohmann::json r, RunRealPlacement(real));
    report["real"] = r;
    report["real_step_seconds"] = {{"network_aware", r["real_step_seconds_network_aware"]},
                                   {"spread", r["real_step_seconds_spread"]}};
    report["ratios"]["real_network_aware_vs_spread"] = r["ratio"];
    report["targets"]["real_step_at_most_0_67x_spread"] = r["ratio"].get<double>() <= 0.67;
  }

  std::printf("%s\n", report.dump(2).c_str());
  return WriteJsonReport(a.json_path, report);
}

}  // namespace

void AddSchedBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<SchedArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "sched",
      "Network-aware placement (tenax's placer on probe-fed links) against Kubernetes' default scheduler, the "
      "scheduler-plugins NetworkOverhead rule and random placement: simulated job completion times on 3 zones x 8 "
      "nodes while links degrade, and the latency of placing one pod on 5,000 nodes",
      "3 seeds instead of 10 and 50 latency repetitions instead of 300 (about 10 s)", a->quick, a->json_path,
      [a] { return RunSched(*a); }, exit_code);
  cmd->add_option("--seed", a->seed, "First seed (links, jobs, degradation, ties)")->capture_default_str();
  cmd->add_option("--seeds", a->seeds, "Seeds to average over (default 3 quick, 10 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--jobs", a->jobs, "Jobs per seed")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->capture_default_str();
  cmd->add_option("--load", a->load, "Offered load: arriving compute slot-seconds over the cluster's slots")
      ->check(CLI::Range(0.01, 2.0))
      ->capture_default_str();
  cmd->add_option("--degraded-nodes", a->degraded_nodes, "Nodes whose NICs turn lossy and slow during the run")
      ->check(CLI::Range(int64_t{0}, int64_t{24}))
      ->capture_default_str();
  cmd->add_option("--nic-loss-lo", a->nic_loss_lo, "Lowest loss of a degraded NIC (0..1)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--nic-loss-hi", a->nic_loss_hi, "Highest loss of a degraded NIC (0..1)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--nic-repair-seconds", a->nic_seconds, "Seconds until the degraded NICs are repaired")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  cmd->add_flag("--no-congestion", a->no_congestion, "Keep every zone pair's links as they were (NICs still degrade)");
  cmd->add_option("--migration-seconds", a->migration_seconds, "What moving a running job costs it (checkpoint/restore)")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  cmd->add_option("--half-life", a->half_life_seconds, "Half-life of the link matrix's measurements, seconds")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--max-slowdown", a->max_slowdown,
                  "network_aware: a job waits rather than start with an estimated step over this many times its "
                  "step on healthy links (0: never waits while it fits)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--probe-interval", a->probe_interval_seconds, "Seconds between probe rounds")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  cmd->add_option("--latency-nodes", a->latency_nodes, "Nodes of the latency cluster")
      ->check(CLI::Range(int64_t{10}, int64_t{100000}))
      ->capture_default_str();
  cmd->add_option("--latency-zones", a->latency_zones, "Zones of the latency cluster")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  cmd->add_option("--latency-repetitions", a->latency_repetitions,
                  "Timed repetitions per latency case (default 50 quick, 300 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_flag("--no-real", a->no_real, "Skip the real part (two `tenax run`s of 4 workers on emulated zones)");
  a->real.data_dir = kDefaultFashionMnistDir;
  cmd->add_option("--data", a->real.data_dir, "Fashion-MNIST directory (real part)")->capture_default_str();
  cmd->add_option("--real-steps", a->real.steps, "Steps of each real run (default 150 quick, 400 full)")
      ->check(CLI::Range(int64_t{20}, int64_t{100000}));
  cmd->add_option("--real-cross-gbps", a->real.cross_zone_gbps, "Real part: cross-zone bandwidth, Gbit/s")
      ->check(CLI::Range(0.001, 100.0))
      ->capture_default_str();
  cmd->add_option("--real-cross-delay-ms", a->real.cross_zone_delay_ms, "Real part: cross-zone one-way delay, ms")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--real-same-gbps", a->real.same_zone_gbps, "Real part: same-zone bandwidth, Gbit/s")
      ->check(CLI::Range(0.001, 100.0))
      ->capture_default_str();
  cmd->add_option("--timeout", a->real.timeout_seconds, "Seconds each real run may take")
      ->check(CLI::Range(int64_t{30}, int64_t{86400}))
      ->capture_default_str();
}

}  // namespace tenax::bench
