#include "tenax/coord/coordinator.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <map>
#include <optional>
#include <set>
#include <thread>

#include "tenax/coord/coord_codec.h"
#include "tenax/coord/job_store.h"
#include "tenax/core/files.h"
#include "tenax/core/signals.h"
#include "tenax/net/node.h"

namespace tenax::coord {
namespace {

using namespace std::chrono_literals;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class Coordinator {
 public:
  Coordinator(const CoordinatorOptions& o, net::Node& node, JobStore& store, JobRecord job)
      : o_(o), node_(node), store_(store), job_(std::move(job)) {}

  Status Serve();

 private:
  struct Live {
    net::PeerId peer = 0;
    bool connected = false;
  };
  void Handle(const net::ControlMessage& m);
  void OnJoin(net::PeerId from, const wire::JoinRequest& j);
  void OnLost(int rank, const std::string& why);
  void Fail(int rank, const std::string& host, const std::string& reason);
  void Broadcast(uint32_t kind, const std::string& payload, std::optional<net::PeerId> except = std::nullopt);
  void Send(net::PeerId peer, uint32_t kind, const std::string& payload);
  void SendRoster();
  void Drop(net::PeerId peer, const std::string& why);
  std::optional<int> RankOf(net::PeerId peer) const;
  std::string Label(net::PeerId peer) const;
  Status Persist(const MemberRecord& m);

  const CoordinatorOptions& o_;
  net::Node& node_;
  JobStore& store_;
  JobRecord job_;
  std::map<int, MemberRecord> members_;
  std::map<int, Live> live_;
  std::set<net::PeerId> watchers_;
  std::string done_summary_;
  Status io_error_;
  // A worker's report of a failure is held back briefly: when a rank dies,
  // its peers often notice (and report "waiting for rank R") before the
  // coordinator sees R's connection drop, and R is the one to name.
  struct PendingReport {
    int reporter = 0;
    std::string host, reason;
    SteadyClock::time_point until;
  };
  std::optional<PendingReport> pending_report_;
 public:
  void FlushPendingReport(bool force);
};

void Coordinator::FlushPendingReport(bool force) {
  if (!pending_report_ || (!force && SteadyClock::now() < pending_report_->until)) return;
  PendingReport p = *pending_report_;
  pending_report_.reset();
  Fail(p.reporter, p.host, p.reason);
}

std::string Coordinator::Label(net::PeerId peer) const {
  auto info = node_.Info(peer);
  return info.ok() ? info->address + (info->name.empty() ? "" : " (" + info->name + ")") : std::to_string(peer);
}

std::optional<int> Coordinator::RankOf(net::PeerId peer) const {
  for (const auto& [rank, live] : live_) {
    if (live.connected && live.peer == peer) return rank;
  }
  return std::nullopt;
}

Status Coordinator::Persist(const MemberRecord& m) {
  Status st = store_.PutMember(m);
  if (!st.ok() && io_error_.ok()) io_error_ = st;
  return st;
}

void Coordinator::Send(net::PeerId peer, uint32_t kind, const std::string& payload) {
  if (Status st = node_.SendControl(peer, kind, payload, Deadline::After(2s)); !st.ok()) {
    spdlog::warn("job {}: message to {} not sent: {}", job_.job_id, Label(peer), st.message());
  }
}

void Coordinator::Broadcast(uint32_t kind, const std::string& payload, std::optional<net::PeerId> except) {
  for (const auto& [rank, live] : live_) {
    if (live.connected && live.peer != except) Send(live.peer, kind, payload);
  }
  for (net::PeerId w : watchers_) Send(w, kind, payload);
}

void Coordinator::Drop(net::PeerId peer, const std::string& why) {
  spdlog::warn("job {}: refusing {}: {}", job_.job_id, Label(peer), why);
  wire::JoinReply r;
  r.set_error(why);
  Send(peer, kJoinReplyKind, r.SerializeAsString());
  node_.Disconnect(peer, Deadline::After(500ms));
}

void Coordinator::SendRoster() {
  wire::Roster roster;
  roster.set_generation(job_.generation);
  for (const auto& [rank, m] : members_) {
    auto* e = roster.add_members();
    e->set_rank(static_cast<uint32_t>(rank));
    e->set_name(m.name);
    e->set_host(m.host);
    e->set_port(m.port);
  }
  const std::string bytes = roster.SerializeAsString();
  for (const auto& [rank, live] : live_) {
    if (live.connected) Send(live.peer, kRosterKind, bytes);
  }
}

void Coordinator::OnJoin(net::PeerId from, const wire::JoinRequest& j) {
  if (j.job_id() != job_.job_id) {
    return Drop(from, "this coordinator serves job '" + job_.job_id + "', not '" + j.job_id() + "'");
  }
  if (job_.state == "finished" || job_.state == "failed") {
    return Drop(from, "job '" + job_.job_id + "' has already " + job_.state);
  }
  int rank = j.requested_rank();
  auto existing = members_.find(rank);
  if (j.rejoin()) {
    // A worker of a running job whose coordinator restarted.
    if (existing == members_.end() || existing->second.name != j.name()) {
      return Drop(from, "rank " + std::to_string(rank) + " of job '" + job_.job_id + "' is not '" + j.name() + "'");
    }
  } else {
    if (job_.state != "joining") {
      return Drop(from, "job '" + job_.job_id + "' is already running with all " + std::to_string(job_.world) +
                            " workers");
    }
    if (rank >= job_.world) {
      return Drop(from, "rank " + std::to_string(rank) + " asked for, but job '" + job_.job_id + "' has " +
                            std::to_string(job_.world) + " workers");
    }
    if (rank < 0) {
      for (rank = 0; rank < job_.world && members_.count(rank); ++rank) {
      }
      if (rank == job_.world) return Drop(from, "job '" + job_.job_id + "' is full");
    } else if (existing != members_.end() && live_[rank].connected) {
      return Drop(from, "rank " + std::to_string(rank) + " is already taken by " + existing->second.name);
    }
  }
  MemberRecord m{rank, j.name(), j.host(), static_cast<uint16_t>(j.port()),
                 j.rejoin() ? members_[rank].state : "joined",
                 NowMs() + std::chrono::duration_cast<std::chrono::milliseconds>(o_.peer_timeout).count()};
  members_[rank] = m;
  live_[rank] = {from, true};
  if (!Persist(m).ok()) return;
  spdlog::info("job {}: rank {} {} {} ({}:{})", job_.job_id, rank, j.rejoin() ? "rejoined:" : "joined:", j.name(),
               j.host(), j.port());
  wire::JoinReply reply;
  reply.set_rank(static_cast<uint32_t>(rank));
  reply.set_world(static_cast<uint32_t>(job_.world));
  reply.set_config_toml(job_.config_toml);
  reply.set_generation(job_.generation);
  Send(from, kJoinReplyKind, reply.SerializeAsString());
  if (job_.state == "joining" && static_cast<int>(members_.size()) == job_.world) {
    ++job_.generation;
    job_.state = "running";
    if (Status st = store_.SetJobState("running", "", job_.generation); !st.ok()) io_error_ = st;
    spdlog::info("job {}: all {} workers joined (generation {}); publishing the roster", job_.job_id, job_.world,
                 job_.generation);
    SendRoster();
  }
}

void Coordinator::Fail(int rank, const std::string& host, const std::string& reason) {
  if (job_.state == "failed" || job_.state == "finished") return;
  job_.state = "failed";
  job_.failure = "rank " + std::to_string(rank) + " on " + host + " failed: " + reason;
  spdlog::error("job {}: {}", job_.job_id, job_.failure);
  if (Status st = store_.SetJobState("failed", job_.failure, job_.generation); !st.ok()) io_error_ = st;
  if (auto it = members_.find(rank); it != members_.end()) {
    it->second.state = "failed";
    (void)Persist(it->second);
  }
  wire::Failure f;
  f.set_rank(static_cast<uint32_t>(rank));
  f.set_host(host);
  f.set_reason(reason);
  Broadcast(kFailureKind, f.SerializeAsString());
}

void Coordinator::OnLost(int rank, const std::string& why) {
  live_[rank].connected = false;
  const MemberRecord& m = members_[rank];
  if (m.state == "done") return;  // finished and left: expected
  if (pending_report_ && pending_report_->reporter == rank) {
    // The reporter left after telling us why; its verdict still waits out
    // the grace period in case the rank it waited for turns out lost.
    return;
  }
  if (job_.state == "joining") {
    // Not started yet: the rank is free again.
    spdlog::warn("job {}: rank {} ({}) left before the job started: {}", job_.job_id, rank, m.name, why);
    (void)store_.RemoveMember(rank);
    members_.erase(rank);
    live_.erase(rank);
    return;
  }
  Fail(rank, m.host, "lost its connection (" + m.name + "): " + why);
}

void Coordinator::Handle(const net::ControlMessage& m) {
  const std::string label = Label(m.from);
  auto rank = RankOf(m.from);
  switch (m.kind) {
    case kJoinRequestKind: {
      auto j = DecodeJoinRequest(m.payload, label);
      if (!j.ok()) return Drop(m.from, j.status().message());
      return OnJoin(m.from, *j);
    }
    case kWatchKind: {
      auto w = DecodeWatch(m.payload, label);
      if (!w.ok() || w->job_id() != job_.job_id) {
        return Drop(m.from, w.ok() ? "this coordinator serves job '" + job_.job_id + "'" : w.status().message());
      }
      watchers_.insert(m.from);
      if (job_.state == "failed") {
        wire::Failure f;
        f.set_reason(job_.failure);
        Send(m.from, kFailureKind, f.SerializeAsString());
      }
      return;
    }
    case kProgressKind: {
      if (!rank) return;
      auto p = DecodeProgress(m.payload, label);
      if (!p.ok()) return Drop(m.from, p.status().message());
      for (net::PeerId w : watchers_) Send(w, kProgressKind, m.payload);
      return;
    }
    case kDoneKind: {
      if (!rank) return;
      auto d = DecodeDone(m.payload, label);
      if (!d.ok()) return Drop(m.from, d.status().message());
      members_[*rank].state = "done";
      (void)Persist(members_[*rank]);
      if (!d->summary_json().empty()) done_summary_ = d->summary_json();
      spdlog::info("job {}: rank {} finished", job_.job_id, *rank);
      return;
    }
    case kFailureKind: {
      if (!rank) return;
      auto f = DecodeFailure(m.payload, label);
      if (!f.ok()) return Drop(m.from, f.status().message());
      if (!pending_report_) {
        const auto grace = std::min<std::chrono::milliseconds>(o_.peer_timeout / 2 + 1s, 5s);
        pending_report_ = PendingReport{*rank, members_[*rank].host, f->reason(), SteadyClock::now() + grace};
      }
      return;
    }
    default:
      return Drop(m.from, "unexpected message kind " + std::to_string(m.kind));
  }
}

Status Coordinator::Serve() {
  // Resume: members recorded before a restart get join_timeout to rejoin.
  TENAX_ASSIGN_OR_RETURN(auto stored, store_.Members());
  for (auto& m : stored) {
    members_[m.rank] = m;
    live_[m.rank] = {0, false};
  }
  const auto started = SteadyClock::now();
  auto last_lease = SteadyClock::now();
  std::optional<SteadyClock::time_point> ended;
  while (true) {
    if (StopRequested()) return Cancelled("coordinator stopped by signal " + std::to_string(StopSignal()));
    if (!io_error_.ok()) return io_error_;
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
      Handle(*msg);
      idle = false;
    }
    // Node waits poll; an idle coordinator must not take a core from the
    // workers (pacing, not synchronisation: messages wait in UCX meanwhile).
    if (idle) std::this_thread::sleep_for(2ms);
    for (auto& [rank, live] : live_) {
      if (!live.connected) continue;
      if (Status st = node_.PeerStatus(live.peer); !st.ok()) OnLost(rank, st.message());
    }
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      it = node_.PeerStatus(*it).ok() ? std::next(it) : watchers_.erase(it);
    }
    FlushPendingReport(false);
    const auto now = SteadyClock::now();
    if (now - last_lease >= 1s) {
      last_lease = now;
      std::vector<int> alive;
      for (auto& [rank, live] : live_) {
        if (live.connected) alive.push_back(rank);
      }
      if (!alive.empty()) {
        TENAX_RETURN_IF_ERROR(store_.RenewLeases(
            alive, NowMs() + std::chrono::duration_cast<std::chrono::milliseconds>(o_.peer_timeout).count()));
      }
    }
    if (job_.state == "joining" && now - started > o_.join_timeout) {
      Fail(static_cast<int>(members_.size()), o_.listen_host,
           "only " + std::to_string(members_.size()) + " of " + std::to_string(job_.world) + " workers joined within " +
               std::to_string(o_.join_timeout.count() / 1000.0) + " s");
    }
    if (job_.state == "running" || (job_.state == "joining" && !members_.empty())) {
      // A member recorded before a restart that never came back.
      for (auto& [rank, live] : live_) {
        if (!live.connected && live.peer == 0 && members_[rank].state == "joined" && now - started > o_.join_timeout) {
          Fail(rank, members_[rank].host, "did not reconnect to the restarted coordinator within the join timeout");
          break;
        }
      }
    }
    if (job_.state == "running") {
      bool all_done = true;
      for (auto& [rank, m] : members_) all_done = all_done && m.state == "done";
      if (all_done) {
        job_.state = "finished";
        TENAX_RETURN_IF_ERROR(store_.SetJobState("finished", "", job_.generation));
        spdlog::info("job {}: finished", job_.job_id);
        wire::Done d;
        d.set_rank(static_cast<uint32_t>(job_.world));
        d.set_summary_json(done_summary_);
        for (net::PeerId w : watchers_) Send(w, kDoneKind, d.SerializeAsString());
      }
    }
    if (job_.state == "finished" || job_.state == "failed") {
      // Linger briefly so that the last messages leave and workers see the verdict.
      if (!ended) ended = now;
      bool anyone = !watchers_.empty();
      for (auto& [rank, live] : live_) anyone = anyone || live.connected;
      if (!anyone || now - *ended > 3s) break;
    }
  }
  if (job_.state == "failed") return FailedPrecondition(job_.failure);
  return Status::Ok();
}

}  // namespace

