#include "tenax/net/control_codec.h"

#include "tenax/net/bounded_decode.h"

namespace tenax::net {
namespace {

constexpr auto& Bad = BadMessage;

}  // namespace

std::string EncodeEnvelope(wire::Envelope envelope) {
  envelope.set_version(kWireVersion);
  return envelope.SerializeAsString();
}

Result<wire::Envelope> DecodeEnvelope(std::span<const uint8_t> bytes, size_t max_bytes, const std::string& peer) {
  if (bytes.size() > max_bytes) {
    return Bad(peer, "control message of " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                         std::to_string(max_bytes));
  }
  wire::Envelope env;
  if (bytes.empty() || !env.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Bad(peer, "undecodable control message (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (env.version() != kWireVersion) {
    return Bad(peer,
               "wire version " + std::to_string(env.version()) + ", this node speaks " + std::to_string(kWireVersion));
  }
  switch (env.body_case()) {
    case wire::Envelope::kHello:
      if (env.hello().client_nonce().size() != kNonceBytes) return Bad(peer, "hello with a malformed nonce");
      if (env.hello().node_name().size() > kMaxNodeNameBytes) return Bad(peer, "hello with an oversized name");
      break;
    case wire::Envelope::kChallenge:
      if (env.challenge().server_nonce().size() != kNonceBytes ||
          env.challenge().server_proof().size() != kProofBytes) {
        return Bad(peer, "challenge with a malformed nonce or proof");
      }
      if (env.challenge().node_name().size() > kMaxNodeNameBytes) return Bad(peer, "challenge with an oversized name");
      break;
    case wire::Envelope::kAuth:
      if (env.auth().client_proof().size() != kProofBytes) return Bad(peer, "auth with a malformed proof");
      if (env.auth().worker_address().empty() || env.auth().worker_address().size() > kMaxWorkerAddressBytes) {
        return Bad(peer, "auth with a malformed worker address");
      }
      break;
    case wire::Envelope::kRefused:
      if (env.refused().reason().size() > 4096) return Bad(peer, "refusal with an oversized reason");
      break;
    case wire::Envelope::kWelcome:
      if (env.welcome().worker_address().empty() || env.welcome().worker_address().size() > kMaxWorkerAddressBytes) {
        return Bad(peer, "welcome with a malformed worker address");
      }
      break;
    case wire::Envelope::kUser:
    case wire::Envelope::kHeartbeat:
      break;
    case wire::Envelope::BODY_NOT_SET:
      return Bad(peer, "control message without a body");
  }
  return env;
}

std::string EncodeRegion(uint64_t address, uint64_t length, const std::string& rkey) {
  wire::Region r;
  r.set_address(address);
  r.set_length(length);
  r.set_rkey(rkey);
  return r.SerializeAsString();
}

Result<DecodedRegion> DecodeRegion(std::string_view bytes, const std::string& peer) {
  wire::Region r;
  if (bytes.size() > kMaxRkeyBytes + 64 || !r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Bad(peer, "undecodable region descriptor (" + std::to_string(bytes.size()) + " bytes)");
  }
  if (r.length() == 0 || r.rkey().empty() || r.rkey().size() > kMaxRkeyBytes) {
    return Bad(peer, "region descriptor with an empty length or a malformed key");
  }
  if (r.address() + r.length() < r.address()) return Bad(peer, "region descriptor wraps the address space");
  return DecodedRegion{r.address(), r.length(), r.rkey()};
}

}  // namespace tenax::net
