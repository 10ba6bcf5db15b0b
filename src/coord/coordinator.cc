#include "tenax/coord/coordinator.h"

#include <spdlog/spdlog.h>
#include <signal.h>
#include <stdlib.h>

#include <optional>
#include <thread>
#include <type_traits>
#include <variant>

#include "async_units.h"
#include "progress_book.h"
#include "tenax/coord/coord_codec.h"
#include "job_state.h"
#include "job_store.h"
#include "metrics_endpoint.h"
#include "tenax/core/files.h"
#include "tenax/core/signals.h"
#include "tenax/net/many_connections.h"
#include "tenax/net/node.h"

namespace tenax::coord {
namespace {

using namespace std::chrono_literals;

CoordTime Now() {
  return {SteadyClock::now(),
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count()};
}

// The coordinator's I/O: decodes what arrives on the Node into events for
// the JobStateMachine, and carries out the actions it answers with.
class Coordinator {
 public:
  Coordinator(net::Node& node, JobStore& store, JobStateMachine machine, std::unique_ptr<AsyncUnits> async,
              std::vector<std::shared_ptr<net::ControlService>> services, ProgressBook book,
              MetricsEndpoint* metrics)
      : node_(node),
        store_(store),
        machine_(std::move(machine)),
        async_(std::move(async)),
        services_(std::move(services)),
        book_(std::move(book)),
        metrics_(metrics) {}

  // Serves until the job ends; the metrics endpoint's last snapshot then
  // shows how it ended.
  Status Serve() {
    Status st = ServeLoop();
    PublishMetrics(true);
    return st;
  }

 private:
  Status ServeLoop();
  // Hands the metrics endpoint a fresh snapshot, at most every 200 ms
  // unless `now` (work-queue counts at most every second: SQLite queries).
  void PublishMetrics(bool now);
  // An async job's work-queue counts, read at most every second unless
  // `now` (SQLite queries); the metrics and the watchers share them.
  void RefreshQueueCounts(bool now);
  // Watchers (the launcher) get the counts whenever they changed since
  // the last ones sent, so nobody but the coordinator opens its state.
  void TellQueueCounts(const std::vector<ConnId>& to);
  // Carries out `actions` in order. A store write that fails ends serving
  // (its error is returned) before anything after it is announced.
  std::optional<Status> Apply(const Actions& actions, const net::ControlMessage* handled = nullptr);
  Actions Handle(const net::ControlMessage& m);
  void Send(net::PeerId peer, uint32_t kind, const std::string& payload);
  void SendAll(const std::vector<ConnId>& to, uint32_t kind, const std::string& payload);
  void Drop(net::PeerId peer, const std::string& why);
  std::string Label(net::PeerId peer) const;
  // "worker N (host/pid)" for a member's connection, "" otherwise.
  std::string MemberLabel(net::PeerId peer) const;
  const std::string& job_id() const { return machine_.job().job_id; }

  net::Node& node_;
  JobStore& store_;
  JobStateMachine machine_;
  std::unique_ptr<AsyncUnits> async_;  // async jobs only
  std::vector<std::shared_ptr<net::ControlService>> services_;
  SteadyClock::time_point next_unit_timer_{};
  SteadyClock::time_point next_sweep_{};  // ServeLoop's next look at losses and timers
  ProgressBook book_;
  MetricsEndpoint* metrics_;  // nullptr: metrics off
  SteadyClock::time_point next_publish_{}, next_counts_{};
  std::optional<WorkQueueCounts> counts_, sent_counts_;

