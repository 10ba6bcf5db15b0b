// tenax bench coord-load: one coordinator under more members than this
// machine has workers (issue 32, item 6). It starts a real `tenax
// coordinator` process and drives it with lightweight simulated members:
// threads of this process, each with one net::Node hosting many peer
// connections, that speak the coordinator's wire protocol with its own
// codec (proto/coord_wire.proto, tenax/coord/coord_codec.h) and no libtorch.
//
//  - async (mode "async", --clients N, default 100, 1000 and 5000): the N
//    members join (cluster.workers = N, at most 1024: the job file's bound;
//    the rest wait as spares, which the coordinator leases units to all the
//    same), then every member asks for a unit, "trains" it for
//    --unit-seconds (jittered 0.5x-1.5x) while it reports progress every
//    250 ms like a real worker, hands the result to the simulated
//    parameter-server shards (--shards, each its own connection speaking
//    ShardHello/ShardCheck/ShardVerdict/ShardMerged) and asks again at once;
//    a "wait" is asked again after 50 ms, as worker_role's async loop does.
//    The job has --units-per-member x N units; it ends when every unit is
//    merged (members then report Done and the coordinator exits) or at
//    --seconds: then the members stop asking (a unit granted later is left
//    to expire) and hand in what they train, and the run waits
//    (--drain-seconds) until the shards settled every result and the
//    coordinator's own counts (QueueCounts, to its watcher) show every merge
//    recorded. A watcher (what `tenax run` attaches) reads the relayed
//    progress all along.
//  - elastic (sync, cluster.elastic, --elastic-clients N, default 64 and
//    256): the N members join and form generation 1, then --generations
//    membership changes in turn (a member leaves, one joins, one's
//    connection is dropped, one joins), one at a time: each is timed from
//    its trigger until the coordinator recorded the new generation as
//    formed (every member reported Formed; its state file's
//    stable_generation, polled).
// Node heartbeats run throughout. Measured: leases per second, p50/p99 of a
// lease (request to grant, at the member) and of a generation's formation,
// the coordinator's CPU (utime + stime from /proc, as cores) and peak RSS
// (VmHWM), and from the coordinator's state file (coord::WorkQueue's
// decision log) that no unit handed in was lost or merged twice (when
// results were still in flight at the drain's end, "lost" cannot be told
// from "late": units_lost is then -1, and a note says so). The exit status
// is 1 when a unit was lost or merged twice, the coordinator crashed, or a
// membership change never formed.
//
// Beyond about 1000 connections per process UCX's async event limit must be
// raised (net/many_connections.h): the coordinator and the shards do it
// themselves (NodeOptions::max_peers), and so do the simulated members.
//
// The members run on the same cores as the coordinator (2 here): what they
// cost is reported as bench_cores next to the coordinator's.
#include <dirent.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "bench_common.h"
#include "coord_wire.pb.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/coord/work_queue.h"
#include "tenax/core/files.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/signals.h"
#include "tenax/core/sqlite_db.h"
#include "tenax/net/many_connections.h"
#include "tenax/net/node.h"

