// tenax bench allreduce --hosts ZONES: the allreduce between emulated hosts
// on this machine, one network namespace per host (sched::EmulatedNetwork,
// the network `tenax run` builds for a [topology]): each host's egress is
// shaped by tc htb (a same-zone and a cross-zone class), and delay is added
// at tenax's transport seam (no tc netem here), so only tenax's ranks see it.
//
// In one run, for every host in the given order (host i = rank i):
//   tenax         the flat ring (comm::Allreduce) over TCP between the hosts
//   hierarchical  comm::HierarchicalAllreduce over the same hosts (2+ zones)
//   gloo          Gloo's allreduce bound to the hosts' addresses; run only
//                 without added delay, which Gloo's traffic would not see
//   iperf3        the raw TCP ceiling on the same veths: one iperf3 flow per
//                 ring link (host i -> host i+1), all at once, as the ring's
//                 sends are; the slowest flow bounds a ring's bus bandwidth
// Every tenax rank counts the bytes it wrote to ranks of other zones; the
// table shows them per call for all ranks, and in zone-sums (the tensor's
// size): the hierarchical allreduce moves one zone-sum per zone across.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "allreduce_bench.h"
#include "bench_common.h"
#include "tenax/core/files.h"
#include "tenax/core/signals.h"
#include "tenax/net/emulated_links.h"
#include "tenax/sched/emulate/emulated_network.h"

