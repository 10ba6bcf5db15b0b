// A deliberately naive UCX client for the transport tests: it speaks to a
// Node's control plane (TCP, active message id 1) without following the
// protocol, so tests can inject lies and malformed frames into a live Node.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace tenax::testing {

class RawUcxClient {
 public:
  explicit RawUcxClient(uint16_t port);
  ~RawUcxClient();
  bool connected() const { return ep_ != nullptr; }
  // Sends one control frame (any bytes).
  void Send(const std::string& bytes);
  // The next frame received, or nothing if the connection closed or the time ran out.
  std::optional<std::string> Receive(std::chrono::milliseconds timeout);
  // True once the server closed or reset the connection (waits up to `timeout`).
  bool WaitClosed(std::chrono::milliseconds timeout);

 private:
  static ucs_status_t OnAm(void* arg, const void*, size_t, void* data, size_t length, const ucp_am_recv_param_t*);
  static void OnError(void* arg, ucp_ep_h, ucs_status_t);
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  bool closed_ = false;
  std::deque<std::string> frames_;
  std::vector<void*> pending_;
  std::vector<std::string> buffers_;
};

}  // namespace tenax::testing
