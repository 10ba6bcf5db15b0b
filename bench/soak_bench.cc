// tenax bench soak: faults piling up over time (issue 32, "a one-hour chaos
// soak with nothing lost"). For --minutes it runs `tenax run` rounds, one
// after another, each a job of one of three kinds with a fault plan drawn
// from the round's seed:
//  - elastic: sync elastic, 4 workers, the data in an erasure-coded store of
//    6 nodes (RS 4+2); workers SIGKILLed, preempted, SIGSTOPped then
//    SIGCONTed, each replaced by a joiner (in a quarter of the rounds a
//    third worker SIGKILLed at 0 s, before the job forms); a data node SIGKILLed (its disk
//    wiped or not; at most the code's 2 at once); the coordinator SIGKILLed
//    and restarted, sometimes at the step a joiner is started (inside its
//    join's window);
//  - async: VC-ASGD (tenax's default alpha, --async-alpha), 4 workers and 2
//    parameter-server shards, 3750 steps (2 epochs); random worker
//    kills, preemptions or stops with replacements, a shard killed and
//    restarted on its checkpoints, the coordinator killed and restarted;
//  - sync: a fixed (not elastic) job whose coordinator is killed and
//    restarted once or twice;
//  - network: sync elastic, 4 workers spread over an emulated cloud of 2
//    zones x 3 hosts (network namespaces as root); network faults at the
//    transport seam: a link that drops every message for a while, a link
//    10x slower, a host partitioned from its zone (shorter than the peer
//    timeout: no member may be lost to them), and half the time a
//    partition longer than the timeout (its member is dropped and a new
//    worker joins).
// After each round it checks what a user relies on: the run ended well
// (exit 0) within its deadline (else a hung round), every step trained, an
// async job's every unit merged exactly once by every shard (the
// coordinator's merge log), an elastic job's final members bit-identical,
// no process of the round left running. Accuracy is compared with a
// fault-free run of the same job (same steps), one per kind.
//
// The exit status is 1 when any round ended badly or lost, duplicated, hung
// or leaked anything; the accuracy gap (to the fault-free reference: one
// run of a sync kind, the mean of --async-references runs of the async
// job, whose fault-free runs alone spread over about 1 point) is reported, not
// enforced.
#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "bench_common.h"
#include "tenax/coord/work_queue.h"
#include "tenax/core/files.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/signals.h"

namespace tenax::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct SoakArgs {
  bool quick = false;
  std::string json_path;
  double minutes = 0;  // 0 = 3 quick, 60 full
  int64_t seed = 1;
  std::string kinds = "elastic,async,sync,network";
  std::string data_dir = kDefaultFashionMnistDir;
  int64_t round_timeout_seconds = 600;
  std::string keep_dir;  // keep every round's job file and run directory here
  int64_t min_rounds = 0;  // at least this many rounds, even past --minutes
  int64_t async_references = 5;  // fault-free async runs averaged for the reference
  // The async job's async.alpha; < 0: none set, tenax's default (0). 0.5 is
  // what docs/async.md recommends for a noisy job like this one.
  double async_alpha = -1;
  // The async job's async.average_tail; < 0: none set, tenax's default
  // (0.1; 0 is the final model alone).
  double async_average_tail = -1;
  // cluster.spares of the elastic and network jobs, their references
  // included (docs/elastic.md, "Warm spares").
  int64_t elastic_spares = 0;
};

// One kind of job: its base text (without faults) and its steps.
struct Kind {
  std::string name;
  int64_t steps = 0;
  int64_t workers = 4;
  int64_t unit_steps = 10;  // async
  int64_t servers = 2;      // async
};

