// tenax bench allreduce: tenax's in-place float32 sum allreduce (comm::Allreduce
// over a comm::Group) against Open MPI's MPI_Allreduce and Gloo's allreduce
// (the call PyTorch's ProcessGroupGloo makes), P processes on this machine,
// in the same run.
//
// For each (implementation, process count) the parent starts the processes:
// P copies of the hidden `tenax-bench allreduce-rank`, one `mpirun -np P`
// of bench/mpi_allreduce.cc, or P copies of bench/gloo_allreduce.cc. All
// three time the same way: per size, --warmup untimed calls, one barrier,
// then max(min_iters, min(2000, budget/bytes)) individually timed calls; each
// rank takes its median and the slowest rank's median is the result. Every
// implementation checks one fresh call per size for the exact sum. Rank 0
// prints one JSON line per size; the parent collects them.
//
// Nothing is pinned: all processes share the machine's cores, as the peers'
// launch lines do. Children that outlive a failure or a stop signal are
// stopped (PeerGroup), and the rendezvous directory is removed.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "allreduce_bench.h"
#include "allreduce_peer_common.h"
#include "bench_common.h"
#include "cli_app.h"
#include "tenax/comm/allreduce.h"
#include "tenax/comm/group.h"
#include "tenax/comm/hierarchical_allreduce.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/node.h"

namespace tenax::bench {
namespace {

using namespace allreduce;  // NOLINT: this file is that benchmark

using namespace std::chrono_literals;
using allreduce_peer::CountWrong;
using allreduce_peer::Fill;
using allreduce_peer::Iterations;

constexpr const char* kMpiBinName = "tenax_bench_mpi_allreduce";
constexpr const char* kGlooBinName = "tenax_bench_gloo_allreduce";
constexpr const char* kSocketsBinName = "tenax_bench_socket_ring";

// ------------------------------------------------------------ one tenax rank

struct RankArgs {
  int rank = -1;
  int procs = 0;
  std::string rendezvous;
  std::vector<std::string> sizes;
  uint64_t budget_bytes = 256 << 20;
  uint64_t min_iters = 10;
  uint64_t warmup = 3;
  std::string transports;
  // `--hosts` mode: every rank's address (rank r listens on addresses[r]),
  // every rank's zone, and the algorithm ("ring" or "hierarchical").
  std::vector<std::string> addresses;
  std::vector<std::string> zones;
  std::string algorithm = "ring";
  comm::AllreduceOptions options;  // --piece-bytes, --window (experiments; every rank the same)
  int tcp_streams = 1;             // net::NodeOptions::tcp_streams
};

std::string PortFile(const std::string& dir, int rank) { return dir + "/rank-" + std::to_string(rank) + ".port"; }

// Waits for every rank's port file, driving our Node meanwhile so that ranks
// which already have the full list can complete their handshake with us.
Result<std::vector<comm::GroupMember>> AwaitMembers(net::Node& node, const RankArgs& a, Deadline deadline) {
  std::vector<comm::GroupMember> members(static_cast<size_t>(a.procs));
  int missing = a.procs;
  while (true) {
    missing = 0;
    for (int r = 0; r < a.procs; ++r) {
      auto& m = members[static_cast<size_t>(r)];
      if (m.port != 0) continue;
      auto text = ReadFileText(PortFile(a.rendezvous, r), 64);
      if (!text.ok()) {
        if (text.status().code() != StatusCode::kNotFound) return text.status();
        ++missing;
        continue;
      }
      char* end = nullptr;
      const unsigned long port = std::strtoul(text->c_str(), &end, 10);
      if (port == 0 || port > 65535) return ProtocolError(PortFile(a.rendezvous, r) + ": bad port '" + *text + "'");
      m = {a.addresses.empty() ? "127.0.0.1" : a.addresses[static_cast<size_t>(r)], static_cast<uint16_t>(port),
           "rank " + std::to_string(r)};
    }
    if (missing == 0) return members;
    if (deadline.Expired()) {
      return DeadlineExceeded(std::to_string(missing) + " rank(s) never wrote a port file into " + a.rendezvous);
    }
    node.Progress();
    std::this_thread::sleep_for(1ms);
  }
}

Status RunRank(const RankArgs& a) {
  if (a.procs < 1 || a.rank < 0 || a.rank >= a.procs) return InvalidArgument("need 0 <= --rank < --procs");
  if (a.min_iters == 0) return InvalidArgument("--min-iters must be >= 1");
  TENAX_ASSIGN_OR_RETURN(std::vector<uint64_t> sizes, ParseSizes(a.sizes));
  const uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  const size_t procs = static_cast<size_t>(a.procs);
  if (!a.addresses.empty() && a.addresses.size() != procs) return InvalidArgument("--addresses needs one per rank");
  if (!a.zones.empty() && a.zones.size() != procs) return InvalidArgument("--zones needs one per rank");
  if (a.algorithm != "ring" && a.algorithm != "hierarchical") return InvalidArgument("--algorithm: ring or hierarchical");
  if (a.algorithm == "hierarchical" && a.zones.empty()) return InvalidArgument("--algorithm hierarchical needs --zones");

  net::NodeOptions o;
  o.name = "allreduce-rank-" + std::to_string(a.rank);
  o.transports = a.transports;
  o.tcp_streams = a.tcp_streams;
  // On a namespaced host the rank's interface is its veth, not lo.
  o.net_devices = a.addresses.empty() ? "lo" : "";
  TENAX_ASSIGN_OR_RETURN(o.secret, net::ResolveSecret(""));  // the parent's per-run $TENAX_SECRET
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(o));
  TENAX_ASSIGN_OR_RETURN(uint16_t port,
                         node->Listen(a.addresses.empty() ? "127.0.0.1" : a.addresses[static_cast<size_t>(a.rank)], 0));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(PortFile(a.rendezvous, a.rank), std::to_string(port) + "\n"));

