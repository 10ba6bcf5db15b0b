// The simulation behind `tenax bench sched` (docs/placement.md, "tenax bench
// sched"): a cluster of zones and nodes with GPU-like slots, links drawn
// from published cloud ranges, a Poisson stream of data-parallel jobs, and a
// link degradation during the run; each policy places the same jobs on the
// same cluster and the simulator measures their completion times.
//
// What is real and what is modelled:
//  - network_aware is tenax's own placer (sched::PlaceGang, Replace,
//    DegradedSlots) reading a sched::LinkMatrix that simulated probes feed
//    the way `tenax probe` measures (pings' median round trip, lost or late
//    pings as loss, a timed 1 MiB write as throughput) at its default
//    interval; the matrix's half-life is the coordinator's default.
//  - The peers are the per-pod rules of sched_peers.h.
//  - A job's step is max(compute, input read) + communication, where the
//    communication is sched::RingAllreduceSeconds over the worst TRUE link
//    among the job's workers (a parameter-server job: each server's shard
//    in and out, over the worst link among all its pods), re-evaluated
//    whenever the links change. Compute and communication do not overlap
//    (a pessimistic choice that every policy shares).
//  - JCT = waiting in the queue + running (including network_aware's
//    migration pauses). The queue is FIFO without head-of-line blocking:
//    every pass offers each waiting job, oldest first, what is free.
//
// Deterministic for a Scenario (its seed). Single-threaded; Simulate may run
// on several threads at once for different scenarios.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sched_peers.h"
#include "sched_rng.h"
#include "tenax/sched/probe/link_metrics.h"
#include "tenax/sched/place/placer.h"

namespace tenax::bench::schedsim {

// Link ranges (sources and reasoning in docs/placement.md):
//  - round trips: intra-zone 0.05-0.3 ms, cross-zone 0.5-1.5 ms per zone
//    pair (../shared/PAPERS.md section 5; AWS and GCP publish cross-zone
//    round trips as "single-digit ms", measurements put them at ~0.5-1.5),
//    +-10% per node pair;
//  - throughput of one flow: intra-zone 8-10 Gbit/s (AWS: 10 Gbit/s single
//    flow inside a cluster placement group), cross-zone 3-5 Gbit/s (5 Gbit/s
//    single-flow limit outside one, less when shared);
//  - loss: 0 inside a zone; cross-zone up to 1e-5 (our assumption: clouds
//    publish no loss figures; 1e-5 already caps a 1 ms flow near 4.5 Gbit/s
//    by the Mathis bound);
//  - tails: a cross-zone ping takes 5-15x its round trip with probability
//    0.002 (the "tails past 10 ms"; probes see them, the mean link does not).
struct LinkRanges {
  double intra_rtt_ms_lo = 0.05, intra_rtt_ms_hi = 0.3;
  double cross_rtt_ms_lo = 0.5, cross_rtt_ms_hi = 1.5;
  double intra_gbps_lo = 8.0, intra_gbps_hi = 10.0;
  double cross_gbps_lo = 3.0, cross_gbps_hi = 5.0;
  double cross_loss_hi = 1e-5;
  double tail_probability = 0.002, tail_factor_lo = 5.0, tail_factor_hi = 15.0;
};

// A kind of job: its model (gradient bytes = 4 per parameter), compute per
// step, steps and input.
struct ModelClass {
  std::string name;
  double parameters = 0;
  double share = 0;                      // of the jobs
  double compute_lo = 0, compute_hi = 0;  // seconds per step per worker
  int64_t steps_lo = 0, steps_hi = 0;
  double input_bytes = 0;  // one worker's batch per step, read from the job's storage node (if any)
};

struct WorkerShare {
  int workers = 0;
  double share = 0;
};

struct JobMix {
  std::vector<ModelClass> models;
  std::vector<WorkerShare> workers;
  double server_share = 0.2;   // jobs with 1 or 2 parameter servers (asynchronous), equal odds
  double hard_share = 0.3;     // zone = hard (all in one zone, or wait); the rest soft
  double storage_share = 0.3;  // jobs whose data lives on one node of the cluster (affinity)
};
// The documented mix: tenax's cnn and ResNet-50, half each; 2/4/8 workers.
JobMix DefaultJobMix();

// The links that go bad during the run (docs/placement.md), at
// `at_fraction` of the (expected) arrival window, so that jobs keep arriving
// while it lasts: `nodes` NICs (a seeded choice) get loss in [loss_lo,
// loss_hi] and their bandwidth times `bandwidth_factor` on every link until
// they are repaired `nic_seconds` later (a gray failure nobody pages for is
// found and fixed within hours); and one zone pair's links get
// `congestion_rtt_factor` times the delay and `congestion_bandwidth_factor`
// times the bandwidth for `congestion_seconds`.
struct Degradation {
  int nodes = 3;
  double loss_lo = 0.01, loss_hi = 0.03;
  double bandwidth_factor = 0.1;
  double at_fraction = 0.25;
  double nic_seconds = 7200;
  bool congest_zone_pair = true;
  double congestion_rtt_factor = 3.0, congestion_bandwidth_factor = 0.5;
  double congestion_seconds = 1800;
};

// network_aware's view of the network: `tenax probe`'s defaults (interval
// 2 s, 10 pings, 1 MiB throughput write), the coordinator's half-life
// (60 s), a re-placement check of the running jobs every 10 s with
// DegradedSlots' default thresholds (over all of a job's pods, servers
// too), what a move costs, and the placer's wait rule. Each job's request
// carries its gradient bytes, input bytes and compute per step (what the
// job's own configuration and first steps tell the launcher).
struct Probing {
  double interval_seconds = 2.0;
  int pings = 10;
  double throughput_bytes = 1 << 20;
  double rtt_noise_sigma = 0.1;  // log-normal spread of one ping
  double half_life_seconds = 60.0;
  double warmup_seconds = 300.0;  // probing before the first job arrives
  double replace_check_seconds = 10.0;
  double migration_seconds = 30.0;  // checkpoint, move, restore: the job makes no progress
  // A move must make the believed step at least this much faster (and save
  // more than the pause over the remaining steps).
  double min_gain = 0.2;
  sched::DegradationThresholds thresholds;
  // PlacerOptions::max_slowdown: a gang waits rather than start on links
  // that make its estimated step more than this many times its step on
  // healthy links (0: it starts whenever it fits).
  double max_slowdown = 3.0;
};

struct Scenario {
  int zones = 3, nodes_per_zone = 8, slots_per_node = 4;
  int jobs = 150;
  // Offered load: arriving compute slot-seconds (steps x compute x slots,
  // no communication) over the cluster's slots; sets the arrival rate.
  double load = 0.5;
  uint64_t seed = 1;
  LinkRanges links;
  JobMix mix = DefaultJobMix();
  Degradation degradation;
  Probing probing;
};

// InvalidArgument naming the field when a scenario cannot be simulated.
Status ValidateScenario(const Scenario& s);

struct Job {
  int id = 0;
  double arrival = 0;
  int model = 0;  // index into the mix's models
  int workers = 1, servers = 0;
  bool hard = false;
  int storage_node = -1;  // index into the nodes, -1 = none
  double gradient_bytes = 0, compute_seconds = 0, input_bytes = 0;
  int64_t steps = 0;
  int pods() const { return workers + servers; }
};

// Nodes "zone-a-n0".. with zones "zone-a".. (ids dense from 0).
std::vector<sched::NodeState> MakeNodes(int zones, int nodes_per_zone, int slots_per_node);
// Jobs per second that offer the scenario's load.
double ArrivalRate(const Scenario& s);
std::vector<Job> MakeJobs(const Scenario& s, const std::vector<sched::NodeState>& nodes);

// A full matrix of links by NodeState::id: the simulator's truth.
class DenseLinks final : public sched::LinkView {
 public:
  explicit DenseLinks(int nodes = 0) : n_(nodes), links_(static_cast<size_t>(nodes) * nodes) {}
  void Set(int a, int b, const sched::LinkMetrics& m) {
    links_[Index(a, b)] = m;
    links_[Index(b, a)] = m;
  }
  const sched::LinkMetrics& Get(int a, int b) const { return links_[Index(a, b)]; }
  std::optional<sched::LinkMetrics> Link(const sched::NodeState& a, const sched::NodeState& b) const override {
    if (a.id < 0 || b.id < 0 || a.id >= n_ || b.id >= n_) return std::nullopt;
    return Get(a.id, b.id);
  }
  int size() const { return n_; }