namespace tenax::bench::allreduce {
namespace {

using namespace std::chrono_literals;

constexpr const char* kGlooBinName = "tenax_bench_gloo_allreduce";
constexpr const char* kIperfPort = "5201";

sched::TopologySpec MakeSpec(const HostsArgs& a) {
  sched::TopologySpec spec;
  spec.mode = "namespaces";  // the bandwidth must be the kernel's, as iperf3 and Gloo see it
  for (size_t i = 0; i < a.zones.size(); ++i) spec.hosts.push_back({"h" + std::to_string(i), a.zones[i], 1});
  spec.same_zone = {a.same_zone_delay_ms, 0.0, a.same_zone_gbps};
  spec.cross_zone = {a.cross_zone_delay_ms, 0.0, a.cross_zone_gbps};
  return spec;
}

int ZoneCount(const std::vector<std::string>& zones) {
  std::vector<std::string> z = zones;
  std::sort(z.begin(), z.end());
  return static_cast<int>(std::unique(z.begin(), z.end()) - z.begin());
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The iperf3 ring: the Gbit/s each flow host i -> host i+1 delivered.
Result<std::vector<double>> MeasureIperfRing(const sched::EmulatedNetwork& net, const HostsArgs& a) {
  const size_t n = a.zones.size();
  PeerGroup servers, clients;
  for (size_t i = 0; i < n; ++i) {
    TENAX_RETURN_IF_ERROR(servers.Start(
        "iperf3 server on h" + std::to_string(i),
        net.OnHost(i, {a.iperf3, "-s", "-1", "-B", net.HostAddress(i), "-p", kIperfPort, "--forceflush"})));
  }
  for (size_t i = 0; i < n; ++i) {
    TENAX_RETURN_IF_ERROR(servers
                              .WaitForLine(
                                  i, [](const std::string& l) { return l.find("Server listening") != std::string::npos; },
                                  Deadline::After(20s))
                              .status());
  }
  const std::string seconds = std::to_string(a.iperf_seconds);
  for (size_t i = 0; i < n; ++i) {
    const size_t to = (i + 1) % n;
    TENAX_RETURN_IF_ERROR(clients.Start("iperf3 h" + std::to_string(i) + " -> h" + std::to_string(to),
                                        net.OnHost(i, {a.iperf3, "-c", net.HostAddress(to), "-B", net.HostAddress(i),
                                                       "-p", kIperfPort, "-t", seconds, "-J"})));
  }
  const auto limit = std::chrono::seconds(static_cast<int64_t>(a.iperf_seconds) + 30);
  TENAX_RETURN_IF_ERROR(clients.Wait(Deadline::After(limit), "the iperf3 run's time limit"));
  TENAX_RETURN_IF_ERROR(servers.Wait(Deadline::After(20s), "the iperf3 servers' time limit"));
  std::vector<double> gbps;
  for (size_t i = 0; i < n; ++i) {
    std::string text;
    for (const auto& line : clients.Lines(i)) text += line + "\n";
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* bps = nullptr;
    if (j.is_object() && j.contains("end") && j["end"].contains("sum_received")) {
      bps = &j["end"]["sum_received"]["bits_per_second"];
    }
    if (!bps || !bps->is_number() || !(bps->get<double>() > 0)) {
      return Internal("iperf3 flow from h" + std::to_string(i) + " printed no received rate: " + text.substr(0, 400));
    }
    gbps.push_back(bps->get<double>() / 1e9);
  }
  return gbps;
}

// One implementation's processes, one per host; rank 0's results.
Result<std::vector<RunResult>> RunOnHosts(const sched::EmulatedNetwork& net, const HostsArgs& a,
                                          const std::string& impl, const std::string& bench_bin,
                                          const std::string& gloo_bin, const std::string& rendezvous) {
  const int n = static_cast<int>(a.zones.size());
  std::error_code ec;
  std::filesystem::create_directories(rendezvous, ec);
  if (ec) return IoError(rendezvous + ": cannot create: " + ec.message());
  std::vector<std::string> addresses;
  for (size_t i = 0; i < a.zones.size(); ++i) addresses.push_back(net.HostAddress(i));
  const std::vector<std::string> common = {
      "--sizes",     JoinSizes(a.sizes),          "--budget-bytes", std::to_string(a.budget_bytes),
      "--min-iters", std::to_string(a.min_iters), "--warmup",       std::to_string(a.warmup)};
  PeerGroup ranks;
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> argv;
    if (impl == "gloo") {
      argv = {gloo_bin,      "--rank",   std::to_string(r), "--procs", std::to_string(n),
              "--store-dir", rendezvous, "--host",          addresses[static_cast<size_t>(r)]};
    } else {
      argv = {bench_bin,      "allreduce-rank", "--rank",      std::to_string(r), "--procs",   std::to_string(n),
              "--rendezvous", rendezvous,       "--transports", "tcp",            "--addresses", Join(addresses),
              "--zones",      Join(a.zones),    "--algorithm", impl == "hierarchical" ? "hierarchical" : "ring"};
    }
    if (impl != "gloo" && a.piece_bytes) argv.insert(argv.end(), {"--piece-bytes", std::to_string(a.piece_bytes)});
    if (impl != "gloo" && a.window) argv.insert(argv.end(), {"--window", std::to_string(a.window)});
    if (impl != "gloo") argv.insert(argv.end(), {"--tcp-streams", std::to_string(a.tcp_streams)});
    argv.insert(argv.end(), common.begin(), common.end());
    TENAX_RETURN_IF_ERROR(ranks.Start(impl + " rank " + std::to_string(r), net.OnHost(static_cast<size_t>(r), argv)));
  }
  TENAX_RETURN_IF_ERROR(
      ranks.Wait(Deadline::After(std::chrono::seconds(a.timeout_seconds)), "the per-run time limit (--timeout)"));
  return ParseResults(ranks.Lines(0), impl, n, a.sizes);
}

}  // namespace

Status RunHostsBench(const HostsArgs& in) {
  HostsArgs a = in;
  const int n = static_cast<int>(a.zones.size());
  if (n < 2) return InvalidArgument("--hosts needs at least 2 hosts (one zone name per host, e.g. a,a,b,b)");
  for (const auto& z : a.zones) {
    if (z.empty()) return InvalidArgument("--hosts: an empty zone name (one zone name per host, e.g. a,a,b,b)");
  }
  if (!(a.same_zone_gbps > 0) || !(a.cross_zone_gbps > 0)) {
    return InvalidArgument("--same-zone-gbps and --cross-zone-gbps must be positive (tc htb needs a rate)");
  }
  const int zones = ZoneCount(a.zones);
  const bool delayed = a.same_zone_delay_ms > 0 || (zones > 1 && a.cross_zone_delay_ms > 0);
  if (a.impls.empty()) {
    a.impls = {"tenax"};
    if (zones > 1) a.impls.push_back("hierarchical");
    if (!delayed) a.impls.push_back("gloo");
    a.impls.push_back("iperf3");
  }
  for (const auto& impl : a.impls) {
    if (impl == "mpi") {
      return InvalidArgument("--impls mpi does not run with --hosts (mpirun starts its ranks outside the hosts' "
                             "namespaces); use tenax, hierarchical, gloo, iperf3");
    }
    if (impl == "sockets") {
      return InvalidArgument("--impls sockets runs only on this machine (--transports tcp); between hosts iperf3 "
                             "measures what TCP allows");
    }
    if (impl == "hierarchical" && zones < 2) {
      return InvalidArgument("--impls hierarchical needs hosts in at least 2 zones (--hosts " + Join(a.zones) + ")");
    }
  }
  auto wants = [&](const char* impl) { return std::count(a.impls.begin(), a.impls.end(), impl) > 0; };
  if (wants("gloo") && delayed) {
    spdlog::warn("gloo runs without the added delay (it lives at tenax's transport seam): compare its times "
                 "with tenax's only where no delay is set");
  }

  TENAX_ASSIGN_OR_RETURN(const std::string bench_bin, SelfExe());
  std::string gloo_bin;
  if (wants("gloo")) {
    TENAX_ASSIGN_OR_RETURN(gloo_bin, FindProgram(kGlooBinName, a.gloo_bin, "--gloo-bin"));
  }
  if (wants("iperf3")) TENAX_RETURN_IF_ERROR(CheckOnPath(a.iperf3, "--iperf3"));

  const sched::TopologySpec spec = MakeSpec(a);
  TENAX_ASSIGN_OR_RETURN(auto net, sched::EmulatedNetwork::Create(spec));
  UseFreshSecret();  // for the tenax ranks
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-allreduce-hosts"));
  const std::string links = work.path() + "/emulated_links.json";
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(links, spec.ToEmulatedLinks(/*with_bandwidth=*/false).ToJson() + "\n"));
  ::setenv(net::kEmulatedLinksEnvVar, links.c_str(), 1);  // the ranks' transport seam adds the delays

