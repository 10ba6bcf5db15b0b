// In-place float32 sum across a Group, over registered memory: the peers
// write straight into our buffer (allgather) and into a scratch region
// (reduce phase); no message is serialised and nothing is copied out.
//
// Algorithms, chosen per segment by size (the same on every rank):
// - direct, for segments up to AllreduceOptions::direct_max_bytes: every
//   rank writes its segment into a slot of every other rank, then each sums
//   the slots in rank order. One round of latency.
// - ring, above that: reduce-scatter then allgather around the ring
//   (rank r sends to r+1), 2(p-1) steps moving 2(p-1)/p of the data per
//   rank. The reduce-scatter writes into the right neighbour's scratch
//   slots; the allgather writes the finished chunk into the right
//   neighbour's buffer in place.
// Every message is one put, a fence and a put of a per-sender counter into
// the receiver's signal word (or, when the peers' memory is mapped here,
// a memcpy and a release store); a receiver acknowledges consumed scratch slots
// before the sender may reuse them. Both algorithms give bitwise identical
// results on every rank (each element is summed in one fixed order), which
// keeps data-parallel replicas identical.
//
// Segments are queued with Start and advanced by Poll, so a trainer can
// start a gradient bucket while backward is still running and keep
// computing; Wait completes the queue.
//
// Threading: uses the Group's Node from the Node's thread only.
// Failures: sticky. A lost member (PeerLost), a missed deadline
// (DeadlineExceeded naming the rank we were waiting for) or an interrupt
// fails the current and every later call; the buffer's contents are then
// unspecified.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tenax/comm/group.h"

namespace tenax::comm {

// Which part of the ring a segment runs (see Allreduce::Start).
enum class RingPhase {
  kWhole,          // reduce-scatter then allgather: every rank ends with the whole sum
  kReduceScatter,  // only the reduce-scatter: rank r ends with the final sum of ReducedChunk(count, p, r)
  kAllgather,      // only the allgather: rank r brings ReducedChunk(count, p, r) (already final in its
                   // buffer), and every rank ends with every chunk
};

// An in-place float32 sum across a group, queued and advanced without
// blocking: the flat ring and direct algorithms (Allreduce) or the
// zone-hierarchical one (hierarchical_allreduce.h). Trainers hold this.
class SumCollective {
 public:
  virtual ~SumCollective() = default;
  // Queues an in-place sum of data[offset, offset + count) over all ranks,
  // multiplied by `scale`. Every rank must queue the same segments in the
  // same order. The segment must not be touched until it completes.
  // With `input`, the segment's values are read from input[0, count)
  // (caller memory, left unchanged) instead of data(), whose segment only
  // receives the result: a caller whose values live elsewhere saves the
  // copy into data(). `input` must stay valid and unchanged until the
  // segment completes. Ranks may mix both forms.
  virtual Status Start(size_t offset, size_t count, float scale = 1.0f, const float* input = nullptr) = 0;
  // Advances the queue without blocking; returns how many segments have
  // completed since creation.
  virtual Result<uint64_t> Poll() = 0;
  // Completes every queued segment.
  virtual Status Wait(Deadline deadline) = 0;
  // Start + Wait.
  Status Run(size_t offset, size_t count, float scale, Deadline deadline) {
    TENAX_RETURN_IF_ERROR(Start(offset, count, scale));
    return Wait(deadline);
  }
  // Consulted while waiting: a non-OK status aborts the wait with that
  // status (e.g. the coordinator announced a failed rank, or a stop signal).
  virtual void SetInterrupt(std::function<Status()> interrupt) = 0;
  virtual size_t count() const = 0;
  virtual float* data() const = 0;
  // After a DeadlineExceeded: the rank (of the whole group) the collective
  // was waiting for (-1: none).
  virtual int waiting_for() const = 0;
  // "ring" or "hierarchical", for summaries.
  virtual const char* algorithm() const = 0;
  // Bytes this rank has written into rank `rank`'s memory (data, not
  // signal words) since creation: with the ranks' zones, the bytes per
  // link class of a run's summary.
  virtual uint64_t bytes_sent_to(int rank) const = 0;
};

struct AllreduceOptions {
  size_t direct_max_bytes = 32 << 10;  // segments up to this size use the direct algorithm
  bool allow_mapping = true;           // plain stores into peers' memory when the transport maps it
  // Ring segments run as consecutive pieces of at most this size, so that a
  // chunk a peer just wrote into our scratch is summed while still in cache
  // (0 = one piece).
  size_t ring_piece_bytes = 1 << 20;
  // Ring pieces in flight at once when the peers are reached through the
  // transport (not mapped): each ring step of a piece waits for the link's
  // delay, so one piece at a time would pay 2(p-1) delays per piece; a
  // window keeps the link busy meanwhile. Every member must pass the same
  // value (it shapes the scratch region: refused at setup otherwise). On
  // mapped memory one piece runs at a time (microsecond hops; the summed
  // chunk stays in cache).
  size_t ring_window = 8;
  // Which allreduce this one is part of, sent with the setup offer: peers
  // whose string differs are refused (FailedPrecondition naming both), so
  // members that chose different algorithms fail at setup, not at a
  // deadline. "" = the flat ring.
  std::string algorithm;
};

class Allreduce : public SumCollective {
 public:
  // Collective: every rank calls it with the same `count`. The buffer of
  // `count` floats is allocated here, by the transport, zeroed: memory the
  // transport maps itself is what peers on the same host can write with a
  // plain copy (caller memory would make UCX emulate puts with messages).
  // Put the values to reduce there (data()), or make tensors views of it.
  static Result<std::unique_ptr<Allreduce>> Create(Group& group, size_t count, Deadline deadline,
                                                   AllreduceOptions options = {});
  // A second collective over `buffer_owner`'s group and buffer (it must
  // outlive this one), with its own scratch, op numbers and queue: the
  // hierarchical allreduce queues its zone reduce-scatters on one and its
  // allgathers on the other, so each queue has one order on every member
  // while jobs overlap. Collective, like Create.
  static Result<std::unique_ptr<Allreduce>> CreateSharingBuffer(Allreduce& buffer_owner, Deadline deadline,
                                                                AllreduceOptions options = {});
  ~Allreduce() override;

