// The gRPC peer of a tenax-bench built without its peers
// (-DTENAX_BENCH_PEERS=OFF, e.g. on the GPU machine, which has no gRPC):
// every call says so, and the transport bench reports it as its error.
#include "grpc_peer.h"

namespace tenax::bench {

struct GrpcSinkServer::Impl {};
struct GrpcPusher::Impl {};

namespace {
Status NotBuilt() {
  return Unavailable("tenax-bench was built without its gRPC peer (-DTENAX_BENCH_PEERS=OFF): "
                     "rebuild with the peers to compare with gRPC");
}
}  // namespace

Result<std::unique_ptr<GrpcSinkServer>> GrpcSinkServer::Start() { return NotBuilt(); }
GrpcSinkServer::~GrpcSinkServer() = default;
Result<std::unique_ptr<GrpcPusher>> GrpcPusher::Connect(uint16_t) { return NotBuilt(); }
GrpcPusher::~GrpcPusher() = default;
Status GrpcPusher::Push(const std::vector<Tensor>&) { return NotBuilt(); }

}  // namespace tenax::bench
