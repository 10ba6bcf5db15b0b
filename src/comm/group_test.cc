// The membership generation in the mesh hello: real Nodes on loopback, each
// on its own thread (the Node's threading rule). A member of another
// generation is refused on both ends with both generations named, and does
// not keep the current members from forming their group.
#include "tenax/comm/group.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
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


// Every rank of `g` adds (rank + 1) x {1, 2, 3}: the sum is checked.
Status SumOverWholeGroup(Group& g) {
  TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 3, Deadline::After(20s)));
  for (size_t i = 0; i < 3; ++i) ar->data()[i] = static_cast<float>((g.rank() + 1) * static_cast<int>(i + 1));
  TENAX_RETURN_IF_ERROR(ar->Run(0, 3, 1.0f, Deadline::After(20s)));
  const int w = g.world();
  for (size_t i = 0; i < 3; ++i) {
    const float want = static_cast<float>(w * (w + 1) / 2 * static_cast<int>(i + 1));
    if (ar->data()[i] != want) {
      return Internal("rank " + std::to_string(g.rank()) + ": element " + std::to_string(i) + " is " +
                      std::to_string(ar->data()[i]) + ", want " + std::to_string(want));
    }
  }
  return g.Barrier(Deadline::After(20s));
}

// The case an elastic job failed on (docs/elastic.md): generation 2 adds
// joiner J, but member M skips it (generation 3 is out before M reaches its
// step boundary). A formed generation 2 with J; M never connected to J.
// Generation 3 keeps J marked joining because generation 1 is the newest
// every member formed (the stable one): A and M reuse their generation-1
// connection, J dials both anew, and a sum over generation 3 is right.
TEST(GroupGeneration, AMemberThatSkippedAGenerationReformsFromTheStableOne) {
  std::promise<std::vector<GroupMember>> roster_promise;
  std::shared_future<std::vector<GroupMember>> roster = roster_promise.get_future().share();
  std::promise<void> a_gen1, m_gen1, gen2_done_promise;
  std::shared_future<void> a_gen1_done = a_gen1.get_future().share(), m_gen1_done = m_gen1.get_future().share();
  std::shared_future<void> gen2_done = gen2_done_promise.get_future().share();
  auto members_of = [&](std::vector<uint32_t> ids, std::set<uint32_t> joining) -> Result<std::vector<GroupMember>> {
    if (roster.wait_for(20s) != std::future_status::ready) return DeadlineExceeded("no roster");
    std::vector<GroupMember> all = roster.get(), out;
    for (uint32_t id : ids) {
      out.push_back(all[id]);
      out.back().joining = joining.count(id) > 0;
    }
    return out;
  };
  auto wait_gen2 = [&]() -> Status {
    return gen2_done.wait_for(30s) == std::future_status::ready ? Status::Ok() : DeadlineExceeded("generation 2");
  };
  NodeThread a("A", [&](net::Node& node) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto g1m, members_of({0, 1}, {0, 1}));
    TENAX_ASSIGN_OR_RETURN(auto g1, Group::Connect(node, "job-s", 1, 0, g1m, Deadline::After(20s)));
    a_gen1.set_value();
    const auto stable = g1->ConnectionsById();
    TENAX_ASSIGN_OR_RETURN(auto g2m, members_of({0, 1, 2}, {2}));
    TENAX_ASSIGN_OR_RETURN(auto g2, Group::Reform(*g1, stable, "job-s", 2, 0, g2m, Deadline::After(20s)));
    TENAX_RETURN_IF_ERROR(wait_gen2());
    TENAX_ASSIGN_OR_RETURN(auto g3m, members_of({0, 1, 2}, {2}));
    TENAX_ASSIGN_OR_RETURN(auto g3, Group::Reform(*g2, stable, "job-s", 3, 0, g3m, Deadline::After(20s)));
    if (g3->peer(1) != stable.at(1)) return Internal("A did not keep its connection to M");
    return SumOverWholeGroup(*g3);
  });
  NodeThread m("M", [&](net::Node& node) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto g1m, members_of({0, 1}, {0, 1}));
    TENAX_ASSIGN_OR_RETURN(auto g1, Group::Connect(node, "job-s", 1, 1, g1m, Deadline::After(20s)));
    m_gen1.set_value();
    const auto stable = g1->ConnectionsById();
    TENAX_RETURN_IF_ERROR(wait_gen2());  // skips generation 2
    TENAX_ASSIGN_OR_RETURN(auto g3m, members_of({0, 1, 2}, {2}));
    TENAX_ASSIGN_OR_RETURN(auto g3, Group::Reform(*g1, stable, "job-s", 3, 1, g3m, Deadline::After(20s)));
    return SumOverWholeGroup(*g3);
  });
  NodeThread j("J", [&](net::Node& node) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto g2m, members_of({0, 1, 2}, {2}));
    if (a_gen1_done.wait_for(20s) != std::future_status::ready || m_gen1_done.wait_for(20s) != std::future_status::ready) {
      gen2_done_promise.set_value();
      return DeadlineExceeded("generation 1 was not formed");
    }
    // It reaches A (rank 0) and then waits in vain for M.
    auto g2 = Group::Join(node, "job-s", 2, 2, g2m, Deadline::After(2s));
    gen2_done_promise.set_value();
    if (g2.ok()) return Internal("J formed generation 2 without M");
    TENAX_ASSIGN_OR_RETURN(auto g3m, members_of({0, 1, 2}, {2}));
    TENAX_ASSIGN_OR_RETURN(auto g3, Group::Join(node, "job-s", 3, 2, g3m, Deadline::After(20s)));
    return SumOverWholeGroup(*g3);
  });
  ASSERT_TRUE(a.port() != 0 && m.port() != 0 && j.port() != 0);
  std::vector<GroupMember> all;
  uint32_t id = 0;
  for (auto [name, port] : {std::pair<const char*, uint16_t>{"A", a.port()}, {"M", m.port()}, {"J", j.port()}}) {
    GroupMember member{"127.0.0.1", port, name};
    member.id = id++;
    all.push_back(member);
  }
  roster_promise.set_value(all);
  const Status sa = a.Join(), sm = m.Join(), sj = j.Join();
  EXPECT_TRUE(sa.ok()) << sa.ToString();
  EXPECT_TRUE(sm.ok()) << sm.ToString();
  EXPECT_TRUE(sj.ok()) << sj.ToString();
}