namespace tenax::bench {
namespace {

using namespace std::chrono_literals;
using Clock = SteadyClock;

constexpr int64_t kUnitSteps = 10;
constexpr int64_t kMaxClusterWorkers = 1024;  // cluster.workers' bound (job/train_config.cc)
constexpr auto kProgressEvery = 250ms;        // a worker's progress reports (worker_role.cc)
constexpr auto kWaitRetry = 50ms;             // an async worker asks again after "wait" (async_exchange.cc)
const char* const kHost = "127.0.0.1";

struct CoordLoadArgs {
  bool quick = false;
  std::string json_path;
  std::vector<int64_t> clients;          // async members; empty = the defaults
  std::vector<int64_t> elastic_clients;  // elastic members; empty = the defaults
  std::string phases = "async,elastic";
  double seconds = 0;        // lease phase limit per N; 0 = 60 full, 45 quick
  double join_seconds = 0;   // join phase limit per N; 0 = 150 full, 60 quick
  double idle_seconds = 0;   // heartbeats only, after the joins; 0 = 3 full, 1 quick
  double drain_seconds = 0;  // results handed in settling after an async lease phase; 0 = 60 full, 30 quick
  double unit_seconds = 1.0;
  int64_t units_per_member = 3;
  int64_t shards = 2;
  int64_t threads = 2;      // member threads (each one Node)
  int64_t generations = 0;  // elastic membership changes per N; 0 = 200 full, 12 quick
  int64_t seed = 1;
  std::string keep_dir;  // keep each phase's job file, coordinator log and state file here
};

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Deadline AfterSeconds(double s) {
  return Deadline::After(std::chrono::duration_cast<std::chrono::nanoseconds>(Seconds(s)));
}

// The q-quantile (0..1) of `v` by nearest rank; 0 when empty.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

nlohmann::json Latency(const std::vector<double>& ms) {
  return {{"count", ms.size()},
          {"p50_ms", Quantile(ms, 0.5)},
          {"p99_ms", Quantile(ms, 0.99)},
          {"max_ms", ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end())}};
}

// ------------------------------------------------ the coordinator process

// utime + stime of `pid` in seconds (/proc/PID/stat); -1 when unreadable.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A "Key: N kB" line of /proc/PID/status, in MiB; 0 when absent.
double StatusMib(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return 0;
}

int64_t OpenFiles(pid_t pid) {
  int64_t n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// The 1-minute load average: what else ran on the cores meanwhile.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

double OwnCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// CPU used over a window, as cores (CPU seconds per wall second).
struct CpuWindow {
  pid_t pid = 0;  // 0: this process
  double cpu0 = 0;
  Clock::time_point t0;
  static CpuWindow Begin(pid_t pid) { return {pid, pid ? CpuSeconds(pid) : OwnCpuSeconds(), Clock::now()}; }
  double Cores() const {
    const double wall = Secs(Clock::now() - t0);
    return wall > 0 ? ((pid ? CpuSeconds(pid) : OwnCpuSeconds()) - cpu0) / wall : 0;
  }
};

// `tenax coordinator` on a job file, its log and state in `dir`; stopped
// (SIGTERM, then SIGKILL) when dropped.
class Coordinator {
 public:
  static Result<std::unique_ptr<Coordinator>> Start(const std::string& tenax, const std::string& dir,
                                                    const std::string& job_text) {
    std::unique_ptr<Coordinator> c(new Coordinator(dir));
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(dir + "/job.toml", job_text));
    TENAX_ASSIGN_OR_RETURN(c->index_, c->sup_.StartLogged("coordinator",
                                                          {tenax, "coordinator", "--job", dir + "/job.toml", "--state",
                                                           c->state_path(), "--port-file", dir + "/port"},
                                                          c->log_path()));
    const Deadline deadline = Deadline::After(60s);
    while (true) {
      if (auto text = ReadFileText(dir + "/port", 64); text.ok() && !text->empty() && text->back() == '\n') {
        c->port_ = static_cast<uint16_t>(std::stoi(*text));
        return c;
      }
      if (auto failure = c->sup_.FirstFailure()) return Unavailable(failure->Describe());
      if (c->Exited()) return Unavailable("the coordinator exited before it listened (see " + c->log_path() + ")");
      if (StopRequested()) return Cancelled("stopped by a signal while the coordinator started");
      if (deadline.Expired())
        return DeadlineExceeded("the coordinator did not listen within 60 s (" + c->log_path() + ")");
      c->sup_.WaitForActivity(Deadline::After(20ms));  // pacing the port file's poll
    }
  }

  uint16_t port() const { return port_; }
  pid_t pid() const { return sup_.pid(index_); }
  std::string state_path() const { return dir_ + "/coordinator.db"; }
  std::string log_path() const { return dir_ + "/coordinator.log"; }
  bool Exited() {
    sup_.Poll();
    return sup_.exit_code(index_).has_value();
  }
  // Waits for its own exit (a finished job) until `deadline`, then stops it.
  int StopWithin(Deadline deadline) {
    sup_.ExpectExit(index_);
    if (auto code = sup_.WaitForExit(index_, deadline); code.ok()) return *code;
    (void)sup_.Signal(index_, SIGTERM);
    auto code = sup_.WaitForExit(index_, Deadline::After(30s));
    sup_.Stop();
    return code.ok() ? *code : -1;
  }
  // Blocks until the coordinator exits or `until` (pacing a caller's waits).
  void WaitForActivity(Deadline until) { sup_.WaitForActivity(until); }

 private:
  explicit Coordinator(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  ProcessSupervisor sup_{"coord-load", 5s};
  size_t index_ = 0;
  uint16_t port_ = 0;
};

// Waits (up to `deadline`, pacing 20 ms) until `done`; false at the
// deadline, Cancelled on a stop signal, Unavailable when the coordinator
// exited first.
Result<bool> WaitUntil(Coordinator& c, Deadline deadline, const std::function<bool()>& done) {
  while (!done()) {
    if (StopRequested()) return Cancelled("stopped by a signal");
    if (c.Exited()) return Unavailable("the coordinator exited (see " + c.log_path() + ")");
    if (deadline.Expired()) return false;
    c.WaitForActivity(Deadline::After(20ms).Earlier(deadline));
  }
  return true;
}

wire::JoinRequest JoinAsk(const std::string& job_id, const std::string& name, uint16_t port) {
  wire::JoinRequest r;
  r.set_job_id(job_id);
  r.set_name(name);
  r.set_host(kHost);
  r.set_port(port);
  r.set_requested_rank(-1);
  r.set_pid(static_cast<uint64_t>(::getpid()));
  return r;
}

wire::Progress ProgressReport(uint32_t rank, int64_t step, int64_t total_steps) {
  wire::Progress p;
  p.set_rank(rank);
  p.set_step(step);
  p.set_total_steps(total_steps);
  p.set_epochs(1);
  p.set_loss(0.5);
  p.set_samples_per_second(100);
  p.set_test_accuracy(-1);
  p.set_step_seconds(0.01);
  return p;
}

// ------------------------------------------------------------ async phase

enum Stage : int { kJoin = 0, kIdle = 1, kLease = 2, kDrain = 3, kQuit = 4 };

struct PushedResult {
  uint64_t unit = 0, attempt = 0;
  int64_t steps = 0;
  std::vector<uint32_t> shards;
  Clock::time_point at;
};

// What the members and the shards share; the counters are read by the
// main thread, which moves `stage` on.
struct AsyncRun {
  uint16_t port = 0;
  std::string job_id;
  int64_t total_steps = 0;
  int shards = 1;
  double unit_seconds = 1;
  std::atomic<int> stage{kJoin};
  std::atomic<int64_t> answered{0}, joined{0}, done{0}, training{0}, pushed{0}, settled{0};
  // Units every shard merged: as the shards here count them, and as the
  // coordinator last told its watcher (QueueCounts, at most every second).
  std::atomic<int64_t> merged_here{0}, merged_reported{0};
  std::atomic<bool> shards_ready{false}, shards_failed{false};
  std::mutex mu;
  std::vector<PushedResult> results;  // members -> shards, under mu
  void Push(PushedResult r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(std::move(r));
  }
  std::vector<PushedResult> TakeResults() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(results, {});
  }
};

// One member thread's tallies (merged by the main thread after it ended).
struct MemberTallies {
  std::vector<double> connect_ms, join_ms, lease_ms, wait_ms;
  int64_t refused = 0, connect_failed = 0, connect_retries = 0, leases = 0, late_grants = 0, waits = 0, done = 0,
          progress = 0, rosters = 0, failures = 0, send_failed = 0;
  int64_t roster_bytes = 0, max_member_roster_bytes = 0;
  std::vector<std::string> errors;  // the first few
  void Error(const std::string& e) {
    if (errors.size() < 3) errors.push_back(e);
  }
  void Add(const MemberTallies& t) {
    for (auto [to, from] : {std::pair{&connect_ms, &t.connect_ms}, std::pair{&join_ms, &t.join_ms},
                            std::pair{&lease_ms, &t.lease_ms}, std::pair{&wait_ms, &t.wait_ms}}) {
      to->insert(to->end(), from->begin(), from->end());
    }
    for (auto [to, from] :
         {std::pair{&refused, t.refused}, std::pair{&connect_failed, t.connect_failed},
          std::pair{&connect_retries, t.connect_retries}, std::pair{&leases, t.leases},
          std::pair{&late_grants, t.late_grants}, std::pair{&waits, t.waits}, std::pair{&done, t.done},
          std::pair{&progress, t.progress}, std::pair{&rosters, t.rosters}, std::pair{&failures, t.failures},
          std::pair{&send_failed, t.send_failed}, std::pair{&roster_bytes, t.roster_bytes}}) {
      *to += from;
    }
    max_member_roster_bytes = std::max(max_member_roster_bytes, t.max_member_roster_bytes);
    for (const auto& e : t.errors) Error(e);
  }
};

enum class AsyncState { kJoining, kJoined, kAsking, kTraining, kIdle, kDone, kGone };

struct AsyncMember {
  int id = 0;
  net::PeerId peer = 0;
  uint32_t rank = 0;
  AsyncState state = AsyncState::kJoining;
  Clock::time_point asked_at;
  wire::UnitGrant unit;
  uint64_t token = 0;  // a unit's number here: its progress timers stop with it
  int64_t roster_bytes = 0;
};

enum class TimerKind { kAsk, kTrainEnd, kProgress };
struct Timer {
  Clock::time_point at;
  size_t member = 0;
  TimerKind kind = TimerKind::kAsk;
  uint64_t token = 0;
  bool operator>(const Timer& o) const { return at > o.at; }
};

// The members `ids` on one Node, on the calling thread, until stage kQuit.
void RunAsyncMembers(AsyncRun& run, const std::vector<int>& ids, uint64_t seed, MemberTallies& t) {
  auto give_up = [&](const Status& st) {
    t.Error(st.ToString());
    t.connect_failed += static_cast<int64_t>(ids.size());
    run.answered += static_cast<int64_t>(ids.size());
  };
  net::NodeOptions no;
  no.name = "coord-load-members";
  no.max_peers = ids.size() + 16;  // a connection per member, to the coordinator and the shards
  auto created = net::Node::Create(no);
  if (!created.ok()) return give_up(created.status());
  net::Node& node = **created;
  auto listen = node.Listen(kHost, 0);  // where a worker's peers would reach it
  if (!listen.ok()) return give_up(listen.status());

  std::vector<AsyncMember> m(ids.size());
  std::unordered_map<net::PeerId, size_t> by_peer;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.5, 1.5), uniform(0.0, 1.0);
  int stage_seen = kJoin;
  auto after = [](double seconds) { return std::chrono::duration_cast<Clock::duration>(Seconds(seconds)); };
  auto set_state = [&](AsyncMember& x, AsyncState s) {
    if ((x.state == AsyncState::kTraining) != (s == AsyncState::kTraining)) {
      run.training += s == AsyncState::kTraining ? 1 : -1;
    }
    x.state = s;
  };
  auto send = [&](AsyncMember& x, uint32_t kind, const std::string& payload) {
    if (node.SendControl(x.peer, kind, payload, Deadline::After(2s)).ok()) return true;
    ++t.send_failed;
    t.Error("member " + std::to_string(x.id) + ": " + node.PeerStatus(x.peer).ToString());
    set_state(x, AsyncState::kGone);
    return false;
  };
  auto ask = [&](size_t i) {
    AsyncMember& x = m[i];
    wire::UnitRequest r;
    r.set_worker("load-" + std::to_string(x.id));
    x.asked_at = Clock::now();
    if (send(x, coord::kUnitRequestKind, r.SerializeAsString())) set_state(x, AsyncState::kAsking);
  };
  auto on_grant = [&](size_t i, const net::ControlMessage& msg) {
    AsyncMember& x = m[i];
    const auto now = Clock::now();
    auto g = coord::DecodeUnitGrant(msg.payload, "coordinator");
    if (!g.ok() || x.state != AsyncState::kAsking) {
      t.Error(g.ok() ? "a grant nobody asked for" : g.status().ToString());
      return;
    }
    if (g->state() == "unit") {
      t.lease_ms.push_back(Ms(now - x.asked_at));
      ++t.leases;
      if (run.stage.load() != kLease) {
        // Granted after the phase: the member has stopped (its lease
        // would expire); giving it back would only add to the backlog.
        ++t.late_grants;
        set_state(x, AsyncState::kIdle);
        return;
      }
      x.unit = *g;
      ++x.token;
      set_state(x, AsyncState::kTraining);
      timers.push({now + after(run.unit_seconds * jitter(rng)), i, TimerKind::kTrainEnd, x.token});
      timers.push({now + kProgressEvery, i, TimerKind::kProgress, x.token});
    } else if (g->state() == "wait") {
      t.wait_ms.push_back(Ms(now - x.asked_at));
      ++t.waits;
      set_state(x, AsyncState::kIdle);
      timers.push({now + kWaitRetry, i, TimerKind::kAsk, 0});
    } else {  // "done": every unit is merged; the worker reports it finished
      ++t.done;
      wire::Done d;
      d.set_rank(x.rank);
      if (send(x, coord::kDoneKind, d.SerializeAsString())) set_state(x, AsyncState::kDone);
      ++run.done;
    }
  };
  auto on_message = [&](net::ControlMessage& msg) {
    auto it = by_peer.find(msg.from);
    if (it == by_peer.end()) return;
    AsyncMember& x = m[it->second];
    if (msg.kind == coord::kUnitGrantKind) {
      on_grant(it->second, msg);
    } else if (msg.kind == coord::kJoinReplyKind) {
      auto r = coord::DecodeJoinReply(msg.payload, "coordinator");
      ++run.answered;
      if (!r.ok() || !r->error().empty()) {
        ++t.refused;
        t.Error(r.ok() ? r->error() : r.status().ToString());
        set_state(x, AsyncState::kGone);
        return;
      }
      t.join_ms.push_back(Ms(Clock::now() - x.asked_at));
      x.rank = r->rank();
      set_state(x, AsyncState::kJoined);
      ++run.joined;
      // In past the join phase's limit: it starts asking at once.
      if (run.stage.load() == kLease) timers.push({Clock::now(), it->second, TimerKind::kAsk, 0});
    } else if (msg.kind == coord::kRosterKind) {
      // Every async joiner makes a generation whose roster goes to every
      // member; a real async worker never reads them (they wait in its
      // Node's bounded queue). Counted, not decoded.
      ++t.rosters;
      t.roster_bytes += static_cast<int64_t>(msg.payload.size());
      x.roster_bytes += static_cast<int64_t>(msg.payload.size());
      t.max_member_roster_bytes = std::max(t.max_member_roster_bytes, x.roster_bytes);
    } else if (msg.kind == coord::kFailureKind) {
      ++t.failures;
      auto f = coord::DecodeFailure(msg.payload, "coordinator");
      t.Error("the coordinator announced a failure: " + (f.ok() ? f->reason() : f.status().message()));
    }
  };
  auto on_timer = [&](const Timer& tm) {
    AsyncMember& x = m[tm.member];
    // Asks again while the lease phase lasts; stops after it.
    auto ask_or_stop = [&] {
      if (run.stage.load() == kLease) {
        ask(tm.member);
      } else {
        set_state(x, AsyncState::kIdle);
      }
    };
    switch (tm.kind) {
      case TimerKind::kAsk:
        if (x.state == AsyncState::kJoined || x.state == AsyncState::kIdle) ask_or_stop();
        return;
      case TimerKind::kTrainEnd: {
        if (x.state != AsyncState::kTraining || tm.token != x.token) return;
        PushedResult r{x.unit.unit(), x.unit.attempt(), x.unit.steps(), {}, Clock::now()};
        r.shards.assign(x.unit.shards().begin(), x.unit.shards().end());
        ++run.pushed;
        run.Push(std::move(r));
        ask_or_stop();
        return;
      }
      case TimerKind::kProgress: {
        if (x.state != AsyncState::kTraining || tm.token != x.token) return;
        const int64_t step = x.unit.start_step() + 1;
        if (send(x, coord::kProgressKind, ProgressReport(x.rank, step, run.total_steps).SerializeAsString())) {
          ++t.progress;
          timers.push({Clock::now() + kProgressEvery, tm.member, TimerKind::kProgress, tm.token});
        }
        return;
      }
    }
  };
  // One round: UCX progress, every message that arrived, every timer due.
  auto pump = [&]() -> bool {
    node.Progress();
    bool did = false;
    for (auto msg = node.ReceiveControl(Deadline::At(Clock::now())); msg.ok();
         msg = node.ReceiveControl(Deadline::At(Clock::now()))) {
      on_message(*msg);
      did = true;
    }
    const int stage = run.stage.load();
    if (stage != stage_seen) {
      if (stage == kLease) {
        // The first asks spread over one unit's time, as workers that
        // started at different moments would.
        for (size_t i = 0; i < m.size(); ++i) {
          if (m[i].state == AsyncState::kJoined) {
            timers.push({Clock::now() + after(run.unit_seconds * uniform(rng)), i, TimerKind::kAsk, 0});
          }
        }
      }
      stage_seen = stage;
    }
    const auto now = Clock::now();
    while (!timers.empty() && timers.top().at <= now) {
      const Timer tm = timers.top();
      timers.pop();
      on_timer(tm);
      did = true;
    }
    return did;
  };

