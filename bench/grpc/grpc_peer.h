// gRPC baseline for the transport benchmark (bench only: not part of the
// runtime's layers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::bench {

// Serves TensorSink on 127.0.0.1:<port> from gRPC's own threads until
// destroyed; every pushed tensor is copied into a receive buffer.
class GrpcSinkServer {
 public:
  static Result<std::unique_ptr<GrpcSinkServer>> Start();
  ~GrpcSinkServer();
  uint16_t port() const { return port_; }

  struct Impl;

 private:
  GrpcSinkServer() = default;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// A client that pushes a list of (pointer, length, offset) tensors in one
// streaming call and waits for the acknowledgement.
class GrpcPusher {
 public:
  static Result<std::unique_ptr<GrpcPusher>> Connect(uint16_t port);
  ~GrpcPusher();
  struct Tensor {
    const uint8_t* data;
    size_t size;
    uint64_t offset;
  };
  Status Push(const std::vector<Tensor>& tensors);

  struct Impl;

 private:
  GrpcPusher() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax::bench
