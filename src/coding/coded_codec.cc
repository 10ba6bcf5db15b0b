#include "tenax/coding/coded_codec.h"

#include <cmath>

#include "tenax/net/bounded_decode.h"

namespace tenax::coding {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxCodedMessageBytes, peer, what);
}

}  // namespace

Result<wire::CodedWelcome> DecodeCodedWelcome(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::CodedWelcome>(bytes, peer, "decoder welcome"));
  if (m.workers() < 1 || m.workers() > kMaxCodedWorkers) {
    return Bad(peer, "welcome for " + std::to_string(m.workers()) + " workers");
  }
  if (m.param_count() == 0 || m.param_count() > kMaxCodedFloats) {
    return Bad(peer, "welcome for a model of " + std::to_string(m.param_count()) + " floats");
  }
  const uint64_t slot = m.param_count() * sizeof(float);
  if (m.model_length() != CodedModelRegionBytes(m.param_count()) || m.slots_length() != slot * m.workers()) {
    return Bad(peer, "welcome with regions of " + std::to_string(m.model_length()) + " and " +
                         std::to_string(m.slots_length()) + " bytes for " + std::to_string(m.param_count()) +
                         " floats and " + std::to_string(m.workers()) + " workers");
  }
  if (m.slot_offset() % slot != 0 || m.slot_offset() / slot >= m.workers()) {
    return Bad(peer, "welcome with slot offset " + std::to_string(m.slot_offset()));
  }
  if (m.model_rkey().empty() || m.slots_rkey().empty() || m.model_rkey().size() > 4096 ||
      m.slots_rkey().size() > 4096 || m.model_address() == 0 || m.slots_address() == 0) {
    return Bad(peer, "welcome with an unusable region key");
  }
  if (m.scheme().size() > 64) return Bad(peer, "welcome with an overlong scheme name");
  return m;
}

Result<wire::CodedStep> DecodeCodedStep(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::CodedStep>(bytes, peer, "coded step"));
  if (m.step() < 0 || m.step() > kMaxCodedSteps) return Bad(peer, "coded step " + std::to_string(m.step()));
  if (!m.done() && !m.summary_json().empty()) return Bad(peer, "a statistics summary before the last step");
  return m;
}

Result<wire::CodedReady> DecodeCodedReady(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::CodedReady>(bytes, peer, "coded result notice"));
  if (m.step() < 0 || m.step() > kMaxCodedSteps) return Bad(peer, "result for step " + std::to_string(m.step()));
  if (!std::isfinite(m.compute_seconds()) || m.compute_seconds() < 0 || m.compute_seconds() > 1e6) {
    return Bad(peer, "result with compute time " + std::to_string(m.compute_seconds()));
  }
  return m;
}

}  // namespace tenax::coding
