// A planned, one-directional tensor channel between two peers: the sender
// writes a step's tensors into its mirror of the receiver's arena, and
// SendStep moves the whole arena with one coalesced one-sided write, then
// writes the step number into the receiver's signal word (ordered by a
// fence). The receiver waits for that word, uses the tensors in place, and
// Release()s the step, which lets the sender overwrite the arena. No
// serialisation and no copy on the receiving side.
//
// Tensors whose size is only known at run time take the dynamic path: the
// sender stages them in a registered region and announces (offset, length);
// the receiver reads them one-sided into memory it chooses.
//
// Threading: the channel uses its Node from the calling thread only (the
// Node's rule). Failures: every wait takes a Deadline; a lost peer surfaces
// as the Node's typed Status; mismatched plans fail Open with
// FailedPrecondition before any data moves.
#pragma once

#include <functional>
#include <memory>

#include "tenax/comm/buffer_plan.h"
#include "tenax/net/message_kinds.h"
#include "tenax/net/node.h"

namespace tenax::comm {

// Control-message kinds used by channels (registered in net/message_kinds.h).
inline constexpr uint32_t kArenaOfferKind = net::KindValue(net::MessageKind::kArenaOffer);
inline constexpr uint32_t kDynamicTensorKind = net::KindValue(net::MessageKind::kDynamicTensor);
inline constexpr uint32_t kDynamicDoneKind = net::KindValue(net::MessageKind::kDynamicDone);

class TensorSender {
 public:
  // Exchanges arenas with the receiver on `peer` (which calls
  // TensorReceiver::Open with the same plan).
  static Result<std::unique_ptr<TensorSender>> Open(net::Node& node, net::PeerId peer, BufferPlan plan,
                                                    Deadline deadline, size_t staging_bytes = 16 << 20);

  const BufferPlan& plan() const { return plan_; }
  // Where tensor `i` of the plan lives in the local mirror arena: write the
  // step's values there (or compute into it) before SendStep.
  uint8_t* data(size_t i) { return arena_.data() + plan_.tensors[i].offset; }
  uint8_t* arena() { return arena_.data(); }

  // Waits until the receiver released step-1, then writes the arena and
  // signals `step` (steps start at 1 and increase by one).
  Status SendStep(uint64_t step, Deadline deadline);
  // Waits until the receiver released `step`.
  Status WaitReleased(uint64_t step, Deadline deadline);

  // Stages `bytes` of a dynamic tensor and announces it. Waits for the
  // previous dynamic tensor to be read first (one staging buffer).
  Status SendDynamic(const TensorSpec& spec, const void* data, size_t bytes, Deadline deadline);

 private:
  TensorSender(net::Node& node, net::PeerId peer, BufferPlan plan) : node_(node), peer_(peer), plan_(std::move(plan)) {}
  uint64_t Released() const;

  net::Node& node_;
  net::PeerId peer_;
  BufferPlan plan_;
  net::MemoryRegion arena_;    // mirror arena; its signal slot receives the receiver's releases
  net::MemoryRegion staging_;  // dynamic tensors
  net::RemoteRegion remote_arena_;
  std::vector<net::Op> in_flight_;
  uint64_t signal_value_ = 0;  // source of the signal write; stable while in flight
  uint64_t dynamic_sequence_ = 0;
  uint64_t dynamic_done_ = 0;
};

class TensorReceiver {
 public:
  static Result<std::unique_ptr<TensorReceiver>> Open(net::Node& node, net::PeerId peer, BufferPlan plan,
                                                      Deadline deadline);

  const BufferPlan& plan() const { return plan_; }
  // Tensor `i` of the last completed step, in place in the arena.
  const uint8_t* data(size_t i) const { return arena_.data() + plan_.tensors[i].offset; }
  uint8_t* mutable_data(size_t i) { return arena_.data() + plan_.tensors[i].offset; }

  // Waits until the sender signalled `step` (or a later one).
  Status WaitStep(uint64_t step, Deadline deadline);
  // Tells the sender the arena may be overwritten.
  Status Release(uint64_t step, Deadline deadline);

  // Receives the next dynamic tensor: `allocate(spec, bytes)` returns where
  // to put it (e.g. a fresh torch tensor's storage); the bytes are read
  // one-sided from the sender's staging region. Returns the tensor's spec.
  using Allocator = std::function<void*(const TensorSpec& spec, size_t bytes)>;
  Result<TensorSpec> ReceiveDynamic(const Allocator& allocate, Deadline deadline);

 private:
  TensorReceiver(net::Node& node, net::PeerId peer, BufferPlan plan)
      : node_(node), peer_(peer), plan_(std::move(plan)) {}

  net::Node& node_;
  net::PeerId peer_;
  BufferPlan plan_;
  net::MemoryRegion arena_;
  net::RemoteRegion remote_ack_;      // the sender's arena (its signal slot takes our releases)
  net::RemoteRegion remote_staging_;  // the sender's staging region
  uint64_t release_value_ = 0;
  net::Op release_op_;
};

}  // namespace tenax::comm