std::string BaseJob(const SoakArgs& a, const Kind& k) {
  std::string text = fmt::format("mode = \"{}\"\n[cluster]\nworkers = {}\njob_id = \"soak-{}\"\n",
                                 k.name == "async" ? "async" : "sync", k.workers, k.name);
  text += "peer_timeout_seconds = 3\nstep_timeout_seconds = 15\njoin_timeout_seconds = 60\n";
  if (k.name == "elastic" || k.name == "network") {
    text += "elastic = true\nmin_workers = 2\nmax_workers = 4\n";
    if (a.elastic_spares > 0) text += fmt::format("spares = {}\n", a.elastic_spares);
  }
  if (k.name == "network") {
    // examples/cloud.toml's cloud; the workers spread over both zones so
    // that links of both kinds carry the job.
    text +=
        "[topology]\nmode = \"auto\"\nhosts = [ { name = \"a1\", zone = \"za\" }, { name = \"a2\", zone = \"za\" }, "
        "{ name = \"a3\", zone = \"za\" }, { name = \"b1\", zone = \"zb\" }, { name = \"b2\", zone = \"zb\" }, "
        "{ name = \"b3\", zone = \"zb\" } ]\nsame_zone = { delay_ms = 0.05, bandwidth_gbps = 4 }\n"
        "cross_zone = { delay_ms = 1.0, loss = 0.001, bandwidth_gbps = 0.2 }\n[placement]\npolicy = \"spread\"\n"
        "probe_seconds = 3\n";
  }
  if (k.name == "async") {
    text += fmt::format("[async]\nservers = {}\nunit_steps = {}\nlease_seconds = 10\nrule = \"vc_asgd\"\n", k.servers,
                        k.unit_steps);
    if (a.async_alpha >= 0) text += fmt::format("alpha = {:.3f}\n", a.async_alpha);
    if (a.async_average_tail >= 0) text += fmt::format("average_tail = {:.3f}\n", a.async_average_tail);
  }
  if (k.name == "elastic") {
    text += "[storage]\nnodes = 6\nzones = 3\ndata_chunks = 4\nparity_chunks = 2\nchunk_kib = 256\n";
    // `tenax run` fills the store from the Fashion-MNIST files it finds
    // (the dataset package's), as examples/cloud.toml does.
    text += "[data]\nformat = \"store\"\ncache_chunks = 16\nrecovery_policy = \"prm\"\n";
  } else {
    text += fmt::format("[data]\ndir = \"{}\"\n", a.data_dir);
  }
  text += fmt::format(
      "[model]\nname = \"mlp\"\n[train]\nepochs = 50\nmax_steps = {}\nbatch_size = 32\noptimizer = \"sgd\"\n"
      "lr = 0.05\nmomentum = 0.9\nseed = 1\nthreads = 1\n[log]\nevery_steps = 50\n[report]\nhtml = false\n",
      k.steps);
  return text;
}

// What the plan of one round asks for, by kind of fault ("worker kill",
// "coordinator restart", ...), and the plan's text.
struct Plan {
  std::string text;
  std::map<std::string, int64_t> planned;
};

std::string Entry(const std::string& body) { return "[[faults]]\n" + body; }

// A step in [lo, hi) of the job's steps.
int64_t StepIn(std::mt19937_64& rng, const Kind& k, double lo, double hi) {
  std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo * static_cast<double>(k.steps)),
                                           static_cast<int64_t>(hi * static_cast<double>(k.steps)) - 1);
  return std::max<int64_t>(1, d(rng));
}

Plan ElasticPlan(std::mt19937_64& rng, const Kind& k) {
  Plan p;
  std::vector<int64_t> workers = {0, 1, 2, 3};
  std::shuffle(workers.begin(), workers.end(), rng);
  std::uniform_int_distribution<int> what(0, 2), coin(0, 1), one_in_four(0, 3);
  // A quarter of the rounds lose a worker before the job forms (a Spot
  // machine reclaimed in the job's first second): SIGKILLed at 0 s, while
  // it still loads libtorch; a spare takes its place in the first
  // generation, or the job starts short of it and the joiner started 1 s
  // later takes the place (docs/elastic.md, "A member lost before the job
  // formed").
  if (one_in_four(rng) == 0) {
    p.text += Entry(fmt::format("action = \"kill\"\nworker = {}\nat_seconds = 0\n", workers[3]));
    p.text += Entry("action = \"restart\"\nat_seconds = 0\ndelay_seconds = 1\n");
    ++p.planned["worker kill before the job formed"];
    ++p.planned["joiner start"];
  }
  // Two worker faults, each replaced by a joiner; the second keeps at least
  // min_workers (2) running.
  std::vector<int64_t> restart_steps;
  for (int i = 0; i < 2; ++i) {
    const int64_t w = workers[static_cast<size_t>(i)];
    const int64_t at = StepIn(rng, k, 0.1 + 0.35 * i, 0.35 + 0.35 * i);
    switch (what(rng)) {
      case 0:
        p.text += Entry(fmt::format("action = \"kill\"\nworker = {}\nat_step = {}\n", w, at));
        ++p.planned["worker kill"];
        break;
      case 1:
        p.text += Entry(fmt::format("action = \"preempt\"\nworker = {}\nat_step = {}\ngrace_seconds = 5\n", w, at));
        ++p.planned["worker preempt"];
        break;
      default:
        // A hung worker: the members drop it at the step timeout; woken
        // later, it learns it was removed and leaves.
        p.text += Entry(fmt::format("action = \"stop\"\nworker = {}\nat_step = {}\n", w, at));
        p.text += Entry(fmt::format("action = \"cont\"\nworker = {}\nat_step = {}\n", w, at + k.steps / 10));
        ++p.planned["worker stop"];
        ++p.planned["worker cont"];
        break;
    }
    const int64_t restart_at = at + 1;
    p.text += Entry(fmt::format("action = \"restart\"\nat_step = {}\ndelay_seconds = 1\n", restart_at));
    ++p.planned["joiner start"];
    restart_steps.push_back(restart_at);
  }
  // A data node lost, half the time with its disk.
  const int64_t node = std::uniform_int_distribution<int64_t>(0, 5)(rng);
  p.text += Entry(fmt::format("action = \"kill\"\nstorage = {}\nwipe = {}\nat_step = {}\n", node,
                              coin(rng) ? "true" : "false", StepIn(rng, k, 0.2, 0.7)));
  ++p.planned["storage kill"];
  // The coordinator: half the time 1.5-4 s after a joiner's start (it
  // loads libtorch and its data, then joins: the kill lands around its
  // join's window), else at any step.
  const bool in_join = coin(rng) == 1;
  const int64_t at = in_join ? restart_steps[static_cast<size_t>(coin(rng))] : StepIn(rng, k, 0.15, 0.8);
  const double delay = in_join ? 1 + std::uniform_real_distribution<double>(1.5, 4.0)(rng) : 0;
  p.text += Entry(fmt::format("action = \"kill\"\ncoordinator = true\nat_step = {}\ndelay_seconds = {:.2f}\n", at,
                              delay));
  p.text += Entry(fmt::format("action = \"restart\"\ncoordinator = true\nat_step = {}\ndelay_seconds = {:.2f}\n",
                              at, delay + 1));
  if (in_join) ++p.planned["coordinator kill in a join's window"];
  ++p.planned["coordinator kill"];
  ++p.planned["coordinator restart"];
  return p;
}

