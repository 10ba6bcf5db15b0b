#include "sched_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>

#include "median.h"
#include "tenax/sched/probe/link_matrix.h"
#include "tenax/sched/place/scorer.h"

namespace tenax::bench::schedsim {
namespace {

std::string ZoneName(int z) {
  return z < 26 ? std::string("zone-") + static_cast<char>('a' + z) : "zone-" + std::to_string(z);
}

sched::LinkMetrics Perfect() { return sched::LinkMetrics{0.0, 0.0, std::numeric_limits<double>::infinity(), true}; }

void Worsen(sched::LinkMetrics& worst, const sched::LinkMetrics& l) {
  worst.throughput_gbps = std::min(worst.throughput_gbps, l.throughput_gbps);
  worst.rtt_ms = std::max(worst.rtt_ms, l.rtt_ms);
  worst.loss = std::max(worst.loss, l.loss);
  worst.reachable = worst.reachable && l.reachable;
}

// One TCP flow's rate under loss (Mathis et al. 1997, as
// sched::RingAllreduceSeconds caps it), for what a throughput probe sees.
double FlowGbps(const sched::LinkMetrics& l) {
  double gbps = l.throughput_gbps;
  if (l.loss > 0) {
    const double rtt_s = std::max(l.rtt_ms, 1e-3) / 1000.0;
    gbps = std::min(gbps, 1460.0 * 8.0 / (rtt_s * std::sqrt(2.0 * std::min(l.loss, 1.0) / 3.0)) / 1e9);
  }
  return gbps;
}

// One probe of a link as `tenax probe` measures it (sched/probe/probe_agent.h):
// `pings` reads whose median answered round trip is the delay; a read lost
// (probability = the link's loss) or answered later than 2 x the median +
// 1 ms counts as lost; a timed write of `throughput_bytes` is the
// throughput. Returns false when no ping was answered (unreachable).
bool ProbeSample(const sched::LinkMetrics& truth, bool cross_zone, const Probing& p, const LinkRanges& r, Rng& rng,
                 sched::LinkSample& out) {
  std::vector<double> answered;
  int lost = 0;
  for (int i = 0; i < p.pings; ++i) {
    if (rng.Bernoulli(truth.loss)) {
      ++lost;
      continue;
    }
    double rtt = truth.rtt_ms * std::exp(p.rtt_noise_sigma * rng.Normal());
    if (cross_zone && rng.Bernoulli(r.tail_probability)) rtt *= rng.Uniform(r.tail_factor_lo, r.tail_factor_hi);
    answered.push_back(rtt);
  }
  if (answered.empty()) return false;
  const double median = Median(answered);
  for (double a : answered) lost += a > 2.0 * median + 1.0 ? 1 : 0;
  const double bits = p.throughput_bytes * 8.0;
  const double seconds = bits / (FlowGbps(truth) * 1e9) + truth.rtt_ms / 1000.0;
  out.rtt_ms = median;
  out.loss = static_cast<double>(lost) / p.pings;
  out.throughput_gbps = bits / seconds / 1e9 * rng.Uniform(0.9, 1.1);
  return true;
}

double ExpectedSlots(const JobMix& m) {
  double share = 0, slots = 0;
  for (const WorkerShare& w : m.workers) {
    share += w.share;
    slots += w.share * w.workers;
  }
  return slots / share + m.server_share * 1.5;
}

double ExpectedComputeSeconds(const JobMix& m) {
  double share = 0, seconds = 0;
  for (const ModelClass& c : m.models) {
    share += c.share;
    seconds += c.share * 0.5 * static_cast<double>(c.steps_lo + c.steps_hi) * 0.5 * (c.compute_lo + c.compute_hi);
  }
  return seconds / share;
}

// Index drawn by the shares (their sum need not be 1).
template <typename T, typename Share>
int DrawByShare(const std::vector<T>& items, Share share, Rng& rng) {
  double total = 0;
  for (const T& t : items) total += share(t);
  double u = rng.Uniform() * total;
  for (size_t i = 0; i < items.size(); ++i) {
    u -= share(items[i]);
    if (u < 0) return static_cast<int>(i);
  }
  return static_cast<int>(items.size()) - 1;
}

}  // namespace

JobMix DefaultJobMix() {
  JobMix m;
  // tenax's cnn on 1x28x28 Fashion-MNIST (src/train/model.cc): conv 1->16
  // 5x5 (416) + conv 16->32 5x5 (12,832) + fc 800->128 (102,528) + fc
  // 128->10 (1,290) = 117,066 parameters, 468,264 gradient bytes. A small
  // model: 10-30 ms a step, a few thousand steps, 64 x 784-byte samples.
  m.models.push_back({"cnn", 117066, 0.5, 0.01, 0.03, 2000, 8000, 64.0 * 784});
  // ResNet-50 (bench/resnet50_shapes.txt): 25,557,032 parameters, 102 MB of
  // gradients; 0.15-0.35 s a step for a batch of 64 on a V100- to T4-class
  // GPU; 64 ImageNet JPEGs of ~110 KB a step.
  m.models.push_back({"resnet50", 25557032, 0.5, 0.15, 0.35, 1000, 4000, 64.0 * 110e3});
  m.workers = {{2, 0.4}, {4, 0.35}, {8, 0.25}};
  return m;
}

Status ValidateScenario(const Scenario& s) {
  if (s.zones < 1 || s.nodes_per_zone < 1 || s.slots_per_node < 1) {
    return InvalidArgument("sched simulation: zones, nodes per zone and slots per node must be >= 1");
  }
  if (s.jobs < 1) return InvalidArgument("sched simulation: at least one job");
  if (!(s.load > 0) || !std::isfinite(s.load)) return InvalidArgument("sched simulation: load must be > 0");
  if (s.mix.models.empty() || s.mix.workers.empty()) {
    return InvalidArgument("sched simulation: the job mix needs models and worker counts");
  }
  int max_workers = 0;
  for (const WorkerShare& w : s.mix.workers) {
    if (w.workers < 1 || !(w.share >= 0)) return InvalidArgument("sched simulation: worker counts >= 1, shares >= 0");
    max_workers = std::max(max_workers, w.workers);
  }
  const int zone_slots = s.nodes_per_zone * s.slots_per_node;
  if (max_workers + 2 > zone_slots) {
    return InvalidArgument("sched simulation: a job of " + std::to_string(max_workers) +
                           " workers and 2 servers must fit one zone (" + std::to_string(zone_slots) +
                           " slots), or a hard job would wait forever");
  }
  for (const ModelClass& m : s.mix.models) {
    if (!(m.parameters > 0) || !(m.compute_lo > 0) || m.compute_hi < m.compute_lo || m.steps_lo < 1 ||
        m.steps_hi < m.steps_lo || !(m.share >= 0)) {
      return InvalidArgument("sched simulation: model '" + m.name + "' has an empty or negative range");
    }
  }
  if (s.degradation.nodes < 0 || s.degradation.nodes > s.zones * s.nodes_per_zone) {
    return InvalidArgument("sched simulation: degraded nodes must be between 0 and the " +
                           std::to_string(s.zones * s.nodes_per_zone) + " nodes");
  }
  if (s.degradation.congest_zone_pair && s.zones < 2) {
    return InvalidArgument("sched simulation: a congested zone pair needs at least 2 zones");
  }
  const Probing& p = s.probing;
  if (s.degradation.nic_seconds < 0 || s.degradation.congestion_seconds < 0 || s.degradation.at_fraction < 0) {
    return InvalidArgument("sched simulation: degradation start and durations must be >= 0");
  }
  if (!(p.interval_seconds > 0) || p.pings < 1 || !(p.half_life_seconds > 0) || !(p.replace_check_seconds > 0) ||
      p.migration_seconds < 0 || !(p.throughput_bytes > 0)) {
    return InvalidArgument("sched simulation: probe interval, pings, half-life, check interval and bytes must be > 0");
  }
  if (!(p.max_slowdown == 0 || p.max_slowdown >= 1)) {
    return InvalidArgument("sched simulation: max slowdown must be 0 (never wait) or >= 1");
  }
  return Status::Ok();
}

std::vector<sched::NodeState> MakeNodes(int zones, int nodes_per_zone, int slots_per_node) {
  std::vector<sched::NodeState> nodes;
  nodes.reserve(static_cast<size_t>(zones) * static_cast<size_t>(nodes_per_zone));
  for (int z = 0; z < zones; ++z) {
    for (int i = 0; i < nodes_per_zone; ++i) {
      sched::NodeState n;
      n.zone = ZoneName(z);
      n.name = n.zone + "-n" + std::to_string(i);
      n.capacity = slots_per_node;
      n.id = static_cast<int>(nodes.size());
      nodes.push_back(std::move(n));
    }
  }
  return nodes;
}

double ArrivalRate(const Scenario& s) {
  const double slots = static_cast<double>(s.zones) * s.nodes_per_zone * s.slots_per_node;
  return s.load * slots / (ExpectedSlots(s.mix) * ExpectedComputeSeconds(s.mix));
}

std::vector<Job> MakeJobs(const Scenario& s, const std::vector<sched::NodeState>& nodes) {
  Rng rng(s.seed, "jobs");
  const double mean_gap = 1.0 / ArrivalRate(s);
  std::vector<Job> jobs;
  double t = 0;
  for (int i = 0; i < s.jobs; ++i) {
    Job j;
    j.id = i;
    t += rng.Exponential(mean_gap);
    j.arrival = t;
    j.model = DrawByShare(s.mix.models, [](const ModelClass& m) { return m.share; }, rng);
    j.workers = s.mix.workers[static_cast<size_t>(
                                  DrawByShare(s.mix.workers, [](const WorkerShare& w) { return w.share; }, rng))]
                    .workers;
    j.servers = rng.Bernoulli(s.mix.server_share) ? 1 + rng.Index(2) : 0;
    j.hard = rng.Bernoulli(s.mix.hard_share);
    const bool storage = rng.Bernoulli(s.mix.storage_share);
    const int storage_node = rng.Index(static_cast<int>(nodes.size()));
    j.storage_node = storage ? storage_node : -1;
    const ModelClass& m = s.mix.models[static_cast<size_t>(j.model)];
    j.gradient_bytes = 4.0 * m.parameters;
    j.compute_seconds = rng.Uniform(m.compute_lo, m.compute_hi);
    j.steps = rng.Between(m.steps_lo, m.steps_hi);
    j.input_bytes = m.input_bytes;
    jobs.push_back(j);
  }
  return jobs;
}

DenseLinks MakeBaseLinks(const std::vector<sched::NodeState>& nodes, const LinkRanges& r, Rng& rng) {
  std::map<std::string, int> zone_index;
  for (const sched::NodeState& n : nodes) zone_index.emplace(n.zone, static_cast<int>(zone_index.size()));
  const int zones = static_cast<int>(zone_index.size());
  std::vector<double> pair_rtt(static_cast<size_t>(zones * zones)), pair_gbps(static_cast<size_t>(zones * zones));
  for (int a = 0; a < zones; ++a) {
    for (int b = a + 1; b < zones; ++b) {
      pair_rtt[static_cast<size_t>(a * zones + b)] = rng.Uniform(r.cross_rtt_ms_lo, r.cross_rtt_ms_hi);
      pair_gbps[static_cast<size_t>(a * zones + b)] = rng.Uniform(r.cross_gbps_lo, r.cross_gbps_hi);
    }
  }
  DenseLinks links(static_cast<int>(nodes.size()));
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      sched::LinkMetrics m;
      if (nodes[i].zone == nodes[j].zone) {
        m.rtt_ms = rng.Uniform(r.intra_rtt_ms_lo, r.intra_rtt_ms_hi);
        m.throughput_gbps = rng.Uniform(r.intra_gbps_lo, r.intra_gbps_hi);
      } else {
        int a = zone_index[nodes[i].zone], b = zone_index[nodes[j].zone];
        if (a > b) std::swap(a, b);
        m.rtt_ms = pair_rtt[static_cast<size_t>(a * zones + b)] * rng.Uniform(0.9, 1.1);
        m.throughput_gbps = std::min(r.cross_gbps_hi, pair_gbps[static_cast<size_t>(a * zones + b)] * rng.Uniform(0.95, 1.05));
        m.loss = rng.Uniform(0.0, r.cross_loss_hi);
      }
      links.Set(nodes[i].id, nodes[j].id, m);
    }
  }
  return links;
}