 private:
  size_t Index(int a, int b) const { return static_cast<size_t>(a) * static_cast<size_t>(n_) + static_cast<size_t>(b); }
  int n_;
  std::vector<sched::LinkMetrics> links_;
};

DenseLinks MakeBaseLinks(const std::vector<sched::NodeState>& nodes, const LinkRanges& ranges, Rng& rng);

// Links answered from a hash of the two NodeState ids, for clusters too big
// for a matrix (the 5,000-node latency measurement): `nodes_per_zone`
// consecutive ids per zone, the same ranges as MakeBaseLinks.
class HashedLinks final : public sched::LinkView {
 public:
  HashedLinks(int nodes_per_zone, const LinkRanges& ranges, uint64_t seed)
      : per_zone_(nodes_per_zone), ranges_(ranges), seed_(seed) {}
  std::optional<sched::LinkMetrics> Link(const sched::NodeState& a, const sched::NodeState& b) const override;

 private:
  int per_zone_;
  LinkRanges ranges_;
  uint64_t seed_;
};

// One step of `job` with its pods on `pod_nodes` (workers first, then
// servers; indices into nodes), the links as `links` says.
double StepSeconds(const Job& job, const std::vector<int>& pod_nodes, const std::vector<sched::NodeState>& nodes,
                   const sched::LinkView& links, const sched::UnmeasuredLinks& unmeasured = {});

enum class Policy { kNetworkAware, kNetworkOverhead, kDefault, kDefaultLeastAllocated, kRandom };
const char* PolicyName(Policy p);
std::vector<Policy> AllPolicies();

struct JobOutcome {
  int id = 0;
  std::string model;
  int pods = 0;
  double arrival = 0, start = -1, finish = -1;
  double compute_only_seconds = 0;  // steps x max(compute, 0): the run without any network
  bool cross_zone = false;          // its first placement spans zones
  int migrations = 0;
};

struct RunResult {
  std::string policy;
  std::vector<JobOutcome> jobs;
  int migrations = 0;
  int replacements_refused = 0;  // degraded, but no better place (or not worth the move)
  double first_arrival = 0, last_finish = 0;
  int probe_rounds = 0;
  std::vector<int> degraded_nodes;  // the nodes whose NICs went bad
  double degrade_at_seconds = 0, nic_repair_seconds = 0, congestion_end_seconds = 0;
  std::string congested_zones;
};

// Fails only on an invalid scenario or an unexpected error of the placer.
Result<RunResult> Simulate(const Scenario& s, Policy policy);

struct Summary {
  int jobs = 0;
  double mean_jct = 0, p95_jct = 0;  // p95: nearest rank
  double mean_wait = 0, mean_run = 0;
  double mean_slowdown = 0;  // run / compute-only run
  int cross_zone_jobs = 0;
  int migrations = 0;
  double makespan = 0;  // first arrival to last finish
};
Summary Summarize(const RunResult& r);

}  // namespace tenax::bench::schedsim