Plan AsyncPlan(std::mt19937_64& rng, const Kind& k) {
  Plan p;
  static const char* kActions[] = {"kill", "preempt", "stop"};
  const char* action = kActions[std::uniform_int_distribution<int>(0, 2)(rng)];
  const int64_t shard = std::uniform_int_distribution<int64_t>(0, k.servers - 1)(rng);
  const int64_t shard_at = StepIn(rng, k, 0.2, 0.6);
  p.text += Entry(fmt::format("action = \"kill\"\nserver = {}\nat_step = {}\n", shard, shard_at));
  p.text += Entry(fmt::format("action = \"restart\"\nserver = {}\nat_step = {}\ndelay_seconds = 1\n", shard, shard_at));
  ++p.planned["server kill"];
  ++p.planned["server restart"];
  const int64_t at = StepIn(rng, k, 0.15, 0.8);
  p.text += Entry(fmt::format("action = \"kill\"\ncoordinator = true\nat_step = {}\n", at));
  p.text += Entry(fmt::format("action = \"restart\"\ncoordinator = true\nat_step = {}\ndelay_seconds = 1\n", at));
  ++p.planned["coordinator kill"];
  ++p.planned["coordinator restart"];
  // Random worker faults, each followed by a new worker (they are not
  // counted as planned: the schedule decides how many land in the run).
  p.text += fmt::format(
      "[faults.random]\nmean_lifetime_seconds = 15\nseed = {}\naction = \"{}\"\nrestart_delay_seconds = 2\n"
      "max_faults = 3\n",
      std::uniform_int_distribution<int64_t>(1, 1000000)(rng), action);
  return p;
}

Plan NetworkPlan(std::mt19937_64& rng, const Kind& k) {
  Plan p;
  std::uniform_int_distribution<int64_t> worker(0, k.workers - 1);
  auto two_workers = [&] {
    const int64_t a = worker(rng);
    int64_t b = worker(rng);
    while (b == a) b = worker(rng);
    return std::make_pair(a, b);
  };
  auto seconds = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  // Shorter than the job's 3 s peer timeout: ridden through.
  const auto [d0, d1] = two_workers();
  p.text += Entry(fmt::format("action = \"drop_link\"\nworkers = [{}, {}]\nseconds = {:.2f}\nat_step = {}\n", d0, d1,
                              seconds(0.5, 2.0), StepIn(rng, k, 0.1, 0.3)));
  ++p.planned["link drop"];
  const auto [s0, s1] = two_workers();
  p.text += Entry(fmt::format("action = \"slow_link\"\nworkers = [{}, {}]\nseconds = {:.2f}\nfactor = 10\nat_step = {}\n",
                              s0, s1, seconds(2.0, 6.0), StepIn(rng, k, 0.3, 0.5)));
  ++p.planned["link slow"];
  p.text += Entry(fmt::format("action = \"partition\"\nworker = {}\nseconds = {:.2f}\nat_step = {}\n", worker(rng),
                              seconds(0.5, 2.0), StepIn(rng, k, 0.5, 0.65)));
  ++p.planned["host partition"];
  // Half the time a partition past the timeout: its member is dropped; a
  // new worker takes its place.
  if (std::uniform_int_distribution<int>(0, 1)(rng) == 1) {
    const int64_t at = StepIn(rng, k, 0.65, 0.8);
    p.text += Entry(fmt::format("action = \"partition\"\nworker = {}\nseconds = 8\nat_step = {}\n", worker(rng), at));
    p.text += Entry(fmt::format("action = \"restart\"\nat_step = {}\ndelay_seconds = 6\n", at));
    ++p.planned["host partition (past the timeout)"];
    ++p.planned["joiner start"];
  }
  return p;
}