 public:
  bool sigkill_on_first_done = false;  // CoordinatorOptions' test seam
};

void Coordinator::PublishMetrics(bool now) {
  if (!metrics_) return;
  const auto t = SteadyClock::now();
  if (!now && t < next_publish_) return;
  next_publish_ = t + 200ms;
  RefreshQueueCounts(now);
  metrics_->Publish(book_.Snapshot(machine_.job(), machine_.members(), counts_, t));
}

void Coordinator::RefreshQueueCounts(bool now) {
  const auto t = SteadyClock::now();
  if (!async_ || (!now && t < next_counts_)) return;
  next_counts_ = t + 1s;
  auto counts = async_->Counts();
  if (counts.ok()) {
    counts_ = *counts;
  } else {
    spdlog::warn("job {}: work queue counts not read: {}", job_id(), counts.status().message());
  }
}

void Coordinator::TellQueueCounts(const std::vector<ConnId>& to) {
  if (!counts_ || counts_ == sent_counts_ || to.empty()) return;
  SendAll(to, kQueueCountsKind, QueueCountsToWire(*counts_).SerializeAsString());
  sent_counts_ = counts_;
}

std::string Coordinator::Label(net::PeerId peer) const {
  auto info = node_.Info(peer);
  return info.ok() ? info->address + (info->name.empty() ? "" : " (" + info->name + ")") : std::to_string(peer);
}

std::string Coordinator::MemberLabel(net::PeerId peer) const {
  auto rank = machine_.RankOf(peer);
  if (!rank) return "";
  const auto& members = machine_.members();
  auto it = members.find(*rank);
  return "worker " + std::to_string(*rank) + (it != members.end() ? " (" + it->second.name + ")" : "");
}

void Coordinator::Send(net::PeerId peer, uint32_t kind, const std::string& payload) {
  if (Status st = node_.SendControl(peer, kind, payload, Deadline::After(2s)); !st.ok()) {
    spdlog::warn("job {}: message to {} not sent: {}", job_id(), Label(peer), st.message());
  }
}

void Coordinator::SendAll(const std::vector<ConnId>& to, uint32_t kind, const std::string& payload) {
  for (ConnId peer : to) Send(peer, kind, payload);
}

void Coordinator::Drop(net::PeerId peer, const std::string& why) {
  spdlog::warn("job {}: refusing {}: {}", job_id(), Label(peer), why);
  wire::JoinReply r;
  r.set_error(why);
  Send(peer, kJoinReplyKind, r.SerializeAsString());
  node_.Disconnect(peer, Deadline::After(500ms));
}

template <typename>
inline constexpr bool kUnhandled = false;

std::optional<Status> Coordinator::Apply(const Actions& actions, const net::ControlMessage* handled) {
  // nullopt: carry on with the next action.
  auto stored = [](Status st) { return st.ok() ? std::nullopt : std::optional<Status>(std::move(st)); };
  auto apply = [&](const auto& a) -> std::optional<Status> {
    using T = std::decay_t<decltype(a)>;
    if constexpr (std::is_same_v<T, action::PutMember>) {
      return stored(store_.PutMember(a.member));
    } else if constexpr (std::is_same_v<T, action::RemoveMember>) {
      return stored(store_.RemoveMember(a.rank));
    } else if constexpr (std::is_same_v<T, action::SetJobState>) {
      return stored(store_.SetJobState(a.phase, a.failure, a.generation));
    } else if constexpr (std::is_same_v<T, action::RenewLeases>) {
      return stored(store_.RenewLeases(a.ranks, a.until_ms));
    } else if constexpr (std::is_same_v<T, action::PutGeneration>) {
      return stored(store_.PutGeneration(a.generation));
    } else if constexpr (std::is_same_v<T, action::SetStableGeneration>) {
      return stored(store_.SetStableGeneration(a.generation));
    } else if constexpr (std::is_same_v<T, action::Refuse>) {
      Drop(a.to, a.reason);
    } else if constexpr (std::is_same_v<T, action::Admit>) {
      wire::JoinReply reply;
      reply.set_rank(static_cast<uint32_t>(a.rank));
      reply.set_world(static_cast<uint32_t>(a.world));
      reply.set_config_toml(a.config_toml);
      reply.set_generation(a.generation);
      Send(a.to, kJoinReplyKind, reply.SerializeAsString());
    } else if constexpr (std::is_same_v<T, action::PublishRoster>) {
      wire::Roster r;
      r.set_generation(a.generation);
      r.set_why(a.why);
      r.set_stable_generation(a.stable);
      uint32_t position = 0;
      for (const MemberRecord& m : a.members) {
        auto* e = r.add_members();
        e->set_rank(position++);
        e->set_member_id(static_cast<uint32_t>(m.rank));
        e->set_joining(a.joining.count(m.rank) > 0);
        e->set_name(m.name);
        e->set_host(m.host);
        e->set_port(m.port);
      }
      SendAll(a.to, kRosterKind, r.SerializeAsString());
    } else if constexpr (std::is_same_v<T, action::AnnounceFailure>) {
      wire::Failure f;
      f.set_rank(static_cast<uint32_t>(a.rank));
      f.set_host(a.host);
      f.set_reason(a.reason);
      SendAll(a.to, kFailureKind, f.SerializeAsString());
      if (async_) async_->TellShards(kFailureKind, f.SerializeAsString());
    } else if constexpr (std::is_same_v<T, action::RelayProgress>) {
      if (handled) SendAll(a.to, kProgressKind, handled->payload);
    } else if constexpr (std::is_same_v<T, action::AnnounceDone>) {
      if (async_) {
        RefreshQueueCounts(true);  // the final counts, before Done
        sent_counts_.reset();
        TellQueueCounts(a.to);
      }
      wire::Done d;
      d.set_rank(static_cast<uint32_t>(machine_.job().world));  // rank = world: the whole job
      d.set_summary_json(a.summary_json);
      if (async_) async_->TellShards(kDoneKind, d.SerializeAsString());
      SendAll(a.to, kDoneKind, d.SerializeAsString());
    } else if constexpr (std::is_same_v<T, action::AckDone>) {
      wire::Done d;
      d.set_rank(static_cast<uint32_t>(a.rank));  // its own rank: "your Done is recorded"
      Send(a.to, kDoneKind, d.SerializeAsString());
    } else if constexpr (std::is_same_v<T, action::Stop>) {
      return a.verdict;
    } else {
      static_assert(kUnhandled<T>, "every action must be carried out");
    }
    return std::nullopt;
  };
  for (const Action& a : actions) {
    if (auto end = std::visit(apply, a)) return end;
  }
  return std::nullopt;
}

Actions Coordinator::Handle(const net::ControlMessage& m) {
  const std::string label = Label(m.from);
  const bool member = machine_.RankOf(m.from).has_value();
  // A message that does not decode ends its sender's connection (for a
  // member, the loss then fails the job).
  auto refuse = [&](const Status& st) {
    Drop(m.from, st.message());
    return Actions{};
  };
  if (async_ && async_->Handles(m.kind)) {
    Status st = async_->Handle(m, MemberLabel(m.from));
    if (st.code() == StatusCode::kProtocolError) return refuse(st);
    if (!st.ok()) return machine_.OnJobFailure("the work queue failed: " + st.message());
    return {};
  }
  for (const auto& service : services_) {
    if (!service->Handles(m.kind)) continue;
    Status st = service->Handle(node_, m);
    if (st.code() == StatusCode::kProtocolError) return refuse(st);
    if (!st.ok()) spdlog::warn("job {}: message from {}: {}", job_id(), label, st.message());
    return {};
  }
  switch (m.kind) {
    case kJoinRequestKind: {
      auto j = DecodeJoinRequest(m.payload, label);
      if (!j.ok()) return refuse(j.status());
      return machine_.OnJoin(m.from,
                             JoinAsk{j->job_id(), j->name(), j->host(), static_cast<uint16_t>(j->port()),
                                     j->requested_rank(), j->rejoin(), j->plan_fingerprint(), j->spare()},
                             Now());
    }
    case kWatchKind: {
      auto w = DecodeWatch(m.payload, label);
      if (!w.ok()) return refuse(w.status());
      return machine_.OnWatch(m.from, w->job_id());
    }
    case kProgressKind: {
      if (!member) return {};
      auto p = DecodeProgress(m.payload, label);
      if (!p.ok()) return refuse(p.status());
      if (auto rank = machine_.RankOf(m.from)) book_.OnProgress(*rank, *p, SteadyClock::now());
      return machine_.OnProgress(m.from);
    }
    case kDoneKind: {
      if (!member) return {};
      auto d = DecodeDone(m.payload, label);
      if (!d.ok()) return refuse(d.status());
      if (sigkill_on_first_done) ::raise(SIGKILL);  // test seam (CoordinatorOptions)
      if (async_) async_->OnMemberDone(MemberLabel(m.from));
      return machine_.OnDone(m.from, d->summary_json());
    }
    case kFailureKind: {
      const bool watcher = machine_.watchers().count(m.from) > 0;
      if (!member && !watcher) return {};
      auto f = DecodeFailure(m.payload, label);
      if (!f.ok()) return refuse(f.status());
      // From the launcher (a watcher): a worker's process ended.
      if (watcher) return machine_.OnWorkerExited(static_cast<int>(f->rank()), f->reason());
      return machine_.OnFailureReport(m.from, f->reason(), Now());
    }
    case kLeaveKind: {
      if (!member) return {};
      auto l = DecodeLeave(m.payload, label);
      if (!l.ok()) return refuse(l.status());
      return machine_.OnLeave(m.from, l->reason());
    }
    case kSuspectKind: {
      if (!member) return {};
      auto f = DecodeFailure(m.payload, label);
      if (!f.ok()) return refuse(f.status());
      return machine_.OnSuspect(m.from, static_cast<int>(f->rank()), f->reason());
    }
    case kFormedKind: {
      if (!member) return {};
      auto f = DecodeFormed(m.payload, label);
      if (!f.ok()) return refuse(f.status());
      return machine_.OnFormed(m.from, f->generation());
    }
    default:
      return refuse(ProtocolError("unexpected message kind " + std::to_string(m.kind)));
  }
}

Status Coordinator::ServeLoop() {
  while (true) {
    PublishMetrics(false);
    if (async_) {
      RefreshQueueCounts(false);
      TellQueueCounts({machine_.watchers().begin(), machine_.watchers().end()});
    }
    if (StopRequested()) return Cancelled("coordinator stopped by signal " + std::to_string(StopSignal()));
    node_.Progress();  // the non-blocking calls below may not drive UCX themselves
    while (true) {  // admit new connections; they must speak first
      auto peer = node_.Accept(Deadline::At(SteadyClock::now()));
      if (!peer.ok()) break;
    }
    // Every message already here is handled before any loss is judged: a
    // worker's last words (Done, or why it failed) often arrive together
    // with its disconnect.
    bool idle = true;
    for (auto msg = node_.ReceiveControl(Deadline::At(SteadyClock::now())); msg.ok();
         msg = node_.ReceiveControl(Deadline::At(SteadyClock::now()))) {
      if (auto end = Apply(Handle(*msg), &*msg)) return *end;
      idle = false;
    }
    // Node waits poll; an idle coordinator must not take a core from the
    // workers (pacing, not synchronisation: messages wait in UCX meanwhile).
    if (idle) std::this_thread::sleep_for(2ms);
    // Losses and timers every 10 ms, not after every batch of messages: a
    // sweep visits every connection, and under 1,000 busy members the loop
    // turns thousands of times a second (tenax bench coord-load).
    const auto now = SteadyClock::now();
    if (now < next_sweep_) continue;
    next_sweep_ = now + 10ms;
    for (ConnId conn : machine_.Connections()) {
      if (Status st = node_.PeerStatus(conn); !st.ok()) {
        if (async_) {
          if (const std::string member = MemberLabel(conn); !member.empty()) {
            if (Status q = async_->OnMemberLost(member, st.message()); !q.ok()) {
              if (auto end = Apply(machine_.OnJobFailure("the work queue failed: " + q.message()))) return *end;
            }
          }
        }
        if (auto end = Apply(machine_.OnConnectionLost(conn, st.message()))) return *end;
      }
    }
    if (async_) {
      for (net::PeerId conn : async_->ShardConnections()) {
        if (Status st = node_.PeerStatus(conn); !st.ok()) async_->OnShardLost(conn, st.message());
      }
      if (SteadyClock::now() >= next_unit_timer_) {
        next_unit_timer_ = SteadyClock::now() + 100ms;
        auto failed = async_->OnTimer(Now().wall_ms);
        if (!failed.ok()) {
          if (auto end = Apply(machine_.OnJobFailure("the work queue failed: " + failed.status().message()))) return *end;
        } else if (!failed->empty()) {
          if (auto end = Apply(machine_.OnJobFailure(*failed))) return *end;
        }
      }
    }
    if (auto end = Apply(machine_.OnTimer(Now()))) return *end;
  }
}
}  // namespace

Status RunCoordinator(const CoordinatorOptions& o) {
  if (o.world < 1) return InvalidArgument("a job needs at least one worker");
  // Metrics first: an address it cannot use ends the run before any state
  // is written or the coordinator announces its own port.
  std::unique_ptr<MetricsEndpoint> metrics;
  if (!o.metrics_listen.empty()) {
    TENAX_ASSIGN_OR_RETURN(metrics, MetricsEndpoint::Start(o.metrics_listen));
    if (!o.metrics_port_file.empty()) {
      TENAX_RETURN_IF_ERROR(WriteFileAtomic(o.metrics_port_file, std::to_string(metrics->port()) + "\n"));
    }
    spdlog::info("job {}: Prometheus metrics at {}", o.job_id, metrics->Url());
  }
  TENAX_ASSIGN_OR_RETURN(auto store, JobStore::Open(o.state_path));
  TENAX_ASSIGN_OR_RETURN(JobRecord job, store->OpenJob(o.job_id, o.config_toml, o.world));
  if (job.resumed) {
    spdlog::info("job {}: resuming from {} (state {}, generation {})", job.job_id, o.state_path, ToString(job.phase),
                 job.generation);
    if (job.phase == JobPhase::kFinished) return Status::Ok();
    if (job.phase == JobPhase::kFailed) return FailedPrecondition(job.failure);
  }
  // A restarted coordinator must get its port back while the workers'
  // old connections to it linger in the kernel (UCX reads this only from
  // the environment; this process is the coordinator and nothing else).
  ::setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  net::NodeOptions no;
  no.name = "coordinator";
  no.secret = o.secret;
  no.peer_timeout = o.peer_timeout;
  no.max_peers = net::kFleetPeers;  // every member, spare, shard and watcher of a large fleet
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(o.listen_host, o.port));
  if (!o.port_file.empty()) TENAX_RETURN_IF_ERROR(WriteFileAtomic(o.port_file, std::to_string(port) + "\n"));
  spdlog::info("coordinator for job {} ({} workers) listening on {}:{}, state in {}", job.job_id, o.world,
               o.listen_host, port, o.state_path);
  // Resume: members recorded before a restart get the join timeout to rejoin.
  TENAX_ASSIGN_OR_RETURN(auto members, store->Members());
  // Async jobs: workers come and go as in an elastic job; no minimum.
  JobStateOptions so{o.listen_host, o.join_timeout, o.peer_timeout, o.elastic || o.async,
                     o.async ? 1 : o.min_workers, o.max_workers};
  so.rosters = !o.async;  // async workers ask for units and never read a roster
  so.spares = o.async ? 0 : o.spares;
  std::unique_ptr<AsyncUnits> async;
  if (o.async) {
    WorkQueueOptions wo;
    wo.total_steps = o.total_steps;
    wo.unit_steps = o.unit_steps;
    wo.shards = o.shards;
    wo.lease_ms = o.lease.count();
    wo.max_attempts = o.max_attempts;
    TENAX_ASSIGN_OR_RETURN(auto queue, WorkQueue::Open(o.state_path, wo));
    TENAX_ASSIGN_OR_RETURN(WorkQueueCounts counts, queue->Counts());
    spdlog::info("job {}: {} work units of up to {} steps ({} steps), {} shard(s); {} issued so far", job.job_id,
                 counts.units, o.unit_steps, o.total_steps, o.shards, counts.units_issued);
    async = std::make_unique<AsyncUnits>(*node, job.job_id, std::move(queue), o.shards, o.total_steps);
  }
  ProgressBook book(job.job_id, o.async, o.async ? o.total_steps : 0);
  JobStateMachine machine(so, std::move(job), std::move(members), Now());
  Coordinator c(*node, *store, std::move(machine), std::move(async), o.services, std::move(book), metrics.get());
  c.sigkill_on_first_done = o.sigkill_on_first_done;
  return c.Serve();
}

}  // namespace tenax::coord
