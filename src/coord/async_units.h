// The coordinator's side of an asynchronous job (mode "async"): it hands
// out work units to members (UnitRequest -> UnitGrant), takes leases back
// (UnitRelease), registers the parameter-server shards (ShardHello), and
// turns their checks into verdicts and their merges into the log, all
// through the WorkQueue (work_queue.h), whose every decision is one SQLite
// transaction. Internal to the coordinator (coordinator.cc).
//
// Threading: the coordinator's thread. Failures: bad or unexpected
// messages from a peer are answered or logged and change nothing; the
// queue's IoError is returned (the coordinator then stops: deciding
// without durable state could merge a unit twice).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "coord_wire.pb.h"
#include "tenax/coord/work_queue.h"
#include "tenax/net/node.h"

namespace tenax::coord {

class AsyncUnits {
 public:
  AsyncUnits(net::Node& node, std::string job_id, std::unique_ptr<WorkQueue> queue, int shards, int64_t total_steps);

  // True for the kinds handled here. `member` names the sender when it is
  // a member of the job ("" otherwise: only shards may speak then).
  bool Handles(uint32_t kind) const;
  Status Handle(const net::ControlMessage& m, const std::string& member);

  // Expires leases; a non-empty string when the job must fail (a unit
  // failed every attempt), naming the unit.
  Result<std::string> OnTimer(int64_t wall_ms);
  // Connections of registered shards (to watch for loss and to tell the
  // job's end).
  std::vector<net::PeerId> ShardConnections() const;
  void OnShardLost(net::PeerId conn, const std::string& why);
  // A member's connection was lost (`member` as Handle names it): its
  // leases expire at once, and if it was the finisher and had not finished,
  // the next worker to ask finishes the job. The queue's IoError is returned.
  Status OnMemberLost(const std::string& member, const std::string& why);
  // A member reported Done (it wrote its outputs and left).
  void OnMemberDone(const std::string& member);
  // The job ended: every shard gets `kind` (Done or Failure) with `payload`.
  void TellShards(uint32_t kind, const std::string& payload);
  // For summary.json: units_issued, units_reissued, results_rejected...
  Result<WorkQueueCounts> Counts() { return queue_->Counts(); }

 private:
  struct ShardLink {
    net::PeerId conn = 0;
    std::string host;
    uint32_t port = 0;
  };
  void Send(net::PeerId peer, uint32_t kind, const std::string& payload);
  Status OnShardHello(const net::ControlMessage& m);
  Status OnUnitRequest(const net::ControlMessage& m, const std::string& member);
  Status OnShardCheck(const net::ControlMessage& m, int shard);
  Status OnShardMerged(const net::ControlMessage& m, int shard);
  std::optional<int> ShardOf(net::PeerId conn) const;
  int64_t Now() const;

  net::Node& node_;
  std::string job_id_;
  std::unique_ptr<WorkQueue> queue_;
  int shards_;
  std::map<int, ShardLink> links_;
  std::optional<std::string> finisher_;  // the member that evaluates and writes the outputs
  bool finisher_done_ = false;           // ... and has reported Done
  int64_t total_steps_ = 0;
};

}  // namespace tenax::coord
