// The README's main command, short: `tenax run examples/quickstart.toml`
// (examples/cloud.toml made short) end to end with every fault it
// schedules, as real processes: an emulated 2-zone cloud (namespaces as
// root, loopback otherwise), a store of 6 `tenax storage` processes the
// launcher fills, a worker SIGKILLed and replaced, a data node SIGKILLed with
// its directory wiped (the workers read around it and run a PRM recovery), a
// worker preempted (SIGTERM) and replaced, a persistent 3x straggler, and
// the fault-free reference run first. Checks what a user reads afterwards:
// summary.json's faults with reactions and times to recover, the reference
// accuracy, the workers' states in metrics.jsonl, report.html, and that
// nothing is left running.
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing.h"

namespace tenax::testing {
namespace {

using namespace std::chrono_literals;

std::vector<nlohmann::json> Records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

const nlohmann::json* FaultOf(const nlohmann::json& faults, const std::string& name) {
  for (const auto& f : faults) {
    if (f.value("fault", "") == name) return &f;
  }
  return nullptr;
}

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// The NUL-separated strings of /proc/<pid>/<file> (environ, cmdline); empty
// when the process is gone, a zombie, or not ours to read.
std::vector<std::string> ProcStrings(pid_t pid, const char* file) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file, std::ios::binary);
  std::vector<std::string> out;
  std::string item;
  while (std::getline(in, item, '\0')) out.push_back(item);
  return out;
}

// Whether `pid` is a live process of the run in `out`: `tenax run` sets
// TENAX_RUN_METRICS=<out>/metrics.jsonl (include/tenax/core/metrics.h)
// before it starts the coordinator, the storage nodes, the probe agents and
// the workers, and every one of them inherits it (the reference run's
// children have <out>/reference/metrics.jsonl). A pid the kernel gave to an
// unrelated process since (pid_max may be 32768) does not count.
bool OfRun(pid_t pid, const std::string& out) {
  const std::string marker = "TENAX_RUN_METRICS=" + out + "/";
  for (const std::string& e : ProcStrings(pid, "environ")) {
    if (e.rfind(marker, 0) == 0) return true;
  }
  return false;
}

struct LiveProcess {
  pid_t pid;
  std::string role;     // argv[1]: coordinator, storage, probe, worker, store, ...
  std::string command;  // the whole command line, for messages
};

// Every live process of the run in `out`, found in /proc by its environment.
std::vector<LiveProcess> ProcessesOfRun(const std::string& out) {
  std::vector<LiveProcess> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str()));
    if (!OfRun(pid, out)) continue;
    const std::vector<std::string> argv = ProcStrings(pid, "cmdline");
    std::string command;
    for (const auto& a : argv) command += (command.empty() ? "" : " ") + a;
    found.push_back({pid, argv.size() > 1 ? argv[1] : "", command});
  }
  return found;
}

std::string Describe(const std::vector<LiveProcess>& ps) {
  std::string s;
  for (const auto& p : ps) s += "  pid " + std::to_string(p.pid) + ": " + p.command + "\n";
  return s;
}

// On a failure, the end of every log the run wrote (workers, joiners,
// coordinator, storage nodes) before the scratch directory goes: a worker
// that left on its own says why only there.
// `out`: the run's folder; its fault-free reference run's log and logs too
// (a reference run that failed says why only there).
struct LogsOnFailure {
  std::string out;
  ~LogsOnFailure() {
    if (!::testing::Test::HasFailure()) return;
    std::vector<std::filesystem::path> files = {out + "/reference.log"};
    for (const std::string& logs : {out + "/logs", out + "/reference/logs"}) {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(logs, ec)) files.push_back(e.path());
    }
    for (const auto& f : files) {
      if (!std::filesystem::exists(f)) continue;
      const std::string text = ReadText(f.string());
      const size_t from = text.size() > 4000 ? text.size() - 4000 : 0;
      std::cerr << "---- " << std::filesystem::relative(f, out).string() << " (last " << text.size() - from
                << " bytes) ----\n"
                << text.substr(from) << "\n";
    }
  }
};