std::optional<sched::LinkMetrics> HashedLinks::Link(const sched::NodeState& a, const sched::NodeState& b) const {
  if (a.id < 0 || b.id < 0) return std::nullopt;
  const uint64_t lo = static_cast<uint64_t>(std::min(a.id, b.id)), hi = static_cast<uint64_t>(std::max(a.id, b.id));
  auto unit = [](uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; };
  const uint64_t h1 = Mix(seed_ ^ Mix((lo << 32) | hi)), h2 = Mix(h1), h3 = Mix(h2);
  const uint64_t za = lo / static_cast<uint64_t>(per_zone_), zb = hi / static_cast<uint64_t>(per_zone_);
  sched::LinkMetrics m;
  if (za == zb) {
    m.rtt_ms = ranges_.intra_rtt_ms_lo + (ranges_.intra_rtt_ms_hi - ranges_.intra_rtt_ms_lo) * unit(h1);
    m.throughput_gbps = ranges_.intra_gbps_lo + (ranges_.intra_gbps_hi - ranges_.intra_gbps_lo) * unit(h2);
    return m;
  }
  const uint64_t z1 = Mix(seed_ ^ Mix(0x5a5a5a5a00000000ULL ^ ((za << 32) | zb))), z2 = Mix(z1);
  const double base_rtt = ranges_.cross_rtt_ms_lo + (ranges_.cross_rtt_ms_hi - ranges_.cross_rtt_ms_lo) * unit(z1);
  const double base_gbps = ranges_.cross_gbps_lo + (ranges_.cross_gbps_hi - ranges_.cross_gbps_lo) * unit(z2);
  m.rtt_ms = base_rtt * (0.9 + 0.2 * unit(h1));
  m.throughput_gbps = std::min(ranges_.cross_gbps_hi, base_gbps * (0.95 + 0.1 * unit(h2)));
  m.loss = ranges_.cross_loss_hi * unit(h3);
  return m;
}

