// Fuzzes the decoders of the probes' messages (sched/probe/sched_codec.h) and the
// link-matrix JSON that a link answer carries: any bytes decode or give
// ProtocolError (InvalidArgument for the JSON); what decodes is in bounds.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tenax/net/emulated_links.h"
#include "tenax/sched/probe/link_matrix.h"
#include "tenax/sched/probe/sched_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  using tenax::StatusCode;
  auto protocol_error = [](const tenax::Status& st) {
    if (st.code() != StatusCode::kProtocolError) std::abort();
  };
  if (auto r = tenax::sched::DecodeProbeReport(bytes, "fuzz"); r.ok()) {
    for (const auto& s : r->samples()) {
      if (!(s.loss() >= 0 && s.loss() <= 1) || !std::isfinite(s.rtt_ms()) || s.peer() == r->agent().node()) std::abort();
    }
    if (r->agent().port() == 0 || r->agent().port() > 65535) std::abort();
  } else {
    protocol_error(r.status());
  }
  if (auto r = tenax::sched::DecodeProbeRoster(bytes, "fuzz"); r.ok()) {
    if (r->agents_size() > tenax::sched::kMaxProbeAgents) std::abort();
  } else {
    protocol_error(r.status());
  }
  if (auto a = tenax::sched::DecodeLinkAnswer(bytes, "fuzz"); !a.ok()) protocol_error(a.status());
  if (auto o = tenax::sched::DecodeProbeOffer(bytes, "fuzz"); o.ok()) {
    if (o->length() == 0 || o->rkey().empty()) std::abort();
  } else {
    protocol_error(o.status());
  }
  if (auto m = tenax::sched::LinkMatrix::FromJson(std::string(bytes)); m.ok()) {
    for (const auto& e : m->Entries()) {
      if (e.a == e.b || !(e.metrics.loss >= 0 && e.metrics.loss <= 1)) std::abort();
    }
  } else if (m.status().code() != StatusCode::kInvalidArgument) {
    std::abort();
  }
  // The launcher's emulated-links file (net/emulated_links.h).
  if (auto e = tenax::net::EmulatedLinks::FromJson(std::string(bytes)); e.ok()) {
    for (const auto& [host, zone] : e->zone_of) {
      const auto shape = e->Between(host, host);
      if (!shape.is_ideal()) std::abort();
    }
    if (e->same_zone.loss > 0.9 || e->cross_zone.loss > 0.9) std::abort();
  } else if (e.status().code() != StatusCode::kInvalidArgument) {
    std::abort();
  }
  return 0;
}
