#include "grpc_peer.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <mutex>

#include "tensor_sink.grpc.pb.h"

namespace tenax::bench {
namespace {
constexpr int kMaxMessage = 1 << 30;
}

struct GrpcSinkServer::Impl final : public TensorSink::Service {
  std::unique_ptr<grpc::Server> server;
  std::mutex mu;
  std::vector<uint8_t> buffer;

  grpc::Status Push(grpc::ServerContext*, grpc::ServerReader<TensorChunk>* reader, PushAck* ack) override {
    std::lock_guard<std::mutex> lock(mu);
    TensorChunk chunk;
    uint64_t total = 0;
    while (reader->Read(&chunk)) {
      const std::string& d = chunk.data();
      if (chunk.offset() + d.size() > buffer.size()) buffer.resize(chunk.offset() + d.size());
      std::memcpy(buffer.data() + chunk.offset(), d.data(), d.size());  // copy out, as a receiver must
      total += d.size();
    }
    ack->set_bytes(total);
    return grpc::Status::OK;
  }
};

Result<std::unique_ptr<GrpcSinkServer>> GrpcSinkServer::Start() {
  std::unique_ptr<GrpcSinkServer> s(new GrpcSinkServer());
  s->impl_ = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxMessage);
  builder.SetMaxSendMessageSize(kMaxMessage);
  builder.RegisterService(s->impl_.get());
  s->impl_->server = builder.BuildAndStart();
  if (!s->impl_->server || port == 0) return Unavailable("gRPC server did not start");
  s->port_ = static_cast<uint16_t>(port);
  return s;
}

GrpcSinkServer::~GrpcSinkServer() {
  if (impl_ && impl_->server) impl_->server->Shutdown();
}

struct GrpcPusher::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<TensorSink::Stub> stub;
};

Result<std::unique_ptr<GrpcPusher>> GrpcPusher::Connect(uint16_t port) {
  std::unique_ptr<GrpcPusher> p(new GrpcPusher());
  p->impl_ = std::make_unique<Impl>();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessage);
  args.SetMaxSendMessageSize(kMaxMessage);
  p->impl_->channel =
      grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
  if (!p->impl_->channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    return Unavailable("gRPC peer on port " + std::to_string(port) + " did not answer");
  }
  p->impl_->stub = TensorSink::NewStub(p->impl_->channel);
  return p;
}

GrpcPusher::~GrpcPusher() = default;

Status GrpcPusher::Push(const std::vector<Tensor>& tensors) {
  grpc::ClientContext ctx;
  PushAck ack;
  auto writer = impl_->stub->Push(&ctx, &ack);
  TensorChunk chunk;
  for (const auto& t : tensors) {
    chunk.set_offset(t.offset);
    chunk.set_data(t.data, t.size);  // serialisation copies, as TF's gRPC path does
    if (!writer->Write(chunk)) return Unavailable("gRPC stream broke");
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  if (!st.ok()) return Unavailable("gRPC push failed: " + st.error_message());
  return Status::Ok();
}

}  // namespace tenax::bench