  const Deadline setup = Deadline::After(30s);
  TENAX_ASSIGN_OR_RETURN(std::vector<comm::GroupMember> members, AwaitMembers(*node, a, setup));
  TENAX_ASSIGN_OR_RETURN(auto group,
                         comm::Group::Connect(*node, "bench-allreduce", /*generation=*/1, a.rank, members, setup));
  std::unique_ptr<comm::SumCollective> ar;
  if (a.algorithm == "hierarchical") {
    TENAX_ASSIGN_OR_RETURN(
        ar, comm::HierarchicalAllreduce::Create(*group, a.zones, max_bytes / sizeof(float), setup, a.options));
  } else {
    TENAX_ASSIGN_OR_RETURN(ar, comm::Allreduce::Create(*group, max_bytes / sizeof(float), setup, a.options));
  }
  // Per-rank medians, a failure flag and the cross-zone KiB per call, gathered
  // by a sum into zeroed slots.
  TENAX_ASSIGN_OR_RETURN(auto stats, comm::Allreduce::Create(*group, procs + 2, setup));
  // Bytes this rank has written to ranks in other zones (0 without --zones).
  auto cross_zone_bytes = [&] {
    uint64_t b = 0;
    for (size_t r = 0; r < a.zones.size(); ++r) {
      if (a.zones[r] != a.zones[static_cast<size_t>(a.rank)]) b += ar->bytes_sent_to(static_cast<int>(r));
    }
    return b;
  };