Plan SyncPlan(std::mt19937_64& rng, const Kind& k) {
  Plan p;
  const int kills = std::uniform_int_distribution<int>(1, 2)(rng);
  for (int i = 0; i < kills; ++i) {
    const int64_t at = StepIn(rng, k, 0.15 + 0.4 * i, 0.45 + 0.4 * i);
    p.text += Entry(fmt::format("action = \"kill\"\ncoordinator = true\nat_step = {}\n", at));
    p.text += Entry(fmt::format("action = \"restart\"\ncoordinator = true\nat_step = {}\ndelay_seconds = 1\n", at));
    ++p.planned["coordinator kill"];
    ++p.planned["coordinator restart"];
  }
  return p;
}

// "worker kill", "coordinator restart", "storage kill (wiped)", ... for a
// fault record of summary.json.
std::string FaultKind(const nlohmann::json& f) {
  const std::string action = f.value("action", "?");
  std::string kind;
  if (action == "drop_link" || action == "slow_link") {
    kind = action == "drop_link" ? "link drop" : "link slow";
  } else if (action == "partition") {
    kind = f.value("seconds", 0.0) > 3 ? "host partition (past the timeout)" : "host partition";
  } else if (f.contains("storage")) {
    kind = "storage " + action + (f.value("wiped", false) ? " (wiped)" : "");
  } else if (f.value("coordinator", false)) {
    kind = "coordinator " + action;
  } else if (f.contains("server")) {
    kind = "server " + action;
  } else if (action == "restart") {
    kind = "joiner start";  // a new worker
  } else if (action == "kill" && f.contains("at_seconds") && f.value("source", "") != "faults.random") {
    // The only worker fault the plans time in seconds (faults.random's
    // kills carry the second they fired at, too).
    kind = "worker kill before the job formed";
  } else {
    kind = "worker " + action;  // one of the launcher's workers or a joiner
  }
  return kind;
}

// Pids of processes (other than this one) whose command line mentions `text`.
std::vector<pid_t> ProcessesMentioning(const std::string& text) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (!proc) return pids;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end != '\0' || pid <= 0 || pid == getpid()) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(text) != std::string::npos) pids.push_back(static_cast<pid_t>(pid));
  }
  closedir(proc);
  return pids;
}

// Network namespaces that exist now (`ip netns list` reads this directory).
std::set<std::string> Namespaces() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec)) names.insert(e.path().filename());
  return names;
}

// The final state hashes the workers of an elastic run logged (members,
// joiners and admitted spares: worker-N, joiner-N and spare-N logs).
std::vector<std::string> FinalHashes(const std::string& logs) {
  static const std::regex re("final model and momentum state fnv1a ([0-9a-f]{16})");
  std::vector<std::string> hashes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(logs, ec)) {
    const std::string name = e.path().filename();
    if (name.rfind("worker-", 0) != 0 && name.rfind("joiner-", 0) != 0 && name.rfind("spare-", 0) != 0) continue;
    auto text = ReadFileText(e.path().string(), 64 << 20);
    if (!text.ok()) continue;
    std::string last;
    for (std::sregex_iterator it(text->begin(), text->end(), re), end; it != end; ++it) last = (*it)[1];
    if (!last.empty()) hashes.push_back(last);
  }
  return hashes;
}

// An async run's merge log: units never merged by some shard, and merges
// of a (unit, shard) beyond the first (not undone by a shard's restart
// from an older checkpoint, which re-opens them).
struct MergeCheck {
  int64_t units = 0, lost = 0, merged_twice = 0;
};

Result<MergeCheck> CheckMerges(const std::string& db, const Kind& k) {
  coord::WorkQueueOptions o;
  o.total_steps = k.steps;
  o.unit_steps = k.unit_steps;
  o.shards = static_cast<int>(k.servers);
  o.lease_ms = 10000;
  TENAX_ASSIGN_OR_RETURN(auto queue, coord::WorkQueue::Open(db, o));
  TENAX_ASSIGN_OR_RETURN(auto events, queue->Events());
  TENAX_ASSIGN_OR_RETURN(auto counts, queue->Counts());
  std::map<std::pair<int64_t, int>, int64_t> merged;
  for (const auto& e : events) {
    if (e.what == "merged") ++merged[{e.unit, e.shard}];
    if (e.what == "reopened") merged[{e.unit, e.shard}] = 0;
  }
  // Each (unit, shard) the job needs, merged exactly once; a remainder of
  // a unit re-opened for one restarted shard is needed by that shard alone.
  TENAX_ASSIGN_OR_RETURN(auto required, queue->RequiredMerges());
  MergeCheck c;
  c.units = counts.units;
  for (const auto& need : required) {
    auto it = merged.find(need);
    const int64_t n = it == merged.end() ? 0 : it->second;
    if (n == 0) ++c.lost;
    if (n > 1) c.merged_twice += n - 1;
    merged.erase(need);
  }
  for (const auto& [pair, n] : merged) c.merged_twice += n;  // merged by a shard that never needed it
  return c;
}

struct RunOutcome {
  pid_t pid = 0;  // the round's `tenax run` (its namespaces are named after it)
  int exit_code = -1;
  bool hung = false;
  double seconds = 0;
  std::string last_error;
};

