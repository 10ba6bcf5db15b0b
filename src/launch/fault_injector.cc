#include "fault_injector.h"

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tenax/core/number_text.h"


namespace tenax {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

double Millis3(double s) { return std::round(s * 1000.0) / 1000.0; }

const char* SignalName(int signal) {
  switch (signal) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGCONT:
      return "SIGCONT";
  }
  return "a signal";
}

}  // namespace

FaultInjector::FaultInjector(ProcessSupervisor& children, FaultInjectorOptions options)
    : children_(children), options_(std::move(options)) {
  const int64_t workers = static_cast<int64_t>(options_.workers.size());
  for (int64_t w = 0; w < workers; ++w) slots_[w] = options_.workers[static_cast<size_t>(w)];
  for (size_t sh = 0; sh < options_.servers.size(); ++sh) server_slots_[static_cast<int64_t>(sh)] = options_.servers[sh];
  for (size_t n = 0; n < options_.storage.size(); ++n) storage_slots_[static_cast<int64_t>(n)] = options_.storage[n];
  coordinator_slot_ = options_.coordinator;
  for (const FaultSpec& f : options_.plan.faults) {
    Pending p;
    p.source = "faults[" + std::to_string(f.index) + "]";
    p.action = f.action;
    p.slot = f.worker;
    p.server = f.server;
    p.storage = f.storage;
    p.wipe = f.wipe;
    p.coordinator = f.coordinator;
    p.at_seconds = f.at_seconds;
    p.at_step = f.at_step;
    p.grace_seconds = f.grace_seconds;
    p.delay_seconds = f.delay_seconds;
    p.hosts = f.hosts;
    p.link_workers = f.link_workers;
    p.seconds = f.seconds;
    p.factor = f.factor;
    p.delay_ms = f.delay_ms;
    pending_.push_back(p);
  }
  if (options_.plan.random) {
    for (const RandomFaultEvent& e : ScheduleRandomFaults(*options_.plan.random, workers)) {
      Pending p;
      p.source = "faults.random";
      p.action = e.action;
      (e.action == FaultAction::kRestart ? p.new_slot : p.slot) = e.slot;
      p.at_seconds = e.at_seconds;
      p.grace_seconds = options_.plan.random->grace_seconds;
      pending_.push_back(p);
    }
  }
}

void FaultInjector::Start(SteadyClock::time_point start) { start_ = start; }

double FaultInjector::Elapsed(SteadyClock::time_point now) const {
  return std::chrono::duration<double>(now - start_).count();
}

std::string FaultInjector::Who(int64_t slot) const {
  if (slot < static_cast<int64_t>(options_.workers.size())) return "worker " + std::to_string(slot);
  auto it = joiner_of_slot_.find(slot);
  return it != joiner_of_slot_.end() ? "joiner " + std::to_string(it->second) : "an unstarted joiner";
}

std::string FaultInjector::WhoOf(const Pending& p) const {
  if (IsLinkFault(p.action)) {
    if (p.hosts.size() == 2) return "the link " + p.hosts[0] + "-" + p.hosts[1];
    if (p.hosts.size() == 1) return "host " + p.hosts[0];
    if (p.link_workers.size() == 2) {
      return "the link between workers " + std::to_string(p.link_workers[0]) + " and " +
             std::to_string(p.link_workers[1]);
    }
    return "worker " + std::to_string(p.slot) + "'s host";
  }
  if (p.coordinator) return "the coordinator";
  if (p.storage >= 0) return "storage node-" + std::to_string(p.storage);
  return p.server >= 0 ? "server " + std::to_string(p.server) : Who(p.slot);
}

void FaultInjector::Push(const records::Fault& record) {
  nlohmann::json j = records::ToJson(record);
  if (options_.on_record) options_.on_record(j);
  records_.push_back(std::move(j));
}

void FaultInjector::Notice(const std::string& text) const {
  if (options_.on_notice) options_.on_notice(text);
}