  // Joins, one connection at a time. As CoordinatorClient::Join does, only
  // a refusal is final: a connection that failed (a handshake the loaded
  // coordinator did not finish in time) is tried again, until the join
  // phase ends.
  std::deque<size_t> to_join;
  for (size_t i = 0; i < m.size(); ++i) {
    m[i].id = ids[i];
    to_join.push_back(i);
  }
  while (!to_join.empty() && run.stage.load() == kJoin && !StopRequested()) {
    const size_t i = to_join.front();
    to_join.pop_front();
    AsyncMember& x = m[i];
    const auto t0 = Clock::now();
    auto peer = node.Connect(kHost, run.port, Deadline::After(30s));
    if (!peer.ok()) {
      // A refusal is final (an error); anything else is tried again, as a
      // worker's Join does, and only counted (connect_retries): a handshake
      // slower than 5 s on a loaded machine is not a coordinator's fault.
      if (peer.status().code() == StatusCode::kRefused) {
        t.Error(peer.status().ToString());
        ++t.connect_failed;
        ++run.answered;
        x.state = AsyncState::kGone;
      } else {
        ++t.connect_retries;
        to_join.push_back(i);
        std::this_thread::sleep_for(10ms);  // pacing the retries, as Join does
      }
      pump();
      continue;
    }
    t.connect_ms.push_back(Ms(Clock::now() - t0));
    x.peer = *peer;
    by_peer[x.peer] = i;
    x.asked_at = Clock::now();
    if (!send(x, coord::kJoinRequestKind,
              JoinAsk(run.job_id, "load/" + std::to_string(x.id), *listen).SerializeAsString())) {
      ++run.answered;
      continue;
    }
    pump();
  }
  for (size_t i : to_join) {  // the join phase ended before they got in
    ++t.connect_failed;
    m[i].state = AsyncState::kGone;
  }
  while (run.stage.load() != kQuit && !StopRequested()) {
    // Pacing an idle loop (messages wait in UCX meanwhile): the members
    // must leave the cores to the coordinator they measure.
    if (!pump()) std::this_thread::sleep_for(500us);
  }
  // Closed one by one while the Node is driven, rather than all at once by
  // its destructor, whose bounded wait a thousand closes outlast.
  for (const AsyncMember& x : m) {
    if (x.peer != 0) node.Disconnect(x.peer, Deadline::After(200ms));
  }
}

// The parameter-server shards (one connection each) and a watcher, on one
// Node: each result handed in is checked by every shard it names; a
// "merge" verdict is merged and reported (ShardMerged) with the shard's
// next merge number.
struct ShardTallies {
  std::vector<double> merge_ms;                        // handed in -> merged by every shard
  std::map<std::pair<uint64_t, int>, int64_t> merges;  // (unit, shard) -> merges made here
  std::set<uint64_t> units_handed_in;
  std::map<std::string, int64_t> other_verdicts;
  int64_t done_seen = 0, watcher_messages = 0, watcher_bytes = 0;
  std::vector<std::string> errors;
};