  // SumCollective. With `input`, each value is read exactly once, in the
  // same order as without it, so the bits are the same.
  Status Start(size_t offset, size_t count, float scale = 1.0f, const float* input = nullptr) override {
    return StartPhase(RingPhase::kWhole, offset, count, scale, input);
  }
  Result<uint64_t> Poll() override;
  Status Wait(Deadline deadline) override;
  void SetInterrupt(std::function<Status()> interrupt) override { interrupt_ = std::move(interrupt); }
  const char* algorithm() const override { return "ring"; }

  // `phase` other than kWhole runs half of the ring (always the ring, even
  // for small segments, and never split into pieces: `count` floats are one
  // segment): a reduce-scatter leaves rank r with the final sum (times
  // `scale`) of ReducedChunk(count, world, r) only, the rest of its segment
  // holding partial sums; an allgather (scale and input ignored) then
  // copies each rank's chunk into every other rank. The hierarchical
  // allreduce (hierarchical_allreduce.h) puts a cross-zone step between them.
  Status StartPhase(RingPhase phase, size_t offset, size_t count, float scale = 1.0f, const float* input = nullptr);

  // The chunk [begin, begin + length) of a segment of `count` floats whose
  // final sum rank `rank` of `world` holds after a reduce-scatter.
  struct Span {
    size_t begin = 0, length = 0;
  };
  static Span ReducedChunk(size_t count, int world, int rank);

  // Bytes this rank has written into its peers' memory (data, not the
  // signal words), since Create: in all, and to one rank.
  uint64_t bytes_sent() const { return bytes_sent_; }
  uint64_t bytes_sent_to(int rank) const override { return bytes_to_.at(static_cast<size_t>(rank)); }

  size_t count() const override { return count_; }
  float* data() const override { return data_; }
  int waiting_for() const override { return waiting_for_; }

 private:
  struct Segment {
    size_t offset = 0, count = 0;
    float scale = 1.0f;
    const float* input = nullptr;  // the values of [offset, +count) when not in data_
    uint64_t op = 0;  // 1-based sequence number, equal on every rank
    bool ring = false;
    int step = 0;       // ring: 0..2(p-1); direct: 0 = not sent, 1 = sent, 2 = summed
    int first_step = 0;  // ring: the steps [first_step, end_step) run (the phase)
    int end_step = 0;
    bool sent = false;  // ring: this step's message left
    bool acked = false;  // ring: its slot group was handed back to the left neighbour
    bool done = false;   // complete, waiting for the segments before it
    bool last = true;  // the last piece of what Start queued: completes it
  };
  struct Pending {
    net::Op op;
    int to = 0;
    uint64_t segment_op = 0;  // the segment that issued it
    std::unique_ptr<uint64_t> value;  // source of a signal put, stable until completion
  };
  explicit Allreduce(Group& group) : group_(group), node_(group.node()) {}
  // Create's work; `buffer_owner` null: allocate the buffer.
  static Result<std::unique_ptr<Allreduce>> Make(Group& group, size_t count, Deadline deadline,
                                                 AllreduceOptions options, Allreduce* buffer_owner);