double StepSeconds(const Job& job, const std::vector<int>& pod_nodes, const std::vector<sched::NodeState>& nodes,
                   const sched::LinkView& links, const sched::UnmeasuredLinks& unmeasured) {
  const std::vector<int> workers(pod_nodes.begin(), pod_nodes.begin() + std::min<size_t>(pod_nodes.size(),
                                                                                             static_cast<size_t>(job.workers)));
  double input = 0;
  if (job.storage_node >= 0 && job.input_bytes > 0) {
    // Each worker reads its batch from the storage node; the step waits
    // for the slowest (request and reply: bytes / rate + 2 round trips).
    sched::LinkMetrics worst = Perfect();
    for (int w : workers) {
      Worsen(worst, sched::EffectiveLink(nodes[static_cast<size_t>(job.storage_node)], nodes[static_cast<size_t>(w)],
                                         links, unmeasured));
    }
    input = sched::RingAllreduceSeconds(2, job.input_bytes, worst);
  }
  double comm = 0;
  if (job.servers == 0) {
    comm = sched::RingAllreduceSeconds(job.workers, job.gradient_bytes,
                                       sched::WorstLinkAmong(nodes, workers, links, unmeasured));
  } else {
    // Each server holds 1/S of the model: W gradient shards in, W model
    // shards out per step, over the worst link among the job's pods.
    const double bytes = 2.0 * job.workers * job.gradient_bytes / job.servers;
    comm = sched::RingAllreduceSeconds(2, bytes, sched::WorstLinkAmong(nodes, pod_nodes, links, unmeasured));
  }
  return std::max(job.compute_seconds, input) + comm;
}

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kNetworkAware:
      return "network_aware";
    case Policy::kNetworkOverhead:
      return PeerRuleName(PeerRule::kNetworkOverhead);
    case Policy::kDefault:
      return PeerRuleName(PeerRule::kDefault);
    case Policy::kDefaultLeastAllocated:
      return PeerRuleName(PeerRule::kDefaultLeastAllocated);
    case Policy::kRandom:
      return PeerRuleName(PeerRule::kRandom);
  }
  return "?";
}