records::Fault FaultInjector::Record(bool fired, const Pending& p, double elapsed, int64_t max_step) const {
  records::Fault r;
  r.fired = fired;
  r.action = FaultActionName(p.action);
  if (p.server >= 0) r.server = p.server;
  if (p.storage >= 0) r.storage = "node-" + std::to_string(p.storage);
  if (p.coordinator) r.coordinator = true;
  if (IsLinkFault(p.action)) {
    r.hosts = p.hosts;
    r.seconds = p.seconds;
    if (p.action == FaultAction::kSlowLink || p.action == FaultAction::kSlowHost) {
      r.factor = p.factor;
      if (p.delay_ms > 0) r.delay_ms = p.delay_ms;
    }
  } else if (p.slot >= 0) {
    if (p.slot < static_cast<int64_t>(options_.workers.size())) {
      r.worker = p.slot;
    } else if (auto it = joiner_of_slot_.find(p.slot); it != joiner_of_slot_.end()) {
      r.joiner = it->second;
    }
  }
  r.elapsed_seconds = Millis3(elapsed);
  r.step = max_step;
  r.source = p.source;
  if (p.at_seconds) r.at_seconds = Millis3(*p.at_seconds);
  r.at_step = p.at_step;
  return r;
}

void FaultInjector::Poll(int64_t max_step, SteadyClock::time_point now) {
  if (finished_) return;
  const double elapsed = Elapsed(now);
  children_.Poll();

  // Preempted children: gone by themselves, or SIGKILL after the grace period.
  for (auto g = graces_.begin(); g != graces_.end();) {
    const pid_t pid = children_.pid(g->child);
    const std::string who = WhoOf(g->fault);
    if (std::optional<int> code = children_.exit_code(g->child)) {
      Notice("fault: " + who + " (pid " + std::to_string(pid) + ") exited with code " + std::to_string(*code) +
             " after SIGTERM");
      g = graces_.erase(g);
    } else if (elapsed >= g->kill_at) {
      (void)children_.Signal(g->child, SIGKILL);
      Notice("fault: SIGKILL " + who + " (pid " + std::to_string(pid) + ") at " + Seconds(elapsed) +
             ": still running at the end of its grace period");
      records::Fault r = Record(true, g->fault, elapsed, max_step);
      r.action = "kill";
      r.signal = "SIGKILL";
      r.pid = pid;
      r.reason = "still running at the end of the preemption's grace period";
      Push(r);
      stopped_.erase(g->child);
      g = graces_.erase(g);
    } else {
      ++g;
    }
  }

  // Faults due now, fired in the order they fell due.
  std::vector<std::pair<double, size_t>> due;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (p.done) continue;
    if (!p.triggered_at) {
      const bool triggered = (p.at_seconds && elapsed >= *p.at_seconds) || (p.at_step && max_step >= *p.at_step);
      if (!triggered) continue;
      p.triggered_at = p.at_seconds ? *p.at_seconds : elapsed;
    }
    const double at = *p.triggered_at + p.delay_seconds;
    if (elapsed >= at) due.emplace_back(at, i);
  }
  std::stable_sort(due.begin(), due.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [at, i] : due) Fire(pending_[i], elapsed, max_step);
}

std::optional<SteadyClock::time_point> FaultInjector::NextDue() const {
  std::optional<double> next;
  auto consider = [&next](double at) { next = next ? std::min(*next, at) : at; };
  for (const Grace& g : graces_) consider(g.kill_at);
  for (const Pending& p : pending_) {
    if (p.done) continue;
    if (p.triggered_at) {
      consider(*p.triggered_at + p.delay_seconds);
    } else if (p.at_seconds) {
      consider(*p.at_seconds);
    }
  }
  if (!next || finished_) return std::nullopt;
  return start_ + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(*next));
}

void FaultInjector::Fire(Pending& p, double elapsed, int64_t max_step) {
  p.done = true;
  if (IsLinkFault(p.action)) return FireLinkFault(p, elapsed, max_step);
  if (p.action == FaultAction::kRestart) {
    if (p.coordinator) {
      RestartCoordinator(p, elapsed, max_step);
    } else if (p.server >= 0) {
      RestartServer(p, elapsed, max_step);
    } else {
      StartJoiner(p, elapsed, max_step);
    }
    return;
  }
  std::map<int64_t, size_t> coordinator;
  if (coordinator_slot_) coordinator[0] = *coordinator_slot_;
  const std::map<int64_t, size_t>& targets = p.coordinator ? coordinator
                                             : p.storage >= 0 ? storage_slots_
                                             : p.server >= 0  ? server_slots_
                                                              : slots_;
  auto slot = targets.find(p.coordinator ? 0 : p.storage >= 0 ? p.storage : p.server >= 0 ? p.server : p.slot);
  std::string why;
  if (slot == targets.end()) {
    why = "its target was never started";
  } else if (std::optional<int> code = children_.exit_code(slot->second)) {
    why = WhoOf(p) + " (pid " + std::to_string(children_.pid(slot->second)) + ") had already exited with code " +
          std::to_string(*code);
  }
  if (!why.empty()) {
    Notice("fault not fired: " + p.source + " (" + FaultActionName(p.action) + " " + WhoOf(p) + "): " + why);
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = why;
    Push(r);
    return;
  }
  const int signal = p.action == FaultAction::kKill      ? SIGKILL
                     : p.action == FaultAction::kPreempt ? SIGTERM
                     : p.action == FaultAction::kStop    ? SIGSTOP
                                                         : SIGCONT;
  Signal(p, slot->second, signal, elapsed, max_step);
}