void RunShards(AsyncRun& run, ShardTallies& t) {
  auto fail = [&](const Status& st) {
    t.errors.push_back(st.ToString());
    run.shards_failed = true;
  };
  net::NodeOptions no;
  no.name = "coord-load-shards";
  no.max_peers = net::kFleetPeers;  // as a real shard
  auto created = net::Node::Create(no);
  if (!created.ok()) return fail(created.status());
  net::Node& node = **created;
  auto listen = node.Listen(kHost, 0);
  if (!listen.ok()) return fail(listen.status());
  std::vector<net::PeerId> conn(static_cast<size_t>(run.shards));
  std::unordered_map<net::PeerId, int> shard_of;
  for (int s = 0; s < run.shards; ++s) {
    auto peer = node.Connect(kHost, run.port, Deadline::After(30s));
    if (!peer.ok()) return fail(peer.status());
    wire::ShardHello h;
    h.set_job_id(run.job_id);
    h.set_shard(static_cast<uint32_t>(s));
    h.set_shards(static_cast<uint32_t>(run.shards));
    h.set_host(kHost);
    h.set_port(*listen);
    h.set_first_hello(true);
    if (Status st = node.SendControl(*peer, coord::kShardHelloKind, h.SerializeAsString(), Deadline::After(5s));
        !st.ok()) {
      return fail(st);
    }
    auto w = node.ReceiveControl(Deadline::After(30s), *peer, coord::kShardWelcomeKind);
    if (!w.ok()) return fail(w.status());
    auto welcome = coord::DecodeShardWelcome(w->payload, "coordinator");
    if (!welcome.ok()) return fail(welcome.status());
    if (!welcome->error().empty()) return fail(Refused("shard " + std::to_string(s) + ": " + welcome->error()));
    conn[static_cast<size_t>(s)] = *peer;
    shard_of[*peer] = s;
  }
  auto watcher = node.Connect(kHost, run.port, Deadline::After(30s));
  if (!watcher.ok()) return fail(watcher.status());
  wire::Watch watch;
  watch.set_job_id(run.job_id);
  if (Status st = node.SendControl(*watcher, coord::kWatchKind, watch.SerializeAsString(), Deadline::After(5s));
      !st.ok()) {
    return fail(st);
  }
  run.shards_ready = true;

  struct Pending {
    Clock::time_point at;
    size_t left = 0;
  };
  std::map<std::pair<uint64_t, uint64_t>, Pending> pending;
  std::vector<uint64_t> merge_seq(static_cast<size_t>(run.shards), 0);
  auto send = [&](net::PeerId peer, uint32_t kind, const std::string& payload) {
    if (Status st = node.SendControl(peer, kind, payload, Deadline::After(2s)); !st.ok() && t.errors.size() < 3) {
      t.errors.push_back(st.ToString());
    }
  };
  while (run.stage.load() != kQuit && !StopRequested()) {
    node.Progress();
    bool did = false;
    for (PushedResult& r : run.TakeResults()) {
      did = true;
      t.units_handed_in.insert(r.unit);
      pending[{r.unit, r.attempt}] = {r.at, r.shards.size()};
      for (uint32_t s : r.shards) {
        wire::ShardCheck c;
        c.set_unit(r.unit);
        c.set_attempt(r.attempt);
        c.set_shard(s);
        c.set_valid(true);
        c.set_steps_done(r.steps);
        if (s < conn.size()) send(conn[s], coord::kShardCheckKind, c.SerializeAsString());
      }
    }
    for (auto msg = node.ReceiveControl(Deadline::At(Clock::now())); msg.ok();
         msg = node.ReceiveControl(Deadline::At(Clock::now()))) {
      did = true;
      if (msg->from == *watcher) {
        ++t.watcher_messages;
        t.watcher_bytes += static_cast<int64_t>(msg->payload.size());
        if (msg->kind == coord::kQueueCountsKind) {
          if (auto q = coord::DecodeQueueCounts(msg->payload, "coordinator"); q.ok()) {
            run.merged_reported = q->merged_everywhere();
          }
        }
        continue;
      }
      auto it = shard_of.find(msg->from);
      if (it == shard_of.end()) continue;
      const int s = it->second;
      if (msg->kind == coord::kDoneKind) {
        ++t.done_seen;
        continue;
      }
      if (msg->kind != coord::kShardVerdictKind) continue;
      auto v = coord::DecodeShardVerdict(msg->payload, "coordinator");
      if (!v.ok()) {
        if (t.errors.size() < 3) t.errors.push_back(v.status().ToString());
        continue;
      }
      const auto key = std::make_pair(v->unit(), v->attempt());
      auto p = pending.find(key);
      if (v->verdict() == "merge") {
        wire::ShardMerged mm;
        mm.set_unit(v->unit());
        mm.set_attempt(v->attempt());
        mm.set_shard(static_cast<uint32_t>(s));
        mm.set_merge_seq(++merge_seq[static_cast<size_t>(s)]);
        mm.set_version(merge_seq[static_cast<size_t>(s)]);
        send(msg->from, coord::kShardMergedKind, mm.SerializeAsString());
        ++t.merges[{v->unit(), s}];
        if (p != pending.end() && --p->second.left == 0) {
          t.merge_ms.push_back(Ms(Clock::now() - p->second.at));
          pending.erase(p);
          ++run.settled;
          ++run.merged_here;
        }
      } else if (v->verdict() != "pending") {
        ++t.other_verdicts[v->verdict()];
        if (p != pending.end()) {  // not merged: the lease goes on (or was re-issued)
          pending.erase(p);
          ++run.settled;
        }
      }
    }
    if (!did) std::this_thread::sleep_for(500us);  // pacing an idle loop, as the members'
  }
}

// From the coordinator's decision log (the state file, as soak_bench
// reads it): every unit that was handed in or accepted (every unit, when
// the job finished) merged by every shard, and exactly once.
struct OnceCheck {
  coord::WorkQueueCounts counts;
  int64_t checked_units = 0, lost = 0, merged_twice = 0;
};

Result<OnceCheck> CheckExactlyOnce(const std::string& state, int64_t total_steps, int shards, bool finished,
                                   const std::set<uint64_t>& handed_in) {
  coord::WorkQueueOptions o;
  o.total_steps = total_steps;
  o.unit_steps = kUnitSteps;
  o.shards = shards;
  TENAX_ASSIGN_OR_RETURN(auto queue, coord::WorkQueue::Open(state, o));
  TENAX_ASSIGN_OR_RETURN(auto events, queue->Events());
  OnceCheck c;
  TENAX_ASSIGN_OR_RETURN(c.counts, queue->Counts());
  std::map<std::pair<int64_t, int>, int64_t> merged;
  std::set<int64_t> check(handed_in.begin(), handed_in.end());
  for (const auto& e : events) {
    if (e.what == "merged") ++merged[{e.unit, e.shard}];
    if (e.what == "reopened") merged[{e.unit, e.shard}] = 0;
    if (e.what == "accepted") check.insert(e.unit);
  }
  if (finished) {
    for (int64_t u = 0; u < c.counts.units; ++u) check.insert(u);
  }
  c.checked_units = static_cast<int64_t>(check.size());
  for (int64_t u : check) {
    for (int s = 0; s < shards; ++s) {
      auto it = merged.find({u, s});
      if (it == merged.end() || it->second == 0) ++c.lost;
    }
  }
  for (const auto& [key, n] : merged) c.merged_twice += std::max<int64_t>(0, n - 1);
  return c;
}

std::string AsyncJobText(int64_t members, int64_t units, int64_t shards, const std::string& job_id) {
  const int64_t steps = units * kUnitSteps;
  // Batch 1: an epoch of Fashion-MNIST is 60000 steps.
  return fmt::format(
      "mode = \"async\"\n[cluster]\nworkers = {}\njob_id = \"{}\"\njoin_timeout_seconds = 600\n"
      "[async]\nservers = {}\nunit_steps = {}\n[model]\nname = \"mlp\"\n"
      "[train]\nbatch_size = 1\nepochs = {}\nmax_steps = {}\n[report]\nhtml = false\n",
      std::min(members, kMaxClusterWorkers), job_id, shards, kUnitSteps, steps / 60000 + 1, steps);
}

