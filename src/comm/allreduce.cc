#include "tenax/comm/allreduce.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <thread>

#include "tenax/comm/channel_codec.h"
#include "wait_backoff.h"
#include "tenax/net/control_codec.h"

namespace tenax::comm {
namespace {

size_t RoundUp64(size_t n) { return (n + 63) / 64 * 64; }

constexpr uint64_t kNoSegment = UINT64_MAX;  // Pending::segment_op of a signal

uint64_t LoadWord(const uint8_t* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p)))
      .load(std::memory_order_acquire);
}

// Chunk j of a segment of `count` elements split over `p` ranks: the first
// count % p chunks hold one element more.
struct Chunk {
  size_t begin, length;
};
Chunk ChunkOf(size_t count, int p, int j) {
  const size_t base = count / static_cast<size_t>(p), rem = count % static_cast<size_t>(p);
  const size_t uj = static_cast<size_t>(j);
  return {uj * base + std::min(uj, rem), base + (uj < rem ? 1 : 0)};
}

int Mod(int a, int p) { return ((a % p) + p) % p; }

// Four floats (SSE, baseline x86-64); unaligned loads and stores through
// memcpy. At -O2 GCC leaves the plain loops below scalar (it cannot rule out
// aliasing without versioning the loop), which made the sum, not the
// copies, the bottleneck of large allreduces. Element-wise, so every element
// is still summed in the same order: results are bitwise unchanged.
typedef float F4 __attribute__((vector_size(16)));
inline F4 Load4(const float* p) { F4 v; std::memcpy(&v, p, sizeof v); return v; }
inline void Store4(float* p, F4 v) { std::memcpy(p, &v, sizeof v); }

// out[i] = a[i] + b[i]; `out` may be `a` or `b` (each block is loaded
// before it is stored).
void AddArrays(float* out, const float* a, const float* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const F4 x0 = Load4(a + i) + Load4(b + i), x1 = Load4(a + i + 4) + Load4(b + i + 4);
    const F4 x2 = Load4(a + i + 8) + Load4(b + i + 8), x3 = Load4(a + i + 12) + Load4(b + i + 12);
    Store4(out + i, x0);
    Store4(out + i + 4, x1);
    Store4(out + i + 8, x2);
    Store4(out + i + 12, x3);
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

// Shares the regions' keys with `peer` only (see net::Node::Share).
Result<std::string> EncodeOffer(net::Node& node, net::PeerId peer, size_t count, int rank, uint64_t generation,
                                const std::string& algorithm, const net::MemoryRegion& buffer,
                                const net::MemoryRegion& scratch) {
  wire::CollectiveOffer m;
  m.set_algorithm(algorithm);
  m.set_count(count);
  m.set_rank(static_cast<uint32_t>(rank));
  m.set_generation(generation);
  TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor b, node.Share(buffer, peer));
  TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor s, node.Share(scratch, peer));
  m.set_buffer(net::EncodeRegion(b.address, b.length, b.rkey));
  m.set_scratch(net::EncodeRegion(s.address, s.length, s.rkey));
  return m.SerializeAsString();
}

}  // namespace

Result<std::unique_ptr<Allreduce>> Allreduce::Create(Group& group, size_t count, Deadline deadline,
                                                     AllreduceOptions options) {
  return Make(group, count, deadline, std::move(options), nullptr);
}

Result<std::unique_ptr<Allreduce>> Allreduce::CreateSharingBuffer(Allreduce& buffer_owner, Deadline deadline,
                                                                  AllreduceOptions options) {
  return Make(buffer_owner.group_, buffer_owner.count_, deadline, std::move(options), &buffer_owner);
}