void FaultInjector::Signal(const Pending& p, size_t child, int signal, double elapsed, int64_t max_step) {
  const pid_t pid = children_.pid(child);
  if (Status st = children_.Signal(child, signal); !st.ok()) {  // exited since the check
    Notice("fault not fired: " + p.source + ": " + st.message());
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = st.message();
    Push(r);
    return;
  }
  // The coordinator the plan kills is the plan's business in every mode
  // (its restart resumes the job); a worker's death only in elastic ones.
  if (options_.expect_exits || p.coordinator) children_.ExpectExit(child);
  if (p.coordinator && signal == SIGKILL) coordinator_down_ = true;
  const std::string who = WhoOf(p);
  std::string line = std::string("fault: ") + SignalName(signal) + " " + who + " (pid " + std::to_string(pid) +
                     ") at " + Seconds(elapsed) + (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : "");
  if (signal == SIGTERM) {
    line += "; SIGKILL in " + Seconds(p.grace_seconds) + " if it still runs";
    graces_.push_back({child, p, elapsed + p.grace_seconds});
  }
  if (signal == SIGSTOP) stopped_.insert(child);
  if (signal == SIGCONT) stopped_.erase(child);
  Notice(line);
  records::Fault r = Record(true, p, elapsed, max_step);
  r.signal = SignalName(signal);
  r.pid = pid;
  if (signal == SIGTERM) r.grace_seconds = p.grace_seconds;
  if (p.delay_seconds > 0) r.delay_seconds = p.delay_seconds;
  if (p.storage >= 0 && p.wipe) {
    // A dead disk: the node's chunks are gone, not just unreachable.
    Status wiped = options_.wipe_storage ? options_.wipe_storage(p.storage)
                                         : FailedPrecondition("no way to wipe a storage node");
    r.wiped = wiped.ok();
    if (!wiped.ok()) r.wipe_error = wiped.message();
    Notice(wiped.ok() ? "fault: wiped " + who + "'s directory (its disk is gone)"
                      : "fault: could not wipe " + who + ": " + wiped.message());
  }
  Push(r);
}

void FaultInjector::StartJoiner(Pending& p, double elapsed, int64_t max_step) {
  const int64_t n = ++joiners_;
  Result<size_t> child =
      options_.start_joiner ? options_.start_joiner(n) : Result<size_t>(FailedPrecondition("no way to start a joiner"));
  if (!child.ok()) {
    const std::string why = "could not start joiner " + std::to_string(n) + ": " + child.status().message();
    Notice("fault not fired: " + p.source + " (restart): " + why);
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = why;
    Push(r);
    return;
  }
  if (p.new_slot >= 0) {
    slots_[p.new_slot] = *child;
    joiner_of_slot_[p.new_slot] = n;
  }
  const pid_t pid = children_.pid(*child);
  Notice("fault: started joiner " + std::to_string(n) + " (pid " + std::to_string(pid) + ") at " + Seconds(elapsed) +
         (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : ""));
  records::Fault r = Record(true, p, elapsed, max_step);
  r.joiner = n;
  r.pid = pid;
  if (p.delay_seconds > 0) r.delay_seconds = p.delay_seconds;
  Push(r);
}

