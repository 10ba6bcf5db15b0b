#include "tenax/sched/k8s/coordinator_state_source.h"

#include <spdlog/spdlog.h>

#include "tenax/net/node.h"
#include "tenax/sched/probe/link_book.h"

namespace tenax::sched {

CoordinatorStateSource::CoordinatorStateSource(std::string host, uint16_t port, std::string secret,
                                               std::chrono::milliseconds refresh,
                                               std::unique_ptr<ClusterStateSource> base)
    : host_(std::move(host)), secret_(std::move(secret)), port_(port), refresh_(refresh), base_(std::move(base)) {
  thread_ = std::thread([this] { Loop(); });
}

CoordinatorStateSource::~CoordinatorStateSource() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<const ClusterSnapshot> CoordinatorStateSource::Snapshot() {
  std::shared_ptr<const ClusterSnapshot> base = base_ ? base_->Snapshot() : EmptySnapshot();
  std::lock_guard<std::mutex> lock(mu_);
  if (!links_) return base;
  auto s = std::make_shared<ClusterSnapshot>(*base);
  s->links = links_;
  for (const auto& [node, zone] : agent_zones_) s->zones.emplace(node, zone);  // the base file wins
  return s;
}

void CoordinatorStateSource::Loop() {
  // The node lives on this thread (net::Node is single-threaded).
  std::unique_ptr<net::Node> node;
  net::PeerId peer = 0;
  bool connected = false;
  bool failing = false;
  while (true) {
    Status st = Status::Ok();
    if (!node) {
      net::NodeOptions no;
      no.name = "sched-extender";
      no.secret = secret_;
      auto n = net::Node::Create(no);
      if (n.ok()) node = std::move(n).value();
      else st = n.status();
    }
    if (node && (!connected || !node->PeerStatus(peer).ok())) {
      auto p = node->Connect(host_, port_, Deadline::After(std::chrono::seconds(5)));
      connected = p.ok();
      if (connected) {
        peer = *p;
      } else {
        st = p.status();
      }
    }
    if (node && connected) {
      auto s = QueryLinks(*node, peer, Deadline::After(std::chrono::seconds(5)));
      if (s.ok()) {
        auto links = std::make_shared<LinkMatrix>(std::move(s->links));
        std::map<std::string, std::string> zones;
        for (const auto& a : s->agents) zones[a.node] = a.zone;
        {
          std::lock_guard<std::mutex> lock(mu_);
          links_ = std::move(links);
          agent_zones_ = std::move(zones);
        }
        refreshes_.fetch_add(1);
        if (failing) spdlog::info("coordinator {}:{} answers again", host_, port_);
        failing = false;
      } else {
        st = s.status();
        connected = false;
      }
    }
    if (!st.ok() && !failing) {
      spdlog::warn("coordinator {}:{}: no link matrix ({}); keeping the last one and retrying every {} ms", host_,
                   port_, st.message(), refresh_.count());
      failing = true;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, refresh_, [this] { return stop_; })) break;
  }
}

}  // namespace tenax::sched