Status RunCoordinator(const CoordinatorOptions& o) {
  if (o.world < 1) return InvalidArgument("a job needs at least one worker");
  TENAX_ASSIGN_OR_RETURN(auto store, JobStore::Open(o.state_path));
  TENAX_ASSIGN_OR_RETURN(JobRecord job, store->OpenJob(o.job_id, o.config_toml, o.world));
  if (job.resumed) {
    spdlog::info("job {}: resuming from {} (state {}, generation {})", job.job_id, o.state_path, job.state,
                 job.generation);
    if (job.state == "finished") return Status::Ok();
    if (job.state == "failed") return FailedPrecondition(job.failure);
  }
  // A restarted coordinator must get its port back while the workers'
  // old connections to it linger in the kernel (UCX reads this only from
  // the environment; this process is the coordinator and nothing else).
  ::setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  net::NodeOptions no;
  no.name = "coordinator";
  no.secret = o.secret;
  no.peer_timeout = o.peer_timeout;
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(o.listen_host, o.port));
  if (!o.port_file.empty()) TENAX_RETURN_IF_ERROR(WriteFileAtomic(o.port_file, std::to_string(port) + "\n"));
  spdlog::info("coordinator for job {} ({} workers) listening on {}:{}, state in {}", job.job_id, o.world,
               o.listen_host, port, o.state_path);
  Coordinator c(o, *node, *store, std::move(job));
  return c.Serve();
}

}  // namespace tenax::coord
