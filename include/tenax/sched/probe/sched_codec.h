// Wire forms of the probe messages (proto/sched_wire.proto) and the
// control-message kinds that carry them (registered in net/message_kinds.h).
// Decoders bound sizes and values and return ProtocolError naming the peer
// for anything else; they are fuzzed (fuzz/sched_wire_fuzz.cc).
#pragma once

#include <string>
#include <string_view>

#include "sched_wire.pb.h"
#include "tenax/core/status.h"
#include "tenax/net/message_kinds.h"

namespace tenax::sched {

inline constexpr uint32_t kProbeReportKind = net::KindValue(net::MessageKind::kProbeReport);
inline constexpr uint32_t kProbeRosterKind = net::KindValue(net::MessageKind::kProbeRoster);
inline constexpr uint32_t kLinkQueryKind = net::KindValue(net::MessageKind::kLinkQuery);
inline constexpr uint32_t kLinkAnswerKind = net::KindValue(net::MessageKind::kLinkAnswer);
inline constexpr uint32_t kProbeOfferRequestKind = net::KindValue(net::MessageKind::kProbeOfferRequest);
inline constexpr uint32_t kProbeOfferKind = net::KindValue(net::MessageKind::kProbeOffer);

inline constexpr size_t kMaxSchedMessageBytes = 4 << 20;
inline constexpr int kMaxProbeAgents = 4096;

Result<wire::ProbeReport> DecodeProbeReport(std::string_view bytes, const std::string& peer);
Result<wire::ProbeRoster> DecodeProbeRoster(std::string_view bytes, const std::string& peer);
Result<wire::LinkAnswer> DecodeLinkAnswer(std::string_view bytes, const std::string& peer);
Result<wire::ProbeOffer> DecodeProbeOffer(std::string_view bytes, const std::string& peer);

}  // namespace tenax::sched
