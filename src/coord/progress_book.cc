#include "progress_book.h"

#include <chrono>

namespace tenax::coord {

ProgressBook::ProgressBook(std::string job_id, bool async, int64_t total_steps)
    : job_id_(std::move(job_id)), async_(async), total_steps_(total_steps) {}

void ProgressBook::OnProgress(int rank, const wire::Progress& p, SteadyClock::time_point at) {
  reports_[rank] = Report{p, at};
  // The furthest step only grows: an elastic group that re-forms may
  // report a step again, which is not the job going back.
  if (!furthest_ || p.step() > furthest_->step()) furthest_ = p;
  newest_ = p;
  if (p.test_accuracy() >= 0) accuracy_ = p.test_accuracy();
}

JobMetrics ProgressBook::Snapshot(const JobRecord& job, const std::map<int, MemberRecord>& members,
                                  const std::optional<WorkQueueCounts>& counts, SteadyClock::time_point now) const {
  JobMetrics m;
  m.job_id = job_id_;
  m.total_steps = total_steps_;
  if (furthest_) {
    m.step = furthest_->step();
    m.total_steps = std::max(m.total_steps, furthest_->total_steps());
    m.epoch = furthest_->epoch();
    m.epochs = furthest_->epochs();
  }
  if (newest_) {
    m.train_loss = newest_->loss();
    if (!async_) m.samples_per_second = newest_->samples_per_second();
  }
  m.test_accuracy = accuracy_;
  for (const auto& [rank, member] : members) {
    if (member.state != MemberState::kJoined && member.state != MemberState::kDone) continue;
    ++m.workers;
    auto it = reports_.find(rank);
    if (it == reports_.end()) continue;
    const wire::Progress& p = it->second.latest;
    if (async_) m.samples_per_second += p.samples_per_second();
    m.worker_reports.push_back(
        WorkerMetrics{rank, p.step(), p.step_seconds(), std::chrono::duration<double>(now - it->second.at).count()});
  }
  for (const auto& [rank, r] : reports_) m.recovery_bytes += r.latest.recovery_bytes();
  m.generation = job.generation;
  m.done = job.phase == JobPhase::kFinished;
  m.failed = job.phase == JobPhase::kFailed;
  if (counts) {
    m.leases_issued = counts->units_issued;
    m.leases_expired = counts->leases_expired;
    m.units_reissued = counts->units_reissued;
  }
  return m;
}

}  // namespace tenax::coord