  float* data = ar->data();
  for (const uint64_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    const uint64_t iters = Iterations(bytes, a.budget_bytes, a.min_iters);
    std::vector<double> seconds(iters);
    const Deadline deadline = Deadline::After(300s);
    Fill(data, count, a.rank);
    for (uint64_t w = 0; w < a.warmup; ++w) TENAX_RETURN_IF_ERROR(ar->Run(0, count, 1.0f, deadline));
    // One barrier so all ranks start together; none between iterations.
    TENAX_RETURN_IF_ERROR(group->Barrier(deadline));
    const uint64_t cross_before = cross_zone_bytes();
    for (uint64_t it = 0; it < iters; ++it) {
      const auto t0 = SteadyClock::now();
      TENAX_RETURN_IF_ERROR(ar->Run(0, count, 1.0f, deadline));
      seconds[it] = Seconds(SteadyClock::now() - t0).count();
    }
    const double cross_kib_per_call = static_cast<double>(cross_zone_bytes() - cross_before) / 1024.0 /
                                      static_cast<double>(iters);
    // The timed calls saturate the data at +inf; check one fresh call.
    Fill(data, count, a.rank);
    TENAX_RETURN_IF_ERROR(ar->Run(0, count, 1.0f, deadline));
    size_t first_bad = 0;
    const size_t wrong = CountWrong(data, count, a.procs, &first_bad);
    if (wrong) {
      spdlog::error("rank {}: {} of {} floats wrong at {} bytes (first at {}: {})", a.rank, wrong, count, bytes,
                    first_bad, data[first_bad]);
    }
    float* s = stats->data();
    std::fill(s, s + procs + 2, 0.0f);
    s[a.rank] = static_cast<float>(Median(seconds));
    s[procs] = wrong ? 1.0f : 0.0f;
    s[procs + 1] = static_cast<float>(cross_kib_per_call);  // exact below 2^24 KiB
    TENAX_RETURN_IF_ERROR(stats->Run(0, procs + 2, 1.0f, deadline));
    if (s[a.procs] != 0) {
      return DataLoss("allreduce of " + std::to_string(bytes) + " bytes gave wrong sums on " +
                      std::to_string(static_cast<int>(s[a.procs])) + " rank(s)");
    }
    const double slowest = *std::max_element(s, s + a.procs);
    if (a.rank == 0) {
      std::printf(
          "{\"impl\":\"%s\",\"procs\":%d,\"bytes\":%llu,\"seconds\":%.9g,\"iterations\":%llu,"
          "\"cross_zone_bytes\":%.0f}\n",
          a.algorithm == "ring" ? "tenax" : "hierarchical", a.procs, static_cast<unsigned long long>(bytes), slowest,
          static_cast<unsigned long long>(iters), static_cast<double>(s[procs + 1]) * 1024.0);
      std::fflush(stdout);
    }
  }
  // The measurements are done. Ranks released from the final barrier close
  // their connections while others still wait for their release: expected,
  // not worth a warning per connection (a failed barrier is still reported).
  spdlog::set_level(spdlog::level::err);
  // A rank that leaves while others still address it looks lost to them.
  return group->Barrier(Deadline::After(30s));
}

// ----------------------------------------------------------------- parent

struct BenchArgs {
  bool quick = false;
  std::string json_path;
  std::vector<int> procs = {2, 4};
  std::vector<std::string> sizes;  // empty: 4KiB,1MiB,16MiB,64MiB; with --hosts 16MiB,64MiB
  std::vector<std::string> impls;  // empty: tenax,mpi,gloo; with --hosts see HostsArgs
  // --hosts: one zone per namespaced host, and the hosts' links.
  std::vector<std::string> hosts;
  double same_zone_gbps = 10, cross_zone_gbps = 1;
  double same_zone_delay_ms = 0, cross_zone_delay_ms = 10;
  double iperf_seconds = 3;
  std::string iperf3 = "iperf3";
  uint64_t piece_bytes = 0, window = 0;
  int tcp_streams = 1;        // tenax ranks over TCP: data connections per peer
  uint64_t budget_bytes = 0;  // 0 = 64 MiB with --quick, else 256 MiB
  uint64_t min_iters = 0;     // 0 = 5 with --quick, else 10
  int64_t warmup = -1;        // -1 = 2 with --quick, else 3
  std::string transports;     // tenax ranks: "" = UCX's choice (shared memory), "tcp"
  std::string mpirun = "mpirun";
  std::string mpi_bin;
  std::string gloo_bin;
  std::string sockets_bin;
  int64_t timeout_seconds = 300;
};

struct RunPlan {
  std::string impl;
  int procs = 0;
  std::vector<uint64_t> sizes;
  uint64_t budget_bytes = 0, min_iters = 0, warmup = 0;
};

