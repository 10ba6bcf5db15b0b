#include "run_monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "tenax/core/json_fields.h"
#include "tenax/core/run_records.h"

namespace tenax {
namespace {

std::string MiB(double bytes) { return fmt::format("{:.1f} MiB", bytes / (1 << 20)); }

// How long after a link fault's end a new generation still counts as its
// cost: a member cut off is dropped one peer timeout (cluster's default:
// 10 s) after its last message.
constexpr double kLinkFaultAftermathSeconds = 10;

std::string TargetOf(const records::Fault& f) {
  std::string target = records::TargetName(f);
  return target.empty() ? "?" : target;
}

// The reaction to a member lost: "the other 3 workers re-formed as
// generation 4 and went on (rank 2 lost ...)"; lost before the job formed
// (generation 1), nothing re-formed: "the job formed without it as ...".
std::string Reformed(const nlohmann::json& generation) {
  const size_t n = generation["members"].size();
  if (generation.value("number", 0) == 1) {
    return fmt::format("the job formed without it as generation 1 of {} worker{} ({})", n, n == 1 ? "" : "s",
                       generation.value("why", std::string()));
  }
  return fmt::format("the other {} worker{} re-formed as generation {} and went on ({})", n, n == 1 ? "" : "s",
                     generation.value("number", 0), generation.value("why", std::string()));
}

pid_t PidOfName(const std::string& name) {
  const auto slash = name.rfind('/');
  return slash == std::string::npos ? 0 : static_cast<pid_t>(std::atoll(name.c_str() + slash + 1));
}

// Whether a generation record ({"names": {id: "host/pid"}}) lists `pid`.
bool HasMember(const nlohmann::json& generation, pid_t pid) {
  for (const auto& [id, name] : generation["names"].items()) {
    if (PidOfName(name.get<std::string>()) == pid) return true;
  }
  return false;
}

}  // namespace

RunMonitor::RunMonitor(std::string metrics_path, Callbacks callbacks, std::vector<std::string> injected_stragglers)
    : metrics_path_(metrics_path),
      cb_(std::move(callbacks)),
      injected_stragglers_(std::move(injected_stragglers)),
      start_(Now()),
      tail_(std::move(metrics_path)) {}

double RunMonitor::Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

RunMonitor::Worker* RunMonitor::ByPid(pid_t pid) {
  for (auto& w : workers_) {
    if (w.pid == pid && pid > 0) return &w;
  }
  return nullptr;
}

RunMonitor::Worker* RunMonitor::ByName(const std::string& name) {
  for (auto& w : workers_) {
    if (w.status.name == name) return &w;
  }
  return nullptr;
}

void RunMonitor::Record(nlohmann::json record) {
  if (!writer_ && !write_failed_) {
    auto w = JsonLinesWriter::Append(metrics_path_);
    if (w.ok()) {
      writer_.emplace(std::move(*w));
    } else {
      write_failed_ = true;
      if (cb_.notice) cb_.notice("cannot record the run's events: " + w.status().message());
    }
  }
  if (writer_) (void)writer_->Write(record);
}

void RunMonitor::Publish() {
  if (!cb_.workers) return;
  std::vector<WorkerStatus> all;
  for (const auto& w : workers_) all.push_back(w.status);
  cb_.workers(all);
}

void RunMonitor::SetState(Worker& w, const std::string& state, const std::string& detail) {
  if (w.status.state == state && w.status.detail == detail) return;
  const bool changed = w.status.state != state;
  w.status.state = state;
  w.status.detail = detail;
  if (changed) w.status.since_seconds = Now() - start_;
  Record(records::ToJson(records::WorkerState{w.status.name, state, w.status.host, detail}));
  Publish();
}

void RunMonitor::AddWorker(const std::string& name, pid_t pid, const std::string& host) {
  Worker w;
  w.status.name = name;
  w.status.host = host;
  w.pid = pid;
  workers_.push_back(w);
  if (name.rfind("spare", 0) == 0 || name.rfind("migrant", 0) == 0) {
    SetState(workers_.back(), "spare", "pid " + std::to_string(pid) + "; waits to take a member's place");
    return;
  }
  SetState(workers_.back(), name.rfind("joiner", 0) == 0 ? "rejoining" : "starting", "pid " + std::to_string(pid));
}

bool RunMonitor::SpareReady(pid_t pid) const {
  for (const auto& w : workers_) {
    if (w.pid == pid) return w.spare_ready && w.status.state == "spare";
  }
  return false;
}

std::string RunMonitor::StateOf(pid_t pid) const {
  for (const auto& w : workers_) {
    if (w.pid == pid) return w.status.state;
  }
  return "";
}

void RunMonitor::Notice(const std::string& text) {
  Record(records::ToJson(records::Notice{text}));
  if (cb_.notice) cb_.notice(text);
}

void RunMonitor::OnFaultRecord(nlohmann::json record) {
  const double time = Now();
  record["time"] = time;
  Record(record);
  std::optional<records::Fault> fault = records::FaultFrom(record);
  if (!fault || !fault->fired) return;
  faults_.push_back({time, *fault});
  const std::string& action = fault->action;
  Worker* w = ByName(TargetOf(*fault));
  if (!w || action == "restart") return;  // a joiner's state comes with AddWorker
  if (action == "kill") SetState(*w, "killed", "SIGKILL at step " + std::to_string(fault->step));
  if (action == "preempt") SetState(*w, "preempted", "notice (SIGTERM): leaves at the next step boundary");
  if (action == "stop") SetState(*w, "stopped", "SIGSTOP: hangs");
  if (action == "cont" && w->dropped_while_stopped > 0) {
    // Woken, it learns that it was removed and exits (OnExit: not a failure).
    SetState(*w, "left", fmt::format("SIGCONT: generation {} dropped it while it was stopped; it leaves",
                                     w->dropped_while_stopped));
  } else if (action == "cont") {
    SetState(*w, "active", "SIGCONT");
  }
}

void RunMonitor::OnGeneration(const coord::JobGeneration& g) {
  nlohmann::json names = nlohmann::json::object();
  for (const auto& [id, name] : g.member_names) names[std::to_string(id)] = name;
  generations_.push_back({Now(), {{"number", g.generation}, {"members", g.members}, {"why", g.why}, {"names", names}}});
  std::vector<const Worker*> members;
  for (const auto& [id, name] : g.member_names) {
    if (Worker* w = ByPid(PidOfName(name))) {
      members.push_back(w);
      // A generation published before the coordinator noticed a loss may
      // still list a worker that was killed, stopped or failed, or that
      // has its notice: it keeps that state.
      const std::string& st = w->status.state;
      if (st == "starting" || st == "rejoining" || st == "spare" || st == "active") {
        SetState(*w, "active", "member " + std::to_string(id) + " of generation " + std::to_string(g.generation));
      }
    }
  }
  for (auto& w : workers_) {
    const bool member = std::find(members.begin(), members.end(), &w) != members.end();
    if (!member && (w.status.state == "active" || w.status.state == "slow" || w.status.state == "preempted")) {
      SetState(w, "left", "not in generation " + std::to_string(g.generation));
    }
    // Stopped by the plan while a member, and dropped by this generation.
    const bool was_member = generations_.size() >= 2 && HasMember(generations_[generations_.size() - 2].record, w.pid);
    if (!member && was_member && w.status.state == "stopped" && w.dropped_while_stopped == 0) {
      w.dropped_while_stopped = g.generation;
      SetState(w, "stopped", "SIGSTOP: hangs; not in generation " + std::to_string(g.generation));
    }
  }
}

void RunMonitor::OnCoordinatorFollowed() { coordinator_followed_.push_back(Now()); }

void RunMonitor::OnProgress() {
  if (!generations_.empty()) return;
  for (auto& w : workers_) {
    if (w.status.state == "starting") SetState(w, "active", "training");
  }
}

void RunMonitor::OnQueueCounts(const coord::WorkQueueCounts& c) {
  if (c.leases_expired > queue_.leases_expired) {
    Notice(fmt::format("work queue: {} lease(s) expired (a worker went silent); {} expired in all",
                       c.leases_expired - queue_.leases_expired, c.leases_expired));
  }
  if (c.units_reissued > queue_.units_reissued) {
    Notice(fmt::format("work queue: {} unit(s) re-issued to another worker; {} re-issued in all",
                       c.units_reissued - queue_.units_reissued, c.units_reissued));
  }
  if (c.results_rejected > queue_.results_rejected) {
    Notice(fmt::format("work queue: {} result(s) rejected by the shards' validation; {} in all",
                       c.results_rejected - queue_.results_rejected, c.results_rejected));
  }
  queue_ = c;
}

bool RunMonitor::OnExit(pid_t pid, int code, const std::string& why) {
  Worker* w = ByPid(pid);
  if (!w || w->status.state == "killed" || w->status.state == "left" || w->status.state == "done") return false;
  if (w->status.state == "preempted") {
    SetState(*w, "left", "exited with code " + std::to_string(code) + " after its notice");
    return false;
  }
  if (w->dropped_while_stopped > 0) {
    SetState(*w, "left", fmt::format("exited with code {} on waking: generation {} dropped it while it was stopped{}",
                                     code, w->dropped_while_stopped, why.empty() ? "" : " (" + why + ")"));
    return false;
  }
  if (code == 0) return false;
  SetState(*w, "failed", "exited with code " + std::to_string(code) + (why.empty() ? "" : ": " + why));
  own_failures_.push_back({Now(), {{"worker", w->status.name}, {"pid", pid}, {"code", code}, {"why", why}}});
  return true;
}

void RunMonitor::OnJobEvent(const nlohmann::json& e) {
  const double time = json_fields::Number(e, "time").value_or(Now());
  if (auto st = records::StragglerFrom(e)) {
    stragglers_.push_back({time, *st});
    Worker* w = ByPid(static_cast<pid_t>(st->pid.value_or(0)));
    const std::string who = w ? w->status.name : st->member.empty() ? std::string("a member") : st->member;
    const std::string detail = fmt::format("{:.1f}x the median time per sample; share {} of {}", st->ratio,
                                           st->share.value_or(0), st->global_batch.value_or(0));
    if (w && (w->status.state == "active" || w->status.state == "slow")) {
      SetState(*w, st->slow ? "slow" : "active", detail);
    }
    Notice(fmt::format("step {}: {} {} ({})", st->step, who,
                       st->slow ? "is a straggler: the others take more of each batch" : "is no longer slow", detail));
  } else if (e.value("event", "") == "spare_waiting") {
    // A spare (or a migration's newcomer) is warm: prepared, joined, waiting.
    Worker* w = ByPid(static_cast<pid_t>(json_fields::Number(e, "pid").value_or(0)));
    if (w && w->status.state == "spare") {
      w->spare_ready = true;
      SetState(*w, "spare", "pid " + std::to_string(w->pid) + "; warm: waits to take a member's place");
    }
  } else if (auto r = records::RecoveryFrom(e)) {
    recoveries_.push_back({time, *r});
    const std::string policy = r->policy.empty() ? "?" : r->policy;
    const std::string dataset = r->dataset.empty() ? "?" : r->dataset;
    if (r->phase == "started") {
      Notice("store: a worker read around a lost chunk of " + dataset + "; " + policy +
             " recovery planned and started");
    } else if (r->phase == "done") {
      Notice(fmt::format("store: {} recovery of {} done: rebuilt {} of {} lost chunks ({} moved) in {:.1f} s", policy,
                         dataset, r->chunks_rebuilt, r->lost_chunks, MiB(static_cast<double>(r->bytes)),
                         r->seconds));
    } else {
      Notice("store: the " + policy + " recovery failed: " + (r->error.empty() ? "?" : r->error));
    }
  }
}

void RunMonitor::Poll() {
  const double now = Now();
  if (now - last_poll_ < 0.2) return;
  last_poll_ = now;
  for (const auto& e : tail_.ReadNew()) OnJobEvent(e);
}

void RunMonitor::Finish() {
  Poll();
  for (auto& w : workers_) {
    if (w.status.state == "active" || w.status.state == "slow") SetState(w, "done", w.status.detail);
    if (w.status.state == "spare" || w.status.state == "rejoining") SetState(w, "left", "not needed: the job is done");
  }
}

double RunMonitor::RecoveryBytes() const {
  double bytes = 0;
  for (const auto& e : recoveries_) {
    if (e.record.phase == "done") bytes += static_cast<double>(e.record.bytes);
  }
  return bytes;
}

const RunMonitor::Event* RunMonitor::FirstGenerationAfter(
    double t, const std::function<bool(const nlohmann::json&)>& ok) const {
  for (const auto& g : generations_) {
    if (g.time >= t && ok(g.record)) return &g;
  }
  return nullptr;
}

nlohmann::json RunMonitor::ReactionToFault(const Timed<records::Fault>& f) const {
  const records::Fault& r = f.record;
  const std::string& action = r.action;
  const std::string target = TargetOf(r);
  nlohmann::json entry = {{"fault", action + " " + target},
                          {"action", action},
                          {"target", target},
                          {"source", r.source},
                          {"at_seconds", f.time - start_},
                          {"time", f.time},
                          {"step", r.step},
                          {"reaction", "none observed before the job ended"},
                          {"recovered", false},
                          {"recovered_seconds", nullptr}};
  auto recovered = [&](double at, const std::string& reaction) {
    entry["reaction"] = reaction;
    entry["recovered"] = true;
    entry["recovered_seconds"] = std::max(0.0, at - f.time);
  };
  const pid_t pid = static_cast<pid_t>(r.pid.value_or(0));
  if (!r.storage.empty()) {
    if (r.wiped.value_or(false)) entry["fault"] = "kill " + target + " and wipe its disk";
    auto done = std::find_if(recoveries_.begin(), recoveries_.end(), [&](const Timed<records::Recovery>& e) {
      return e.time >= f.time && e.record.phase == "done";
    });
    if (done != recoveries_.end()) {
      const records::Recovery& d = done->record;
      recovered(done->time,
                fmt::format("training read around the lost chunks (degraded reads); a {} recovery rebuilt {} of {} "
                            "lost chunks ({} moved)",
                            d.policy.empty() ? "?" : d.policy, d.chunks_rebuilt, d.lost_chunks,
                            MiB(static_cast<double>(d.bytes))));
    } else {
      entry["reaction"] = "training read around the lost chunks (degraded reads); no recovery finished";
    }
  } else if (r.coordinator) {
    // Its members keep their generation while it is away (a restart
    // resumes from its state file), so no generation is its reaction: a
    // later one is some other fault's. The launcher following the
    // restarted coordinator is.
    auto back = std::find_if(coordinator_followed_.begin(), coordinator_followed_.end(),
                             [&](double t) { return t >= f.time; });
    if (back != coordinator_followed_.end() && action == "kill") {
      recovered(*back, fmt::format("restarted on its state file; the launcher followed it {:.1f} s after the kill",
                                   *back - f.time));
    } else if (back != coordinator_followed_.end()) {
      recovered(*back, "it resumed the job from its state file; the launcher followed it");
    }
  } else if (action == "restart") {
    const Event* g = FirstGenerationAfter(f.time, [&](const nlohmann::json& gen) { return HasMember(gen, pid); });
    if (g) {
      recovered(g->time, fmt::format("{} joined generation {} and copied the model from a live peer", target,
                                     g->record.value("number", 0)));
    }
  } else if (action == "kill" || action == "preempt" || action == "stop") {
    const Event* g = FirstGenerationAfter(f.time, [&](const nlohmann::json& gen) { return !HasMember(gen, pid); });
    if (g) recovered(g->time, Reformed(g->record));
  } else if (action == "cont") {
    recovered(f.time, "resumed");
  } else if (action == "drop_link" || action == "slow_link" || action == "partition") {
    // A generation formed while the link was cut, or within the peer
    // timeout after (kLinkFaultAftermathSeconds), is what it cost; else the
    // job rode through it.
    const double end = f.time + r.seconds.value_or(0);
    const Event* g = FirstGenerationAfter(f.time, [](const nlohmann::json&) { return true; });
    if (g && g->time <= end + kLinkFaultAftermathSeconds) {
      recovered(g->time, "it cost a member: " + Reformed(g->record));
    } else if (action == "slow_link") {
      recovered(end, fmt::format("ridden through: {:.1f} s on a {}x slower link, no member lost", r.seconds.value_or(0),
                                 r.factor.value_or(0)));
    } else {
      recovered(end, fmt::format("ridden through: the link{} came back after {:.1f} s, no member lost",
                                 action == "partition" ? "s" : "", r.seconds.value_or(0)));
    }
  }
  return entry;
}

std::vector<nlohmann::json> RunMonitor::DetectedStragglers(double train_start,
                                                           std::vector<std::string>& detected) const {
  std::vector<nlohmann::json> out;
  for (const auto& e : stragglers_) {
    const records::Straggler& st = e.record;
    if (!st.slow) continue;
    std::string who = st.member.empty() ? "?" : st.member;
    for (const auto& w : workers_) {
      if (st.pid && w.pid == static_cast<pid_t>(*st.pid)) who = w.status.name;
    }
    const bool injected =
        std::find(injected_stragglers_.begin(), injected_stragglers_.end(), who) != injected_stragglers_.end();
    if (!injected || std::find(detected.begin(), detected.end(), who) != detected.end()) continue;
    detected.push_back(who);
    out.push_back({{"fault", "straggler " + who},
                   {"action", "straggler"},
                   {"target", who},
                   {"source", "stragglers"},
                   {"at_seconds", train_start - start_},
                   {"time", train_start},
                   {"step", st.step},
                   {"reaction", fmt::format("detected at step {} ({:.1f}x the median time per sample); its share of "
                                            "each global batch fell to {} of {}",
                                            st.step, st.ratio, st.share.value_or(0), st.global_batch.value_or(0))},
                   {"recovered", true},
                   {"recovered_seconds", std::max(0.0, e.time - train_start)}});
  }
  return out;
}

nlohmann::json RunMonitor::UndetectedStraggler(const std::string& who, double train_start) const {
  return {{"fault", "straggler " + who},
          {"action", "straggler"},
          {"target", who},
          {"source", "stragglers"},
          {"at_seconds", train_start - start_},
          {"time", train_start},
          {"step", 0},
          {"reaction", "not detected before the job ended"},
          {"recovered", false},
          {"recovered_seconds", nullptr}};
}

// A worker that failed on its own: not planned, but the user's run lived
// through it (or not) all the same.
nlohmann::json RunMonitor::ReactionToOwnFailure(const Event& e) const {
  const std::string who = e.record.value("worker", std::string("?"));
  const pid_t pid = static_cast<pid_t>(e.record.value("pid", int64_t{0}));
  nlohmann::json entry = {{"fault", who + " failed on its own (exit code " +
                                        std::to_string(e.record.value("code", 0)) + ")"},
                          {"action", "failed"},
                          {"target", who},
                          {"source", "unplanned"},
                          {"at_seconds", e.time - start_},
                          {"time", e.time},
                          {"detail", e.record.value("why", std::string())},
                          {"reaction", "none observed before the job ended"},
                          {"recovered", false},
                          {"recovered_seconds", nullptr}};
  // The generation that dropped it: the first one without it after one
  // with it (formed before its exit was reaped, when its connection went
  // first, or after).
  const Event* g = nullptr;
  for (size_t i = 1; i < generations_.size() && !g; ++i) {
    if (HasMember(generations_[i - 1].record, pid) && !HasMember(generations_[i].record, pid)) g = &generations_[i];
  }
  if (g) {
    entry["reaction"] = Reformed(g->record);
    entry["recovered"] = true;
    entry["recovered_seconds"] = std::max(0.0, g->time - e.time);
  }
  return entry;
}

// In order: the injected faults, the injected stragglers that were
// detected, the workers' own failures, the stragglers never detected.
nlohmann::json RunMonitor::FaultsWithReactions() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : faults_) out.push_back(ReactionToFault(f));
  const double train_start = generations_.empty() ? start_ : generations_.front().time;
  std::vector<std::string> detected;
  for (auto& entry : DetectedStragglers(train_start, detected)) out.push_back(std::move(entry));
  for (const auto& e : own_failures_) out.push_back(ReactionToOwnFailure(e));
  for (const auto& who : injected_stragglers_) {
    if (std::find(detected.begin(), detected.end(), who) == detected.end()) {
      out.push_back(UndetectedStraggler(who, train_start));
    }
  }
  return out;
}

}  // namespace tenax