std::vector<Policy> AllPolicies() {
  return {Policy::kNetworkAware, Policy::kNetworkOverhead, Policy::kDefault, Policy::kDefaultLeastAllocated,
          Policy::kRandom};
}

namespace {

PeerRule RuleOf(Policy p) {
  switch (p) {
    case Policy::kNetworkOverhead:
      return PeerRule::kNetworkOverhead;
    case Policy::kDefault:
      return PeerRule::kDefault;
    case Policy::kDefaultLeastAllocated:
      return PeerRule::kDefaultLeastAllocated;
    default:
      return PeerRule::kRandom;
  }
}

class Simulator {
 public:
  Simulator(const Scenario& s, Policy policy)
      : s_(s),
        policy_(policy),
        matrix_(s.probing.half_life_seconds),
        policy_rng_(s.seed, std::string("policy ") + PolicyName(policy)),
        probe_rng_(s.seed, "probes") {}

  Result<RunResult> Run();

 private:
  enum class Kind { kLinks, kFinish, kArrival, kProbe, kCheck };
  struct Event {
    double time = 0;
    int64_t seq = 0;
    Kind kind = Kind::kArrival;
    int job = -1;  // kLinks: 0 = degrade, 1 = congestion ends, 2 = NICs repaired
    int version = 0;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct Running {
    std::vector<int> pods;
    sched::Placement placement;
    double step = 0, remaining = 0, last = 0, paused_until = 0;
    int version = 0;
    bool active = false;
  };