Result<std::unique_ptr<Allreduce>> Allreduce::Make(Group& group, size_t count, Deadline deadline,
                                                   AllreduceOptions options, Allreduce* buffer_owner) {
  if (count == 0) return InvalidArgument("allreduce over an empty buffer");
  std::unique_ptr<Allreduce> a(new Allreduce(group));
  const int p = group.world();
  a->options_ = options;
  a->count_ = count;
  a->window_ = std::max<size_t>(options.ring_window, 1);
  const size_t piece = options.ring_piece_bytes / sizeof(float);
  a->ring_slot_bytes_ = RoundUp64(ChunkOf(piece ? std::min(count, piece) : count, p, 0).length * sizeof(float));
  a->direct_slot_bytes_ = RoundUp64(std::min(count * sizeof(float), options.direct_max_bytes));
  const size_t slots = a->ring_slot_bytes_ * static_cast<size_t>(p - 1) * a->window_ +
                       a->direct_slot_bytes_ * 2 * static_cast<size_t>(p);
  net::Node& node = group.node();
  if (buffer_owner) {
    a->buffer_region_ = buffer_owner->buffer_region_;
  } else {
    TENAX_ASSIGN_OR_RETURN(a->buffer_, node.Allocate(count * sizeof(float)));
    a->buffer_region_ = &a->buffer_;
    std::memset(a->buffer_.data(), 0, count * sizeof(float));
  }
  a->data_ = reinterpret_cast<float*>(a->buffer_region_->data());
  TENAX_ASSIGN_OR_RETURN(a->scratch_, node.Allocate(a->SlotsOffset() + slots));
  std::memset(a->scratch_.data(), 0, a->scratch_.size());
  a->remote_buffer_.resize(static_cast<size_t>(p));
  a->remote_scratch_.resize(static_cast<size_t>(p));
  a->tx_messages_.assign(static_cast<size_t>(p), 0);
  a->bytes_to_.assign(static_cast<size_t>(p), 0);
  a->rx_messages_.assign(static_cast<size_t>(p), 0);
  a->ring_group_op_.assign(a->window_, 0);
  a->direct_op_to_.assign(static_cast<size_t>(p), {0, 0});
  a->sum_sources_.resize(static_cast<size_t>(p));
  if (p == 1) return a;

  for (int r = 0; r < p; ++r) {
    if (r == group.rank()) continue;
    TENAX_ASSIGN_OR_RETURN(std::string offer,
                           EncodeOffer(node, group.peer(r), count, group.rank(), group.generation(), options.algorithm,
                                       *a->buffer_region_, a->scratch_));
    TENAX_RETURN_IF_ERROR(node.SendControl(group.peer(r), kCollectiveOfferKind, offer, deadline));
  }
  for (int r = 0; r < p; ++r) {
    if (r == group.rank()) continue;
    // An offer of an older generation (a re-form that was superseded) is
    // dropped; one of a newer generation is kept for the group that will
    // need it, and this one is abandoned (Aborted): a newer membership exists.
    wire::CollectiveOffer o;
    while (true) {
      std::optional<net::ControlMessage> early = group.TakeEarly(group.peer(r), kCollectiveOfferKind);
      auto msg = early ? Result<net::ControlMessage>(std::move(*early))
                       : node.ReceiveControl(deadline, group.peer(r), kCollectiveOfferKind);
      if (!msg.ok()) {
        return Status(msg.status().code(), "allreduce setup: no offer from " + group.Describe(r) + ": " +
                                               msg.status().message());
      }
      TENAX_ASSIGN_OR_RETURN(o, DecodeCollectiveOffer(msg->payload, group.Describe(r)));
      if (o.generation() == group.generation()) break;
      if (o.generation() > group.generation()) {
        group.KeepEarly(std::move(*msg));
        return Aborted("allreduce setup: " + group.Describe(r) + " is already at membership generation " +
                       std::to_string(o.generation()) + " (this group: " + std::to_string(group.generation()) + ")");
      }
    }
    if (o.algorithm() != options.algorithm) {
      auto name = [](const std::string& a) { return a.empty() ? std::string("the flat ring") : "'" + a + "'"; };
      return FailedPrecondition("allreduce setup: " + group.Describe(r) + " runs " + name(o.algorithm()) +
                                ", this rank " + name(options.algorithm) + " (the members chose differently)");
    }
    if (o.count() != count) {
      return FailedPrecondition("allreduce setup: " + group.Describe(r) + " reduces " + std::to_string(o.count()) +
                                " floats, this rank " + std::to_string(count));
    }
    TENAX_ASSIGN_OR_RETURN(net::DecodedRegion b, net::DecodeRegion(o.buffer(), group.Describe(r)));
    TENAX_ASSIGN_OR_RETURN(net::DecodedRegion s, net::DecodeRegion(o.scratch(), group.Describe(r)));
    // The scratch layout follows the options (pieces, window): equal sizes or nothing.
    if (b.length < count * sizeof(float) || s.length != a->scratch_.size()) {
      return ProtocolError("allreduce setup: " + group.Describe(r) + " offered a scratch region of " +
                           std::to_string(s.length) + " bytes, this rank's layout needs " +
                           std::to_string(a->scratch_.size()) + " (different ring piece or window options?)");
    }
    TENAX_ASSIGN_OR_RETURN(a->remote_buffer_[static_cast<size_t>(r)],
                           node.Import(group.peer(r), net::RegionDescriptor{b.address, b.length, b.rkey}));
    TENAX_ASSIGN_OR_RETURN(a->remote_scratch_[static_cast<size_t>(r)],
                           node.Import(group.peer(r), net::RegionDescriptor{s.address, s.length, s.rkey}));
  }
  // Plain stores when every peer is mapped here. All ranks on one host
  // decide alike; mixing is still correct (each side only reads its own
  // signal words), just slower.
  a->mapped_buffer_.assign(static_cast<size_t>(p), nullptr);
  a->mapped_scratch_.assign(static_cast<size_t>(p), nullptr);
  bool mapped = options.allow_mapping;
  for (int r = 0; r < p && mapped; ++r) {
    if (r == group.rank()) continue;
    auto b = node.MapRemote(a->remote_buffer_[static_cast<size_t>(r)]);
    auto s = node.MapRemote(a->remote_scratch_[static_cast<size_t>(r)]);
    mapped = b.ok() && s.ok();
    if (mapped) {
      a->mapped_buffer_[static_cast<size_t>(r)] = *b;
      a->mapped_scratch_[static_cast<size_t>(r)] = *s;
    }
  }
  a->mapped_ = mapped;
  return a;
}

