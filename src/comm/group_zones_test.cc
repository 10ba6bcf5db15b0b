// The zones of a group's members from the emulated topology (each Node's
// own host, its peers' from their handshakes, the links file's zones), as
// an elastic generation works them out: the same list on every member, a
// hierarchical sum over it that adds up, and the reasons it is refused.
#include "tenax/comm/group_zones.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>

#include "tenax/comm/hierarchical_allreduce.h"
#include "tenax/net/emulated_links.h"
#include "testing.h"
#include "thread_group.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;
using tenax::testing::RunThreadGroup;

std::shared_ptr<const net::EmulatedLinks> TwoZones() {
  auto links = std::make_shared<net::EmulatedLinks>();
  links->zone_of = {{"a1", "za"}, {"a2", "za"}, {"b1", "zb"}, {"b2", "zb"}};
  return links;  // ideal links: the zones matter here, not delays
}

TEST(GroupZones, WhyNotHierarchicalNamesWhatIsMissing) {
  EXPECT_EQ("", WhyNotHierarchical({"za", "zb", "za", "zb"}));
  EXPECT_EQ("", WhyNotHierarchical({"x", "y", "z"}));
  EXPECT_EQ("zones of unequal size (za: 2, zb: 1)", WhyNotHierarchical({"za", "zb", "za"}));
  EXPECT_EQ("every member is in zone za", WhyNotHierarchical({"za", "za"}));
  EXPECT_EQ("the zones of the members are not known", WhyNotHierarchical({}));
  EXPECT_EQ("zb: 2, za: 1", DescribeZones({"zb", "za", "zb"}));
}

// Four members on a1, b1, a2, b2: every member computes za, zb, za, zb, and
// the hierarchical allreduce over that list gives every member the exact
// sum (integers, so any order of additions gives the same value).
TEST(GroupZones, EveryMemberWorksOutTheSameZonesAndSumsZoneByZoneOverThem) {
  const std::vector<std::string> hosts = {"a1", "b1", "a2", "b2"};
  const auto links = TwoZones();
  constexpr size_t kCount = 70001;
  std::mutex mu;
  std::vector<std::vector<std::string>> seen(hosts.size());
  std::vector<std::vector<float>> sums(hosts.size());
  auto statuses = RunThreadGroup(
      4, "",
      [&](Group& g) -> Status {
        GroupZones z = ZonesOfGroup(g);
        if (z.zone_of_rank.empty()) return FailedPrecondition(z.why_unknown);
        TENAX_ASSIGN_OR_RETURN(auto h, HierarchicalAllreduce::Create(g, z.zone_of_rank, kCount, Deadline::After(20s)));
        for (size_t i = 0; i < kCount; ++i) h->data()[i] = static_cast<float>((g.rank() + 1) * 1000 + i % 997);
        TENAX_RETURN_IF_ERROR(h->Run(0, kCount, 1.0f, Deadline::After(20s)));
        std::lock_guard<std::mutex> lock(mu);
        seen[static_cast<size_t>(g.rank())] = z.zone_of_rank;
        sums[static_cast<size_t>(g.rank())].assign(h->data(), h->data() + kCount);
        return Status::Ok();
      },
      [&](int r, net::NodeOptions& o) {
        o.emulated_host = hosts[static_cast<size_t>(r)];
        o.emulated_links = links;
      });
  for (size_t r = 0; r < hosts.size(); ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
    EXPECT_EQ((std::vector<std::string>{"za", "zb", "za", "zb"}), seen[r]) << "rank " << r;
    ASSERT_EQ(kCount, sums[r].size());
    for (size_t i = 0; i < kCount; ++i) {
      // (1 + 2 + 3 + 4) x 1000 + 4 x (i mod 997)
      const float want = static_cast<float>(10000 + 4 * (i % 997));
      if (sums[r][i] != want) {
        ADD_FAILURE() << "rank " << r << " element " << i << ": " << sums[r][i] << ", want " << want;
        break;
      }
    }
  }
}

// A member on a host the links file does not list (or on none): no member
// gets a zone list, and the reason names that member.
TEST(GroupZones, AMemberOnAHostTheTopologyDoesNotListLeavesTheZonesUnknownNamingIt) {
  const auto links = TwoZones();
  std::mutex mu;
  std::vector<GroupZones> got(3);
  auto statuses = RunThreadGroup(
      3, "",
      [&](Group& g) -> Status {
        GroupZones z = ZonesOfGroup(g);
        std::lock_guard<std::mutex> lock(mu);
        got[static_cast<size_t>(g.rank())] = z;
        return Status::Ok();
      },
      [&](int r, net::NodeOptions& o) {
        o.emulated_host = r == 2 ? "c9" : (r == 0 ? "a1" : "b1");
        o.emulated_links = links;
      });
  for (size_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
    EXPECT_TRUE(got[r].zone_of_rank.empty()) << "rank " << r;
    EXPECT_NE(std::string::npos, got[r].why_unknown.find("rank 2")) << got[r].why_unknown;
    EXPECT_NE(std::string::npos, got[r].why_unknown.find("'c9'")) << got[r].why_unknown;
  }
}

TEST(GroupZones, WithoutAnEmulatedTopologyTheZonesAreUnknown) {
  std::mutex mu;
  std::vector<GroupZones> got(2);
  auto statuses = RunThreadGroup(2, "", [&](Group& g) -> Status {
    GroupZones z = ZonesOfGroup(g);
    std::lock_guard<std::mutex> lock(mu);
    got[static_cast<size_t>(g.rank())] = z;
    return Status::Ok();
  });
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message();
    EXPECT_TRUE(got[r].zone_of_rank.empty());
    EXPECT_NE(std::string::npos, got[r].why_unknown.find("no emulated topology")) << got[r].why_unknown;
  }
}

}  // namespace
}  // namespace tenax::comm
