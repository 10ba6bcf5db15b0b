#include "tenax/comm/tensor_channel.h"

#include <atomic>
#include <cstring>

#include "tenax/comm/channel_codec.h"
#include "tenax/net/control_codec.h"

namespace tenax::comm {
namespace {

// Reads a word that a peer writes with one-sided puts.
uint64_t LoadSignal(const uint8_t* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<uint8_t*>(p)))
      .load(std::memory_order_acquire);
}

std::string PeerLabel(net::Node& node, net::PeerId peer) {
  auto info = node.Info(peer);
  return info.ok() ? info->address + (info->name.empty() ? "" : " (" + info->name + ")") : std::to_string(peer);
}

// Shares the regions' keys with `peer` only (see net::Node::Share).
Result<std::string> EncodeOffer(net::Node& node, net::PeerId peer, uint64_t fingerprint,
                                const net::MemoryRegion& region, const net::MemoryRegion* staging) {
  wire::ArenaOffer offer;
  offer.set_plan_fingerprint(fingerprint);
  TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor d, node.Share(region, peer));
  offer.set_region(net::EncodeRegion(d.address, d.length, d.rkey));
  if (staging) {
    TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor s, node.Share(*staging, peer));
    offer.set_staging(net::EncodeRegion(s.address, s.length, s.rkey));
  }
  return offer.SerializeAsString();
}

// Sends our offer, waits for the peer's and checks that both sides planned
// the same tensors.
Result<wire::ArenaOffer> ExchangeOffers(net::Node& node, net::PeerId peer, const BufferPlan& plan,
                                        const std::string& our_offer, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(node.SendControl(peer, kArenaOfferKind, our_offer, deadline));
  TENAX_ASSIGN_OR_RETURN(net::ControlMessage msg, node.ReceiveControl(deadline, peer, kArenaOfferKind));
  const std::string label = PeerLabel(node, peer);
  TENAX_ASSIGN_OR_RETURN(wire::ArenaOffer offer, DecodeArenaOffer(msg.payload, label));
  if (offer.plan_fingerprint() != plan.fingerprint) {
    return FailedPrecondition("peer " + label + " planned different tensors (plan fingerprint " +
                              std::to_string(offer.plan_fingerprint()) + ", ours " + std::to_string(plan.fingerprint) +
                              ")");
  }
  return offer;
}

Result<net::RemoteRegion> ImportRegion(net::Node& node, net::PeerId peer, const std::string& bytes, size_t min_size) {
  const std::string label = PeerLabel(node, peer);
  TENAX_ASSIGN_OR_RETURN(net::DecodedRegion d, net::DecodeRegion(bytes, label));
  if (d.length < min_size) {
    return ProtocolError("peer " + label + " offered a region of " + std::to_string(d.length) +
                         " bytes, the plan needs " + std::to_string(min_size));
  }
  return node.Import(peer, net::RegionDescriptor{d.address, d.length, d.rkey});
}

// Waits until the word at `p` reaches `value`, driving the Node (TCP puts
// land only while the target progresses).
Status WaitForSignal(net::Node& node, net::PeerId peer, const uint8_t* p, uint64_t value, Deadline deadline,
                     const char* what) {
  while (LoadSignal(p) < value) {
    if (Status st = node.PeerStatus(peer); !st.ok()) return st;
    if (deadline.Expired()) {
      return DeadlineExceeded(std::string(what) + " " + std::to_string(value) + " from peer " + PeerLabel(node, peer) +
                              " did not arrive before the deadline");
    }
    node.Progress();
  }
  return Status::Ok();
}

}  // namespace

// ------------------------------------------------------------------ sender

Result<std::unique_ptr<TensorSender>> TensorSender::Open(net::Node& node, net::PeerId peer, BufferPlan plan,
                                                         Deadline deadline, size_t staging_bytes) {
  std::unique_ptr<TensorSender> s(new TensorSender(node, peer, std::move(plan)));
  TENAX_ASSIGN_OR_RETURN(s->arena_, node.Allocate(s->plan_.total_bytes));
  std::memset(s->arena_.data(), 0, s->arena_.size());
  TENAX_ASSIGN_OR_RETURN(s->staging_, node.Allocate(std::max<size_t>(staging_bytes, 64)));
  TENAX_ASSIGN_OR_RETURN(std::string our_offer, EncodeOffer(node, peer, s->plan_.fingerprint, s->arena_, &s->staging_));
  TENAX_ASSIGN_OR_RETURN(wire::ArenaOffer offer, ExchangeOffers(node, peer, s->plan_, our_offer, deadline));
  TENAX_ASSIGN_OR_RETURN(s->remote_arena_, ImportRegion(node, peer, offer.region(), s->plan_.total_bytes));
  return s;
}

uint64_t TensorSender::Released() const { return LoadSignal(arena_.data() + plan_.signal_offset); }

Status TensorSender::WaitReleased(uint64_t step, Deadline deadline) {
  return WaitForSignal(node_, peer_, arena_.data() + plan_.signal_offset, step, deadline, "release of step");
}