Allreduce::~Allreduce() {
  // Outstanding puts read our buffer: let them finish before the caller may
  // free it (bounded, the peers may be gone).
  for (auto& p : pending_) (void)node_.Wait(p.op, Deadline::After(std::chrono::seconds(1)));
}

Status Allreduce::Fail(Status st) {
  if (failed_.ok()) failed_ = st;
  return failed_;
}

std::string Allreduce::Where(const Segment& s, int waiting_for) const {
  return "allreduce #" + std::to_string(s.op) + " (" + std::to_string(s.count) + " floats at " +
         std::to_string(s.offset) + ") on rank " + std::to_string(group_.rank()) +
         (waiting_for >= 0 ? ", waiting for " + group_.Describe(waiting_for) : "");
}

Allreduce::Span Allreduce::ReducedChunk(size_t count, int world, int rank) {
  const Chunk c = ChunkOf(count, world, Mod(rank + 1, world));
  return {c.begin, c.length};
}

Status Allreduce::StartPhase(RingPhase phase, size_t offset, size_t count, float scale, const float* input) {
  if (!failed_.ok()) return failed_;
  if (offset > count_ || count > count_ - offset) {
    return InvalidArgument("allreduce segment [" + std::to_string(offset) + ", +" + std::to_string(count) +
                           ") outside the buffer of " + std::to_string(count_) + " floats");
  }
  const int p = group_.world();
  if (phase != RingPhase::kWhole) {
    Segment s;
    s.offset = offset;
    s.count = count;
    s.ring = true;
    s.op = next_op_++;
    if (phase == RingPhase::kReduceScatter) {
      s.scale = scale;
      s.input = input;
      s.first_step = 0;
      s.end_step = p - 1;
    } else {
      s.first_step = p - 1;
      s.end_step = 2 * (p - 1);
    }
    s.step = s.first_step;
    queue_.push_back(s);
    return Status::Ok();
  }
  const bool ring = count * sizeof(float) > options_.direct_max_bytes;
  const size_t piece =
      ring && options_.ring_piece_bytes ? std::max<size_t>(options_.ring_piece_bytes / sizeof(float), 1) : count;
  size_t queued = 0;
  do {  // every rank splits alike, so op numbers stay equal
    Segment s;
    s.offset = offset + queued;
    s.count = std::min(piece, count - queued);
    s.scale = scale;
    s.input = input ? input + queued : nullptr;
    s.op = next_op_++;
    s.ring = ring;
    s.end_step = 2 * (p - 1);
    queued += s.count;
    s.last = queued == count;
    queue_.push_back(s);
  } while (queued < count);
  return Status::Ok();
}