Result<nlohmann::json> AsyncPhase(const CoordLoadArgs& a, const std::string& tenax, const std::string& root,
                                  int64_t n) {
  const std::string dir = fmt::format("{}/async-{}", root, n);
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  AsyncRun run;
  run.job_id = fmt::format("coord-load-async-{}", n);
  run.shards = static_cast<int>(a.shards);
  run.unit_seconds = a.unit_seconds;
  const int64_t units = n * a.units_per_member;
  run.total_steps = units * kUnitSteps;
  TENAX_ASSIGN_OR_RETURN(auto coordinator,
                         Coordinator::Start(tenax, dir, AsyncJobText(n, units, a.shards, run.job_id)));
  run.port = coordinator->port();
  const pid_t pid = coordinator->pid();
  const double load_before = LoadAverage();

  ShardTallies shard_tallies;
  const size_t threads = static_cast<size_t>(std::min<int64_t>(a.threads, n));
  std::vector<MemberTallies> tallies(threads);
  std::vector<std::thread> workers;
  // Every way out of here ends the threads (their Nodes close) and, unless
  // it exited, the coordinator.
  struct Ending {
    AsyncRun& run;
    std::vector<std::thread>& workers;
    ~Ending() {
      run.stage = kQuit;
      for (auto& w : workers) w.join();
    }
  } ending{run, workers};
  workers.emplace_back([&] { RunShards(run, shard_tallies); });
  TENAX_ASSIGN_OR_RETURN(bool ready, WaitUntil(*coordinator, Deadline::After(60s),
                                               [&] { return run.shards_ready.load() || run.shards_failed.load(); }));
  if (!ready || run.shards_failed) {
    return Unavailable("the simulated shards did not register: " + (shard_tallies.errors.empty()
                                                                        ? std::string("no answer in 60 s")
                                                                        : shard_tallies.errors.front()));
  }

  // Joins: every member thread connects and joins its members at once.
  std::fprintf(stderr, "coord-load: async, %lld members (%zu threads, %lld units, %lld shards): joining ...\n",
               static_cast<long long>(n), threads, static_cast<long long>(units), static_cast<long long>(a.shards));
  const CpuWindow join_cpu = CpuWindow::Begin(pid), join_bench_cpu = CpuWindow::Begin(0);
  const auto join_t0 = Clock::now();
  for (size_t t = 0; t < threads; ++t) {
    std::vector<int> ids;
    for (int64_t i = static_cast<int64_t>(t); i < n; i += static_cast<int64_t>(threads))
      ids.push_back(static_cast<int>(i));
    workers.emplace_back([&run, &tallies, ids, t, seed = a.seed] {
      RunAsyncMembers(run, ids, static_cast<uint64_t>(seed) * 7919 + t, tallies[t]);
    });
  }
  TENAX_ASSIGN_OR_RETURN(bool all_answered, WaitUntil(*coordinator, AfterSeconds(a.join_seconds),
                                                      [&] { return run.answered.load() >= n; }));
  const double join_seconds = Secs(Clock::now() - join_t0);
  const double join_cores = join_cpu.Cores(), join_bench_cores = join_bench_cpu.Cores();
  const int64_t joined = run.joined.load();
  std::fprintf(stderr, "coord-load: async %lld: %lld joined in %.1f s%s\n", static_cast<long long>(n),
               static_cast<long long>(joined), join_seconds, all_answered ? "" : " (join phase limit reached)");

  // Heartbeats only: what N idle connections cost the coordinator.
  const CpuWindow idle_cpu = CpuWindow::Begin(pid);
  run.stage = kIdle;
  TENAX_ASSIGN_OR_RETURN(bool idle_ended, WaitUntil(*coordinator, AfterSeconds(a.idle_seconds), [] { return false; }));
  (void)idle_ended;  // a measuring window: it always runs to its end
  const double idle_cores = idle_cpu.Cores();

  // Leases until every unit is merged, or the phase limit.
  const CpuWindow lease_cpu = CpuWindow::Begin(pid), bench_cpu = CpuWindow::Begin(0);
  const auto lease_t0 = Clock::now();
  run.stage = kLease;
  TENAX_ASSIGN_OR_RETURN(bool finished, WaitUntil(*coordinator, AfterSeconds(a.seconds),
                                                  [&] { return joined > 0 && run.done.load() >= joined; }));
  const double lease_seconds = Secs(Clock::now() - lease_t0);
  const double lease_cores = lease_cpu.Cores(), bench_cores = bench_cpu.Cores();
  const auto drain_t0 = Clock::now();
  bool drained = true;
  if (!finished) {
    // The members stop asking and hand in the units they train; the
    // shards settle what was handed in, and the coordinator's own counts
    // show every merge recorded (then its log is complete for them).
    run.stage = kDrain;
    TENAX_ASSIGN_OR_RETURN(drained, WaitUntil(*coordinator, AfterSeconds(a.drain_seconds), [&] {
                             return run.training.load() == 0 && run.settled.load() >= run.pushed.load() &&
                                    run.merged_reported.load() >= run.merged_here.load();
                           }));
  }
  const double drain_seconds = finished ? 0 : Secs(Clock::now() - drain_t0);
  const double rss_mib = StatusMib(pid, "VmHWM");
  const int64_t open_files = OpenFiles(pid);
  // A finished job's coordinator exits once its members are gone; an
  // unfinished one is stopped before they go (each loss would make a
  // generation).
  int exit_code = finished ? -1 : coordinator->StopWithin(Deadline::After(0s));
  run.stage = kQuit;
  for (auto& w : workers) w.join();
  workers.clear();
  if (finished) exit_code = coordinator->StopWithin(Deadline::After(30s));

  MemberTallies all;
  for (const MemberTallies& t : tallies) all.Add(t);
  for (const auto& e : shard_tallies.errors) all.Error("shards: " + e);
  TENAX_ASSIGN_OR_RETURN(OnceCheck once, CheckExactlyOnce(coordinator->state_path(), run.total_steps, run.shards,
                                                          finished, shard_tallies.units_handed_in));
  int64_t merges_here = 0;
  for (const auto& [key, k] : shard_tallies.merges) merges_here += k;
  const double mib = 1024.0 * 1024.0;
  nlohmann::json row = {
      {"clients", n},
      {"active_members", std::min(n, kMaxClusterWorkers)},
      {"spares", std::max<int64_t>(0, n - kMaxClusterWorkers)},
      {"member_threads", threads},
      {"shards", a.shards},
      {"units", units},
      {"unit_seconds", a.unit_seconds},
      {"join",
       {{"joined", joined},
        {"refused", all.refused},
        {"not_joined", all.connect_failed},
        {"connect_retries", all.connect_retries},
        {"seconds", join_seconds},
        {"all_answered", all_answered},
        {"joins_per_second", join_seconds > 0 ? static_cast<double>(joined) / join_seconds : 0},
        {"latency", Latency(all.join_ms)},
        {"connect", Latency(all.connect_ms)},
        {"coordinator_cores", join_cores},
        {"bench_cores", join_bench_cores},
        {"rosters_received", all.rosters},
        {"roster_mib_received", static_cast<double>(all.roster_bytes) / mib},
        {"max_roster_mib_per_member", static_cast<double>(all.max_member_roster_bytes) / mib}}},
      {"idle", {{"seconds", a.idle_seconds}, {"coordinator_cores", idle_cores}}},
      {"lease",
       {{"seconds", lease_seconds},
        {"job_finished", finished},
        {"drained", drained},
        {"leases", all.leases},
        // Granted while the phase lasted (a request of the phase answered
        // after it is a lease too, but not the phase's throughput).
        {"leases_per_second",
         lease_seconds > 0 ? static_cast<double>(all.leases - all.late_grants) / lease_seconds : 0},
        {"drain_seconds", drain_seconds},
        {"offered_leases_per_second", static_cast<double>(joined) / a.unit_seconds},
        {"latency", Latency(all.lease_ms)},
        {"granted_after_the_phase", all.late_grants},
        {"wait_grants", all.waits},
        {"wait_latency", Latency(all.wait_ms)},
        {"merge_latency", Latency(shard_tallies.merge_ms)},
        {"progress_reports", all.progress},
        {"watcher_messages", shard_tallies.watcher_messages},
        {"coordinator_cores", lease_cores},
        {"bench_cores", bench_cores}}},
      {"coordinator_rss_mib", rss_mib},
      {"coordinator_open_files", open_files},
      {"coordinator_exit_code", exit_code},
      // Finished: it exits 0; stopped after the phase: 130 (SIGTERM, handled).
      {"coordinator_exit_expected", finished ? exit_code == 0 : exit_code == 130 || exit_code == 128 + SIGTERM},
      {"load_average", {{"before", load_before}, {"after", LoadAverage()}}},
      {"results_handed_in", run.pushed.load()},
      {"merges_reported", merges_here},
      {"other_verdicts", shard_tallies.other_verdicts},
      {"queue",
       {{"units", once.counts.units},
        {"units_issued", once.counts.units_issued},
        {"units_reissued", once.counts.units_reissued},
        {"leases_expired", once.counts.leases_expired},
        {"accepted", once.counts.accepted},
        {"merged_everywhere", once.counts.merged_everywhere}}},
      {"units_checked", once.checked_units},
      // Complete when the job finished or the results settled; otherwise
      // results were still in flight when the coordinator was stopped: -1.
      {"units_lost", finished || drained ? once.lost : -1},
      {"unsettled_at_stop", run.pushed.load() - run.settled.load()},
      {"units_merged_twice", once.merged_twice},
      {"failures_announced", all.failures},
      {"errors", all.errors}};
  std::fprintf(stderr,
               "coord-load: async %lld: %lld leases in %.1f s (%.0f/s), lease p50 %.1f ms p99 %.1f ms, coordinator "
               "%.2f cores, %.0f MiB; %lld lost, %lld merged twice\n",
               static_cast<long long>(n), static_cast<long long>(all.leases - all.late_grants), lease_seconds,
               row["lease"]["leases_per_second"].get<double>(), Quantile(all.lease_ms, 0.5),
               Quantile(all.lease_ms, 0.99), lease_cores, rss_mib,
               static_cast<long long>(row["units_lost"].get<int64_t>()), static_cast<long long>(once.merged_twice));
  return row;
}

