#include "tenax/comm/channel_codec.h"

#include "tenax/net/bounded_decode.h"

namespace tenax::comm {
namespace {

constexpr auto& Bad = net::BadMessage;

template <typename Msg>
Result<Msg> Parse(std::string_view bytes, const std::string& peer, const char* what) {
  return net::DecodeBoundedProto<Msg>(bytes, kMaxChannelMessageBytes, peer, what);
}

}  // namespace

Result<wire::ArenaOffer> DecodeArenaOffer(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::ArenaOffer>(bytes, peer, "arena offer"));
  if (m.region().empty()) return Bad(peer, "arena offer without a region");
  return m;
}

std::string EncodeDynamicTensor(const TensorSpec& spec, uint64_t offset, uint64_t length, uint64_t sequence) {
  wire::DynamicTensor m;
  m.set_name(spec.name);
  m.set_dtype(static_cast<uint32_t>(spec.dtype));
  for (int64_t d : spec.shape) m.add_shape(d);
  m.set_offset(offset);
  m.set_length(length);
  m.set_sequence(sequence);
  return m.SerializeAsString();
}

Result<DynamicAnnouncement> DecodeDynamicTensor(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::DynamicTensor>(bytes, peer, "dynamic tensor"));
  if (m.dtype() >= kDTypeCount) return Bad(peer, "dynamic tensor with unknown dtype " + std::to_string(m.dtype()));
  if (m.shape_size() > static_cast<int>(kMaxTensorRank)) return Bad(peer, "dynamic tensor of rank > 16");
  if (m.name().empty() || m.name().size() > 1024) return Bad(peer, "dynamic tensor with a bad name");
  DynamicAnnouncement a;
  a.spec.name = m.name();
  a.spec.dtype = static_cast<DType>(m.dtype());
  a.spec.dynamic = true;
  uint64_t bytes_needed = DTypeSize(a.spec.dtype);
  for (int64_t d : m.shape()) {
    if (d < 0 || (d > 0 && bytes_needed > (uint64_t{1} << 48) / static_cast<uint64_t>(d))) {
      return Bad(peer, "dynamic tensor '" + m.name() + "' with an impossible shape");
    }
    bytes_needed *= static_cast<uint64_t>(d);
    a.spec.shape.push_back(d);
  }
  if (bytes_needed != m.length()) {
    return Bad(peer, "dynamic tensor '" + m.name() + "' announces " + std::to_string(m.length()) +
                         " bytes but its shape needs " + std::to_string(bytes_needed));
  }
  if (m.offset() + m.length() < m.offset()) return Bad(peer, "dynamic tensor range wraps");
  a.offset = m.offset();
  a.length = m.length();
  a.sequence = m.sequence();
  return a;
}

Result<uint64_t> DecodeDynamicDone(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::DynamicDone>(bytes, peer, "dynamic-done"));
  return m.sequence();
}

std::string EncodeMeshHello(const std::string& job_id, uint32_t rank, uint32_t world, uint64_t generation) {
  wire::MeshHello m;
  m.set_job_id(job_id);
  m.set_rank(rank);
  m.set_world(world);
  m.set_generation(generation);
  return m.SerializeAsString();
}

Result<wire::MeshHello> DecodeMeshHello(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::MeshHello>(bytes, peer, "mesh hello"));
  if (m.world() == 0 || m.world() > kMaxGroupRanks) return Bad(peer, "mesh hello with world " + std::to_string(m.world()));
  if (m.rank() >= m.world()) {
    return Bad(peer, "mesh hello with rank " + std::to_string(m.rank()) + " of world " + std::to_string(m.world()));
  }
  if (m.job_id().size() > 256) return Bad(peer, "mesh hello with a job id longer than 256 bytes");
  return m;
}

Result<wire::CollectiveOffer> DecodeCollectiveOffer(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::CollectiveOffer>(bytes, peer, "collective offer"));
  if (m.buffer().empty() || m.scratch().empty()) return Bad(peer, "collective offer without its regions");
  return m;
}

Result<wire::StateOffer> DecodeStateOffer(std::string_view bytes, const std::string& peer) {
  TENAX_ASSIGN_OR_RETURN(auto m, Parse<wire::StateOffer>(bytes, peer, "state offer"));
  if (m.region().empty()) return Bad(peer, "state offer without its region");
  if (m.bytes() == 0 || m.bytes() % 4 != 0 || m.bytes() > (uint64_t{16} << 30) || m.applied_steps() < 0) {
    return Bad(peer, "state offer of " + std::to_string(m.bytes()) + " bytes at step " +
                         std::to_string(m.applied_steps()));
  }
  return m;
}

}  // namespace tenax::comm