void FaultInjector::RestartServer(Pending& p, double elapsed, int64_t max_step) {
  auto old = server_slots_.find(p.server);
  std::string why;
  if (!options_.restart_server) {
    why = "no way to restart a server";
  } else if (old != server_slots_.end() && !children_.exit_code(old->second)) {
    // Two processes on one checkpoint directory would overwrite each other.
    why = "server " + std::to_string(p.server) + " (pid " + std::to_string(children_.pid(old->second)) +
          ") still runs; kill or preempt it first";
  }
  Result<size_t> child = why.empty() ? options_.restart_server(p.server) : Result<size_t>(FailedPrecondition(why));
  if (!child.ok()) {
    why = "could not restart server " + std::to_string(p.server) + ": " + child.status().message();
    Notice("fault not fired: " + p.source + " (restart server " + std::to_string(p.server) + "): " + why);
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = why;
    Push(r);
    return;
  }
  server_slots_[p.server] = *child;
  const pid_t pid = children_.pid(*child);
  Notice("fault: restarted server " + std::to_string(p.server) + " (pid " + std::to_string(pid) + ") at " +
         Seconds(elapsed) + (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : "") +
         " on its checkpoint directory");
  records::Fault r = Record(true, p, elapsed, max_step);
  r.pid = pid;
  if (p.delay_seconds > 0) r.delay_seconds = p.delay_seconds;
  Push(r);
}

void FaultInjector::RestartCoordinator(Pending& p, double elapsed, int64_t max_step) {
  std::string why;
  if (!options_.restart_coordinator) {
    why = "no way to restart the coordinator";
  } else if (coordinator_slot_ && !children_.exit_code(*coordinator_slot_)) {
    // Two coordinators on one state file and port would fight over both.
    why = "the coordinator (pid " + std::to_string(children_.pid(*coordinator_slot_)) +
          ") still runs; kill it first";
  }
  Result<size_t> child = why.empty() ? options_.restart_coordinator() : Result<size_t>(FailedPrecondition(why));
  if (!child.ok()) {
    why = why.empty() ? "could not restart the coordinator: " + child.status().message() : why;
    Notice("fault not fired: " + p.source + " (restart the coordinator): " + why);
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = why;
    Push(r);
    return;
  }
  coordinator_slot_ = *child;
  coordinator_down_ = false;
  ++coordinator_restarts_;
  const pid_t pid = children_.pid(*child);
  Notice("fault: restarted the coordinator (pid " + std::to_string(pid) + ") at " + Seconds(elapsed) +
         (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : "") + " on its state file");
  records::Fault r = Record(true, p, elapsed, max_step);
  r.pid = pid;
  if (p.delay_seconds > 0) r.delay_seconds = p.delay_seconds;
  Push(r);
}

void FaultInjector::FireLinkFault(Pending& p, double elapsed, int64_t max_step) {
  const std::string planned = WhoOf(p);
  std::string why;
  // The hosts: as named, or where placement put the workers.
  std::vector<std::string> hosts = p.hosts;
  if (options_.link_faults_file.empty()) {
    why = "the job has no emulated topology whose links could fail";
  } else if (hosts.empty()) {
    std::vector<int64_t> workers = p.link_workers.empty() ? std::vector<int64_t>{p.slot} : p.link_workers;
    for (int64_t w : workers) {
      const std::string h = options_.host_of_worker ? options_.host_of_worker(w) : "";
      if (h.empty()) {
        why = "worker " + std::to_string(w) + " was placed on no emulated host";
        break;
      }
      hosts.push_back(h);
    }
  }
  // The links: the pair, or every link from the host to the others of its zone.
  std::vector<std::pair<std::string, std::string>> links;
  if (why.empty() && p.action == FaultAction::kPartition) {
    auto zone = options_.zone_of_host.find(hosts[0]);
    for (const auto& [host, z] : options_.zone_of_host) {
      if (zone != options_.zone_of_host.end() && z == zone->second && host != hosts[0]) links.emplace_back(hosts[0], host);
    }
    if (links.empty()) why = "host " + hosts[0] + " has no other host in its zone";
  } else if (why.empty() && p.action == FaultAction::kSlowHost) {
    // A bad NIC: every link of the host, in and out of its zone.
    for (const auto& [host, z] : options_.zone_of_host) {
      if (host != hosts[0]) links.emplace_back(hosts[0], host);
    }
    if (links.empty()) why = "host " + hosts[0] + " has no other host";
  } else if (why.empty()) {
    if (hosts[0] == hosts[1]) {
      why = planned + ": both ends are on host " + hosts[0] + " (no link between them)";
    } else {
      links.emplace_back(hosts[0], hosts[1]);
    }
  }
  const int64_t now_ms = net::WallMillis();
  const auto until_ms = now_ms + static_cast<int64_t>(std::llround(p.seconds * 1000.0));
  if (why.empty()) {
    link_faults_.Prune(now_ms);
    for (const auto& [a, b] : links) {
      net::LinkFault f;
      f.a = a;
      f.b = b;
      const bool slow = p.action == FaultAction::kSlowLink || p.action == FaultAction::kSlowHost;
      f.kind = slow ? net::LinkFaultKind::kSlow : net::LinkFaultKind::kDrop;
      f.factor = p.factor;
      if (slow) f.delay_ms = p.delay_ms;
      f.from_ms = now_ms;
      f.until_ms = until_ms;
      link_faults_.faults.push_back(f);
    }
    if (Status st = link_faults_.WriteTo(options_.link_faults_file); !st.ok()) {
      why = "could not write the link faults: " + st.message();
    }
  }
  p.hosts = hosts;  // the record names the hosts it hit
  if (!why.empty()) {
    Notice("fault not fired: " + p.source + " (" + FaultActionName(p.action) + " " + planned + "): " + why);
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = why;
    Push(r);
    return;
  }
  const std::string added = p.delay_ms > 0 ? " (+" + NumberText(p.delay_ms) + " ms each way)" : "";
  std::string what = p.action == FaultAction::kPartition
                         ? "host " + hosts[0] + " cut off from the " + std::to_string(links.size()) +
                               " other host(s) of its zone"
                     : p.action == FaultAction::kSlowHost
                         ? "every link of host " + hosts[0] + " (" + std::to_string(links.size()) + " links) " +
                               NumberText(p.factor) + "x slower" + added
                     : p.action == FaultAction::kSlowLink
                         ? "the link " + hosts[0] + "-" + hosts[1] + " " + NumberText(p.factor) + "x slower" + added
                         : "the link " + hosts[0] + "-" + hosts[1] + " drops everything";
  if (p.action != FaultAction::kPartition && p.action != FaultAction::kSlowHost && planned != WhoOf(p)) {
    what += " (" + planned + ")";
  }
  Notice("fault: " + what + " for " + Seconds(p.seconds) + " at " + Seconds(elapsed) +
         (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : ""));
  records::Fault r = Record(true, p, elapsed, max_step);
  if (p.delay_seconds > 0) r.delay_seconds = p.delay_seconds;
  Push(r);
}