  void Push(double t, Kind k, int job = -1, int version = 0) { events_.push(Event{t, seq_++, k, job, version}); }
  void UpdateTruth();
  void Advance(int j, double now);
  void Reschedule(int j, double now);
  Status TrySchedule(double now);
  sched::GangRequest Request(const Job& job) const;
  Result<std::optional<std::vector<int>>> Place(const Job& job, sched::Placement& placement);
  void Start(int j, const std::vector<int>& pods, const sched::Placement& placement, double now);
  void ProbeRound(double now);
  Status CheckRunning(double now);

  const Scenario& s_;
  Policy policy_;
  std::vector<sched::NodeState> nodes_;
  DenseLinks base_, truth_;
  std::vector<Job> jobs_;
  std::vector<Running> run_;
  std::vector<int> queue_;
  ZoneCosts costs_;
  sched::LinkMatrix matrix_;
  Rng policy_rng_, probe_rng_;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  int64_t seq_ = 0;
  int done_ = 0;
  bool nic_bad_ = false, congested_ = false;
  std::vector<double> bad_loss_;  // per degraded node, in result_.degraded_nodes order
  std::string congested_a_, congested_b_;
  RunResult result_;
};

void Simulator::UpdateTruth() {
  truth_ = base_;
  const int n = base_.size();
  if (nic_bad_) {
    for (size_t k = 0; k < result_.degraded_nodes.size(); ++k) {
      const int bad = result_.degraded_nodes[k];
      for (int o = 0; o < n; ++o) {
        if (o == bad) continue;
        sched::LinkMetrics m = truth_.Get(bad, o);
        m.loss = 1.0 - (1.0 - m.loss) * (1.0 - bad_loss_[k]);
        m.throughput_gbps = std::min(m.throughput_gbps, base_.Get(bad, o).throughput_gbps * s_.degradation.bandwidth_factor);
        truth_.Set(bad, o, m);
      }
    }
  }
  if (congested_) {
    for (int a = 0; a < n; ++a) {
      if (nodes_[static_cast<size_t>(a)].zone != congested_a_) continue;
      for (int b = 0; b < n; ++b) {
        if (nodes_[static_cast<size_t>(b)].zone != congested_b_) continue;
        sched::LinkMetrics m = truth_.Get(a, b);
        m.rtt_ms *= s_.degradation.congestion_rtt_factor;
        m.throughput_gbps *= s_.degradation.congestion_bandwidth_factor;
        truth_.Set(a, b, m);
      }
    }
  }
}

void Simulator::Advance(int j, double now) {
  Running& r = run_[static_cast<size_t>(j)];
  const double from = std::max(r.last, r.paused_until);
  if (now > from) r.remaining = std::max(0.0, r.remaining - (now - from) / r.step);
  r.last = std::max(r.last, now);
}

void Simulator::Reschedule(int j, double now) {
  Running& r = run_[static_cast<size_t>(j)];
  ++r.version;
  Push(std::max(now, r.paused_until) + r.remaining * r.step, Kind::kFinish, j, r.version);
}

sched::GangRequest Simulator::Request(const Job& job) const {
  sched::GangRequest req;
  req.job = "job-" + std::to_string(job.id);
  req.workers = job.workers;
  req.servers = job.servers;
  if (job.storage_node >= 0) req.storage_nodes = {nodes_[static_cast<size_t>(job.storage_node)].name};
  req.zone = job.hard ? sched::ZoneConstraint::kHard : sched::ZoneConstraint::kSoft;
  req.gradient_bytes = job.gradient_bytes;
  req.input_bytes = job.input_bytes;
  req.compute_seconds = job.compute_seconds;
  return req;
}

Result<std::optional<std::vector<int>>> Simulator::Place(const Job& job, sched::Placement& placement) {
  if (policy_ == Policy::kNetworkAware) {
    sched::PlacerOptions options;
    options.max_slowdown = s_.probing.max_slowdown;
    Result<sched::Placement> p = sched::PlaceGang(nodes_, matrix_, Request(job), options);
    if (!p.ok()) {
      if (p.status().code() == StatusCode::kUnavailable) return std::optional<std::vector<int>>();
      return p.status();
    }
    placement = std::move(p).value();
    std::vector<int> pods;
    for (const sched::SlotAssignment& a : placement.slots) pods.push_back(a.node);
    return std::optional<std::vector<int>>(std::move(pods));
  }
  std::optional<std::vector<int>> pods =
      PlacePodByPod(RuleOf(policy_), nodes_, PodGang{job.pods(), job.hard}, costs_, policy_rng_);
  if (pods) {
    placement = sched::Placement{};
    for (int i = 0; i < job.pods(); ++i) {
      const bool worker = i < job.workers;
      placement.slots.push_back(
          sched::SlotAssignment{worker ? "worker" : "server", worker ? i : i - job.workers, (*pods)[static_cast<size_t>(i)]});
    }
  }
  return pods;
}

void Simulator::Start(int j, const std::vector<int>& pods, const sched::Placement& placement, double now) {
  const Job& job = jobs_[static_cast<size_t>(j)];
  std::set<std::string> zones;
  for (int p : pods) {
    ++nodes_[static_cast<size_t>(p)].used;
    zones.insert(nodes_[static_cast<size_t>(p)].zone);
  }
  JobOutcome& o = result_.jobs[static_cast<size_t>(j)];
  o.start = now;
  o.cross_zone = zones.size() > 1;
  Running& r = run_[static_cast<size_t>(j)];
  r.pods = pods;
  r.placement = placement;
  r.step = StepSeconds(job, pods, nodes_, truth_);
  r.remaining = static_cast<double>(job.steps);
  r.last = now;
  r.paused_until = now;
  r.active = true;
  Reschedule(j, now);
}

Status Simulator::TrySchedule(double now) {
  std::vector<int> still;
  for (int j : queue_) {
    sched::Placement placement;
    TENAX_ASSIGN_OR_RETURN(std::optional<std::vector<int>> pods, Place(jobs_[static_cast<size_t>(j)], placement));
    if (pods) {
      Start(j, *pods, placement, now);
    } else {
      still.push_back(j);
    }
  }
  queue_ = std::move(still);
  return Status::Ok();
}

void Simulator::ProbeRound(double now) {
  ++result_.probe_rounds;
  for (size_t a = 0; a < nodes_.size(); ++a) {
    for (size_t b = 0; b < nodes_.size(); ++b) {
      if (a == b) continue;
      sched::LinkSample sample;
      const bool cross = nodes_[a].zone != nodes_[b].zone;
      if (ProbeSample(truth_.Get(nodes_[a].id, nodes_[b].id), cross, s_.probing, s_.links, probe_rng_, sample)) {
        matrix_.Observe(nodes_[a].name, nodes_[b].name, sample, now);
      } else {
        matrix_.ObserveUnreachable(nodes_[a].name, nodes_[b].name, now);
      }
    }
  }
}

Status Simulator::CheckRunning(double now) {
  for (size_t j = 0; j < run_.size(); ++j) {
    Running& r = run_[j];
    if (!r.active || now < r.paused_until) continue;
    // Every pod counts: a parameter server's links carry the job's traffic
    // as much as a worker's, and DegradedSlots looks at workers only. Pods
    // are ranked by their slot (unique, as worker ranks are), and the
    // indices it returns are the placement's.
    sched::Placement all_pods = r.placement;
    for (size_t i = 0; i < all_pods.slots.size(); ++i) {
      all_pods.slots[i].role = "worker";
      all_pods.slots[i].index = static_cast<int>(i);
    }
    const std::vector<int> move = sched::DegradedSlots(nodes_, matrix_, all_pods, s_.probing.thresholds);
    if (move.empty()) continue;
    // The moved slots do not count as used, and their nodes are not
    // candidates: the job would move back onto the NIC it leaves.
    std::vector<sched::NodeState> snapshot = nodes_;
    for (int m : move) --snapshot[static_cast<size_t>(r.placement.slots[static_cast<size_t>(m)].node)].used;
    for (int m : move) {
      sched::NodeState& n = snapshot[static_cast<size_t>(r.placement.slots[static_cast<size_t>(m)].node)];
      n.used = n.capacity;
    }
    const Job& job = jobs_[j];
    Result<sched::Placement> moved = sched::Replace(snapshot, matrix_, Request(job), r.placement, move);
    if (!moved.ok()) {
      if (moved.status().code() != StatusCode::kUnavailable) return moved.status();
      ++result_.replacements_refused;
      continue;
    }
    std::vector<int> pods;
    for (const sched::SlotAssignment& a : moved.value().slots) pods.push_back(a.node);
    Advance(static_cast<int>(j), now);
    // Worth it only if the believed step is clearly faster (by more than
    // the measurements' noise, or a job would hop between equally bad
    // nodes) and the time saved exceeds the pause.
    const double believed_old = StepSeconds(job, r.pods, nodes_, matrix_);
    const double believed_new = StepSeconds(job, pods, nodes_, matrix_);
    if (believed_new > (1.0 - s_.probing.min_gain) * believed_old ||
        r.remaining * (believed_old - believed_new) <= s_.probing.migration_seconds) {
      ++result_.replacements_refused;
      continue;
    }
    for (size_t i = 0; i < pods.size(); ++i) {
      --nodes_[static_cast<size_t>(r.pods[i])].used;
      ++nodes_[static_cast<size_t>(pods[i])].used;
    }
    r.pods = std::move(pods);
    r.placement = std::move(moved).value();
    r.paused_until = now + s_.probing.migration_seconds;
    r.step = StepSeconds(job, r.pods, nodes_, truth_);
    ++result_.migrations;
    ++result_.jobs[j].migrations;
    Reschedule(static_cast<int>(j), now);
  }
  return Status::Ok();
}

Result<RunResult> Simulator::Run() {
  TENAX_RETURN_IF_ERROR(ValidateScenario(s_));
  result_.policy = PolicyName(policy_);
  nodes_ = MakeNodes(s_.zones, s_.nodes_per_zone, s_.slots_per_node);
  jobs_ = MakeJobs(s_, nodes_);
  Rng link_rng(s_.seed, "links");
  base_ = MakeBaseLinks(nodes_, s_.links, link_rng);
  truth_ = base_;
  costs_ = StaticZoneCosts(nodes_, base_);
  run_.assign(jobs_.size(), Running{});
  result_.jobs.resize(jobs_.size());
  for (const Job& j : jobs_) {
    JobOutcome& o = result_.jobs[static_cast<size_t>(j.id)];
    o.id = j.id;
    o.model = s_.mix.models[static_cast<size_t>(j.model)].name;
    o.pods = j.pods();
    o.arrival = j.arrival;
    o.compute_only_seconds = static_cast<double>(j.steps) * j.compute_seconds;
    Push(j.arrival, Kind::kArrival, j.id);
  }
  result_.first_arrival = jobs_.front().arrival;

  // The degradation: the same nodes, zones and times for every policy.
  Rng deg_rng(s_.seed, "degradation");
  const double window = static_cast<double>(s_.jobs) / ArrivalRate(s_);
  std::vector<int> order(nodes_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(deg_rng.Index(static_cast<int>(i)))]);
  for (int k = 0; k < s_.degradation.nodes; ++k) {
    result_.degraded_nodes.push_back(order[static_cast<size_t>(k)]);
    bad_loss_.push_back(deg_rng.Uniform(s_.degradation.loss_lo, s_.degradation.loss_hi));
  }
  const int za = deg_rng.Index(s_.zones);
  int zb = s_.zones > 1 ? deg_rng.Index(s_.zones - 1) : 0;
  if (zb >= za) ++zb;
  congested_a_ = ZoneName(za);
  congested_b_ = ZoneName(std::min(zb, s_.zones - 1));
  result_.degrade_at_seconds = s_.degradation.at_fraction * window;
  Push(result_.degrade_at_seconds, Kind::kLinks, 0);
  if (s_.degradation.nodes > 0) {
    result_.nic_repair_seconds = result_.degrade_at_seconds + s_.degradation.nic_seconds;
    Push(result_.nic_repair_seconds, Kind::kLinks, 2);
  }
  if (s_.degradation.congest_zone_pair) {
    result_.congested_zones = congested_a_ + "/" + congested_b_;
    result_.congestion_end_seconds = result_.degrade_at_seconds + s_.degradation.congestion_seconds;
    Push(result_.congestion_end_seconds, Kind::kLinks, 1);
  }
  if (policy_ == Policy::kNetworkAware) {
    Push(-s_.probing.warmup_seconds, Kind::kProbe);
    Push(s_.probing.replace_check_seconds, Kind::kCheck);
  }