TEST(CloudRunTest, TheQuickstartSurvivesEveryScheduledFaultAndReportsEachReaction) {
  setenv("TENAX_SECRET", "cloud-run-test-secret-0123456789", 1);
  ScratchDir dir;
  const std::string out = dir / "run";
  const std::string source = TENAX_SOURCE_DIR;
  Child run({TenaxBinary(), "run", source + "/examples/quickstart.toml", "--out", out, "--set",
             "cost.prices=\"" + source + "/examples/prices/gcp-c2-standard-8-us-central1-spot-workers.toml\""});
  LogsOnFailure logs_on_failure{out};
  const auto deadline = std::chrono::steady_clock::now() + 900s;
  // Mid-run, when the first fault strikes (step 20, before the storage
  // node's kill at step 100): the run's processes as /proc shows them. Every
  // storage node and every host's probe agent runs (until the end of the
  // job), with the coordinator and the workers. This proves that the check
  // of "nothing left running" below sees these processes at all.
  ASSERT_TRUE(run.WaitForStderrLine("fault: SIGKILL worker 1", 900s)) << run.stderr_text();
  const std::vector<LiveProcess> mid_run = ProcessesOfRun(out);
  std::map<std::string, int> roles;
  for (const auto& p : mid_run) roles[p.role] += 1;
  EXPECT_EQ(roles["storage"], 6) << "quickstart.toml's [storage] nodes = 6; running:\n" << Describe(mid_run);
  EXPECT_EQ(roles["probe"], 6) << "one probe agent per host of quickstart.toml's 6; running:\n" << Describe(mid_run);
  EXPECT_EQ(roles["coordinator"], 1) << Describe(mid_run);
  EXPECT_GE(roles["worker"], 3) << Describe(mid_run);
  ASSERT_EQ(run.Wait(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())),
            0)
      << run.stderr_text();
  const std::string err = run.stderr_text();
  // Not a terminal: plain lines, no escape sequences.
  EXPECT_EQ(err.find('\x1b'), std::string::npos);

  auto summary = nlohmann::json::parse(ReadText(out + "/summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << err;
  auto reference = nlohmann::json::parse(ReadText(out + "/reference/summary.json"), nullptr, false);
  ASSERT_TRUE(reference.is_object()) << ReadText(out + "/reference.log");
  // The reference is the fault-free run of the same job, and what the summary says it is.
  EXPECT_EQ(summary["reference_test_accuracy"].get<double>(), reference["final_test_accuracy"].get<double>());
  EXPECT_FALSE(reference.contains("faults") && !reference["faults"].empty()) << reference["faults"].dump();
  EXPECT_EQ(reference["steps"], summary["steps"]);
  // Both trained (10 classes: chance is 0.1).
  EXPECT_GT(summary["final_test_accuracy"].get<double>(), 0.5);
  EXPECT_GT(reference["final_test_accuracy"].get<double>(), 0.5);
  EXPECT_EQ(summary["steps"].get<int64_t>(), 400);
  ASSERT_TRUE(summary["launcher_wall_seconds"].is_number()) << summary.dump(2);

  // Every scheduled fault, the straggler too, with the system's reaction
  // and a time to recover.
  const auto& faults = summary["faults"];
  ASSERT_TRUE(faults.is_array()) << summary.dump(2);
  // No worker failed on its own: the schedule is the only cause of losses.
  for (const auto& f : faults) {
    EXPECT_NE(f.value("source", ""), "unplanned") << "a worker failed on its own: " << f.dump(2);
  }
  for (const char* name : {"kill worker 1", "restart joiner 1", "kill storage node-2 and wipe its disk",
                           "preempt worker 2", "restart joiner 2", "straggler worker 3"}) {
    const nlohmann::json* f = FaultOf(faults, name);
    ASSERT_NE(f, nullptr) << name << " missing from " << faults.dump(2) << "\nthe run said:\n" << err;
    EXPECT_TRUE(f->value("recovered", false)) << f->dump();
    ASSERT_TRUE((*f)["recovered_seconds"].is_number()) << f->dump();
    EXPECT_GE((*f)["recovered_seconds"].get<double>(), 0.0) << f->dump();
    // From the fault to the reaction: inside the run, so never longer than
    // the run itself (a bound from the run's own record, not from the speed
    // of the machine).
    EXPECT_LE((*f)["recovered_seconds"].get<double>(), summary["launcher_wall_seconds"].get<double>()) << f->dump();
    EXPECT_FALSE(f->value("reaction", "").empty()) << f->dump();
  }
  EXPECT_NE(FaultOf(faults, "kill worker 1")->value("reaction", "").find("re-formed as generation"), std::string::npos);
  EXPECT_NE(FaultOf(faults, "restart joiner 1")->value("reaction", "").find("joined generation"), std::string::npos);
  EXPECT_NE(FaultOf(faults, "kill storage node-2 and wipe its disk")->value("reaction", "").find("prm recovery rebuilt"),
            std::string::npos);
  EXPECT_TRUE(FaultOf(faults, "kill storage node-2 and wipe its disk")->value("wiped", false));

  // metrics.jsonl: one time axis, the recovery, the straggler's smaller
  // share, and every worker's states in order.
  auto records = Records(out + "/metrics.jsonl");
  ASSERT_FALSE(records.empty());
  std::map<std::string, std::vector<std::string>> states;
  std::set<pid_t> pids;
  std::map<std::string, pid_t> pid_of;
  std::vector<nlohmann::json> slow_events;
  bool recovered = false;
  for (const auto& r : records) {
    EXPECT_TRUE(r.contains("time") && r["time"].is_number()) << r.dump();
    const std::string e = r.value("event", "");
    if (e == "worker_state") {
      states[r.value("worker", "")].push_back(r.value("state", ""));
      const std::string d = r.value("detail", "");
      if (d.rfind("pid ", 0) == 0) {
        pids.insert(static_cast<pid_t>(std::atoi(d.c_str() + 4)));
        pid_of[r.value("worker", "")] = static_cast<pid_t>(std::atoi(d.c_str() + 4));
      }
    }
    if (e == "recovery" && r.value("phase", "") == "done" && r.value("dataset", "") == "fashion-mnist-train") {
      recovered = true;
      EXPECT_EQ(r.value("policy", ""), "prm");
      EXPECT_GT(r.value("lost_chunks", 0), 0) << r.dump();
      // PRM's contract: the plan splits the lost chunks into a first set,
      // rebuilt now, and a later one (which may be all of them when the
      // samples left keep the availability floor and the class mix).
      EXPECT_EQ(r.value("lost_chunks", -1), r.value("first_chunks", 0) + r.value("later_chunks", 0)) << r.dump();
      EXPECT_EQ(r.value("chunks_rebuilt", -1), r.value("first_chunks", 0)) << r.dump();
      EXPECT_EQ(r.value("bytes", 0.0) > 0, r.value("chunks_rebuilt", 0) > 0) << r.dump();
      EXPECT_TRUE(r["unrecoverable"].empty()) << r.dump();
    }
    if (e == "straggler" && r.value("state", "") == "slow") slow_events.push_back(r);
  }
  EXPECT_TRUE(recovered) << "no recovery record";
  // Worker 3, 3x slower, is detected, and the others take most of its share.
  // Matched by worker 3's own pid: a record without a pid (or another
  // worker's) must not stand in for it.
  ASSERT_TRUE(pid_of.count("worker 3")) << "no \"pid N\" state detail for worker 3: " << nlohmann::json(states).dump();
  const pid_t pid3 = pid_of.at("worker 3");
  ASSERT_GT(pid3, 0);
  const nlohmann::json* slow3 = nullptr;
  for (const auto& r : slow_events) {
    if (r.contains("pid") && r["pid"].is_number_integer() && r["pid"].get<int64_t>() == pid3 && !slow3) slow3 = &r;
  }
  ASSERT_NE(slow3, nullptr) << "worker 3 (pid " << pid3 << ") never reported slow";
  EXPECT_GT(slow3->value("ratio", 0.0), 2.0) << slow3->dump();
  EXPECT_LT(slow3->value("share", 128), 128 / 4) << "the straggler kept an even share: " << slow3->dump();
  auto has = [&](const std::string& w, const std::string& s) {
    const auto& v = states[w];
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has("worker 1", "killed")) << nlohmann::json(states).dump();
  EXPECT_TRUE(has("worker 2", "preempted")) << nlohmann::json(states).dump();
  EXPECT_TRUE(has("worker 3", "slow")) << nlohmann::json(states).dump();
  EXPECT_TRUE(has("joiner 1", "rejoining") && has("joiner 1", "active")) << nlohmann::json(states).dump();
  EXPECT_TRUE(has("joiner 2", "rejoining") && has("joiner 2", "active")) << nlohmann::json(states).dump();
  EXPECT_EQ(states["worker 0"].back(), "done") << nlohmann::json(states).dump();

  // The bytes by purpose: gradients every step, two model copies, the recovery.
  const auto& bytes = summary["bytes_moved"];
  EXPECT_GT(bytes.value("gradients", 0.0), 0.0) << bytes.dump();
  EXPECT_GT(bytes.value("models", 0.0), 0.0) << bytes.dump();
  EXPECT_GT(bytes.value("recovery", 0.0), 0.0) << bytes.dump();
  EXPECT_GT(summary["cost"].value("total", 0.0), 0.0) << summary.dump(2);

  // The live view's event lines were there.
  // The recovery was the resident service's (started beside the nodes).
  for (const char* line : {"fault: SIGKILL worker 1", "is a straggler", "prm recovery of fashion-mnist-train done",
                           "fault-free reference", "store: recovery service at "}) {
    EXPECT_NE(err.find(line), std::string::npos) << line << " not in:\n" << err;
  }
  // The report, with data in every chart.
  const std::string html = ReadText(out + "/report.html");
  EXPECT_NE(html.find("data-chart="), std::string::npos);
  EXPECT_EQ(html.find("data-points=\"0\""), std::string::npos) << "a chart of report.html has no data";

  // Nothing left running: every worker, storage node, probe agent and the
  // coordinator is gone. The workers' pids come from metrics.jsonl, the
  // others from the mid-run look at /proc; worker 0, which runs to the end,
  // was seen there too, so both sources name the same processes.
  ASSERT_TRUE(pid_of.count("worker 0")) << nlohmann::json(states).dump();
  EXPECT_TRUE(std::any_of(mid_run.begin(), mid_run.end(),
                          [&](const LiveProcess& p) { return p.pid == pid_of.at("worker 0") && p.role == "worker"; }))
      << "worker 0 (pid " << pid_of.at("worker 0") << ") not among the run's processes:\n" << Describe(mid_run);
  ASSERT_GE(pids.size(), 6u) << "4 workers and 2 joiners, each with a pid: " << nlohmann::json(states).dump();
  for (const auto& p : mid_run) pids.insert(p.pid);
  for (pid_t pid : pids) EXPECT_FALSE(Alive(pid) && OfRun(pid, out)) << "pid " << pid << " still runs";
  const std::vector<LiveProcess> left = ProcessesOfRun(out);
  EXPECT_TRUE(left.empty()) << "still running after tenax run exited:\n" << Describe(left);
}

}  // namespace
}  // namespace tenax::testing
