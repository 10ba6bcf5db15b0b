#include "async_units.h"

#include <spdlog/spdlog.h>

#include "tenax/coord/coord_codec.h"

namespace tenax::coord {
namespace {
using namespace std::chrono_literals;
}

AsyncUnits::AsyncUnits(net::Node& node, std::string job_id, std::unique_ptr<WorkQueue> queue, int shards,
                       int64_t total_steps)
    : node_(node), job_id_(std::move(job_id)), queue_(std::move(queue)), shards_(shards), total_steps_(total_steps) {}

int64_t AsyncUnits::Now() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AsyncUnits::Send(net::PeerId peer, uint32_t kind, const std::string& payload) {
  if (Status st = node_.SendControl(peer, kind, payload, Deadline::After(2s)); !st.ok()) {
    spdlog::warn("job {}: message to peer {} not sent: {}", job_id_, peer, st.message());
  }
}

bool AsyncUnits::Handles(uint32_t kind) const {
  return kind == kUnitRequestKind || kind == kUnitReleaseKind || kind == kShardHelloKind || kind == kShardCheckKind ||
         kind == kShardMergedKind;
}

std::optional<int> AsyncUnits::ShardOf(net::PeerId conn) const {
  for (const auto& [s, l] : links_) {
    if (l.conn == conn) return s;
  }
  return std::nullopt;
}

std::vector<net::PeerId> AsyncUnits::ShardConnections() const {
  std::vector<net::PeerId> out;
  for (const auto& [s, l] : links_) out.push_back(l.conn);
  return out;
}

void AsyncUnits::OnShardLost(net::PeerId conn, const std::string& why) {
  if (auto s = ShardOf(conn)) {
    spdlog::warn("job {}: shard {} lost ({}); its units wait until it is back", job_id_, *s, why);
    links_.erase(*s);
  }
}

Status AsyncUnits::OnMemberLost(const std::string& member, const std::string& why) {
  TENAX_ASSIGN_OR_RETURN(int n, queue_->ExpireLeasesOf(member, why, Now()));
  if (n > 0) spdlog::info("job {}: {} is gone; its {} unit lease(s) are issued again now", job_id_, member, n);
  if (finisher_ && *finisher_ == member && !finisher_done_) {
    spdlog::warn("job {}: {} was lost ({}) before it wrote the job's outputs; the next worker to ask finishes the job",
                 job_id_, member, why);
    finisher_.reset();
  }
  return Status::Ok();
}

void AsyncUnits::OnMemberDone(const std::string& member) {
  if (finisher_ && *finisher_ == member) finisher_done_ = true;
}

void AsyncUnits::TellShards(uint32_t kind, const std::string& payload) {
  for (const auto& [s, l] : links_) Send(l.conn, kind, payload);
}

Status AsyncUnits::Handle(const net::ControlMessage& m, const std::string& member) {
  const auto shard = ShardOf(m.from);
  auto ignore = [&](const char* what) {
    spdlog::warn("job {}: ignoring {} from peer {}, which is not {}", job_id_, m.kind, m.from, what);
    return Status::Ok();
  };
  switch (m.kind) {
    case kShardHelloKind:
      return OnShardHello(m);
    case kUnitRequestKind:
      return member.empty() ? ignore("a member") : OnUnitRequest(m, member);
    case kUnitReleaseKind: {
      if (member.empty()) return ignore("a member");
      auto r = DecodeUnitRelease(m.payload, member);
      if (!r.ok()) return r.status();
      Status st = queue_->Release(static_cast<int64_t>(r->unit()), static_cast<int64_t>(r->attempt()),
                                  member + ": " + r->reason(), Now());
      if (st.code() == StatusCode::kInvalidArgument) {
        spdlog::warn("job {}: {} released what it does not hold: {}", job_id_, member, st.message());
        return Status::Ok();
      }
      if (st.ok()) spdlog::info("job {}: {} gave unit {} back ({})", job_id_, member, r->unit(), r->reason());
      return st;
    }
    case kShardCheckKind:
      return shard ? OnShardCheck(m, *shard) : ignore("a shard");
    case kShardMergedKind:
      return shard ? OnShardMerged(m, *shard) : ignore("a shard");
    default:
      return Internal("AsyncUnits asked to handle kind " + std::to_string(m.kind));
  }
}

Status AsyncUnits::OnShardHello(const net::ControlMessage& m) {
  auto h = DecodeShardHello(m.payload, "peer " + std::to_string(m.from));
  wire::ShardWelcome w;
  auto refuse = [&](const std::string& why) {
    spdlog::warn("job {}: refusing a shard: {}", job_id_, why);
    w.set_error(why);
    Send(m.from, kShardWelcomeKind, w.SerializeAsString());
    node_.Disconnect(m.from, Deadline::After(500ms));
    return Status::Ok();
  };
  if (!h.ok()) return refuse(h.status().message());
  if (h->job_id() != job_id_) return refuse("a shard of job \"" + h->job_id() + "\", this is \"" + job_id_ + "\"");
  if (static_cast<int>(h->shards()) != shards_) {
    return refuse("a shard of " + std::to_string(h->shards()) + " shards; this job has " + std::to_string(shards_));
  }
  const int s = static_cast<int>(h->shard());
  if (auto it = links_.find(s); it != links_.end() && it->second.conn != m.from && node_.PeerStatus(it->second.conn).ok()) {
    return refuse("shard " + std::to_string(s) + " is already served by another process");
  }
  std::vector<int64_t> reopened;
  if (h->first_hello()) {
    TENAX_ASSIGN_OR_RETURN(reopened, queue_->ShardRestored(s, static_cast<int64_t>(h->restored_merges()), Now()));
  }
  links_[s] = ShardLink{m.from, h->host(), h->port()};
  w.set_reopened_units(reopened.size());
  w.set_total_steps(total_steps_);
  Send(m.from, kShardWelcomeKind, w.SerializeAsString());
  if (!h->first_hello()) {
    // A reconnect (this coordinator restarted, or the link broke): a
    // "merge" verdict, or the shard's report of the merge, may have been
    // lost with the old connection. Tell it again; the shard merges what
    // it still holds and re-tells what it merged (RecordMerged takes the
    // same report twice as once).
    TENAX_ASSIGN_OR_RETURN(auto accepted, queue_->AcceptedNotMerged(s));
    for (const auto& [unit, attempt] : accepted) {
      wire::ShardVerdict v;
      v.set_unit(static_cast<uint64_t>(unit));
      v.set_attempt(static_cast<uint64_t>(attempt));
      v.set_verdict("merge");
      v.set_reason("told again after the shard reconnected");
      Send(m.from, kShardVerdictKind, v.SerializeAsString());
    }
    if (!accepted.empty()) {
      spdlog::info("job {}: shard {} reconnected; {} accepted unit(s) without its merge report: told \"merge\" again",
                   job_id_, s, accepted.size());
    }
  }
  spdlog::info("job {}: shard {} at {}:{} registered ({} merges in its checkpoint{})", job_id_, s, h->host(), h->port(),
               h->restored_merges(),
               reopened.empty() ? "" : "; " + std::to_string(reopened.size()) + " unit(s) re-opened for it");
  return Status::Ok();
}

Status AsyncUnits::OnUnitRequest(const net::ControlMessage& m, const std::string& member) {
  auto r = DecodeUnitRequest(m.payload, member);
  if (!r.ok()) return r.status();
  wire::UnitGrant g;
  g.set_total_steps(total_steps_);
  for (const auto& [s, l] : links_) {
    auto* a = g.add_shard_addresses();
    a->set_shard(static_cast<uint32_t>(s));
    a->set_host(l.host);
    a->set_port(l.port);
  }
  if (static_cast<int>(links_.size()) < shards_) {
    g.set_state("wait");  // not every shard is up (yet, or again)
    Send(m.from, kUnitGrantKind, g.SerializeAsString());
    return Status::Ok();
  }
  // Leases are held by the member (its label), so that its loss expires them.
  const std::string& worker = member;
  TENAX_ASSIGN_OR_RETURN(LeaseOutcome lease, queue_->Lease(worker, Now()));
  switch (lease.kind) {
    case LeaseOutcome::Kind::kWait:
      g.set_state("wait");
      break;
    case LeaseOutcome::Kind::kAllDone:
      if (!finisher_ || *finisher_ == member) {
        finisher_ = member;
        g.set_state("done");
        g.set_finisher(true);
      } else if (!finisher_done_) {
        // The others wait until the finisher has written the job's
        // outputs: if it is lost first, one of them finishes the job
        // instead. (A finisher SIGKILLed while it evaluated the final model
        // ended a soak round without summary.json, the others gone.)
        g.set_state("wait");
      } else {
        g.set_state("done");
      }
      break;
    case LeaseOutcome::Kind::kUnit: {
      const UnitLease& l = lease.lease;
      g.set_state("unit");
      g.set_unit(static_cast<uint64_t>(l.unit));
      g.set_attempt(static_cast<uint64_t>(l.attempt));
      g.set_start_step(l.start_step);
      g.set_steps(l.steps);
      g.set_lease_ms(std::max<int64_t>(0, l.deadline_ms - Now()));
      for (int s : l.shards) g.add_shards(static_cast<uint32_t>(s));
      spdlog::debug("job {}: unit {} attempt {} (steps {}..{}) to {}", job_id_, l.unit, l.attempt, l.start_step,
                    l.start_step + l.steps, worker);
      break;
    }
  }
  Send(m.from, kUnitGrantKind, g.SerializeAsString());
  return Status::Ok();
}

Status AsyncUnits::OnShardCheck(const net::ControlMessage& m, int shard) {
  auto c = DecodeShardCheck(m.payload, "shard " + std::to_string(shard));
  if (!c.ok()) return c.status();
  if (static_cast<int>(c->shard()) != shard) {
    spdlog::warn("job {}: shard {} reported a check as shard {}; ignored", job_id_, shard, c->shard());
    return Status::Ok();
  }
  auto v = queue_->ReportCheck(static_cast<int64_t>(c->unit()), static_cast<int64_t>(c->attempt()), shard, c->valid(),
                               c->reason(), c->steps_done(), Now());
  wire::ShardVerdict out;
  out.set_unit(c->unit());
  out.set_attempt(c->attempt());
  if (!v.ok()) {
    if (v.status().code() != StatusCode::kInvalidArgument) return v.status();
    // A result the queue does not know (an attempt never issued, a unit of
    // nothing): refused, nothing changes.
    spdlog::warn("job {}: shard {}: {}", job_id_, shard, v.status().message());
    out.set_verdict("stale");
    out.set_reason(v.status().message());
    Send(m.from, kShardVerdictKind, out.SerializeAsString());
    return Status::Ok();
  }
  out.set_reason(v->reason);
  switch (v->kind) {
    case UnitVerdict::Kind::kPending:
      return Status::Ok();
    case UnitVerdict::Kind::kAccepted:
      out.set_verdict("merge");
      spdlog::debug("job {}: unit {} attempt {} accepted", job_id_, c->unit(), c->attempt());
      for (int s : v->merge_shards) {
        if (auto it = links_.find(s); it != links_.end()) Send(it->second.conn, kShardVerdictKind, out.SerializeAsString());
      }
      return Status::Ok();
    case UnitVerdict::Kind::kRejected:
      out.set_verdict("rejected");
      spdlog::warn("job {}: unit {} attempt {} rejected: {}", job_id_, c->unit(), c->attempt(), v->reason);
      TellShards(kShardVerdictKind, out.SerializeAsString());  // every shard holding a copy drops it
      return Status::Ok();
    case UnitVerdict::Kind::kDuplicate:
      out.set_verdict("duplicate");
      break;
    case UnitVerdict::Kind::kStale:
      out.set_verdict("stale");
      break;
  }
  spdlog::info("job {}: unit {} attempt {} from shard {}: {} {}", job_id_, c->unit(), c->attempt(), shard,
               out.verdict(), v->reason);
  Send(m.from, kShardVerdictKind, out.SerializeAsString());
  return Status::Ok();
}

Status AsyncUnits::OnShardMerged(const net::ControlMessage& m, int shard) {
  auto mm = DecodeShardMerged(m.payload, "shard " + std::to_string(shard));
  if (!mm.ok()) return mm.status();
  Status st = queue_->RecordMerged(static_cast<int64_t>(mm->unit()), static_cast<int64_t>(mm->attempt()), shard,
                                   static_cast<int64_t>(mm->merge_seq()), Now());
  if (st.code() == StatusCode::kInvalidArgument) {
    spdlog::warn("job {}: shard {}: {}", job_id_, shard, st.message());
    return Status::Ok();
  }
  return st;
}

Result<std::string> AsyncUnits::OnTimer(int64_t wall_ms) {
  TENAX_ASSIGN_OR_RETURN(int expired, queue_->ExpireLeases(wall_ms));
  if (expired > 0) spdlog::info("job {}: {} lease(s) expired; their units are re-issued", job_id_, expired);
  TENAX_ASSIGN_OR_RETURN(WorkQueueCounts c, queue_->Counts());
  if (c.failed_units > 0) {
    return std::to_string(c.failed_units) + " work unit(s) failed every attempt (see the coordinator's log and the " +
           "unit_event table of its state file)";
  }
  return std::string();
}

}  // namespace tenax::coord
