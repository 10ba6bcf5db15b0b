#include "run_migration.h"

#include <signal.h>
#include <spdlog/spdlog.h>

namespace tenax {

using namespace std::chrono_literals;

// Only a link that stays bad moves a member: the probes' loss counts a late
// answer, and a loaded machine delays a round's pings now and then (a loss
// of 0.2 over healthy links was seen once, before any fault). This many
// checks in a row, a second apart, must name the same member on the same
// host.
constexpr int kConfirmChecks = 3;

double RunMigration::RunSeconds() const {
  return std::chrono::duration<double>(SteadyClock::now() - o_.run_start).count();
}

void RunMigration::Poll(int64_t max_step) {
  if (move_) return Follow();
  Plan(max_step);
}

void RunMigration::OnGeneration() {
  if (move_ && move_->left_sent) move_->generation_after_leave = true;
}

void RunMigration::Plan(int64_t max_step) {
  const auto now = SteadyClock::now();
  if (now < next_check_) return;
  next_check_ = now + 1s;
  if (Status st = o_.topology->RefreshLinks(o_.coordinator_host, o_.coordinator_port, o_.secret); !st.ok()) {
    spdlog::debug("migration: the link matrix was not read: {}", st.message());
    return;
  }
  std::vector<size_t> member_children, member_hosts;
  for (const auto& [child, host] : *o_.host_of_member) {
    const std::string state = o_.monitor->StateOf(o_.children->pid(child));
    if (o_.children->exit_code(child) || (state != "active" && state != "slow")) continue;
    member_children.push_back(child);
    member_hosts.push_back(host);
  }
  if (member_children.size() < 2) return;
  std::optional<sched::MigrationPlan> plan = o_.topology->PlanMove(member_hosts);
  if (!plan) {
    checks_ = 0;
    return;
  }
  const size_t member = member_children[static_cast<size_t>(plan->member)];
  const std::pair<size_t, int> suspect{member, plan->from};
  checks_ = suspect == suspect_ ? checks_ + 1 : 1;
  suspect_ = suspect;
  if (checks_ < kConfirmChecks) return;
  const std::string who = o_.children->name(member);
  const std::string from = o_.topology->HostLabel(static_cast<size_t>(plan->from));
  if (plan->to < 0) {
    if (skipped_.insert(suspect).second) {
      o_.monitor->Notice("migration skipped: " + who + " on " + from + " (" + plan->why + "): " + plan->why_not);
      records_.push_back({{"member", who},
                          {"from", from},
                          {"reason", plan->why},
                          {"outcome", "skipped"},
                          {"why_not", plan->why_not},
                          {"at_seconds", RunSeconds()}});
    }
    return;
  }
  const std::string id = std::to_string(++migrants_);
  const std::string name = "migrant " + id;
  const size_t to = static_cast<size_t>(plan->to);
  const std::string to_label = o_.topology->HostLabel(to);
  // At the members' priority, unlike a spare kept for a loss that may never
  // come: the job is already slowed by the link, and the sooner the migrant
  // is warm the sooner it is fast again (at nice 19 beside two busy members
  // on 2 cores, a start took 13 s instead of 1).
  const std::string log = o_.log_path("migrant-" + id);
  auto index = o_.children->StartLogged(name, o_.topology->OnChosenHost(to, o_.migrant_argv()), log);
  if (!index.ok()) {
    o_.topology->ReleaseSlotOn(to);
    o_.monitor->Notice("migration of " + who + " not started: " + index.status().message());
    return;
  }
  o_.children->ExpectExit(*index);
  (*o_.host_of_member)[*index] = to;
  if (o_.on_started) o_.on_started(*index);
  o_.monitor->AddWorker(name, o_.children->pid(*index), to_label);
  Move m;
  m.member = member;
  m.migrant = *index;
  m.started = SteadyClock::now();
  m.log = log;
  m.who = who;
  m.name = name;
  m.from = from;
  m.to = to_label;
  m.record = {{"member", who},
              {"migrant", name},
              {"from", from},
              {"to", to_label},
              {"reason", plan->why},
              {"estimated_exchange_ms", plan->estimated_seconds_now * 1e3},
              {"estimated_exchange_ms_after", plan->estimated_seconds_after * 1e3},
              {"at_seconds", RunSeconds()},
              {"step", max_step}};
  move_ = std::move(m);
  o_.monitor->Notice("migration: " + who + " on " + from + " (" + plan->why + ") moves to " + to_label + "; " + name +
                     " starts there");
}

void RunMigration::End(const std::string& outcome, const std::string& line) {
  move_->record["outcome"] = outcome;
  move_->record["seconds"] = std::chrono::duration<double>(SteadyClock::now() - move_->started).count();
  records_.push_back(move_->record);
  o_.monitor->Notice(line);
  move_.reset();
  checks_ = 0;
}

void RunMigration::Follow() {
  Move& m = *move_;
  const pid_t migrant_pid = o_.children->pid(m.migrant);
  const double since = std::chrono::duration<double>(SteadyClock::now() - m.started).count();
  if (auto code = o_.children->exit_code(m.migrant)) {
    return End("failed", "migration of " + m.who + " failed: " + m.name + " exited with code " +
                             std::to_string(*code) + " (its log: " + m.log + ")");
  }
  const std::string state = o_.monitor->StateOf(migrant_pid);
  if (!m.left_sent && o_.monitor->SpareReady(migrant_pid)) {
    m.record["warm_seconds"] = since;
    if (o_.children->exit_code(m.member)) {
      m.left_sent = true;  // gone already: the migrant takes its place
    } else if (Status st = o_.children->Signal(m.member, SIGTERM); st.ok()) {
      m.left_sent = true;
      o_.monitor->Notice(fmt::format("migration: {} is warm on {} after {:.1f} s; {} leaves at its next step (SIGTERM)",
                                     m.name, m.to, since, m.who));
    }
  }
  if (state == "active") {
    m.record["member_seconds"] = since;
    return End("moved", fmt::format("migration done: {} moved from {} to {} ({} is a member) in {:.1f} s",
                                    m.who, m.from, m.to, m.name, since));
  }
  const std::string member_state = o_.monitor->StateOf(o_.children->pid(m.member));
  if (m.left_sent && m.generation_after_leave && member_state != "active" && member_state != "slow" &&
      state == "spare") {
    // The generation that dropped the member admitted a spare that waited
    // longer (cluster.spares): the migrant stays, as a spare.
    if (o_.on_left_as_spare) o_.on_left_as_spare(m.migrant);
    return End("moved_to_spare", "migration: " + m.who +
                                     " left; the coordinator admitted an older spare in its place, and " +
                                     m.name + " waits as a spare");
  }
  if (!m.left_sent && since > std::chrono::duration<double>(o_.warm_timeout).count()) {
    (void)o_.children->Signal(m.migrant, SIGTERM);
    return End("failed", "migration of " + m.who + " given up: " + m.name +
                             " was not warm within cluster.join_timeout_seconds");
  }
}

}  // namespace tenax