Status Allreduce::Signal(int to, size_t remote_offset, uint64_t value) {
  if (mapped_) {
    // Release: the data stored before becomes visible no later than the counter.
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mapped_scratch_[static_cast<size_t>(to)] + remote_offset))
        .store(value, std::memory_order_release);
    return Status::Ok();
  }
  Pending p;
  p.value = std::make_unique<uint64_t>(value);
  p.to = to;
  // No segment waits for its signals: they read only p.value, never the
  // buffer, and over a delayed link waiting for the last ack's completion
  // would add a delay to every segment. Reaped (and failures seen) later.
  p.segment_op = kNoSegment;
  p.op = group_.node().Put(p.value.get(), sizeof(uint64_t), remote_scratch_[static_cast<size_t>(to)], remote_offset);
  pending_.push_back(std::move(p));
  return Status::Ok();
}

Status Allreduce::Send(int to, const void* src, size_t bytes, bool into_buffer, size_t remote_offset,
                       size_t signal_offset, uint64_t signal) {
  net::Node& node = group_.node();
  const net::PeerId peer = group_.peer(to);
  const size_t t = static_cast<size_t>(to);
  bytes_sent_ += bytes;
  bytes_to_[t] += bytes;
  if (mapped_) {
    if (bytes > 0) std::memcpy((into_buffer ? mapped_buffer_[t] : mapped_scratch_[t]) + remote_offset, src, bytes);
    return Signal(to, signal_offset, signal);
  }
  const net::RemoteRegion& region = into_buffer ? remote_buffer_[t] : remote_scratch_[t];
  if (bytes > 0) {
    Pending p;
    p.to = to;
    p.segment_op = current_op_;
    p.op = node.Put(src, bytes, region, remote_offset);
    pending_.push_back(std::move(p));
    TENAX_RETURN_IF_ERROR(node.Fence(peer));  // the signal must not overtake the data
  }
  return Signal(to, signal_offset, signal);
}

bool Allreduce::Arrived(int from, uint64_t messages) const {
  return LoadWord(scratch_.data() + SignalOffset(from)) >= messages;
}

bool Allreduce::ScratchFree(int to, uint64_t after_op) const {
  return LoadWord(scratch_.data() + AckOffset(to)) >= after_op;
}

bool Allreduce::ScratchFreeRing(int right, size_t group) const {
  (void)right;  // the only writer of our ring ack words
  return LoadWord(scratch_.data() + RingAckOffset(group)) >= ring_group_op_[group];
}

Status Allreduce::Ack(int to, uint64_t op) { return Signal(to, AckOffset(group_.rank()), op); }

// Checks (without blocking) that every put issued by the segments up to
// `upto_op` has completed, so their part of the buffer is ours again.
// Failed puts fail the collective.
Result<bool> Allreduce::OutgoingDone(uint64_t upto_op) {
  net::Node& node = group_.node();
  const Deadline now = Deadline::At(SteadyClock::now());
  size_t kept = 0;
  bool mine_left = false;
  for (auto& p : pending_) {
    Status st = node.Wait(p.op, now);
    if (st.code() == StatusCode::kDeadlineExceeded) {
      mine_left = mine_left || p.segment_op <= upto_op;
      pending_[kept++] = std::move(p);
    } else if (!st.ok()) {
      return Status(st.code(), "a write to " + group_.Describe(p.to) + " failed: " + st.message());
    }
  }
  pending_.resize(kept);
  return !mine_left;
}

