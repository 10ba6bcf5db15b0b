#include "raw_ucx_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <stdexcept>

namespace tenax::testing {

RawUcxClient::RawUcxClient(uint16_t port) {
  ucp_config_t* config = nullptr;
  ucp_config_read(nullptr, nullptr, &config);
  ucp_config_modify(config, "TLS", "tcp");
  ucp_config_modify(config, "NET_DEVICES", "lo");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  if (ucp_init(&params, config, &context_) != UCS_OK) throw std::runtime_error("ucp_init");
  ucp_config_release(config);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucp_worker_create(context_, &wp, &worker_) != UCS_OK) throw std::runtime_error("worker");
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = 1;
  hp.cb = &RawUcxClient::OnAm;
  hp.arg = this;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  ucp_worker_set_am_recv_handler(worker_, &hp);

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  ep.sockaddr.addrlen = sizeof addr;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &RawUcxClient::OnError;
  ep.err_handler.arg = this;
  if (ucp_ep_create(worker_, &ep, &ep_) != UCS_OK) ep_ = nullptr;
}

RawUcxClient::~RawUcxClient() {
  if (ep_) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(ep_, &p);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < until) {
      ucp_worker_progress(worker_);
    }
    if (req && !UCS_PTR_IS_ERR(req)) ucp_request_free(req);
  }
  for (void* r : pending_) ucp_request_free(r);
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
}

ucs_status_t RawUcxClient::OnAm(void* arg, const void*, size_t, void* data, size_t length, const ucp_am_recv_param_t*) {
  static_cast<RawUcxClient*>(arg)->frames_.emplace_back(static_cast<char*>(data), length);
  return UCS_OK;
}

void RawUcxClient::OnError(void* arg, ucp_ep_h, ucs_status_t) { static_cast<RawUcxClient*>(arg)->closed_ = true; }

void RawUcxClient::Send(const std::string& bytes) {
  if (!ep_) return;
  buffers_.push_back(bytes);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  void* req = ucp_am_send_nbx(ep_, 1, nullptr, 0, buffers_.back().data(), buffers_.back().size(), &p);
  if (req && !UCS_PTR_IS_ERR(req)) pending_.push_back(req);
}

std::optional<std::string> RawUcxClient::Receive(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (frames_.empty() && !closed_ && std::chrono::steady_clock::now() < until) ucp_worker_progress(worker_);
  if (frames_.empty()) return std::nullopt;
  std::string f = std::move(frames_.front());
  frames_.pop_front();
  return f;
}

bool RawUcxClient::WaitClosed(std::chrono::milliseconds timeout) {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (!closed_ && std::chrono::steady_clock::now() < until) {
    ucp_worker_progress(worker_);
    frames_.clear();
  }
  return closed_;
}

}  // namespace tenax::testing