// Runs one (impl, procs) and returns its per-size results.
Result<std::vector<RunResult>> RunOne(const BenchArgs& a, const RunPlan& plan, const std::string& bench_bin,
                                      const std::string& mpi_bin, const std::string& gloo_bin,
                                      const std::string& sockets_bin, const std::string& rendezvous) {
  const std::vector<std::string> common = {
      "--sizes",     JoinSizes(plan.sizes),          "--budget-bytes", std::to_string(plan.budget_bytes),
      "--min-iters", std::to_string(plan.min_iters), "--warmup",       std::to_string(plan.warmup)};
  std::error_code ec;
  std::filesystem::create_directories(rendezvous, ec);
  if (ec) return IoError(rendezvous + ": cannot create: " + ec.message());

  PeerGroup children;
  if (plan.impl == "mpi") {
    std::vector<std::string> argv = {
        a.mpirun, "-np",  std::to_string(plan.procs), "--allow-run-as-root", "--oversubscribe", "--bind-to",
        "none",   mpi_bin};
    argv.insert(argv.end(), common.begin(), common.end());
    TENAX_RETURN_IF_ERROR(children.Start("mpirun", argv));
  } else {
    for (int r = 0; r < plan.procs; ++r) {
      std::vector<std::string> argv;
      if (plan.impl == "tenax") {
        argv = {bench_bin, "allreduce-rank",           "--rank",       std::to_string(r),
                "--procs", std::to_string(plan.procs), "--rendezvous", rendezvous};
        if (!a.transports.empty()) argv.insert(argv.end(), {"--transports", a.transports});
        if (a.piece_bytes) argv.insert(argv.end(), {"--piece-bytes", std::to_string(a.piece_bytes)});
        if (a.window) argv.insert(argv.end(), {"--window", std::to_string(a.window)});
        argv.insert(argv.end(), {"--tcp-streams", std::to_string(a.tcp_streams)});
      } else {
        argv = {plan.impl == "gloo" ? gloo_bin : sockets_bin,
                "--rank",
                std::to_string(r),
                "--procs",
                std::to_string(plan.procs),
                "--store-dir",
                rendezvous};
      }
      argv.insert(argv.end(), common.begin(), common.end());
      TENAX_RETURN_IF_ERROR(children.Start(plan.impl + " rank " + std::to_string(r), argv));
    }
  }
  TENAX_RETURN_IF_ERROR(
      children.Wait(Deadline::After(std::chrono::seconds(a.timeout_seconds)), "the per-run time limit (--timeout)"));

  // Rank 0 (or mpirun, which forwards rank 0) printed one JSON line per
  // size; libraries may print other lines.
  return ParseResults(children.Lines(0), plan.impl, plan.procs, plan.sizes);
}