Result<bool> Allreduce::AdvanceRing(Segment& s) {
  const int p = group_.world(), r = group_.rank();
  const int right = Mod(r + 1, p), left = Mod(r - 1, p);
  const size_t g = s.op % window_;  // equal on every rank: op numbers are
  while (s.step < s.end_step) {
    const bool reduce = s.step < p - 1;
    const int k = reduce ? s.step : s.step - (p - 1);
    if (!s.sent) {
      if (s.step == s.first_step) {
        // The group's slots and signal words at `right` are free once it
        // completed the op that used them last (window_ ops ago).
        if (!ScratchFreeRing(right, g)) {
          waiting_for_ = right;
          return false;
        }
        ring_group_op_[g] = s.op;
      }
      const size_t signal = RingSignalOffset(g, s.step);
      if (reduce) {
        const Chunk c = ChunkOf(s.count, p, Mod(r - k, p));
        // Step 0 sends an original chunk; later steps the partial sums made here.
        const float* from = k == 0 ? Original(s, c.begin) : data_ + s.offset + c.begin;
        TENAX_RETURN_IF_ERROR(Send(right, from, c.length * sizeof(float), false, RingSlotOffset(g, k), signal, s.op));
      } else {
        const Chunk c = ChunkOf(s.count, p, Mod(r + 1 - k, p));
        TENAX_RETURN_IF_ERROR(Send(right, data_ + s.offset + c.begin, c.length * sizeof(float), true,
                                   (s.offset + c.begin) * sizeof(float), signal, s.op));
      }
      s.sent = true;
    }
    // Left may already be window_ ops further in this group only after we
    // acknowledged this op (below), so the word holds exactly s.op here.
    if (LoadWord(scratch_.data() + RingSignalOffset(g, s.step)) < s.op) {
      waiting_for_ = left;
      return false;
    }
    if (reduce) {
      const Chunk c = ChunkOf(s.count, p, Mod(r - k - 1, p));
      float* dst = data_ + s.offset + c.begin;
      const float* src = reinterpret_cast<const float*>(scratch_.data() + RingSlotOffset(g, k));
      AddArrays(dst, Original(s, c.begin), src, c.length);  // this chunk's first touch here
      if (k == p - 2 && s.scale != 1.0f) {
        // Reduce phase done: our chunk is final.
        const Chunk own = ChunkOf(s.count, p, Mod(r + 1, p));
        float* o = data_ + s.offset + own.begin;
        for (size_t i = 0; i < own.length; ++i) o[i] *= s.scale;
      }
    }
    ++s.step;
    s.sent = false;
  }
  if (!s.acked) {
    // Every message of this op from left is consumed: its group is free.
    TENAX_RETURN_IF_ERROR(Signal(left, RingAckOffset(g), s.op));
    s.acked = true;
  }
  return OutgoingDone(s.op);
}

Result<bool> Allreduce::AdvanceDirect(Segment& s) {
  const int p = group_.world(), r = group_.rank();
  const size_t bytes = s.count * sizeof(float);
  const size_t parity = s.op % 2;
  if (s.step == 2) return OutgoingDone(s.op);  // summed and acknowledged; only our acks may be in flight
  if (s.step == 0) {
    for (int q = 0; q < p; ++q) {
      if (q != r && !ScratchFree(q, direct_op_to_[static_cast<size_t>(q)][parity])) {
        waiting_for_ = q;
        return false;
      }
    }
    for (int d = 1; d < p; ++d) {  // start with the right neighbour, spread the load
      const int q = Mod(r + d, p);
      TENAX_RETURN_IF_ERROR(Send(q, Original(s, 0), bytes, false, DirectSlotOffset(s.op, r), SignalOffset(r),
                                 ++tx_messages_[static_cast<size_t>(q)]));
      direct_op_to_[static_cast<size_t>(q)][parity] = s.op;
    }
    s.step = 1;
  }
  for (int q = 0; q < p; ++q) {
    if (q != r && !Arrived(q, rx_messages_[static_cast<size_t>(q)] + 1)) {
      waiting_for_ = q;
      return false;
    }
  }
  // Our own puts read the segment: it may change only once they are done.
  if (!mapped_) {
    TENAX_ASSIGN_OR_RETURN(bool idle, OutgoingDone(s.op));
    if (!idle) return false;
  }
  for (int q = 0; q < p; ++q) {
    sum_sources_[static_cast<size_t>(q)] =
        q == r ? Original(s, 0) : reinterpret_cast<const float*>(scratch_.data() + DirectSlotOffset(s.op, q));
  }
  // Rank order on every rank: the same bits everywhere. x * 1.0f == x, so
  // skipping the scale changes nothing.
  float* out = data_ + s.offset;
  const float* a = sum_sources_[0];
  const float* b = sum_sources_[1];
  if (p == 2 && s.scale == 1.0f) {
    AddArrays(out, a, b, s.count);
  } else if (p == 2) {
    for (size_t i = 0; i < s.count; ++i) out[i] = (a[i] + b[i]) * s.scale;
  } else {
    for (size_t i = 0; i < s.count; ++i) {
      float acc = a[i];
      for (size_t q = 1; q < sum_sources_.size(); ++q) acc += sum_sources_[q][i];
      out[i] = acc * s.scale;
    }
  }
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    ++rx_messages_[static_cast<size_t>(q)];
    TENAX_RETURN_IF_ERROR(Ack(q, s.op));
  }
  s.step = 2;
  return OutgoingDone(s.op);
}