  while (done_ < s_.jobs) {
    if (events_.empty()) return Internal("sched simulation: jobs left waiting with nothing running");
    const Event e = events_.top();
    events_.pop();
    switch (e.kind) {
      case Kind::kLinks:
        if (e.job == 0) {
          nic_bad_ = s_.degradation.nodes > 0;
          congested_ = s_.degradation.congest_zone_pair;
        } else if (e.job == 1) {
          congested_ = false;
        } else {
          nic_bad_ = false;
        }
        UpdateTruth();
        for (size_t j = 0; j < run_.size(); ++j) {
          if (!run_[j].active) continue;
          Advance(static_cast<int>(j), e.time);
          run_[j].step = StepSeconds(jobs_[j], run_[j].pods, nodes_, truth_);
          Reschedule(static_cast<int>(j), e.time);
        }
        break;
      case Kind::kFinish: {
        Running& r = run_[static_cast<size_t>(e.job)];
        if (!r.active || e.version != r.version) break;  // superseded by a link change or a move
        r.active = false;
        for (int p : r.pods) --nodes_[static_cast<size_t>(p)].used;
        JobOutcome& o = result_.jobs[static_cast<size_t>(e.job)];
        o.finish = e.time;
        result_.last_finish = std::max(result_.last_finish, e.time);
        ++done_;
        TENAX_RETURN_IF_ERROR(TrySchedule(e.time));
        break;
      }
      case Kind::kArrival:
        queue_.push_back(e.job);
        TENAX_RETURN_IF_ERROR(TrySchedule(e.time));
        break;
      case Kind::kProbe:
        ProbeRound(e.time);
        Push(e.time + s_.probing.interval_seconds, Kind::kProbe);
        break;
      case Kind::kCheck:
        TENAX_RETURN_IF_ERROR(CheckRunning(e.time));
        Push(e.time + s_.probing.replace_check_seconds, Kind::kCheck);
        break;
    }
  }
  return std::move(result_);
}

}  // namespace