  spdlog::info("allreduce between {} namespaced hosts (zones {}): same zone {} Gbit/s + {} ms, cross zone {} Gbit/s "
               "+ {} ms; impls {}; sizes {}",
               n, Join(a.zones), a.same_zone_gbps, a.same_zone_delay_ms, a.cross_zone_gbps, a.cross_zone_delay_ms,
               Join(a.impls), JoinSizes(a.sizes));
  const auto started = SteadyClock::now();
  std::vector<RunResult> results;
  std::vector<std::string> failures;
  std::optional<std::vector<double>> ceiling;
  for (const std::string& impl : a.impls) {
    if (StopRequested()) return Cancelled("benchmark stopped");
    const auto t0 = SteadyClock::now();
    spdlog::info("{} on {} hosts ...", impl, n);
    if (impl == "iperf3") {
      auto flows = MeasureIperfRing(*net, a);
      if (!flows.ok()) {
        failures.push_back("iperf3: " + flows.status().message());
        spdlog::error("{}", failures.back());
        continue;
      }
      for (size_t i = 0; i < flows->size(); ++i) {
        spdlog::info("iperf3 h{} -> h{}: {:.2f} Gbit/s", i, (i + 1) % flows->size(), (*flows)[i]);
      }
      ceiling = *flows;
      continue;
    }
    const std::string dir = work.path() + "/run-" + impl;
    auto r = RunOnHosts(*net, a, impl, bench_bin, gloo_bin, dir);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kCancelled) return r.status();
      failures.push_back(impl + ": " + r.status().message());
      spdlog::error("{}", failures.back());
      continue;
    }
    for (const auto& x : *r) {
      spdlog::info("{:>12} {:>7}: {:>10}  {:7.3f} GB/s bus  ({} iterations)", impl, HumanBytes(x.bytes),
                   HumanSeconds(x.seconds), BusBandwidthGBps(n, x.bytes, x.seconds), x.iterations);
      results.push_back(x);
    }
    spdlog::info("{} took {:.1f} s", impl, Seconds(SteadyClock::now() - t0).count());
  }
  net->Remove();
  const double wall = Seconds(SteadyClock::now() - started).count();

  auto find = [&](const std::string& impl, uint64_t bytes) -> const RunResult* {
    for (const auto& r : results) {
      if (r.impl == impl && r.bytes == bytes) return &r;
    }
    return nullptr;
  };
  std::optional<double> ceiling_gbytes;  // the slowest ring flow, GB/s
  if (ceiling && !ceiling->empty()) ceiling_gbytes = *std::min_element(ceiling->begin(), ceiling->end()) / 8.0;

  std::printf("\nallreduce between %d namespaced hosts, zones %s; time = max over ranks of each rank's median call\n",
              n, Join(a.zones).c_str());
  std::printf("same zone %.3g Gbit/s + %.3g ms, cross zone %.3g Gbit/s + %.3g ms (delay at tenax's transport only)\n",
              a.same_zone_gbps, a.same_zone_delay_ms, a.cross_zone_gbps, a.cross_zone_delay_ms);
  std::printf("%-12s %8s | %10s %9s | %16s %10s\n", "impl", "size", "time", "bus GB/s", "cross-zone/call",
              "zone-sums");
  for (uint64_t bytes : a.sizes) {
    for (const auto& impl : a.impls) {
      const RunResult* r = find(impl, bytes);
      if (!r) continue;
      std::string cross = "-", sums = "-";
      if (r->cross_zone_bytes >= 0) {
        cross = HumanBytes(static_cast<uint64_t>(r->cross_zone_bytes));
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f", r->cross_zone_bytes / static_cast<double>(bytes));
        sums = buf;
      }
      std::printf("%-12s %8s | %10s %9.3f | %16s %10s\n", impl.c_str(), HumanBytes(bytes).c_str(),
                  HumanSeconds(r->seconds).c_str(), BusBandwidthGBps(n, bytes, r->seconds), cross.c_str(),
                  sums.c_str());
    }
  }
  if (ceiling_gbytes) {
    std::printf("iperf3 ring (%d flows at once, %.0f s): slowest flow %.3f GB/s (%.2f Gbit/s)\n", n, a.iperf_seconds,
                *ceiling_gbytes, *ceiling_gbytes * 8);
  }
  std::printf("(bus GB/s: 2(n-1)/n * bytes / time; zone-sums: cross-zone bytes per call, all ranks, / size)\n\n");

  nlohmann::json verdicts = nlohmann::json::array();
  for (uint64_t bytes : a.sizes) {
    const RunResult* ring = find("tenax", bytes);
    const RunResult* hier = find("hierarchical", bytes);
    const RunResult* gloo = find("gloo", bytes);
    if (ring && hier) {
      const double ratio = hier->seconds / ring->seconds;
      std::printf("%s: hierarchical takes %.3f of the flat ring's time (target <= 0.5)%s\n", HumanBytes(bytes).c_str(),
                  ratio, ratio <= 0.5 ? ": met" : ": MISSED");
      verdicts.push_back({{"bytes", bytes}, {"what", "hierarchical_vs_ring"}, {"ratio", ratio}, {"target", 0.5}});
    }
    if (ring && ceiling_gbytes && zones == 1) {
      const double share = BusBandwidthGBps(n, bytes, ring->seconds) / *ceiling_gbytes;
      std::printf("%s: the flat ring reaches %.0f%% of the iperf3 ceiling (target >= 80%%)%s\n",
                  HumanBytes(bytes).c_str(), share * 100, share >= 0.8 ? ": met" : ": MISSED");
      verdicts.push_back({{"bytes", bytes}, {"what", "ring_vs_iperf3"}, {"ratio", share}, {"target", 0.8}});
    }
    if (ring && gloo && !delayed) {
      const double ratio = ring->seconds / gloo->seconds;
      std::printf("%s: tenax takes %.3f of Gloo's time\n", HumanBytes(bytes).c_str(), ratio);
      verdicts.push_back({{"bytes", bytes}, {"what", "tenax_vs_gloo"}, {"ratio", ratio}});
    }
  }
  std::printf("wall time: %.1f s\n", wall);
  std::fflush(stdout);

  nlohmann::json jresults = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json j = {{"impl", r.impl},
                        {"hosts", r.procs},
                        {"bytes", r.bytes},
                        {"seconds", r.seconds},
                        {"busbw_gbps", BusBandwidthGBps(r.procs, r.bytes, r.seconds)},
                        {"iterations", r.iterations}};
    if (r.cross_zone_bytes >= 0) j["cross_zone_bytes_per_call"] = r.cross_zone_bytes;
    jresults.push_back(j);
  }
  nlohmann::json out = {{"benchmark", "allreduce_hosts"},
                        {"quick", a.quick},
                        {"zones", a.zones},
                        {"same_zone", {{"gbps", a.same_zone_gbps}, {"delay_ms", a.same_zone_delay_ms}}},
                        {"cross_zone", {{"gbps", a.cross_zone_gbps}, {"delay_ms", a.cross_zone_delay_ms}}},
                        {"budget_bytes", a.budget_bytes},
                        {"min_iters", a.min_iters},
                        {"warmup", a.warmup},
                        {"wall_seconds", wall},
                        {"results", jresults},
                        {"iperf3_flow_gbits", ceiling ? nlohmann::json(*ceiling) : nlohmann::json(nullptr)},
                        {"verdicts", verdicts},
                        {"failures", failures}};
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, out));
  return FailuresStatus(failures);
}

}  // namespace tenax::bench::allreduce
