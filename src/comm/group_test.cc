// The membership generation in the mesh hello: real Nodes on loopback, each
// on its own thread (the Node's threading rule). A member of another
// generation is refused on both ends with both generations named, and does
// not keep the current members from forming their group.
#include "tenax/comm/group.h"

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <thread>

#include "tenax/comm/allreduce.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;

// A thread that creates a Node listening on 127.0.0.1, publishes its port,
// then runs `body` with it.
class NodeThread {
 public:
  NodeThread(const std::string& name, std::function<Status(net::Node&)> body) {
    auto port = port_.get_future();
    thread_ = std::thread([this, name, body = std::move(body)] {
      net::NodeOptions o;
      o.name = name;
      o.secret = "group-test-secret-0123456789abcdef";
      o.net_devices = "lo";
      auto node = net::Node::Create(o);
      auto listening = node.ok() ? (*node)->Listen("127.0.0.1", 0) : Result<uint16_t>(node.status());
      port_.set_value(listening.ok() ? *listening : uint16_t{0});
      status_ = listening.ok() ? body(**node) : listening.status();
    });
    listening_port_ = port.get();
  }
  ~NodeThread() {
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return listening_port_; }
  Status Join() {
    thread_.join();
    return status_;
  }

 private:
  std::promise<uint16_t> port_;
  uint16_t listening_port_ = 0;
  std::thread thread_;
  Status status_;
};

// Two ranks form a group and sum {1,2,3} x (rank+1) over it.
Status SumOverGroup(Group& g) {
  TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 3, Deadline::After(20s)));
  for (size_t i = 0; i < 3; ++i) ar->data()[i] = static_cast<float>((g.rank() + 1) * static_cast<int>(i + 1));
  TENAX_RETURN_IF_ERROR(ar->Run(0, 3, 1.0f, Deadline::After(20s)));
  for (size_t i = 0; i < 3; ++i) {
    const float want = static_cast<float>(3 * (i + 1));  // (1 + 2) * (i + 1)
    if (ar->data()[i] != want) {
      return Internal("rank " + std::to_string(g.rank()) + ": element " + std::to_string(i) + " is " +
                      std::to_string(ar->data()[i]) + ", want " + std::to_string(want));
    }
  }
  return g.Barrier(Deadline::After(20s));
}

TEST(GroupGeneration, AStaleMemberIsRefusedAndTheCurrentOneStillJoins) {
  NodeThread rank1("rank-1", [](net::Node& node) -> Status {
    // Rank 1 only accepts (from rank 0), so rank 0's entry is never dialled.
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", 0, "rank 1"}};
    TENAX_ASSIGN_OR_RETURN(auto group, Group::Connect(node, "job-g", 2, 1, members, Deadline::After(20s)));
    return SumOverGroup(*group);
  });
  ASSERT_NE(0, rank1.port());
  const std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", rank1.port(), "rank 1"}};
  // A rank 0 left over from generation 1 dials first, and hears why it is refused.
  NodeThread stale("stale-rank-0", [&](net::Node& node) -> Status {
    return Group::Connect(node, "job-g", 1, 0, members, Deadline::After(20s)).status();
  });
  const Status refused = stale.Join();
  EXPECT_EQ(StatusCode::kFailedPrecondition, refused.code()) << refused.ToString();
  EXPECT_EQ("rank 0 refused by its group: rank 1 at 127.0.0.1:" + std::to_string(rank1.port()) +
                " is at membership generation 2, rank 0 at generation 1",
            refused.message());
  // The current rank 0 then forms the group with rank 1, and a sum over it is right.
  NodeThread rank0("rank-0", [&](net::Node& node) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto group, Group::Connect(node, "job-g", 2, 0, members, Deadline::After(20s)));
    return SumOverGroup(*group);
  });
  const Status s0 = rank0.Join();
  const Status s1 = rank1.Join();
  EXPECT_TRUE(s0.ok()) << s0.ToString();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
}

TEST(GroupGeneration, TheAcceptingRankNamesTheRefusedPeerWhenNobodyElseCame) {
  NodeThread rank1("rank-1", [](net::Node& node) -> Status {
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", 0, "rank 1"}};
    return Group::Connect(node, "job-g", 5, 1, members, Deadline::After(3s)).status();
  });
  ASSERT_NE(0, rank1.port());
  NodeThread rank0("rank-0", [&](net::Node& node) -> Status {
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", rank1.port(), "rank 1"}};
    return Group::Connect(node, "job-g", 4, 0, members, Deadline::After(20s)).status();
  });
  const Status s0 = rank0.Join();
  EXPECT_EQ(StatusCode::kFailedPrecondition, s0.code()) << s0.ToString();
  EXPECT_NE(std::string::npos, s0.message().find("is at membership generation 5, rank 0 at generation 4"))
      << s0.ToString();
  const Status s1 = rank1.Join();
  EXPECT_EQ(StatusCode::kDeadlineExceeded, s1.code()) << s1.ToString();
  const std::string& m = s1.message();
  EXPECT_EQ(0u, m.find("rank(s) 0 never connected to rank 1: ")) << m;
  // The refused peer's address is its outgoing one, so only its prefix is known.
  EXPECT_NE(std::string::npos, m.find("(refused: rank 0 at 127.0.0.1:")) << m;
  EXPECT_NE(std::string::npos, m.find(" is at membership generation 4, rank 1 at generation 5)")) << m;
}

}  // namespace
}  // namespace tenax::comm