// ---------------------------------------------------------- elastic phase

struct ElasticMember {
  net::PeerId peer = 0;
  uint32_t member_id = 0;
  bool joined = false, in_job = false, leaving = false, gone = false;
  uint64_t generation = 0;  // the newest roster it received
  Clock::time_point asked_at;
};

std::string ElasticJobText(int64_t n, const std::string& job_id) {
  return fmt::format(
      "mode = \"sync\"\n[cluster]\nworkers = {}\njob_id = \"{}\"\nelastic = true\nmin_workers = {}\n"
      "max_workers = {}\njoin_timeout_seconds = 300\n[model]\nname = \"mlp\"\n"
      "[train]\nbatch_size = 1\nepochs = 1\noptimizer = \"sgd\"\n[report]\nhtml = false\n",
      n, job_id, std::max<int64_t>(1, n / 2), n);
}

// The coordinator's state file, read while it runs: the generation it last
// recorded as formed (0: none) and how many it recorded.
class StateReader {
 public:
  static Result<StateReader> Open(const std::string& path) {
    TENAX_ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::Open(path, "state file"));
    return StateReader(std::move(db));
  }
  int64_t Stable() { return Scalar("SELECT number FROM stable_generation WHERE id = 1"); }
  int64_t Generations() { return Scalar("SELECT COUNT(*) FROM generation"); }

 private:
  explicit StateReader(SqliteDb db) : db_(std::move(db)) {}
  int64_t Scalar(const char* sql) {
    SqliteStatement q(db_.get(), sql);
    return q.ok() && q.Step() == SQLITE_ROW ? q.Int(0) : 0;
  }
  SqliteDb db_;
};

