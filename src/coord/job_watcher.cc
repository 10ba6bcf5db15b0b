#include "tenax/coord/job_watcher.h"

#include <algorithm>
#include <map>
#include <thread>

#include "tenax/coord/coord_codec.h"
#include "tenax/net/node.h"

namespace tenax::coord {

using namespace std::chrono_literals;

std::string JobFailed::Describe() const {
  if (host.empty()) return reason;
  return "rank " + std::to_string(rank) + " on " + host + " failed: " + reason;
}

struct JobWatcher::State {
  JobWatcherOptions options;
  std::unique_ptr<net::Node> node;
  net::PeerId coordinator = 0;
  std::map<uint32_t, wire::Progress> latest;  // per rank
  int64_t reported_step = -1;
  int64_t max_step = 0;

  // The slowest rank's progress, if every rank reported and it moved, or
  // (report_max_step) if the highest step reported rose.
  std::optional<JobProgress> Update(const wire::Progress& p) {
    latest[p.rank()] = p;
    const bool max_rose = p.step() > max_step;
    max_step = std::max<int64_t>(max_step, p.step());
    const wire::Progress* slow = nullptr;
    for (const auto& [rank, q] : latest) {
      if (!slow || q.step() < slow->step()) slow = &q;
    }
    const bool slowest_moved = static_cast<int64_t>(latest.size()) >= options.world && slow->step() != reported_step;
    if (!slowest_moved && !(options.report_max_step && max_rose)) return std::nullopt;
    if (slowest_moved) reported_step = slow->step();
    JobProgress j;
    j.step = slow->step();
    j.total_steps = slow->total_steps();
    j.epoch = slow->epoch();
    j.epochs = slow->epochs();
    j.steps_per_epoch = slow->steps_per_epoch();
    j.loss = slow->loss();
    j.samples_per_second = slow->samples_per_second();
    j.elapsed_seconds = slow->elapsed_seconds();
    if (slowest_moved && slow->test_accuracy() >= 0) j.test_accuracy = slow->test_accuracy();
    j.max_step = max_step;
    for (const auto& [rank, q] : latest) {
      j.step_seconds = std::max(j.step_seconds, q.step_seconds());
      j.recovery_bytes += q.recovery_bytes();
    }
    j.max_step_only = !slowest_moved;
    return j;
  }
};

JobWatcher::JobWatcher(std::unique_ptr<State> state) : state_(std::move(state)) {}
JobWatcher::~JobWatcher() = default;

Result<std::unique_ptr<JobWatcher>> JobWatcher::Connect(const JobWatcherOptions& options, Deadline deadline) {
  auto state = std::make_unique<State>();
  state->options = options;
  net::NodeOptions no;
  no.name = options.name;
  no.secret = options.secret;
  no.peer_timeout = options.peer_timeout;
  TENAX_ASSIGN_OR_RETURN(state->node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(state->coordinator, state->node->Connect(options.host, options.port, deadline));
  wire::Watch watch;
  watch.set_job_id(options.job_id);
  TENAX_RETURN_IF_ERROR(state->node->SendControl(state->coordinator, kWatchKind, watch.SerializeAsString(), deadline));
  return std::unique_ptr<JobWatcher>(new JobWatcher(std::move(state)));
}

Status JobWatcher::TellWorkerExited(int rank, const std::string& reason, Deadline deadline) {
  wire::Failure f;  // from a watcher: a worker's process ended (JobStateMachine::OnWorkerExited)
  f.set_rank(static_cast<uint32_t>(rank));
  f.set_reason(reason);
  return state_->node->SendControl(state_->coordinator, kFailureKind, f.SerializeAsString(), deadline);
}

Result<std::optional<JobEvent>> JobWatcher::Next(Deadline deadline) {
  State& s = *state_;
  while (true) {
    // Node waits poll: check without blocking and pace the idle loop.
    s.node->Progress();
    auto msg = s.node->ReceiveControl(Deadline::At(SteadyClock::now()), s.coordinator);
    if (!msg.ok()) {
      if (msg.status().code() != StatusCode::kDeadlineExceeded) return msg.status();
      if (deadline.Expired()) return std::optional<JobEvent>();
      std::this_thread::sleep_for(5ms);
      continue;
    }
    if (msg->kind == kProgressKind) {
      auto p = DecodeProgress(msg->payload, "coordinator");
      if (!p.ok()) continue;  // a garbled report is skipped, the next one counts
      if (auto j = s.Update(*p)) return std::optional<JobEvent>(*j);
    } else if (msg->kind == kFailureKind) {
      JobFailed failed;
      auto f = DecodeFailure(msg->payload, "coordinator");
      if (f.ok()) {
        failed.rank = static_cast<int>(f->rank());
        failed.host = f->host();
        failed.reason = f->reason();
      } else {
        failed.reason = "unknown reason";
      }
      return std::optional<JobEvent>(std::move(failed));
    } else if (msg->kind == kDoneKind) {
      return std::optional<JobEvent>(JobDone{});
    } else if (msg->kind == kQueueCountsKind) {
      auto q = DecodeQueueCounts(msg->payload, "coordinator");
      if (!q.ok()) continue;  // the next counts, or Done's, follow
      return std::optional<JobEvent>(JobQueue{QueueCountsFromWire(*q)});
    } else if (msg->kind == kRosterKind) {
      auto r = DecodeRoster(msg->payload, "coordinator");
      if (!r.ok()) continue;
      JobGeneration g;
      g.generation = r->generation();
      g.why = r->why();
      std::map<uint32_t, wire::Progress> kept;
      for (const auto& m : r->members()) {
        g.members.push_back(static_cast<int>(m.member_id()));
        g.member_names[static_cast<int>(m.member_id())] = m.name();
        if (auto it = s.latest.find(m.member_id()); it != s.latest.end()) kept.insert(*it);
      }
      std::sort(g.members.begin(), g.members.end());
      // Progress follows the members of the newest generation.
      s.latest = std::move(kept);
      s.options.world = r->members_size();
      return std::optional<JobEvent>(std::move(g));
    }
    if (deadline.Expired()) return std::optional<JobEvent>();
  }
}

}  // namespace tenax::coord