Status RunBenchAllreduce(const BenchArgs& in) {
  BenchArgs a = in;
  RunPlan base;
  base.budget_bytes = a.budget_bytes ? a.budget_bytes : a.quick ? (64u << 20) : (256u << 20);
  base.min_iters = a.min_iters ? a.min_iters : a.quick ? 5 : 10;
  base.warmup = static_cast<uint64_t>(a.warmup >= 0 ? a.warmup : a.quick ? 2 : 3);
  if (a.sizes.empty()) {
    a.sizes = a.hosts.empty() ? std::vector<std::string>{"4KiB", "1MiB", "16MiB", "64MiB"}
                              : std::vector<std::string>{"16MiB", "64MiB"};
  }
  TENAX_ASSIGN_OR_RETURN(base.sizes, ParseSizes(a.sizes));
  if (!a.hosts.empty()) {
    HostsArgs h;
    h.zones = a.hosts;
    for (const char* name : {"tenax", "hierarchical", "gloo", "iperf3", "mpi", "sockets"}) {  // a fixed order
      if (std::find(a.impls.begin(), a.impls.end(), name) != a.impls.end()) h.impls.push_back(name);
    }
    h.sizes = base.sizes;
    h.budget_bytes = base.budget_bytes;
    h.min_iters = base.min_iters;
    h.warmup = base.warmup;
    h.same_zone_gbps = a.same_zone_gbps;
    h.cross_zone_gbps = a.cross_zone_gbps;
    h.same_zone_delay_ms = a.same_zone_delay_ms;
    h.cross_zone_delay_ms = a.cross_zone_delay_ms;
    h.iperf_seconds = a.iperf_seconds;
    h.iperf3 = a.iperf3;
    h.piece_bytes = a.piece_bytes;
    h.window = a.window;
    h.tcp_streams = a.tcp_streams;
    h.gloo_bin = a.gloo_bin;
    h.timeout_seconds = a.timeout_seconds;
    h.json_path = a.json_path;
    h.quick = a.quick;
    return RunHostsBench(h);
  }
  // Over TCP, the plain-sockets ring shows what TCP itself allows here.
  if (a.impls.empty()) a.impls = a.transports == "tcp" ? std::vector<std::string>{"tenax", "mpi", "gloo", "sockets"}
                                                       : std::vector<std::string>{"tenax", "mpi", "gloo"};
  for (const auto& impl : a.impls) {
    if (impl == "hierarchical" || impl == "iperf3") {
      return InvalidArgument("--impls " + impl + " runs only between namespaced hosts (--hosts ZONES)");
    }
  }
  std::vector<std::string> impls;  // in a fixed order, without duplicates
  for (const char* name : {"tenax", "mpi", "gloo", "sockets"}) {
    if (std::find(a.impls.begin(), a.impls.end(), name) != a.impls.end()) impls.push_back(name);
  }
  std::vector<int> procs = a.procs;
  std::sort(procs.begin(), procs.end());
  procs.erase(std::unique(procs.begin(), procs.end()), procs.end());
  if (impls.empty() || procs.empty()) return InvalidArgument("nothing to run (--impls, --procs)");

  // Find every program before running anything.
  TENAX_ASSIGN_OR_RETURN(const std::string bench_bin, SelfExe());
  std::string mpi_bin, gloo_bin, sockets_bin;
  const bool want_mpi = std::count(impls.begin(), impls.end(), "mpi") > 0;
  const bool want_gloo = std::count(impls.begin(), impls.end(), "gloo") > 0;
  if (want_mpi) {
    TENAX_ASSIGN_OR_RETURN(mpi_bin, FindProgram(kMpiBinName, a.mpi_bin, "--mpi-bin"));
    TENAX_RETURN_IF_ERROR(CheckOnPath(a.mpirun, "--mpirun"));
  }
  if (want_gloo) {
    TENAX_ASSIGN_OR_RETURN(gloo_bin, FindProgram(kGlooBinName, a.gloo_bin, "--gloo-bin"));
  }
  if (std::count(impls.begin(), impls.end(), "sockets") > 0) {
    TENAX_ASSIGN_OR_RETURN(sockets_bin, FindProgram(kSocketsBinName, a.sockets_bin, "--sockets-bin"));
  }

  UseFreshSecret();  // for the tenax ranks
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-allreduce"));

  std::string impl_list, procs_list;
  for (const auto& i : impls) impl_list += (impl_list.empty() ? "" : ",") + i;
  for (int p : procs) procs_list += (procs_list.empty() ? "" : ",") + std::to_string(p);
  spdlog::info("allreduce: impls {}, procs {}, sizes {}; budget {} bytes, min {} iterations, {} warmup", impl_list,
               procs_list, JoinSizes(base.sizes), base.budget_bytes, base.min_iters, base.warmup);
  const auto started = SteadyClock::now();
  std::vector<RunResult> results;
  std::vector<std::string> failures;
  int run_index = 0;
  for (int p : procs) {
    for (const std::string& impl : impls) {
      if (StopRequested()) return Cancelled("benchmark stopped");
      RunPlan plan = base;
      plan.impl = impl;
      plan.procs = p;
      const std::string dir =
          work.path() + "/run-" + std::to_string(run_index++) + "-" + impl + "-" + std::to_string(p);
      const auto t0 = SteadyClock::now();
      spdlog::info("{} with {} processes ...", impl, p);
      auto r = RunOne(a, plan, bench_bin, mpi_bin, gloo_bin, sockets_bin, dir);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      if (!r.ok()) {
        if (r.status().code() == StatusCode::kCancelled) return r.status();
        const std::string msg = impl + " with " + std::to_string(p) + " procs: " + r.status().message();
        spdlog::error("{}", msg);
        failures.push_back(msg);
        continue;
      }
      for (const auto& x : *r) {
        spdlog::info("{:>5} {} procs {:>7}: {:>10}  {:7.3f} GB/s bus  ({} iterations)", impl, p, HumanBytes(x.bytes),
                     HumanSeconds(x.seconds), BusBandwidthGBps(p, x.bytes, x.seconds), x.iterations);
        results.push_back(x);
      }
      spdlog::info("{} with {} processes took {:.1f} s", impl, p, Seconds(SteadyClock::now() - t0).count());
    }
  }
  const double wall = Seconds(SteadyClock::now() - started).count();

  auto find = [&](const std::string& impl, int p, uint64_t bytes) -> std::optional<double> {
    for (const auto& r : results) {
      if (r.impl == impl && r.procs == p && r.bytes == bytes) return r.seconds;
    }
    return std::nullopt;
  };
  auto best_peer = [&](int p, uint64_t bytes) -> std::optional<double> {
    std::optional<double> best;
    // Over TCP the peer is Gloo: Open MPI picks shared memory on one host.
    for (const char* peer : {"mpi", "gloo"}) {
      if (a.transports == "tcp" && std::string(peer) == "mpi") continue;
      auto s = find(peer, p, bytes);
      if (s && (!best || *s < *best)) best = s;
    }
    return best;
  };
  auto json_or_null = [](std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };

  nlohmann::json jresults = nlohmann::json::array();
  for (const auto& r : results) {
    jresults.push_back({{"impl", r.impl},
                        {"procs", r.procs},
                        {"bytes", r.bytes},
                        {"seconds", r.seconds},
                        {"busbw_gbps", BusBandwidthGBps(r.procs, r.bytes, r.seconds)},
                        {"iterations", r.iterations}});
  }
  nlohmann::json jratios = nlohmann::json::array();
  for (int p : procs) {
    for (uint64_t bytes : base.sizes) {
      const auto t = find("tenax", p, bytes), best = best_peer(p, bytes), sock = find("sockets", p, bytes);
      jratios.push_back(
          {{"procs", p},
           {"bytes", bytes},
           {"tenax_seconds", json_or_null(t)},
           {"mpi_seconds", json_or_null(find("mpi", p, bytes))},
           {"gloo_seconds", json_or_null(find("gloo", p, bytes))},
           {"sockets_seconds", json_or_null(find("sockets", p, bytes))},
           {"tenax_vs_best_peer", json_or_null(t && best ? std::optional<double>(*t / *best) : std::nullopt)},
           {"tenax_vs_sockets", json_or_null(t && sock ? std::optional<double>(*t / *sock) : std::nullopt)}});
    }
  }

  // The table: per process count and size, each implementation's time and
  // bus bandwidth, and tenax's time over the faster peer's.
  std::printf("\nallreduce, float32 sum in place; time = max over ranks of each rank's median call\n");
  std::printf("%5s %8s |", "procs", "size");
  for (const auto& impl : impls) std::printf(" %10s", (impl + " time").c_str());
  std::printf(" |");
  for (const auto& impl : impls) std::printf(" %11s", (impl + " GB/s").c_str());
  std::printf(" | %s\n", a.transports == "tcp" ? "tenax/gloo" : "tenax/best peer");
  for (int p : procs) {
    for (uint64_t bytes : base.sizes) {
      std::printf("%5d %8s |", p, HumanBytes(bytes).c_str());
      for (const auto& impl : impls) {
        auto s = find(impl, p, bytes);
        std::printf(" %10s", s ? HumanSeconds(*s).c_str() : "-");
      }
      std::printf(" |");
      for (const auto& impl : impls) {
        auto s = find(impl, p, bytes);
        if (s) {
          std::printf(" %11.3f", BusBandwidthGBps(p, bytes, *s));
        } else {
          std::printf(" %11s", "-");
        }
      }
      const auto t = find("tenax", p, bytes), best = best_peer(p, bytes);
      if (t && best) {
        std::printf(" | %15.3f\n", *t / *best);
      } else {
        std::printf(" | %15s\n", "-");
      }
    }
  }
  std::printf("(GB/s: bus bandwidth 2(p-1)/p * bytes / time)\n\n");
  for (auto [bytes, target] : {std::pair<uint64_t, double>{64u << 20, 0.4}, {4u << 10, 1.0}}) {
    const auto t = find("tenax", 2, bytes), best = best_peer(2, bytes);
    if (!t || !best) continue;
    const double ratio = *t / *best;
    std::printf("%s, 2 procs: tenax takes %.3f of %s time (target <= %.1f): %s\n", HumanBytes(bytes).c_str(), ratio,
                a.transports == "tcp" ? "Gloo's" : "the faster peer's", target, ratio <= target ? "met" : "MISSED");
  }
  // The plain-sockets ring pays TCP's copies and one sum, nothing else: a
  // time below its own is below what TCP allows on this machine.
  for (int p : procs) {
    for (uint64_t bytes : base.sizes) {
      const auto sock = find("sockets", p, bytes), gloo = find("gloo", p, bytes), t = find("tenax", p, bytes);
      if (!sock || p < 2) continue;
      std::printf("%s, %d procs: a ring on plain sockets takes %s", HumanBytes(bytes).c_str(), p,
                  HumanSeconds(*sock).c_str());
      if (gloo) std::printf(" = %.3f of Gloo's time", *sock / *gloo);
      if (t) std::printf("; tenax takes %.3f of its time", *t / *sock);
      std::printf("\n");
    }
  }
  std::printf("wall time: %.1f s\n", wall);
  std::fflush(stdout);

  nlohmann::json out = {{"benchmark", "allreduce"},
                        {"quick", a.quick},
                        {"budget_bytes", base.budget_bytes},
                        {"min_iters", base.min_iters},
                        {"warmup", base.warmup},
                        {"tenax_transports", a.transports.empty() ? "auto" : a.transports},
                        {"tenax_tcp_streams", a.tcp_streams},
                        {"wall_seconds", wall},
                        {"results", jresults},
                        {"ratios", jratios},
                        {"failures", failures}};
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, out));
  return FailuresStatus(failures);
}

}  // namespace

void AddAllreduceBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "allreduce",
      "In-place float32 sum allreduce: tenax vs Open MPI vs Gloo (and, with --transports tcp, a ring on plain "
      "sockets: what TCP itself allows), 2 and 4 processes on this machine; with --hosts, "
      "between namespaced hosts in zones: the flat ring vs the zone-hierarchical allreduce vs Gloo vs iperf3",
      "Fewer iterations (under 4 minutes)", a->quick, a->json_path, [a] { return RunBenchAllreduce(*a); }, exit_code);
  CLI::Option* procs = cmd->add_option("--procs", a->procs, "Process counts, comma-separated")
                           ->delimiter(',')
                           ->check(CLI::Range(1, 64))
                           ->capture_default_str();
  cmd->add_option("--sizes", a->sizes,
                  "Message sizes (bytes, or with KiB/MiB), comma-separated (default 4KiB,1MiB,16MiB,64MiB; "
                  "with --hosts 16MiB,64MiB)")
      ->delimiter(',');
  cmd->add_option("--impls", a->impls,
                  "Implementations, comma-separated (default tenax,mpi,gloo, and sockets with --transports tcp; "
                  "with --hosts tenax, hierarchical when the hosts span zones, gloo when no delay is added, iperf3)")
      ->delimiter(',')
      ->check(CLI::IsMember({"tenax", "mpi", "gloo", "sockets", "hierarchical", "iperf3"}));
  cmd->add_option("--hosts", a->hosts,
                  "Run between namespaced hosts (root), one per zone name given, in rank order: e.g. a,a,a,a (one "
                  "zone) or a,b,a,b (two)")
      ->delimiter(',')
      ->excludes(procs);
  cmd->add_option("--same-zone-gbps", a->same_zone_gbps, "--hosts: egress rate to the same zone, Gbit/s (tc htb)")
      ->check(CLI::Range(0.001, 400.0))
      ->capture_default_str();
  cmd->add_option("--cross-zone-gbps", a->cross_zone_gbps, "--hosts: egress rate to other zones, Gbit/s (tc htb)")
      ->check(CLI::Range(0.001, 400.0))
      ->capture_default_str();
  cmd->add_option("--same-zone-delay-ms", a->same_zone_delay_ms,
                  "--hosts: one-way delay inside a zone, ms, at tenax's transport (Gloo and iperf3 do not see it)")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--cross-zone-delay-ms", a->cross_zone_delay_ms,
                  "--hosts: one-way delay between zones, ms, at tenax's transport")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--iperf-seconds", a->iperf_seconds, "--hosts: how long the iperf3 ring measures, seconds")
      ->check(CLI::Range(1.0, 600.0))
      ->capture_default_str();
  cmd->add_option("--iperf3", a->iperf3, "--hosts: the iperf3 program")->capture_default_str();
  cmd->add_option("--piece-bytes", a->piece_bytes,
                  "tenax's ring piece size, bytes (default: the library's, 1 MiB)")
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30));
  cmd->add_option("--window", a->window, "tenax's ring pieces in flight over the transport (default: the library's, 8)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{64}));
  cmd->add_option("--tcp-streams", a->tcp_streams,
                  "tenax's data connections per peer over TCP (net.tcp_streams; --transports tcp or --hosts)")
      ->check(CLI::Range(1, net::kMaxTcpStreams))
      ->capture_default_str();
  cmd->add_option("--budget-bytes", a->budget_bytes,
                  "Timed calls per size = max(min-iters, min(2000, budget/size)) (default 64 MiB quick, 256 MiB full)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  cmd->add_option("--min-iters", a->min_iters, "Minimum timed calls per size (default 5 quick, 10 full)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000}));
  cmd->add_option("--warmup", a->warmup, "Untimed calls per size (default 2 quick, 3 full)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  cmd->add_option("--transports", a->transports, "UCX transports of the tenax ranks (\"\" = shared memory, tcp)")
      ->check(CLI::IsMember({"", "tcp"}));
  cmd->add_option("--mpirun", a->mpirun, "Open MPI launcher")->capture_default_str();
  cmd->add_option("--mpi-bin", a->mpi_bin, "The MPI peer (default: tenax_bench_mpi_allreduce next to tenax-bench)");
  cmd->add_option("--gloo-bin", a->gloo_bin, "The Gloo peer (default: tenax_bench_gloo_allreduce next to tenax-bench)");
  cmd->add_option("--sockets-bin", a->sockets_bin,
                  "The plain-sockets ring (default: tenax_bench_socket_ring next to tenax-bench)");
  cmd->add_option("--timeout", a->timeout_seconds, "Time limit per (implementation, procs) run, seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();

  auto r = std::make_shared<RankArgs>();
  r->sizes = a->sizes;
  CLI::App* rank = bench.add_subcommand("allreduce-rank", "One tenax rank of 'bench allreduce' (internal)");
  rank->group("");  // hidden from --help
  rank->add_option("--rank", r->rank)->required();
  rank->add_option("--procs", r->procs)->required();
  rank->add_option("--rendezvous", r->rendezvous, "Directory for the ranks' port files")->required();
  rank->add_option("--sizes", r->sizes)->delimiter(',');
  rank->add_option("--budget-bytes", r->budget_bytes);
  rank->add_option("--min-iters", r->min_iters);
  rank->add_option("--warmup", r->warmup);
  rank->add_option("--transports", r->transports);
  rank->add_option("--addresses", r->addresses)->delimiter(',');
  rank->add_option("--zones", r->zones)->delimiter(',');
  rank->add_option("--algorithm", r->algorithm);
  rank->add_option("--piece-bytes", r->options.ring_piece_bytes);
  rank->add_option("--window", r->options.ring_window);
  rank->add_option("--tcp-streams", r->tcp_streams);
  rank->callback([r, &exit_code] {
    // Do not outlive the benchmark that started us.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    InitLogging("allreduce-rank-" + std::to_string(r->rank));
    Status st = RunRank(*r);
    exit_code = st.ok() ? 0 : cli::ReportError("bench allreduce-rank", st);
  });
}

}  // namespace tenax::bench