Status TensorSender::SendStep(uint64_t step, Deadline deadline) {
  if (step != signal_value_ + 1) {
    return InvalidArgument("steps must increase by one: sent " + std::to_string(signal_value_) + ", now " +
                           std::to_string(step));
  }
  TENAX_RETURN_IF_ERROR(node_.WaitAll(in_flight_, deadline));  // the previous signal's source is free
  in_flight_.clear();
  TENAX_RETURN_IF_ERROR(WaitReleased(step - 1, deadline));  // the receiver is done with the arena
  if (plan_.data_bytes > 0) in_flight_.push_back(node_.Put(arena_.data(), plan_.data_bytes, remote_arena_, 0));
  TENAX_RETURN_IF_ERROR(node_.Fence(peer_));  // data before signal
  signal_value_ = step;
  in_flight_.push_back(node_.Put(&signal_value_, sizeof signal_value_, remote_arena_, plan_.signal_offset));
  // Completion is awaited at the next step; a lost peer shows up here or there.
  return node_.PeerStatus(peer_);
}

Status TensorSender::SendDynamic(const TensorSpec& spec, const void* data, size_t bytes, Deadline deadline) {
  if (bytes != spec.nbytes()) {
    return InvalidArgument("dynamic tensor '" + spec.name + "': " + std::to_string(bytes) +
                           " bytes given, the shape needs " + std::to_string(spec.nbytes()));
  }
  if (bytes > staging_.size()) {
    return InvalidArgument("dynamic tensor '" + spec.name + "' of " + std::to_string(bytes) +
                           " bytes exceeds the staging region of " + std::to_string(staging_.size()));
  }
  // One staging buffer: the previous dynamic tensor must have been read.
  while (dynamic_done_ < dynamic_sequence_) {
    TENAX_ASSIGN_OR_RETURN(net::ControlMessage msg, node_.ReceiveControl(deadline, peer_, kDynamicDoneKind));
    TENAX_ASSIGN_OR_RETURN(uint64_t done, DecodeDynamicDone(msg.payload, PeerLabel(node_, peer_)));
    dynamic_done_ = std::max(dynamic_done_, done);
  }
  // An empty tensor may come with no data pointer at all (memcpy's null is UB
  // even for 0 bytes; UBSan found it).
  if (bytes > 0) std::memcpy(staging_.data(), data, bytes);
  ++dynamic_sequence_;
  return node_.SendControl(peer_, kDynamicTensorKind, EncodeDynamicTensor(spec, 0, bytes, dynamic_sequence_), deadline);
}

// ---------------------------------------------------------------- receiver

Result<std::unique_ptr<TensorReceiver>> TensorReceiver::Open(net::Node& node, net::PeerId peer, BufferPlan plan,
                                                             Deadline deadline) {
  std::unique_ptr<TensorReceiver> r(new TensorReceiver(node, peer, std::move(plan)));
  TENAX_ASSIGN_OR_RETURN(r->arena_, node.Allocate(r->plan_.total_bytes));
  std::memset(r->arena_.data(), 0, r->arena_.size());
  TENAX_ASSIGN_OR_RETURN(std::string our_offer, EncodeOffer(node, peer, r->plan_.fingerprint, r->arena_, nullptr));
  TENAX_ASSIGN_OR_RETURN(wire::ArenaOffer offer, ExchangeOffers(node, peer, r->plan_, our_offer, deadline));
  TENAX_ASSIGN_OR_RETURN(r->remote_ack_, ImportRegion(node, peer, offer.region(), r->plan_.total_bytes));
  if (!offer.staging().empty()) {
    TENAX_ASSIGN_OR_RETURN(r->remote_staging_, ImportRegion(node, peer, offer.staging(), 1));
  }
  return r;
}

Status TensorReceiver::WaitStep(uint64_t step, Deadline deadline) {
  return WaitForSignal(node_, peer_, arena_.data() + plan_.signal_offset, step, deadline, "step");
}

Status TensorReceiver::Release(uint64_t step, Deadline deadline) {
  TENAX_RETURN_IF_ERROR(node_.Wait(release_op_, deadline));  // previous release's source is free
  release_value_ = step;
  release_op_ = node_.Put(&release_value_, sizeof release_value_, remote_ack_, plan_.signal_offset);
  return node_.PeerStatus(peer_);
}

Result<TensorSpec> TensorReceiver::ReceiveDynamic(const Allocator& allocate, Deadline deadline) {
  TENAX_ASSIGN_OR_RETURN(net::ControlMessage msg, node_.ReceiveControl(deadline, peer_, kDynamicTensorKind));
  const std::string label = PeerLabel(node_, peer_);
  TENAX_ASSIGN_OR_RETURN(DynamicAnnouncement a, DecodeDynamicTensor(msg.payload, label));
  if (remote_staging_.size() == 0) return ProtocolError("peer " + label + " sent a dynamic tensor without staging");
  void* dst = allocate(a.spec, a.length);
  if (a.length > 0) {
    if (!dst) return InvalidArgument("no memory for dynamic tensor '" + a.spec.name + "'");
    net::Op get = node_.Get(dst, a.length, remote_staging_, a.offset);  // bounds-checked against the region
    TENAX_RETURN_IF_ERROR(node_.Wait(get, deadline));
  }
  wire::DynamicDone done;
  done.set_sequence(a.sequence);
  TENAX_RETURN_IF_ERROR(node_.SendControl(peer_, kDynamicDoneKind, done.SerializeAsString(), deadline));
  return a.spec;
}

}  // namespace tenax::comm