Result<nlohmann::json> ElasticPhase(const CoordLoadArgs& a, const std::string& tenax, const std::string& root,
                                    int64_t n) {
  const std::string dir = fmt::format("{}/elastic-{}", root, n);
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  const std::string job_id = fmt::format("coord-load-elastic-{}", n);
  TENAX_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(tenax, dir, ElasticJobText(n, job_id)));
  const pid_t pid = coordinator->pid();
  TENAX_ASSIGN_OR_RETURN(StateReader state, StateReader::Open(coordinator->state_path()));
  net::NodeOptions no;
  no.name = "coord-load-elastic";
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t listen, node->Listen(kHost, 0));
  TENAX_ASSIGN_OR_RETURN(net::PeerId watcher, node->Connect(kHost, coordinator->port(), Deadline::After(30s)));
  wire::Watch watch;
  watch.set_job_id(job_id);
  TENAX_RETURN_IF_ERROR(node->SendControl(watcher, coord::kWatchKind, watch.SerializeAsString(), Deadline::After(5s)));

  std::vector<ElasticMember> members;
  std::unordered_map<net::PeerId, size_t> by_peer;
  std::unordered_map<uint32_t, size_t> by_id;
  std::map<uint64_t, std::vector<uint32_t>> rosters;  // generation -> its member ids
  std::vector<double> join_ms;
  std::vector<std::string> errors;
  int64_t failures = 0, progress = 0, watcher_messages = 0;
  auto error = [&](const std::string& e) {
    if (errors.size() < 3) errors.push_back(e);
  };
  auto on_message = [&](net::ControlMessage& msg) {
    if (msg.from == watcher) {
      ++watcher_messages;
      return;
    }
    auto it = by_peer.find(msg.from);
    if (it == by_peer.end()) return;
    ElasticMember& x = members[it->second];
    if (msg.kind == coord::kJoinReplyKind) {
      auto r = coord::DecodeJoinReply(msg.payload, "coordinator");
      if (!r.ok() || !r->error().empty()) {
        error(r.ok() ? r->error() : r.status().ToString());
        x.gone = true;
        return;
      }
      x.joined = true;
      x.member_id = r->rank();
      by_id[x.member_id] = it->second;
      join_ms.push_back(Ms(Clock::now() - x.asked_at));
    } else if (msg.kind == coord::kRosterKind) {
      auto r = coord::DecodeRoster(msg.payload, "coordinator");
      if (!r.ok()) return error(r.status().ToString());
      auto& ids = rosters[r->generation()];
      if (ids.empty()) {
        for (const auto& e : r->members()) ids.push_back(e.member_id());
      }
      if (r->generation() <= x.generation) return;
      x.generation = r->generation();
      x.in_job = std::find(ids.begin(), ids.end(), x.member_id) != ids.end();
      if (x.in_job) {
        wire::Formed f;  // a real member first connects to the others
        f.set_generation(x.generation);
        (void)node->SendControl(x.peer, coord::kFormedKind, f.SerializeAsString(), Deadline::After(2s));
      } else if (x.leaving && !x.gone) {
        node->Disconnect(x.peer, Deadline::After(500ms));  // told it may go: it exits
        x.gone = true;
      }
    } else if (msg.kind == coord::kFailureKind) {
      ++failures;
      auto f = coord::DecodeFailure(msg.payload, "coordinator");
      error("the coordinator announced a failure: " + (f.ok() ? f->reason() : f.status().message()));
    }
  };
  auto next_progress = Clock::now();
  auto pump = [&]() -> bool {
    node->Progress();
    bool did = false;
    for (auto msg = node->ReceiveControl(Deadline::At(Clock::now())); msg.ok();
         msg = node->ReceiveControl(Deadline::At(Clock::now()))) {
      on_message(*msg);
      did = true;
    }
    if (Clock::now() >= next_progress) {  // every member reports progress, as a training one does
      next_progress = Clock::now() + kProgressEvery;
      for (ElasticMember& x : members) {
        if (!x.in_job || x.gone) continue;
        (void)node->SendControl(x.peer, coord::kProgressKind, ProgressReport(x.member_id, 1, 1000).SerializeAsString(),
                                Deadline::After(2s));
        ++progress;
      }
    }
    return did;
  };
  // Drives the Node until `done` or the deadline (false then).
  auto drive_until = [&](Deadline deadline, const std::function<bool()>& done) -> Result<bool> {
    while (!done()) {
      if (StopRequested()) return Cancelled("stopped by a signal");
      if (deadline.Expired()) return false;
      if (!pump()) {
        if (coordinator->Exited()) return Unavailable("the coordinator exited (see " + coordinator->log_path() + ")");
        std::this_thread::sleep_for(200us);  // pacing an idle loop; messages wait in UCX
      }
    }
    return true;
  };
  auto add_member = [&]() -> Status {
    const size_t i = members.size();
    members.emplace_back();
    TENAX_ASSIGN_OR_RETURN(members[i].peer, node->Connect(kHost, coordinator->port(), Deadline::After(30s)));
    by_peer[members[i].peer] = i;
    members[i].asked_at = Clock::now();
    return node->SendControl(members[i].peer, coord::kJoinRequestKind,
                             JoinAsk(job_id, "elastic/" + std::to_string(i), listen).SerializeAsString(),
                             Deadline::After(5s));
  };
  // Every member of generation g received its roster (and reported Formed).
  auto everyone_has = [&](uint64_t g) {
    auto it = rosters.find(g);
    if (it == rosters.end()) return false;
    for (uint32_t id : it->second) {
      auto m = by_id.find(id);
      if (m == by_id.end() || members[m->second].generation < g) return false;
    }
    return true;
  };

  std::fprintf(stderr, "coord-load: elastic, %lld members: joining ...\n", static_cast<long long>(n));
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    TENAX_RETURN_IF_ERROR(add_member());
    pump();
  }
  TENAX_ASSIGN_OR_RETURN(bool formed_first, drive_until(AfterSeconds(a.join_seconds),
                                                        [&] { return everyone_has(1) && state.Stable() >= 1; }));
  if (!formed_first) return DeadlineExceeded(fmt::format("the first generation of {} members did not form", n));
  const double first_ms = Ms(Clock::now() - t0);

  // Membership changes, one at a time.
  const char* const kKinds[] = {"leave", "join", "lose", "join"};
  std::map<std::string, std::vector<double>> formed_by_kind;
  std::vector<double> formed_ms, roster_ms;
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed));
  int64_t formed = 1, not_formed = 0;
  uint64_t generation = 1;
  const CpuWindow churn_cpu = CpuWindow::Begin(pid), bench_cpu = CpuWindow::Begin(0);
  const auto churn_t0 = Clock::now();
  for (int64_t c = 0; c < a.generations; ++c) {
    const std::string kind = kKinds[c % 4];
    const uint64_t g = generation + 1;
    const auto start = Clock::now();
    if (kind == "join") {
      TENAX_RETURN_IF_ERROR(add_member());
    } else {
      std::vector<size_t> in;
      for (size_t i = 0; i < members.size(); ++i) {
        if (members[i].in_job && !members[i].gone && !members[i].leaving) in.push_back(i);
      }
      if (in.empty()) return Internal("no member left to remove");
      ElasticMember& x = members[in[std::uniform_int_distribution<size_t>(0, in.size() - 1)(rng)]];
      if (kind == "leave") {  // a preemption notice
        x.leaving = true;
        wire::Leave l;
        l.set_rank(x.member_id);
        l.set_reason("coord-load: leaving");
        TENAX_RETURN_IF_ERROR(node->SendControl(x.peer, coord::kLeaveKind, l.SerializeAsString(), Deadline::After(2s)));
      } else {  // a lost machine: the connection drops without a word
        node->Disconnect(x.peer, Deadline::After(500ms));
        x.gone = true;
        x.in_job = false;
      }
    }
    TENAX_ASSIGN_OR_RETURN(bool has, drive_until(Deadline::After(30s), [&] { return everyone_has(g); }));
    const auto rostered = Clock::now();
    TENAX_ASSIGN_OR_RETURN(
        bool ok, drive_until(Deadline::After(30s), [&] { return has && state.Stable() >= static_cast<int64_t>(g); }));
    if (!has || !ok) {
      ++not_formed;
      error(fmt::format("change {} ({}): generation {} {} within 30 s", c, kind, g,
                        has ? "was not recorded as formed" : "did not reach every member"));
      break;
    }
    generation = g;
    ++formed;
    roster_ms.push_back(Ms(rostered - start));
    formed_ms.push_back(Ms(Clock::now() - start));
    formed_by_kind[kind].push_back(formed_ms.back());
  }
  const double churn_seconds = Secs(Clock::now() - churn_t0);
  const double churn_cores = churn_cpu.Cores(), bench_cores = bench_cpu.Cores();
  const double rss_mib = StatusMib(pid, "VmHWM");
  const int64_t recorded = state.Generations(), stable = state.Stable();
  // An elastic job without training never ends by itself: stopped (130).
  const int exit_code = coordinator->StopWithin(Deadline::After(0s));
  nlohmann::json by_kind = nlohmann::json::object();
  for (const auto& [kind, ms] : formed_by_kind) by_kind[kind] = Latency(ms);
  nlohmann::json row = {{"clients", n},
                        {"changes_planned", a.generations},
                        {"generations_planned", a.generations + 1},
                        {"generations_formed", formed},
                        {"generations_recorded", recorded},
                        {"stable_generation", stable},
                        {"changes_not_formed", not_formed},
                        {"first_generation_ms", first_ms},
                        {"join_latency", Latency(join_ms)},
                        {"formation", Latency(formed_ms)},
                        {"roster", Latency(roster_ms)},
                        {"formation_by_kind", by_kind},
                        {"churn_seconds", churn_seconds},
                        {"progress_reports", progress},
                        {"watcher_messages", watcher_messages},
                        {"coordinator_cores", churn_cores},
                        {"bench_cores", bench_cores},
                        {"coordinator_rss_mib", rss_mib},
                        {"load_average", LoadAverage()},
                        {"coordinator_exit_code", exit_code},
                        {"coordinator_exit_expected", exit_code == 130 || exit_code == 128 + SIGTERM},
                        {"failures_announced", failures},
                        {"errors", errors}};
  std::fprintf(stderr,
               "coord-load: elastic %lld: %lld of %lld generations formed, formation p50 %.1f ms p99 %.1f ms, "
               "coordinator %.2f cores, %.0f MiB\n",
               static_cast<long long>(n), static_cast<long long>(formed), static_cast<long long>(a.generations + 1),
               Quantile(formed_ms, 0.5), Quantile(formed_ms, 0.99), churn_cores, rss_mib);
  return row;
}

// ---------------------------------------------------------------- report

void PrintTables(const nlohmann::json& async_rows, const nlohmann::json& elastic_rows) {
  if (!async_rows.empty()) {
    std::printf(
        "\nasync: leases and results (lease = request -> grant at the member; merge = result handed in -> merged by "
        "every shard)\n");
    std::printf("%8s %9s %9s %10s %9s %9s %9s %10s %10s %8s %8s %6s %6s\n", "members", "joins/s", "leases", "leases/s",
                "offered/s", "p50 ms", "p99 ms", "merge p99", "idle cores", "cores", "RSS MiB", "lost", "twice");
    for (const auto& r : async_rows) {
      const auto& l = r["lease"];
      std::printf("%8lld %9.1f %9lld %10.1f %9.0f %9.2f %9.2f %10.1f %10.2f %8.2f %8.0f %6lld %6lld%s\n",
                  static_cast<long long>(r["clients"].get<int64_t>()), r["join"]["joins_per_second"].get<double>(),
                  static_cast<long long>(l["leases"].get<int64_t>()), l["leases_per_second"].get<double>(),
                  l["offered_leases_per_second"].get<double>(), l["latency"]["p50_ms"].get<double>(),
                  l["latency"]["p99_ms"].get<double>(), l["merge_latency"]["p99_ms"].get<double>(),
                  r["idle"]["coordinator_cores"].get<double>(), l["coordinator_cores"].get<double>(),
                  r["coordinator_rss_mib"].get<double>(), static_cast<long long>(r["units_lost"].get<int64_t>()),
                  static_cast<long long>(r["units_merged_twice"].get<int64_t>()),
                  l["job_finished"].get<bool>() ? "" : "  (phase limit)");
    }
  }
  if (!elastic_rows.empty()) {
    std::printf("\nelastic: membership changes (formation = change -> coordinator records every member formed)\n");
    std::printf("%8s %8s %8s %10s %10s %10s %10s %8s %8s\n", "members", "planned", "formed", "first ms", "p50 ms",
                "p99 ms", "roster p50", "cores", "RSS MiB");
    for (const auto& r : elastic_rows) {
      std::printf("%8lld %8lld %8lld %10.1f %10.2f %10.2f %10.2f %8.2f %8.0f\n",
                  static_cast<long long>(r["clients"].get<int64_t>()),
                  static_cast<long long>(r["generations_planned"].get<int64_t>()),
                  static_cast<long long>(r["generations_formed"].get<int64_t>()),
                  r["first_generation_ms"].get<double>(), r["formation"]["p50_ms"].get<double>(),
                  r["formation"]["p99_ms"].get<double>(), r["roster"]["p50_ms"].get<double>(),
                  r["coordinator_cores"].get<double>(), r["coordinator_rss_mib"].get<double>());
    }
  }
}