  Result<bool> Advance(Segment& s);  // true when the segment is complete
  Result<bool> AdvanceRing(Segment& s);
  Result<bool> AdvanceDirect(Segment& s);
  // Where chunk [begin, +length) of segment `s` had its original values.
  const float* Original(const Segment& s, size_t begin) const {
    return s.input ? s.input + begin : data_ + s.offset + begin;
  }
  // Writes into rank `to`'s buffer (into_buffer) or scratch region, then
  // sets the signal word at `signal_offset` in its scratch to `signal`.
  Status Send(int to, const void* src, size_t bytes, bool into_buffer, size_t remote_offset, size_t signal_offset,
              uint64_t signal);
  Status Signal(int to, size_t remote_offset, uint64_t value);
  bool Arrived(int from, uint64_t messages) const;
  bool ScratchFree(int to, uint64_t after_op) const;  // `to` acknowledged every op up to after_op
  // The right neighbour completed the last op that used ring slot group `group`.
  bool ScratchFreeRing(int right, size_t group) const;
  Status Ack(int to, uint64_t op);
  // Reaps finished puts; true when none issued by segments up to `upto_op` is left.
  Result<bool> OutgoingDone(uint64_t upto_op);
  Status Fail(Status st);
  std::string Where(const Segment& s, int waiting_for) const;

  // The scratch region: the direct algorithm's message counters and acks
  // (one cache line per peer each), the ring's words, the ring's slots
  // (window_ groups of p-1), the direct slots.
  size_t SignalOffset(int from) const { return 64 * static_cast<size_t>(from); }
  size_t AckOffset(int from) const { return 64 * static_cast<size_t>(group_.world() + from); }
  // Ring segment op uses slot group op % window_: its slots, one signal
  // word per step (written by the left neighbour: the op whose message for
  // that step arrived) and one ack word (written by the right neighbour:
  // the last op it completed in that group, so the group is free again).
  size_t RingSteps() const { return 2 * static_cast<size_t>(group_.world() - 1); }
  size_t RingWordsOffset() const { return 64 * 2 * static_cast<size_t>(group_.world()); }
  size_t RingSignalOffset(size_t g, int step) const {
    return RingWordsOffset() + 8 * (g * RingSteps() + static_cast<size_t>(step));
  }
  size_t RingAckOffset(size_t g) const { return RingWordsOffset() + 8 * (window_ * RingSteps() + g); }
  size_t SlotsOffset() const {
    return RingWordsOffset() + (8 * (window_ * RingSteps() + window_) + 63) / 64 * 64;
  }
  size_t RingSlotOffset(size_t g, int k) const {
    return SlotsOffset() + (g * static_cast<size_t>(group_.world() - 1) + static_cast<size_t>(k)) * ring_slot_bytes_;
  }
  // Direct slots come in two sets used by alternate ops, so a rank may
  // start op k+1 while its peers still read op k's slots.
  size_t DirectSlotOffset(uint64_t op, int sender) const {
    return SlotsOffset() + ring_slot_bytes_ * static_cast<size_t>(group_.world() - 1) * window_ +
           ((op % 2) * static_cast<size_t>(group_.world()) + static_cast<size_t>(sender)) * direct_slot_bytes_;
  }

  Group& group_;
  // The destructor waits for puts still in flight through the Node, which
  // outlives every group over it: an elastic re-form destroys the old
  // Group before the collective built on it.
  net::Node& node_;
  AllreduceOptions options_;
  float* data_ = nullptr;
  size_t count_ = 0;
  size_t ring_slot_bytes_ = 0;
  size_t direct_slot_bytes_ = 0;
  net::MemoryRegion buffer_;                      // empty when sharing another's
  const net::MemoryRegion* buffer_region_ = nullptr;  // the buffer: ours or the owner's
  net::MemoryRegion scratch_;
  std::vector<net::RemoteRegion> remote_buffer_;   // by rank
  std::vector<net::RemoteRegion> remote_scratch_;  // by rank
  // When every peer's regions are mapped into this process (shared memory
  // on one host), messages are plain stores: memcpy + a release store of
  // the counter, no transport call. Otherwise one-sided puts.
  bool mapped_ = false;
  std::vector<uint8_t*> mapped_buffer_, mapped_scratch_;  // by rank
  uint32_t polls_ = 0;
  std::vector<uint64_t> tx_messages_;              // messages sent to each rank
  std::vector<uint64_t> rx_messages_;              // messages consumed from each rank
  size_t window_ = 1;                              // ring slot groups (AllreduceOptions::ring_window)
  std::vector<uint64_t> ring_group_op_;            // by group: the last op that used it at the right neighbour
  uint64_t current_op_ = 0;                        // the segment being advanced (tags its puts)
  std::vector<std::array<uint64_t, 2>> direct_op_to_;  // last op that wrote each rank's direct slots, by parity
  std::vector<const float*> sum_sources_;          // reused by the direct sum
  std::vector<Pending> pending_;
  std::deque<Segment> queue_;
  uint64_t bytes_sent_ = 0;
  std::vector<uint64_t> bytes_to_;  // by rank
  uint64_t next_op_ = 1;
  uint64_t completed_ = 0;
  int waiting_for_ = -1;
  Status failed_;
  std::function<Status()> interrupt_;
};

}  // namespace tenax::comm