// `tenax run` with its own deadline: past it the run is a hung round, and
// it (with its children) is stopped.
RunOutcome RunJob(const std::string& tenax, const std::vector<std::string>& extra, const std::string& job,
                  const std::string& out, const std::string& log, int64_t timeout_seconds) {
  RunOutcome o;
  std::vector<std::string> argv = {tenax, "run", job, "--out", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ProcessSupervisor child("soak round", std::chrono::seconds(10));
  const auto t0 = SteadyClock::now();
  auto index = child.StartLogged("tenax run", argv, log);
  if (!index.ok()) {
    o.last_error = index.status().message();
    return o;
  }
  o.pid = child.pid(*index);
  const Deadline deadline = Deadline::After(std::chrono::seconds(timeout_seconds));
  while (!child.exit_code(*index)) {
    if (StopRequested() || deadline.Expired()) {
      o.hung = deadline.Expired();
      (void)child.Signal(*index, SIGTERM);  // it stops its own children
      (void)child.WaitForExit(*index, Deadline::After(std::chrono::seconds(60)));
      break;
    }
    child.WaitForActivity(Deadline::After(std::chrono::milliseconds(500)));
    child.Poll();
  }
  o.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  o.exit_code = child.exit_code(*index).value_or(-1);
  if (o.exit_code != 0) {
    auto text = ReadFileText(log, 16 << 20);
    if (text.ok()) {
      std::string t = *text;
      while (!t.empty() && t.back() == '\n') t.pop_back();
      o.last_error = t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
    }
  }
  return o;
}

nlohmann::json ReadSummary(const std::string& out) {
  std::ifstream in(out + "/summary.json");
  auto s = nlohmann::json::parse(in, nullptr, false);
  return s.is_discarded() || !s.is_object() ? nlohmann::json::object() : s;
}

// The records of metrics.jsonl whose "event" is `event` (none when the
// file is missing; lines that are not JSON objects are skipped).
std::vector<nlohmann::json> ReadEvents(const std::string& path, const std::string& event) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == event) out.push_back(std::move(j));
  }
  return out;
}

