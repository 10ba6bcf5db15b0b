// `tenax run` on an emulated topology: real network namespaces, veths and
// tc htb made (and removed) by the launcher, real `tenax probe`s measuring
// the links, and a network-aware placement that keeps the workers in one
// zone; a worker SIGKILLed while the zone-hierarchical allreduce crosses
// zones. Where namespaces cannot be made (not root), the namespace tests are
// skipped with the reason printed; the loopback test runs everywhere.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "tenax/sched/probe/link_metrics.h"
#include "testing.h"

namespace tenax::testing {
namespace {

using namespace std::chrono_literals;

class TopologyClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TENAX_SECRET", "topology-test-secret-0123456789", 1); }
};

std::string WriteJob(const ScratchDir& dir, const std::string& policy, const std::string& mode) {
  const std::string path = dir / ("topo-" + policy + ".toml");
  std::ofstream out(path);
  out << "mode = \"sync\"\n[cluster]\nworkers = 2\njob_id = \"topo\"\npeer_timeout_seconds = 5\n"
      << "join_timeout_seconds = 60\nstep_timeout_seconds = 30\n"
      << "[topology]\nmode = \"" << mode << "\"\n"
      << "hosts = [ { name = \"a1\", zone = \"za\" }, { name = \"b1\", zone = \"zb\" },\n"
      << "          { name = \"a2\", zone = \"za\" }, { name = \"b2\", zone = \"zb\" } ]\n"
      << "same_zone = { delay_ms = 0.0, bandwidth_gbps = 2 }\n"
      << "cross_zone = { delay_ms = 10.0, bandwidth_gbps = 0.05 }\n"
      << "[placement]\npolicy = \"" << policy << "\"\nprobe_seconds = 20\n"
      << "[data]\ntrain_limit = 2048\ntest_limit = 500\n"
      << "[model]\nname = \"mlp\"\n"
      << "[train]\nepochs = 1\nmax_steps = 16\nbatch_size = 32\nthreads = 1\n"
      << "[log]\nevery_steps = 8\n";
  return path;
}

nlohmann::json Link(const nlohmann::json& placement, const std::string& a, const std::string& b) {
  for (const auto& l : placement["links"]["links"]) {
    if ((l["a"] == a && l["b"] == b) || (l["a"] == b && l["b"] == a)) return l;
  }
  return nlohmann::json();
}

// An elastic job of 4 workers (min 2) spread over 2 zones x 2 hosts on
// loopback, one slot each: a1 and a2 in za, b1 and b2 in zb; spread
// placement puts worker 0 on a1, 1 on b1, 2 on a2 and 3 on b2. An mlp on
// 4096 samples for `steps` steps; `train` goes into [train], `faults` last.
std::string WriteFourHostElasticJob(const ScratchDir& dir, const std::string& job_id, const std::string& cross_zone,
                                    int steps, const std::string& train, const std::string& faults) {
  const std::string path = dir / (job_id + ".toml");
  std::ofstream out(path);
  out << "mode = \"sync\"\n[cluster]\nworkers = 4\njob_id = \"" << job_id << "\"\nelastic = true\nmin_workers = 2\n"
      << "max_workers = 4\npeer_timeout_seconds = 5\njoin_timeout_seconds = 60\nstep_timeout_seconds = 30\n"
      << "[topology]\nmode = \"loopback\"\n"
      << "hosts = [ { name = \"a1\", zone = \"za\", slots = 1 }, { name = \"b1\", zone = \"zb\", slots = 1 },\n"
      << "          { name = \"a2\", zone = \"za\", slots = 1 }, { name = \"b2\", zone = \"zb\", slots = 1 } ]\n"
      << "same_zone = { delay_ms = 0.0, bandwidth_gbps = 10 }\n"
      << "cross_zone = " << cross_zone << "\n"
      << "[placement]\npolicy = \"spread\"\nprobe_seconds = 2\n"
      << "[data]\ntrain_limit = 4096\ntest_limit = 500\n"
      << "[model]\nname = \"mlp\"\n"
      << "[train]\nepochs = 100\nmax_steps = " << steps << "\nbatch_size = 32\nthreads = 1\nlr = 0.05\nmomentum = 0.9\n"
      << train << "[log]\nevery_steps = 20\n"
      << faults;
  return path;
}

// Namespaces named after the launcher's pid that still exist.
std::vector<std::string> NamespacesOf(pid_t launcher) {
  std::vector<std::string> left;
  std::error_code ec;
  const std::string prefix = "tnx" + std::to_string(launcher) + "-";
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) left.push_back(name);
  }
  return left;
}