Status RunCoordLoad(CoordLoadArgs a) {
  TENAX_ASSIGN_OR_RETURN(std::string tenax, FindProgram("tenax"));
  if (a.clients.empty()) a.clients = a.quick ? std::vector<int64_t>{100} : std::vector<int64_t>{100, 1000, 5000};
  if (a.elastic_clients.empty()) a.elastic_clients = a.quick ? std::vector<int64_t>{32} : std::vector<int64_t>{64, 256};
  // --quick: limits far above what its small runs take (about 10 s in
  // all), so that a loaded machine slows them but does not cut them short.
  if (a.seconds <= 0) a.seconds = a.quick ? 45 : 60;
  if (a.join_seconds <= 0) a.join_seconds = a.quick ? 60 : 150;
  if (a.idle_seconds <= 0) a.idle_seconds = a.quick ? 1 : 3;
  if (a.drain_seconds <= 0) a.drain_seconds = a.quick ? 30 : 60;
  if (a.generations <= 0) a.generations = a.quick ? 12 : 200;
  const bool async = ("," + a.phases + ",").find(",async,") != std::string::npos;
  const bool elastic = ("," + a.phases + ",").find(",elastic,") != std::string::npos;
  if (!async && !elastic) return InvalidArgument("--phases: name async, elastic or both, got '" + a.phases + "'");
  const int64_t open_files = net::RaiseOpenFileLimit();  // the coordinator, a child, inherits it
  // Every lost connection of thousands of members would be a warning line
  // of their Nodes; the report counts them (and keeps the first few).
  spdlog::set_level(spdlog::level::err);
  UseFreshSecret();
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-coord-load"));
  const std::string root = a.keep_dir.empty() ? work.path() : a.keep_dir;
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(root));

  nlohmann::json async_rows = nlohmann::json::array(), elastic_rows = nlohmann::json::array();
  std::vector<std::string> problems, notes;
  for (int64_t n : async ? a.clients : std::vector<int64_t>{}) {
    TENAX_ASSIGN_OR_RETURN(nlohmann::json row, AsyncPhase(a, tenax, root, n));
    if (row["units_lost"].get<int64_t>() > 0 || row["units_merged_twice"].get<int64_t>() > 0) {
      problems.push_back(fmt::format("async {}: {} (unit, shard) merges lost, {} twice", n,
                                     row["units_lost"].get<int64_t>(), row["units_merged_twice"].get<int64_t>()));
    }
    if (!row["coordinator_exit_expected"].get<bool>()) {
      problems.push_back(fmt::format("async {}: the coordinator exited with {} (see its log)", n,
                                     row["coordinator_exit_code"].get<int>()));
    }
    if (!row["lease"]["drained"].get<bool>()) {
      notes.push_back(
          fmt::format("async {}: {} results handed in had not settled {} s after the phase (not counted "
                      "as lost; units_lost -1)",
                      n, row["unsettled_at_stop"].get<int64_t>(), a.drain_seconds));
    }
    if (row["join"]["not_joined"].get<int64_t>() + row["join"]["refused"].get<int64_t>() > 0) {
      notes.push_back(fmt::format("async {}: {} members did not get in within the join phase ({})", n,
                                  row["join"]["not_joined"].get<int64_t>() + row["join"]["refused"].get<int64_t>(),
                                  row["errors"].dump()));
    }
    async_rows.push_back(std::move(row));
  }
  for (int64_t n : elastic ? a.elastic_clients : std::vector<int64_t>{}) {
    TENAX_ASSIGN_OR_RETURN(nlohmann::json row, ElasticPhase(a, tenax, root, n));
    if (row["changes_not_formed"].get<int64_t>() > 0) {
      problems.push_back(fmt::format("elastic {}: a generation did not form ({})", n, row["errors"].dump()));
    }
    if (!row["coordinator_exit_expected"].get<bool>()) {
      problems.push_back(fmt::format("elastic {}: the coordinator exited with {} (see its log)", n,
                                     row["coordinator_exit_code"].get<int>()));
    }
    elastic_rows.push_back(std::move(row));
  }
  nlohmann::json report = {
      {"benchmark", "coord-load"},
      {"quick", a.quick},
      {"cores", std::thread::hardware_concurrency()},
      {"open_file_limit", open_files},
      // UCX's async event limit in the members' process (the coordinator
      // and the shards raise theirs to net::AsyncEventsFor(kFleetPeers)).
      {"ucx_async_max_events", net::AsyncEventLimit()},
      {"unit_seconds", a.unit_seconds},
      {"units_per_member", a.units_per_member},
      {"shards", a.shards},
      {"member_threads", a.threads},
      {"async", async_rows},
      {"elastic", elastic_rows},
      {"problems", problems},
      {"notes", notes}};
  PrintTables(async_rows, elastic_rows);
  for (const std::string& note : notes) std::fprintf(stderr, "coord-load: %s\n", note.c_str());
  TENAX_RETURN_IF_ERROR(WriteJsonReport(a.json_path, report));
  // Internal: exit status 1 (cli_app.cc), the benchmark's "something was lost".
  if (!problems.empty()) return Internal(fmt::format("{} problem(s): {}", problems.size(), problems.front()));
  return Status::Ok();
}

}  // namespace

void AddCoordLoadBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<CoordLoadArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "coord-load",
      "One coordinator under many simulated members (threads speaking the real wire protocol, no libtorch): async "
      "leases and results for --clients N members, elastic joins, leaves and generations for --elastic-clients N; "
      "leases/s, lease and generation-formation p50/p99, the coordinator's CPU and RSS; fails if a unit was lost or "
      "merged twice",
      "100 async and 32 elastic members, short phases (under a minute)", a->quick, a->json_path,
      [a] { return RunCoordLoad(*a); }, exit_code);
  cmd->add_option("--clients", a->clients, "Async members per run (repeat or comma-separate; default 100,1000,5000)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--elastic-clients", a->elastic_clients,
                  "Elastic members per run (repeat or comma-separate; default 64,256; at most 1024)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{2}, kMaxClusterWorkers));
  cmd->add_option("--phases", a->phases, "Which parts to run: async, elastic (comma-separated)")->capture_default_str();
  cmd->add_option("--seconds", a->seconds, "Limit of an async lease phase (default 60, 45 with --quick)")
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--join-seconds", a->join_seconds, "Limit of a join phase (default 150, 60 with --quick)")
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--idle-seconds", a->idle_seconds,
                  "Heartbeats-only window after the async joins (default 3, 1 with --quick)")
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--drain-seconds", a->drain_seconds,
                  "After an async lease phase that did not finish the job: how long the results handed in may take "
                  "to settle (default 60, 30 with --quick)")
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--unit-seconds", a->unit_seconds, "A member's simulated training of one unit (jittered 0.5x-1.5x)")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->add_option("--units-per-member", a->units_per_member, "Work units of the async job per member")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  cmd->add_option("--shards", a->shards, "Simulated parameter-server shards (async.servers)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Member threads, each one Node hosting its share of the members")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  cmd->add_option("--generations", a->generations, "Elastic membership changes per run (default 200, 12 with --quick)")
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  cmd->add_option("--seed", a->seed, "Seed of the jitter and of which members leave")->capture_default_str();
  cmd->add_option("--keep", a->keep_dir,
                  "Keep each run's job file, coordinator log and state file under this directory");
}

}  // namespace tenax::bench