bool FaultInjector::CoordinatorRestartPending() const {
  return std::any_of(pending_.begin(), pending_.end(), [](const Pending& p) {
    return !p.done && p.coordinator && p.action == FaultAction::kRestart;
  });
}

void FaultInjector::Finish(int64_t max_step, SteadyClock::time_point now) {
  if (finished_) return;
  finished_ = true;
  const double elapsed = Elapsed(now);
  children_.Poll();
  for (Pending& p : pending_) {
    if (p.done) continue;
    p.done = true;
    std::string what = std::string(FaultActionName(p.action)) +
                       (p.server >= 0 || p.storage >= 0 || p.coordinator || IsLinkFault(p.action) ? " " + WhoOf(p)
                        : p.action == FaultAction::kRestart ? ""
                                                            : " " + Who(p.slot)) +
                       (p.at_step ? " at step " + std::to_string(*p.at_step) : " at " + Seconds(*p.at_seconds));
    if (p.triggered_at && p.delay_seconds > 0) what += " + " + Seconds(p.delay_seconds);
    Notice("fault not fired: " + p.source + " (" + what + "): the job ended first, at " + Seconds(elapsed) +
           (max_step > 0 ? " (step " + std::to_string(max_step) + ")" : ""));
    records::Fault r = Record(false, p, elapsed, max_step);
    r.reason = "the job ended first";
    Push(r);
  }
  // Nobody waits for a stopped child, nor for the rest of a grace period.
  std::map<size_t, std::string> leftovers;
  for (size_t child : stopped_) leftovers[child] = "still stopped";
  for (const Grace& g : graces_) leftovers.emplace(g.child, "preempted and still running");
  for (const auto& [child, why] : leftovers) {
    if (children_.exit_code(child)) continue;
    children_.ExpectExit(child);
    if (!children_.Signal(child, SIGKILL).ok()) continue;
    Notice("fault plan: SIGKILL " + children_.name(child) + " (pid " + std::to_string(children_.pid(child)) + "), " +
           why + " when the job ended");
    (void)children_.WaitForExit(child, Deadline::After(std::chrono::seconds(10)));  // reaps it
  }
  stopped_.clear();
  graces_.clear();
}

nlohmann::json FaultInjector::Executed() const {
  nlohmann::json faults = nlohmann::json::array();
  for (const auto& r : records_) {
    if (r.value("event", "") == "fault") faults.push_back(r);
  }
  return faults;
}

}  // namespace tenax