TEST_F(TopologyClusterTest, NetworkAwarePlacementKeepsTheWorkersInOneZoneOnRealNamespaces) {
  if (std::string why = NamespacesUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScratchDir dir;
  const std::string job = WriteJob(dir, "network_aware", "namespaces");
  Child run({TenaxBinary(), "run", job, "--out", dir / "out"});
  const pid_t launcher = run.pid();
  ASSERT_EQ(run.Wait(), 0) << run.stderr_text();
  EXPECT_TRUE(NamespacesOf(launcher).empty()) << "the launcher left namespaces behind";
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  const auto& p = summary["placement"];
  // One zone, short links: net.tcp_streams "auto" takes one stream unless
  // the probes saw two or more of five pings lost, which the launcher
  // printed and the summary holds (a loaded machine delays one ping now
  // and then; sched's unit test holds the rule's values).
  const auto& worst = p["worst_worker_link"];
  ASSERT_TRUE(worst.is_object()) << p.dump();
  EXPECT_LT(worst["rtt_ms"].get<double>(), 10.0) << worst.dump();
  const int streams = sched::AutoTcpStreams(
      sched::LinkMetrics{worst["rtt_ms"].get<double>(), worst["loss"].get<double>(), 1.0, worst["reachable"].get<bool>()});
  EXPECT_NE(std::string::npos,
            run.stderr_text().find("net.tcp_streams (auto): " + std::to_string(streams) + " per peer"))
      << run.stderr_text();
  EXPECT_EQ(p["mode"], "namespaces");
  EXPECT_EQ(p["policy"], "network_aware");
  ASSERT_EQ(p["worker_zones"].size(), 1u) << p.dump();
  // The probes saw what the topology declares: cross-zone reads take at
  // least the 10 ms delay (transport seam; a loaded machine only adds to
  // it) and cross-zone writes are throttled to 0.05 Gbit/s (tc htb).
  const auto same = Link(p, "a1", "a2");
  const auto cross = Link(p, "a1", "b1");
  ASSERT_FALSE(same.is_null()) << p["links"].dump();
  ASSERT_FALSE(cross.is_null()) << p["links"].dump();
  EXPECT_GE(cross["rtt_ms"].get<double>(), 10.0) << p["links"].dump();
  EXPECT_GT(cross["rtt_ms"].get<double>(), same["rtt_ms"].get<double>()) << p["links"].dump();
  EXPECT_LT(cross["throughput_gbps"].get<double>(), 0.1) << p["links"].dump();
  EXPECT_GT(same["throughput_gbps"].get<double>(), 3 * cross["throughput_gbps"].get<double>()) << p["links"].dump();
  // The job trained: its steps are all there.
  EXPECT_EQ(summary["steps"].get<int64_t>(), 16);
}

TEST_F(TopologyClusterTest, SpreadPlacementCrossesZonesAndSigtermRemovesTheNamespaces) {
  if (std::string why = NamespacesUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScratchDir dir;
  const std::string job = WriteJob(dir, "spread", "namespaces");
  {
    Child run({TenaxBinary(), "run", job, "--out", dir / "out"});
    ASSERT_EQ(run.Wait(), 0) << run.stderr_text();
    auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
    ASSERT_FALSE(summary.is_discarded());
    EXPECT_EQ(summary["placement"]["worker_zones"].size(), 2u) << summary["placement"].dump();
    // The workers span a 10 ms link: "auto" takes 4 TCP streams per peer,
    // and the job trains over them to its last step.
    EXPECT_NE(std::string::npos, run.stderr_text().find("net.tcp_streams (auto): 4 per peer")) << run.stderr_text();
    EXPECT_EQ(16, summary.value("steps", 0));
  }
  // Stopped while its workers run: every child stops and the namespaces go.
  Child run({TenaxBinary(), "run", job, "--out", dir / "out2", "--set", "train.max_steps=100000",
             "--set", "train.epochs=50"});
  const pid_t launcher = run.pid();
  ASSERT_TRUE(run.WaitForStderrLine("logs in", 120s)) << run.stderr_text();
  EXPECT_FALSE(NamespacesOf(launcher).empty());
  run.Signal(SIGTERM);
  EXPECT_EQ(run.Wait(60s), 130) << run.stderr_text();
  EXPECT_TRUE(NamespacesOf(launcher).empty()) << "the launcher left namespaces behind after SIGTERM";
}

// Four workers on a1, b1, a2, b2 (spread), the zone-hierarchical allreduce
// forced: every step's cross-zone exchange waits at least the 10 ms delay,
// so the SIGKILL lands in or next to one. The run ends as a fixed sync
// job's does (exit 3, the lost rank named with its namespaced host's
// address), by the reset connection or the peer timeout rather than the
// step timeout; no worker outlives it and the namespaces go.
TEST_F(TopologyClusterTest, WorkerKilledDuringACrossZoneHierarchicalExchangeIsNamedAndEndsTheRun) {
  if (std::string why = NamespacesUnavailable(); !why.empty()) GTEST_SKIP() << why;
  ScratchDir dir;
  const std::string job = WriteJob(dir, "spread", "namespaces");
  const std::string out = dir / "out";
  Child run({TenaxBinary(), "run", job, "--out", out, "--set", "cluster.workers=4", "--set",
             "train.allreduce=hierarchical", "--set", "placement.probe_seconds=2", "--set", "train.max_steps=100000",
             "--set", "train.epochs=50"});
  const pid_t launcher = run.pid();
  ASSERT_TRUE(run.WaitForStderrLine("allreduce: hierarchical", 120s)) << run.stderr_text();
  ASSERT_TRUE(run.WaitForStderrLine("step", 120s)) << run.stderr_text();
  auto victims = ProcessesMentioning("--rank 1 --out " + out);
  ASSERT_EQ(1u, victims.size()) << run.stderr_text();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(0, ::kill(victims[0], SIGKILL));
  EXPECT_EQ(3, run.Wait(60s)) << run.stderr_text();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LT(seconds, 30.0) << "the loss waited for the step timeout (30 s), not the peer timeout (5 s)";
  EXPECT_NE(std::string::npos, run.stderr_text().find("rank 1 on 10.77.0.")) << run.stderr_text();
  EXPECT_TRUE(ProcessesMentioning(out).empty()) << "workers outlived the run";
  EXPECT_TRUE(NamespacesOf(launcher).empty()) << "the launcher left namespaces behind";
}

TEST_F(TopologyClusterTest, LoopbackModeEmulatesTheLinksAtTheTransportAndSaysSo) {
  ScratchDir dir;
  const std::string job = WriteJob(dir, "network_aware", "loopback");
  Child run({TenaxBinary(), "run", job, "--out", dir / "out"});
  ASSERT_EQ(run.Wait(), 0) << run.stderr_text();
  EXPECT_NE(run.stderr_text().find("emulated topology on loopback"), std::string::npos) << run.stderr_text();
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  const auto& p = summary["placement"];
  EXPECT_EQ(p["mode"], "loopback");
  EXPECT_EQ(p["worker_zones"].size(), 1u) << p.dump();
  const auto same = Link(p, "a1", "a2");
  const auto cross = Link(p, "a1", "b1");
  ASSERT_FALSE(cross.is_null()) << p["links"].dump();
  ASSERT_FALSE(same.is_null()) << p["links"].dump();
  EXPECT_GE(cross["rtt_ms"].get<double>(), 10.0) << p["links"].dump();
  EXPECT_GT(cross["rtt_ms"].get<double>(), same["rtt_ms"].get<double>()) << p["links"].dump();
  EXPECT_LT(cross["throughput_gbps"].get<double>(), 0.1) << p["links"].dump();
}

// The last "state fnv1a H" (final model and momentum) a worker logged.
std::string StateHash(const std::string& log) {
  const std::string key = "state fnv1a ";
  const size_t at = log.rfind(key);
  return at == std::string::npos ? "" : log.substr(at + key.size(), 16);
}

// An elastic job across two zones (loopback mode: runs without root),
// four workers spread over a1, b1, a2, b2, the hierarchical allreduce
// asked for. Each generation works its zones out: the first sums zone by
// zone; after worker 1 (on b1) is SIGKILLed, three members in zones of 2
// and 1 fall back to the flat ring, saying why; the replacement takes the
// freed slot on b1, so the third generation is two and two again and sums
// zone by zone. Everyone ends with the same state.
TEST_F(TopologyClusterTest, AnElasticJobSumsZoneByZoneInEveryGenerationWhoseZonesAreEven) {
  ScratchDir dir;
  const std::string job = WriteFourHostElasticJob(dir, "ezones", "{ delay_ms = 2.0, bandwidth_gbps = 10 }", 400,
                                                  "allreduce = \"hierarchical\"\n",
                                                  "[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 40\n"
                                                  "[[faults]]\naction = \"restart\"\nat_step = 100\n");
  auto r = RunProcess({TenaxBinary(), "run", job, "--out", dir / "out"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("allreduce: hierarchical")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("joiner 1 placed on b1 (zb)")) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(400, summary.value("steps", 0));
  const auto& g = summary["generations"];
  ASSERT_EQ(3u, g.size()) << summary.dump();
  EXPECT_EQ("hierarchical", g[0].value("allreduce", "")) << g.dump();
  EXPECT_EQ("zone by zone (za: 2, zb: 2)", g[0].value("allreduce_why", "")) << g.dump();
  EXPECT_EQ("ring", g[1].value("allreduce", "")) << g.dump();
  EXPECT_EQ("flat ring, zones of unequal size (za: 2, zb: 1)", g[1].value("allreduce_why", "")) << g.dump();
  EXPECT_EQ("hierarchical", g[2].value("allreduce", "")) << g.dump();
  EXPECT_EQ("zone by zone (za: 2, zb: 2)", g[2].value("allreduce_why", "")) << g.dump();
  // The last generation's sum: rank 0 (a1) wrote into both zones.
  const auto& sent = summary["allreduce"]["rank_bytes_sent"];
  EXPECT_EQ("hierarchical", summary["allreduce"].value("algorithm", "")) << summary["allreduce"].dump();
  EXPECT_GT(sent.value("same_zone", uint64_t{0}), 0u) << sent.dump();
  EXPECT_GT(sent.value("cross_zone", uint64_t{0}), 0u) << sent.dump();
  // The survivors and the joiner end bit-identical.
  const std::string h = StateHash(ReadText(dir / "out/logs/worker-0.log"));
  ASSERT_EQ(16u, h.size());
  EXPECT_EQ(h, StateHash(ReadText(dir / "out/logs/worker-2.log")));
  EXPECT_EQ(h, StateHash(ReadText(dir / "out/logs/worker-3.log")));
  EXPECT_EQ(h, StateHash(ReadText(dir / "out/logs/joiner-1.log")));
}

// Link faults at the transport seam (docs/config.md): a link that drops
// everything, a link 10x slower and a host cut off from its zone, each
// shorter than the peer timeout. The job rides through them: no member is
// lost (one generation), every step trains, the members end bit-identical,
// and the workers' logs show each fault reaching the transport.
TEST_F(TopologyClusterTest, LinkFaultsShorterThanThePeerTimeoutCostNoMember) {
  ScratchDir dir;
  const std::string job = WriteFourHostElasticJob(
      dir, "lfaults", "{ delay_ms = 1.0, bandwidth_gbps = 1 }", 300, "",
      "[[faults]]\naction = \"drop_link\"\nworkers = [0, 1]\nseconds = 1.5\nat_step = 40\n"
      "[[faults]]\naction = \"slow_link\"\nworkers = [0, 2]\nseconds = 2\nat_step = 120\n"
      "[[faults]]\naction = \"partition\"\nworker = 3\nseconds = 1.5\nat_step = 200\n");
  auto r = RunProcess({TenaxBinary(), "run", job, "--out", dir / "out"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(300, summary.value("steps", 0));
  EXPECT_EQ(1u, summary["generations"].size()) << "a member was lost: " << summary["generations"].dump();
  std::vector<std::string> fired;
  for (const auto& f : summary["faults"]) {
    if (f.value("event", "") == "fault") fired.push_back(f.value("action", ""));
  }
  EXPECT_EQ((std::vector<std::string>{"drop_link", "slow_link", "partition"}), fired) << summary["faults"].dump();
  // Spread placement: worker 0 on a1, 1 on b1, 2 on a2, 3 on b2. Each fault
  // reached both ends of its links.
  const std::string w0 = ReadText(dir / "out/logs/worker-0.log");
  const std::string w1 = ReadText(dir / "out/logs/worker-1.log");
  const std::string w2 = ReadText(dir / "out/logs/worker-2.log");
  const std::string w3 = ReadText(dir / "out/logs/worker-3.log");
  EXPECT_NE(std::string::npos, w0.find("(host b1) drops everything")) << w0;
  EXPECT_NE(std::string::npos, w1.find("(host a1) drops everything")) << w1;
  EXPECT_NE(std::string::npos, w0.find("(host a2) is 10x slower")) << w0;
  EXPECT_NE(std::string::npos, w2.find("(host a1) is 10x slower")) << w2;
  EXPECT_NE(std::string::npos, w3.find("(host b1) drops everything")) << w3;
  EXPECT_NE(std::string::npos, w1.find("(host b2) drops everything")) << w1;
  EXPECT_EQ(std::string::npos, w3.find("(host a1) drops everything")) << "a partition cuts the zone only: " << w3;
  const std::string h = StateHash(w0);
  ASSERT_EQ(16u, h.size());
  EXPECT_EQ(h, StateHash(w1));
  EXPECT_EQ(h, StateHash(w2));
  EXPECT_EQ(h, StateHash(w3));
}

// An elastic job of 2 workers (min 1) with placement.migrate on one-slot
// hosts of zone za (loopback), an mlp for `steps` steps, the flat ring, and
// a bad NIC for the rest of the run (slow_host: every link 10x slower and
// 20 ms more each way), aimed by `target` ("worker = 1\nat_step = 40\n").
std::string WriteMigrationJob(const ScratchDir& dir, const std::string& job_id, const std::vector<std::string>& hosts,
                              int steps, const std::string& target) {
  const std::string path = dir / (job_id + ".toml");
  std::ofstream out(path);
  out << "mode = \"sync\"\n[cluster]\nworkers = 2\njob_id = \"" << job_id << "\"\nelastic = true\nmin_workers = 1\n"
      << "peer_timeout_seconds = 5\njoin_timeout_seconds = 60\nstep_timeout_seconds = 30\n"
      << "[topology]\nmode = \"loopback\"\nhosts = [ ";
  for (size_t i = 0; i < hosts.size(); ++i) out << (i ? ", " : "") << "{ name = \"" << hosts[i] << "\", zone = \"za\" }";
  out << " ]\nsame_zone = { delay_ms = 0.0, bandwidth_gbps = 10 }\n"
      << "[placement]\nprobe_seconds = 2\nmigrate = true\nlink_half_life_seconds = 2\nmigrate_max_rtt_ms = 10\n"
      << "migrate_min_gbps = 0\n"
      << "[data]\ntrain_limit = 4096\ntest_limit = 500\n[model]\nname = \"mlp\"\n"
      << "[train]\nepochs = 100\nmax_steps = " << steps << "\nbatch_size = 32\nthreads = 1\nlr = 0.05\nmomentum = 0.9\n"
      << "allreduce = \"ring\"\n[log]\nevery_steps = 100\n"
      << "[[faults]]\naction = \"slow_host\"\nfactor = 10\ndelay_ms = 20\nseconds = 3600\n" << target;
  return path;
}

// Live migration (placement.migrate, docs/placement.md): two workers on
// three one-slot hosts of one zone (loopback); at step 40 worker 1's host
// gets a bad NIC for the rest of the run (every link 10x slower and 20 ms
// more each way, at the transport seam). The probes see it, the launcher
// starts a migrant on the free host, and once it is warm worker 1 leaves
// at a step boundary and the migrant takes its place with the live state.
// The job ends with every step trained, the survivor and the migrant
// bit-identical, and the move in summary.json with its reason.
TEST_F(TopologyClusterTest, ALiveWorkerMovesOffAHostWhoseLinksDegradeAndEndsBitIdentical) {
  ScratchDir dir;
  const std::string path = WriteMigrationJob(dir, "migrate", {"a1", "a2", "a3"}, 1500, "worker = 1\nat_step = 40\n");
  auto r = RunProcess({TenaxBinary(), "run", path, "--out", dir / "out"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(1500, summary.value("steps", 0));
  // Where placement put worker 1, and the host left free.
  std::string w1_host, free_host = "a1a2a3";
  for (const auto& slot : summary["placement"]["slots"]) {
    const std::string h = slot.value("host", "");
    if (slot.value("index", -1) == 1) w1_host = h;
    free_host.erase(free_host.find(h), h.size());
  }
  ASSERT_EQ(2u, w1_host.size()) << summary["placement"].dump();
  ASSERT_EQ(2u, free_host.size()) << summary["placement"].dump();
  nlohmann::json moves = nlohmann::json::array();  // the moves made (a noisy probe round may also skip one)
  for (const auto& m : summary["migrations"]) {
    if (m.value("outcome", "") != "skipped") moves.push_back(m);
  }
  ASSERT_EQ(1u, moves.size()) << summary.dump();
  EXPECT_EQ("moved", moves[0].value("outcome", "")) << moves.dump();
  EXPECT_EQ("worker 1", moves[0].value("member", "")) << moves.dump();
  EXPECT_EQ(w1_host + " (za)", moves[0].value("from", "")) << moves.dump();
  EXPECT_EQ(free_host + " (za)", moves[0].value("to", "")) << moves.dump();
  EXPECT_NE(std::string::npos, moves[0].value("reason", "").find("rtt")) << moves.dump();
  EXPECT_LE(moves[0].value("warm_seconds", 1e9), moves[0].value("member_seconds", 0.0)) << moves.dump();
  EXPECT_NE(std::string::npos, r.err.find("migration done: worker 1 moved from " + w1_host)) << r.err;
  // Two generations: the first, and the one where the migrant took worker 1's place.
  const auto& g = summary["generations"];
  ASSERT_EQ(2u, g.size()) << g.dump();
  const std::string migrant = ReadText(dir / "out/logs/migrant-1.log");
  EXPECT_NE(std::string::npos, migrant.find("admitted in generation")) << migrant;
  EXPECT_NE(std::string::npos, ReadText(dir / "out/logs/worker-1.log").find("is 10x slower")) << "the fault reached worker 1";
  const std::string h = StateHash(ReadText(dir / "out/logs/worker-0.log"));
  ASSERT_EQ(16u, h.size());
  EXPECT_EQ(h, StateHash(migrant));
}

// The same bad NIC with no host to move to (two one-slot hosts, both
// taken): the move is skipped and said once, never looped, and the job
// trains on, slowly, to its last step.
TEST_F(TopologyClusterTest, AMemberNoHostCanTakeStaysWhereItIsAndTheSkipIsSaidOnce) {
  ScratchDir dir;
  const std::string path = WriteMigrationJob(dir, "nomove", {"a1", "a2"}, 400, "host = \"a2\"\nat_step = 20\n");
  auto r = RunProcess({TenaxBinary(), "run", path, "--out", dir / "out"});
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto summary = nlohmann::json::parse(ReadText(dir / "out/summary.json"), nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_EQ(400, summary.value("steps", 0));
  EXPECT_EQ(1u, summary["generations"].size()) << "nobody moved: " << summary["generations"].dump();
  const auto& moves = summary["migrations"];
  ASSERT_EQ(1u, moves.size()) << "said once, not looped: " << moves.dump();
  EXPECT_EQ("skipped", moves[0].value("outcome", "")) << moves.dump();
  EXPECT_EQ("no other host has a free slot", moves[0].value("why_not", "")) << moves.dump();
  size_t said = 0;
  for (size_t at = r.err.find("migration skipped:"); at != std::string::npos; at = r.err.find("migration skipped:", at + 1)) ++said;
  EXPECT_EQ(1u, said) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "out/logs/migrant-1.log")) << "no migrant was started";
}

TEST_F(TopologyClusterTest, ABadTopologyIsRefusedBeforeAnythingStarts) {
  ScratchDir dir;
  const std::string job = WriteJob(dir, "network_aware", "loopback");
  auto r = RunProcess({TenaxBinary(), "run", job, "--out", dir / "out", "--set", "cluster.workers=5"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("the hosts have 4 slots but the job starts 5 processes"), std::string::npos) << r.err;
  auto p = RunProcess({TenaxBinary(), "run", job, "--out", dir / "out", "--set", "placement.policy=closest"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("placement.policy"), std::string::npos) << p.err;
}

}  // namespace
}  // namespace tenax::testing
