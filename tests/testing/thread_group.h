// Runs a collective body on `world` threads, each with its own net::Node
// (the Node's threading rule), connected as a comm::Group on loopback.
// Header-only so only the tests that link comm include it.
#pragma once

#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "tenax/comm/group.h"

namespace tenax::testing {

// Returns each rank's status (index = rank). A rank whose setup or body
// fails records that Status and returns, never aborting the binary: bodies
// use TENAX_ASSIGN_OR_RETURN on Results, and the test asserts every rank's
// Status with ASSERT_OK(statuses[r]) << "rank " << r.
// `configure`, when given, adjusts rank r's NodeOptions before its Node
// is created (e.g. an emulated host).
inline std::vector<Status> RunThreadGroup(int world, const std::string& transports,
                                          const std::function<Status(comm::Group&)>& body,
                                          const std::function<void(int, net::NodeOptions&)>& configure = nullptr) {
  using namespace std::chrono_literals;
  std::vector<Status> status(static_cast<size_t>(world));
  std::vector<comm::GroupMember> members(static_cast<size_t>(world));
  std::latch listening(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto& st = status[static_cast<size_t>(r)];
      net::NodeOptions o;
      o.name = "rank-" + std::to_string(r);
      o.secret = "thread-group-test-secret-0123456789";
      o.transports = transports;
      o.net_devices = "lo";
      if (configure) configure(r, o);
      auto node = net::Node::Create(o);
      auto port = node.ok() ? (*node)->Listen("127.0.0.1", 0) : Result<uint16_t>(node.status());
      members[static_cast<size_t>(r)] = {"127.0.0.1", port.ok() ? *port : uint16_t{0}, "thread " + std::to_string(r)};
      listening.arrive_and_wait();
      if (!port.ok()) {
        st = port.status();
        return;
      }
      auto group = comm::Group::Connect(**node, "job-a", /*generation=*/1, r, members, Deadline::After(20s));
      st = group.ok() ? body(**group) : group.status();
    });
  }
  for (auto& t : threads) t.join();
  return status;
}

}  // namespace tenax::testing