Result<bool> Allreduce::Advance(Segment& s) {
  if (group_.world() == 1) {
    if (s.input) std::memcpy(data_ + s.offset, s.input, s.count * sizeof(float));
    if (s.scale != 1.0f) {
      for (size_t i = 0; i < s.count; ++i) data_[s.offset + i] *= s.scale;
    }
    return true;
  }
  if (s.ring) return AdvanceRing(s);
  return AdvanceDirect(s);
}

Result<uint64_t> Allreduce::Poll() {
  if (!failed_.ok()) return failed_;
  // Mapped messages need no transport progress; the Node still needs
  // driving now and then (heartbeats, loss detection).
  if (!queue_.empty() && (!mapped_ || ++polls_ % 1024 == 0)) group_.node().Progress();
  // Ring segments advance up to `in_flight` at once, each in its own slot
  // group; a direct segment runs alone, at the front. They complete (and
  // count) in order.
  const size_t in_flight = mapped_ ? 1 : window_;
  while (!queue_.empty()) {
    int front_waits_for = -1;
    for (size_t i = 0; i < queue_.size() && i < in_flight; ++i) {
      Segment& s = queue_[i];
      if (i > 0 && (!s.ring || !queue_.front().ring)) break;
      if (s.done) continue;
      waiting_for_ = -1;
      current_op_ = s.op;
      auto done = Advance(s);
      if (!done.ok()) return Fail(Status(done.status().code(), Where(s, -1) + ": " + done.status().message()));
      s.done = *done;
      if (i == 0) front_waits_for = waiting_for_;
    }
    waiting_for_ = front_waits_for;
    if (!queue_.front().done) break;
    while (!queue_.empty() && queue_.front().done) {
      if (queue_.front().last) ++completed_;
      queue_.pop_front();
    }
  }
  return completed_;
}

Status Allreduce::Wait(Deadline deadline) {
  WaitBackoff backoff(group_.node());
  while (true) {
    TENAX_ASSIGN_OR_RETURN(uint64_t done, Poll());
    (void)done;
    if (queue_.empty()) return Status::Ok();
    if (!backoff.Pause()) continue;
    const Segment& s = queue_.front();
    if (waiting_for_ >= 0) {
      if (Status st = group_.node().PeerStatus(group_.peer(waiting_for_)); !st.ok()) {
        return Fail(Status(st.code(), Where(s, waiting_for_) + ": " + st.message()));
      }
    }
    if (interrupt_) {
      if (Status st = interrupt_(); !st.ok()) return Fail(Status(st.code(), Where(s, waiting_for_) + ": " + st.message()));
    }
    if (deadline.Expired()) {
      return Fail(DeadlineExceeded(Where(s, waiting_for_) + ": no progress before the deadline"));
    }
  }
}

}  // namespace tenax::comm