Result<RunResult> Simulate(const Scenario& s, Policy policy) { return Simulator(s, policy).Run(); }

Summary Summarize(const RunResult& r) {
  Summary s;
  std::vector<double> jct;
  double wait = 0, run = 0, slowdown = 0;
  for (const JobOutcome& o : r.jobs) {
    if (o.finish < 0) continue;
    jct.push_back(o.finish - o.arrival);
    wait += o.start - o.arrival;
    run += o.finish - o.start;
    slowdown += (o.finish - o.start) / o.compute_only_seconds;
    s.cross_zone_jobs += o.cross_zone ? 1 : 0;
  }
  s.jobs = static_cast<int>(jct.size());
  s.migrations = r.migrations;
  if (jct.empty()) return s;
  const double n = static_cast<double>(jct.size());
  double sum = 0;
  for (double v : jct) sum += v;
  s.mean_jct = sum / n;
  std::sort(jct.begin(), jct.end());
  s.p95_jct = jct[static_cast<size_t>(std::ceil(0.95 * n)) - 1];
  s.mean_wait = wait / n;
  s.mean_run = run / n;
  s.mean_slowdown = slowdown / n;
  s.makespan = r.last_finish - r.first_arrival;
  return s;
}

}  // namespace tenax::bench::schedsim
