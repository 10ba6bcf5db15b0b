// The zone-hierarchical allreduce: an in-place float32 sum across a Group
// whose members sit in several zones (cloud availability zones, racks)
// with slow links between the zones and fast links inside them.
//
// For k zones of z members each (rank order decides a member's index i
// inside its zone, and the zones' order is that of their lowest ranks),
// every piece of a segment runs three steps:
//   1. reduce-scatter inside the zone (a ring of z): member i ends with
//      the zone's sum of chunk c_i of the piece;
//   2. allreduce of chunk c_i across the zones, among the k members of
//      index i (one per zone): only zone-sums cross the slow links, each
//      cut into z parts, so every member's cross-zone link carries 1/z of
//      them and all of them are used at once (between two zones, chunks up
//      to 256 KiB go as a direct exchange: the same bytes as a ring of
//      two, in one round, not two);
//   3. allgather inside the zone: every member ends with the whole sum.
// Across all the zone's members, a piece crosses between a pair of zones
// once each way (2(k-1)/k of a zone-sum per member for k zones), where a
// flat ring sends 2(n-1)/n of it across a slow link at every one of its
// 2(n-1) steps. Pieces are pipelined, also across Start calls (gradient
// buckets): piece j's cross-zone step runs while piece j+1 is reduced
// inside the zone. Each step has its own queue (the allgathers run on a
// second collective over the same buffer), so every queue gets its
// operations in piece order on every member whatever the timing.
//
// Every element is summed in one fixed order (the zone ring's order, then
// the cross group's), so every member of every zone ends with the same
// bits. The order differs from the flat ring's, so the bits may differ
// from a flat ring's result (within float rounding).
//
// Zones must have equal sizes (the caller, ChooseAllreduce in
// sched/place/allreduce_choice.h, falls back to the flat ring otherwise);
// Create refuses others with InvalidArgument.
//
// Memory: the zone step's buffer (count floats, data()) and a cross-zone
// buffer of the same size, both registered with the transport, and three
// scratch regions.
//
// Threading and failures: as comm::Allreduce (a lost member, a deadline or
// an interrupt fails this and every later call, naming the rank).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tenax/comm/allreduce.h"
#include "tenax/comm/group.h"

namespace tenax::comm {

class HierarchicalAllreduce : public SumCollective {
 public:
  // Collective over `group`: `zone_of_rank[r]` names rank r's zone (every
  // rank passes the same list). Sub-groups of the zone and of the cross
  // members are formed over `group`'s connections; `group` must outlive this.
  static Result<std::unique_ptr<HierarchicalAllreduce>> Create(Group& group,
                                                               const std::vector<std::string>& zone_of_rank,
                                                               size_t count, Deadline deadline,
                                                               AllreduceOptions options = {});

  // SumCollective.
  Status Start(size_t offset, size_t count, float scale = 1.0f, const float* input = nullptr) override;
  Result<uint64_t> Poll() override;
  Status Wait(Deadline deadline) override;
  void SetInterrupt(std::function<Status()> interrupt) override;
  size_t count() const override { return zone_->count(); }
  float* data() const override { return zone_->data(); }
  int waiting_for() const override;
  const char* algorithm() const override { return "hierarchical"; }
  uint64_t bytes_sent_to(int rank) const override;

  int zones() const { return zones_; }
  int zone_size() const { return zone_size_; }
  // Bytes this rank wrote to members of its own zone / of other zones.
  uint64_t zone_bytes_sent() const { return zone_->bytes_sent() + gather_->bytes_sent(); }
  uint64_t cross_zone_bytes_sent() const { return cross_ ? cross_->bytes_sent() : 0; }

 private:
  struct Piece {
    size_t offset = 0, count = 0;  // in data()
    Allreduce::Span mine;          // the chunk this member carries across zones, relative to offset
  };
  struct Job {
    std::vector<Piece> pieces;
    float scale = 1.0f;
    const float* input = nullptr;
    size_t reduced = 0;   // pieces whose zone reduce-scatter completed
    size_t crossed = 0;   // pieces whose cross-zone sum completed (and was copied back)
    size_t gathered = 0;  // pieces whose zone allgather completed
  };
  HierarchicalAllreduce() = default;
  Status Fail(Status st);

  std::unique_ptr<Group> zone_group_, cross_group_;
  std::vector<int> zone_ranks_, cross_ranks_;  // sub-group rank -> rank in the whole group
  // zone_ runs the zone reduce-scatters and owns the buffer; gather_, over
  // the same buffer, the zone allgathers; cross_ the cross-zone sums. Each
  // queue gets its operations in piece order on every member, whatever the
  // timing, so jobs may overlap (a window of pieces in flight).
  std::unique_ptr<Allreduce> zone_, gather_, cross_;
  int zones_ = 1, zone_size_ = 1;
  size_t piece_floats_ = 0;
  std::deque<Job> jobs_;
  // Operations queued on zone_ / cross_ so far, and completions seen:
  // Allreduce::Poll counts completions since Create.
  uint64_t zone_done_ = 0, gather_done_ = 0, cross_done_ = 0;
  uint64_t completed_ = 0;
  Status failed_;
  std::function<Status()> interrupt_;
};

}  // namespace tenax::comm