// Generations that overtake each other (a join and a leave moments apart,
// the race ElasticClusterTest.AJoinAndALeaveMomentsApart... runs): rank 1 is
// still forming generation 4 when rank 0 dials it for generation 5. Rank 1's
// wait ends at once with Aborted naming the newer generation (before, it
// waited out its whole deadline), and rank 0 dials it again instead of
// failing, so both form generation 5 and a sum over it is right.
TEST(GroupGeneration, AMemberStillAtAnOlderGenerationLeavesItAndTheDialerTriesAgain) {
  Status superseded;
  NodeThread rank1("rank-1", [&](net::Node& node) -> Status {
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", 0, "rank 1"}};
    superseded = Group::Connect(node, "job-g", 4, 1, members, Deadline::After(60s)).status();
    TENAX_ASSIGN_OR_RETURN(auto group, Group::Connect(node, "job-g", 5, 1, members, Deadline::After(20s)));
    return SumOverGroup(*group);
  });
  ASSERT_NE(0, rank1.port());
  NodeThread rank0("rank-0", [&](net::Node& node) -> Status {
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0"}, {"127.0.0.1", rank1.port(), "rank 1"}};
    TENAX_ASSIGN_OR_RETURN(auto group, Group::Connect(node, "job-g", 5, 0, members, Deadline::After(20s)));
    return SumOverGroup(*group);
  });
  const Status s0 = rank0.Join();
  const Status s1 = rank1.Join();
  EXPECT_TRUE(s0.ok()) << s0.ToString();
  EXPECT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(StatusCode::kAborted, superseded.code()) << superseded.ToString();
  EXPECT_EQ(0u, superseded.message().find("generation 4 is superseded: rank 0 at 127.0.0.1:")) << superseded.ToString();
  EXPECT_NE(std::string::npos, superseded.message().find(" is at membership generation 5")) << superseded.ToString();
}

// A forming group consults its interrupt while it waits: the status the
// interrupt returns ends the wait (an elastic member's: a newer generation
// was published, so the joiner it waits for may never come).
TEST(GroupGeneration, AFormingGroupStopsWaitingWhenItsInterruptSaysSo) {
  int asked = 0;
  NodeThread rank1("rank-1", [&](net::Node& node) -> Status {
    std::vector<GroupMember> members{{"127.0.0.1", 0, "rank 0", 7, true}, {"127.0.0.1", 0, "rank 1", 8, true}};
    auto interrupt = [&]() -> Status {
      return ++asked < 3 ? Status::Ok() : Aborted("generation 9 was published");
    };
    return Group::Join(node, "job-g", 8, 1, members, Deadline::After(60s), interrupt).status();
  });
  const Status s1 = rank1.Join();
  EXPECT_EQ(StatusCode::kAborted, s1.code()) << s1.ToString();
  EXPECT_EQ("generation 9 was published", s1.message());
  EXPECT_EQ(3, asked);
}

}  // namespace
}  // namespace tenax::comm