Status RunSoak(const SoakArgs& a) {
  TENAX_ASSIGN_OR_RETURN(std::string tenax, FindProgram("tenax"));
  const double minutes = a.minutes > 0 ? a.minutes : (a.quick ? 3.0 : 60.0);
  std::vector<Kind> kinds;
  for (const std::string& name :
       {std::string("elastic"), std::string("async"), std::string("sync"), std::string("network")}) {
    if (("," + a.kinds + ",").find("," + name + ",") == std::string::npos) continue;
    Kind k;
    k.name = name;
    k.steps = name == "elastic" || name == "network" ? (a.quick ? 500 : 900)
              : name == "async"                       ? (a.quick ? 1000 : 3750)
                                                      : (a.quick ? 400 : 900);
    k.workers = name == "sync" ? 2 : 4;
    kinds.push_back(k);
  }
  if (kinds.empty()) {
    return InvalidArgument("--kinds: name at least one of elastic, async, sync and network, got '" + a.kinds + "'");
  }
  UseFreshSecret();
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-soak"));
  const std::string root = a.keep_dir.empty() ? work.path() : a.keep_dir;
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(root));
  std::set<std::string> namespaces_left;  // of this soak's rounds (another soak may run beside it)
  auto start = SteadyClock::now();
  auto elapsed_minutes = [&] { return std::chrono::duration<double>(SteadyClock::now() - start).count() / 60.0; };

  nlohmann::json totals = {{"rounds", 0},           {"rounds_ended_well", 0}, {"units_lost", 0},
                           {"units_merged_twice", 0}, {"hung_rounds", 0},       {"processes_left", 0},
                           {"elastic_state_mismatches", 0}, {"steps_short", 0}, {"chunks_unrecoverable", 0}};
  std::map<std::string, int64_t> faults_by_kind, planned_by_kind, not_fired_by_kind;
  std::map<std::string, double> reference_accuracy, worst_gap;
  nlohmann::json rounds = nlohmann::json::array();
  std::vector<std::string> problems;

  // Fault-free references: the same jobs, same steps, no plan. The sync
  // kinds are deterministic for their seed: one run is the reference. An
  // async job is not (merges land in arrival order): its fault-free runs
  // alone spread over points, so its reference is the mean of
  // --async-references runs, and their spread is reported beside it.
  nlohmann::json reference_spread = nlohmann::json::object();
  for (const Kind& k : kinds) {
    const int64_t runs = k.name == "async" ? a.async_references : 1;
    std::vector<double> accuracies;
    for (int64_t i = 0; i < runs; ++i) {
      const std::string dir = root + "/reference-" + k.name + (i > 0 ? fmt::format("-{}", i + 1) : "");
      TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
      TENAX_RETURN_IF_ERROR(WriteFileAtomic(dir + "/job.toml", BaseJob(a, k)));
      std::fprintf(stderr, "soak: fault-free reference of the %s job (%lld steps, run %lld of %lld) ...\n",
                   k.name.c_str(), static_cast<long long>(k.steps), static_cast<long long>(i + 1),
                   static_cast<long long>(runs));
      RunOutcome r = RunJob(tenax, {}, dir + "/job.toml", dir + "/run", dir + "/tenax-run.log", a.round_timeout_seconds);
      if (r.exit_code != 0) {
        return Unavailable("the fault-free " + k.name + " job failed (exit " + std::to_string(r.exit_code) +
                           "): " + r.last_error + " (" + dir + "/tenax-run.log)");
      }
      accuracies.push_back(ReadSummary(dir + "/run").value("final_test_accuracy", 0.0));
      std::fprintf(stderr, "soak: reference %s: accuracy %.4f in %.0f s\n", k.name.c_str(), accuracies.back(),
                   r.seconds);
    }
    double sum = 0;
    for (double x : accuracies) sum += x;
    reference_accuracy[k.name] = sum / static_cast<double>(accuracies.size());
    reference_spread[k.name] = {{"runs", accuracies},
                                {"min", *std::min_element(accuracies.begin(), accuracies.end())},
                                {"max", *std::max_element(accuracies.begin(), accuracies.end())}};
  }

  // --minutes counts from the first round.
  const auto references_ended = SteadyClock::now();
  const double reference_minutes = std::chrono::duration<double>(references_ended - start).count() / 60.0;
  start = references_ended;
  for (int64_t round = 0; elapsed_minutes() < minutes || round < a.min_rounds; ++round) {
    if (StopRequested()) return Cancelled("stopped by a signal after " + std::to_string(round) + " rounds");
    const Kind& k = kinds[static_cast<size_t>(round) % kinds.size()];
    const uint64_t round_seed = static_cast<uint64_t>(a.seed) * 1000003u + static_cast<uint64_t>(round);
    std::mt19937_64 rng(round_seed);
    const Plan plan = k.name == "elastic" ? ElasticPlan(rng, k)
                      : k.name == "async" ? AsyncPlan(rng, k)
                      : k.name == "network" ? NetworkPlan(rng, k)
                                            : SyncPlan(rng, k);
    const std::string dir = root + fmt::format("/round-{:04d}-{}", round, k.name), out = dir + "/run";
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(dir + "/job.toml", BaseJob(a, k) + plan.text));
    std::fprintf(stderr, "soak: round %lld (%s, seed %llu) at %.1f min ...\n", static_cast<long long>(round),
                 k.name.c_str(), static_cast<unsigned long long>(round_seed), elapsed_minutes());
    const RunOutcome r = RunJob(tenax, {}, dir + "/job.toml", out, dir + "/tenax-run.log", a.round_timeout_seconds);

    nlohmann::json row = {{"round", round}, {"kind", k.name}, {"seed", round_seed}, {"exit_code", r.exit_code},
                          {"seconds", r.seconds}, {"dir", dir}};
    std::vector<std::string> wrong;
    const bool ended_well = r.exit_code == 0 && !r.hung;
    if (r.hung) {
      totals["hung_rounds"] = totals["hung_rounds"].get<int64_t>() + 1;
      wrong.push_back(fmt::format("still running after {} s (hung)", a.round_timeout_seconds));
    } else if (r.exit_code != 0) {
      wrong.push_back(fmt::format("exit {}: {}", r.exit_code, r.last_error));
    }
    const nlohmann::json s = ReadSummary(out);
    std::map<std::string, int64_t> fired;
    for (const auto& f : s.value("faults", nlohmann::json::array())) {
      if (f.value("event", "") != "fault") continue;
      ++fired[FaultKind(f)];
      ++faults_by_kind[FaultKind(f)];
    }
    // Faults that never fired are in metrics.jsonl only (summary.json
    // lists the fired ones).
    for (const auto& f : ReadEvents(out + "/metrics.jsonl", "fault_not_fired")) ++not_fired_by_kind[FaultKind(f)];
    for (const auto& [kind, n] : plan.planned) planned_by_kind[kind] += n;
    row["faults"] = fired;
    if (ended_well) {
      totals["rounds_ended_well"] = totals["rounds_ended_well"].get<int64_t>() + 1;
      const int64_t steps = s.value("steps", int64_t{0});
      row["steps"] = steps;
      if (steps != k.steps) {
        totals["steps_short"] = totals["steps_short"].get<int64_t>() + 1;
        wrong.push_back(fmt::format("trained {} of {} steps", steps, k.steps));
      }
      const double accuracy = s.value("final_test_accuracy", 0.0);
      const double gap = 100 * (reference_accuracy[k.name] - accuracy);
      row["final_test_accuracy"] = accuracy;
      row["accuracy_gap_points"] = gap;
      worst_gap[k.name] = std::max(worst_gap.count(k.name) ? worst_gap[k.name] : gap, gap);
    }
    if (k.name == "async" && ended_well) {
      auto m = CheckMerges(out + "/coordinator.db", k);
      if (!m.ok()) {
        wrong.push_back("merge log unreadable: " + m.status().message());
      } else {
        row["units"] = m->units;
        row["units_lost"] = m->lost;
        row["units_merged_twice"] = m->merged_twice;
        totals["units_lost"] = totals["units_lost"].get<int64_t>() + m->lost;
        totals["units_merged_twice"] = totals["units_merged_twice"].get<int64_t>() + m->merged_twice;
        if (m->lost > 0) wrong.push_back(fmt::format("{} (unit, shard) merges missing", m->lost));
        if (m->merged_twice > 0) wrong.push_back(fmt::format("{} merges twice", m->merged_twice));
      }
    }
    if (k.name == "elastic" && ended_well) {
      // At most one data node of the RS 4+2 store is down at a time (the
      // plan kills one): every lost chunk must be recoverable.
      int64_t unrecoverable = 0;
      const nlohmann::json store = s.value("store", nlohmann::json::object());
      for (const auto& rec : store.value("recoveries", nlohmann::json::array())) {
        unrecoverable += static_cast<int64_t>(rec.value("unrecoverable", nlohmann::json::array()).size());
      }
      row["degraded_chunks"] = store.value("degraded_chunks", int64_t{0});
      row["chunks_unrecoverable"] = unrecoverable;
      totals["chunks_unrecoverable"] = totals["chunks_unrecoverable"].get<int64_t>() + unrecoverable;
      if (unrecoverable > 0) {
        wrong.push_back(fmt::format("{} chunk(s) unrecoverable with one data node of RS 4+2 down", unrecoverable));
      }
    }
    if ((k.name == "elastic" || k.name == "network") && ended_well) {
      const std::vector<std::string> hashes = FinalHashes(out + "/logs");
      const std::string expected = s.value("state_hash", "");
      size_t members = 0;
      if (s.contains("generations") && s["generations"].is_array() && !s["generations"].empty()) {
        members = s["generations"].back().value("members", nlohmann::json::array()).size();
      }
      const bool same = !hashes.empty() && hashes.size() == members &&
                        std::all_of(hashes.begin(), hashes.end(), [&](const std::string& h) { return h == expected; });
      row["final_members"] = members;
      row["state_hashes_equal"] = same;
      if (!same) {
        totals["elastic_state_mismatches"] = totals["elastic_state_mismatches"].get<int64_t>() + 1;
        wrong.push_back(fmt::format("{} final state hashes for {} members, not all equal to {}", hashes.size(), members,
                                    expected));
      }
    }
    // A round's namespaces are named after its launcher: "tnx<pid>-...".
    const std::string mine = fmt::format("tnx{}-", r.pid);
    size_t round_namespaces = 0;
    for (const std::string& n : Namespaces()) {
      if (r.pid > 0 && n.rfind(mine, 0) == 0 && namespaces_left.insert(n).second) ++round_namespaces;
    }
    row["namespaces_left"] = round_namespaces;
    if (round_namespaces > 0) wrong.push_back(fmt::format("{} network namespace(s) left ({}*)", round_namespaces, mine));
    const std::vector<pid_t> left = ProcessesMentioning(out);
    row["processes_left"] = left.size();
    if (!left.empty()) {
      totals["processes_left"] = totals["processes_left"].get<int64_t>() + static_cast<int64_t>(left.size());
      wrong.push_back(fmt::format("{} process(es) left running", left.size()));
      for (pid_t pid : left) ::kill(pid, SIGKILL);  // the next round starts clean
    }
    totals["rounds"] = totals["rounds"].get<int64_t>() + 1;
    row["ok"] = wrong.empty();
    std::string faults_text;
    for (const auto& [kind, n] : fired) faults_text += fmt::format("{}{} {}", faults_text.empty() ? "" : ", ", n, kind);
    std::fprintf(stderr, "soak: round %lld %s: %s in %.0f s; faults: %s%s\n", static_cast<long long>(round),
                 k.name.c_str(), wrong.empty() ? "ok" : "WRONG", r.seconds, faults_text.c_str(),
                 row.contains("accuracy_gap_points")
                     ? fmt::format("; accuracy {:.4f} ({:+.2f} points vs fault-free)",
                                   row["final_test_accuracy"].get<double>(), -row["accuracy_gap_points"].get<double>())
                           .c_str()
                     : "");
    for (const std::string& w : wrong) {
      std::fprintf(stderr, "soak:   round %lld: %s (see %s)\n", static_cast<long long>(round), w.c_str(), dir.c_str());
      problems.push_back(fmt::format("round {} ({}): {}", round, k.name, w));
    }
    rounds.push_back(std::move(row));
  }

  totals["namespaces_left"] = namespaces_left.size();
  totals["faults_injected"] = faults_by_kind;
  totals["faults_planned"] = planned_by_kind;
  totals["faults_not_fired"] = not_fired_by_kind;
  int64_t injected = 0;
  for (const auto& [kind, n] : faults_by_kind) injected += n;
  totals["faults_injected_total"] = injected;
  nlohmann::json report = {{"benchmark", "soak"},
                           {"quick", a.quick},
                           {"minutes", minutes},
                           {"wall_minutes", elapsed_minutes()},
                           {"reference_minutes", reference_minutes},
                           {"seed", a.seed},
                           {"async_alpha", a.async_alpha >= 0 ? nlohmann::json(a.async_alpha) : nlohmann::json("default")},
                           {"async_average_tail", a.async_average_tail >= 0 ? nlohmann::json(a.async_average_tail)
                                                                           : nlohmann::json("default")},
                           {"elastic_spares", a.elastic_spares},
                           {"totals", totals},
                           {"reference_test_accuracy", reference_accuracy},
                           {"reference_spread", reference_spread},
                           {"worst_accuracy_gap_points", worst_gap},
                           {"rounds", rounds},
                           {"problems", problems}};
  bool accuracy_within_1 = true;
  for (const auto& [kind, gap] : worst_gap) accuracy_within_1 = accuracy_within_1 && gap <= 1.0;
  report["targets"] = {{"nothing_lost_duplicated_hung_or_leaked", problems.empty() && namespaces_left.empty()},
                       {"accuracy_within_1_point", accuracy_within_1}};
  std::printf("%s\n", report.dump(2).c_str());
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, report));
  std::fprintf(stderr, "soak: %lld rounds in %.1f min, %lld ended well; %lld faults injected; %lld units lost, %lld "
               "merged twice, %lld hung, %lld processes and %zu namespaces left\n",
               static_cast<long long>(totals["rounds"].get<int64_t>()), elapsed_minutes(),
               static_cast<long long>(totals["rounds_ended_well"].get<int64_t>()), static_cast<long long>(injected),
               static_cast<long long>(totals["units_lost"].get<int64_t>()),
               static_cast<long long>(totals["units_merged_twice"].get<int64_t>()),
               static_cast<long long>(totals["hung_rounds"].get<int64_t>()),
               static_cast<long long>(totals["processes_left"].get<int64_t>()), namespaces_left.size());
  if (!problems.empty() || !namespaces_left.empty()) {
    return Aborted(fmt::format("{} problem(s): {}{}", problems.size(), problems.empty() ? "" : problems.front(),
                               namespaces_left.empty() ? "" : "; namespaces left: " + *namespaces_left.begin()) +
                   (a.keep_dir.empty() ? " (rerun with --keep DIR to keep the rounds' run directories)" : ""));
  }
  return Status::Ok();
}

}  // namespace

void AddSoakBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<SoakArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "soak",
      "Chaos soak: `tenax run` rounds of elastic, async, fixed sync and networked elastic jobs under seeded fault plans "
      "(workers killed, preempted, stopped and continued; shards, data nodes and the coordinator killed and restarted; "
      "links dropped, slowed and partitioned at the transport) for --minutes; "
      "fails if any round ended badly, lost or merged a unit twice, hung, or left a process",
      "3 minutes of rounds with shorter jobs", a->quick, a->json_path, [a] { return RunSoak(*a); }, exit_code);
  cmd->add_option("--minutes", a->minutes,
                  "Start rounds for this long after the fault-free references (default 3 with --quick, else 60)")
      ->check(CLI::Range(0.01, 10080.0));
  cmd->add_option("--min-rounds", a->min_rounds, "Run at least this many rounds, even past --minutes")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}))
      ->capture_default_str();
  cmd->add_option("--async-references", a->async_references,
                  "Fault-free runs of the async job whose mean accuracy is its reference (its runs spread over points "
                  "by merge order alone; the sync kinds are deterministic and run once)")
      ->check(CLI::Range(int64_t{1}, int64_t{50}))
      ->capture_default_str();
  cmd->add_option("--async-alpha", a->async_alpha,
                  "async.alpha of the async job, its references included: the server's weight at staleness 0 "
                  "(docs/async.md, \"Why alpha = 0, and when to set 0.5\"; default: none set, tenax's 0)")
      ->check(CLI::Range(0.0, 0.95));
  cmd->add_option("--async-average-tail", a->async_average_tail,
                  "async.average_tail of the async job, its references included: the finisher evaluates the mean of "
                  "the models pulled over this last fraction of the job (docs/async.md, \"Tail averaging\"; default: "
                  "none set, tenax's 0.1; 0 evaluates the final model alone)")
      ->check(CLI::Range(0.0, 0.9));
  cmd->add_option("--elastic-spares", a->elastic_spares,
                  "cluster.spares of the elastic and network jobs, their references included: warm spares that take "
                  "a lost member's place (docs/elastic.md, \"Warm spares\")")
      ->check(CLI::Range(int64_t{0}, int64_t{2}))
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the rounds' fault plans (same seed, same plans)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--kinds", a->kinds, "Job kinds, in rotation: elastic, async, sync, network (comma-separated)")
      ->capture_default_str();
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory of the async and sync jobs (the elastic job's store "
                                        "is filled from the dataset package's)")
      ->capture_default_str();
  cmd->add_option("--round-timeout", a->round_timeout_seconds,
                  "Seconds after which a round counts as hung and is stopped")
      ->check(CLI::Range(int64_t{10}, int64_t{86400}))
      ->capture_default_str();
  cmd->add_option("--keep", a->keep_dir, "Keep every round's job file and run directory under this directory");
}

}  // namespace tenax::bench
