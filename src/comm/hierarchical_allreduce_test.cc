// The zone-hierarchical allreduce across 4 and 6 ranks in 1 to 4 zones,
// each rank a Node on its own thread, over shared memory and TCP: results
// bitwise equal on every member and within float rounding of a float64
// sum; only one zone-sum per zone crossing between zones; segments that do
// not divide by the zone size, several pieces, queued segments; bad zone
// lists refused; a member that leaves fails the others naming it.
#include "tenax/comm/hierarchical_allreduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>

#include "testing.h"
#include "thread_group.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;
using tenax::testing::RunThreadGroup;

// Rank r's value at element i of round `salt`: non-integers of mixed sign
// and magnitude, so the order of the additions shows in the bits.
float Value(int rank, size_t i, uint64_t salt) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull + salt * 0x94D049BB133111EBull;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  // 24 random mantissa bits in [-1, 1), times 2^0..2^11.
  const float v = static_cast<float>(static_cast<int64_t>(h >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
  return v * static_cast<float>(1 << ((h >> 8) % 12));
}

struct Layout {
  std::vector<std::string> zones;  // by rank
  std::string name;
};

class HierarchicalTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 public:
  static const std::vector<Layout>& Layouts() {
    static const std::vector<Layout> l = {
        {{"a", "b", "a", "b"}, "2x2_interleaved"},
        {{"a", "a", "a", "b", "b", "b"}, "2x3"},
        {{"x", "y", "z", "x", "y", "z"}, "3x2"},
        {{"a", "b", "c", "d"}, "4x1"},
        {{"a", "a", "a", "a"}, "1x4"},
    };
    return l;
  }

 protected:
  const Layout& layout() const { return Layouts()[static_cast<size_t>(std::get<0>(GetParam()))]; }
  std::string transports() const { return std::string(std::get<1>(GetParam())) == "tcp" ? "tcp" : ""; }
};

TEST_P(HierarchicalTest, EveryMemberGetsTheSameBitsWithinRoundingOfTheExactSum) {
  const Layout& l = layout();
  const int world = static_cast<int>(l.zones.size());
  // (offset, count): below and above the zone size, not multiples of it,
  // more than one 64 KiB piece, and one not at offset 0.
  const std::vector<std::pair<size_t, size_t>> segments = {{0, 1}, {3, 5}, {0, 1001}, {7, 40003}, {0, 100000}};
  const size_t total = 100000 + 16;
  AllreduceOptions options;
  options.ring_piece_bytes = 64 << 10;
  std::mutex mu;
  std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(world));  // [rank][round]
  auto statuses = RunThreadGroup(world, transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto h, HierarchicalAllreduce::Create(g, l.zones, total, Deadline::After(20s), options));
    float* buf = h->data();
    uint64_t salt = 0;
    for (auto [off, n] : segments) {
      for (int rep = 0; rep < 2; ++rep, ++salt) {
        for (size_t i = 0; i < total; ++i) buf[i] = Value(g.rank(), i, salt);
        // Odd rounds read their values from caller memory and scale.
        std::vector<float> input;
        const float scale = rep == 1 ? 0.25f : 1.0f;
        if (rep == 1) input.assign(buf + off, buf + off + n);
        TENAX_RETURN_IF_ERROR(h->Start(off, n, scale, rep == 1 ? input.data() : nullptr));
        TENAX_RETURN_IF_ERROR(h->Wait(Deadline::After(20s)));
        for (size_t i = 0; i < total; ++i) {
          if ((i < off || i >= off + n) && buf[i] != Value(g.rank(), i, salt)) {
            return Internal("rank " + std::to_string(g.rank()) + " element " + std::to_string(i) +
                            " outside the segment changed");
          }
        }
        std::lock_guard<std::mutex> lock(mu);
        results[static_cast<size_t>(g.rank())].emplace_back(buf + off, buf + off + n);
      }
    }
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < world; ++r) ASSERT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
  uint64_t salt = 0;
  size_t round = 0;
  for (auto [off, n] : segments) {
    for (int rep = 0; rep < 2; ++rep, ++salt, ++round) {
      const double scale = rep == 1 ? 0.25 : 1.0;
      const std::vector<float>& first = results[0][round];
      for (int r = 1; r < world; ++r) {
        ASSERT_EQ(0, std::memcmp(first.data(), results[static_cast<size_t>(r)][round].data(), n * sizeof(float)))
            << "rank " << r << " differs from rank 0 in round " << round << " (" << n << " floats at " << off << ")";
      }
      for (size_t i = 0; i < n; ++i) {
        double exact = 0, magnitude = 0;
        for (int r = 0; r < world; ++r) {
          exact += Value(r, off + i, salt);
          magnitude += std::fabs(Value(r, off + i, salt));
        }
        // world - 1 float additions, each off by at most half an ulp of a
        // partial sum bounded by `magnitude`.
        const double tolerance = world * magnitude * scale * std::ldexp(1.0, -24);
        ASSERT_NEAR(exact * scale, first[i], tolerance) << "element " << off + i << " of round " << round;
      }
    }
  }
}

TEST_P(HierarchicalTest, QueuedSegmentsCompleteInOrder) {
  // Several segments started before one Wait: the zone queue must hold the
  // same operations in the same order on every member.
  const Layout& l = layout();
  const int world = static_cast<int>(l.zones.size());
  AllreduceOptions options;
  options.ring_piece_bytes = 16 << 10;
  const std::vector<std::pair<size_t, size_t>> segments = {{0, 10000}, {10000, 3}, {10003, 20000}, {30003, 17}};
  auto statuses = RunThreadGroup(world, transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto h, HierarchicalAllreduce::Create(g, l.zones, 30020, Deadline::After(20s), options));
    // Integers: every order of addition gives the exact sum.
    for (size_t i = 0; i < 30020; ++i) h->data()[i] = static_cast<float>((g.rank() + 1) * static_cast<int>(i % 1000));
    for (auto [off, n] : segments) TENAX_RETURN_IF_ERROR(h->Start(off, n, 1.0f));
    TENAX_ASSIGN_OR_RETURN(uint64_t before, h->Poll());
    if (before > segments.size()) return Internal("Poll counted more segments than were started");
    TENAX_RETURN_IF_ERROR(h->Wait(Deadline::After(20s)));
    TENAX_ASSIGN_OR_RETURN(uint64_t after, h->Poll());
    if (after != segments.size()) return Internal("Poll counted " + std::to_string(after) + " segments, want 4");
    const int ranks_sum = world * (world + 1) / 2;
    for (size_t i = 0; i < 30020; ++i) {
      const float want = static_cast<float>(ranks_sum * static_cast<int>(i % 1000));
      if (h->data()[i] != want) {
        return Internal("rank " + std::to_string(g.rank()) + " element " + std::to_string(i) + " is " +
                        std::to_string(h->data()[i]) + ", want " + std::to_string(want));
      }
    }
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < world; ++r) EXPECT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Zones, HierarchicalTest,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3, 4), ::testing::Values("shm", "tcp")),
                         [](const auto& info) {
                           return std::string(HierarchicalTest::Layouts()[static_cast<size_t>(std::get<0>(info.param))]
                                                  .name) +
                                  "_" + std::get<1>(info.param);
                         });

TEST(HierarchicalAllreduce, OnlyOneZoneSumPerZoneCrossesBetweenTwoZones) {
  // 2 zones of 2 over TCP: the bytes each zone sends to the other zone, over
  // all its members, are exactly one zone-sum (count floats), half on each
  // member's link. A flat ring 0-1-2-3 would send 1.5 zone-sums over the
  // one link 1->2 (6 steps of a quarter each).
  const std::vector<std::string> zones = {"a", "a", "b", "b"};
  const size_t count = 1 << 18;
  std::vector<uint64_t> cross(4), inside(4);
  auto statuses = RunThreadGroup(4, "tcp", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto h, HierarchicalAllreduce::Create(g, zones, count, Deadline::After(20s)));
    for (size_t i = 0; i < count; ++i) h->data()[i] = 1.0f;
    TENAX_RETURN_IF_ERROR(h->Run(0, count, 1.0f, Deadline::After(20s)));
    for (size_t i = 0; i < count; ++i) {
      if (h->data()[i] != 4.0f) return Internal("element " + std::to_string(i) + " is " + std::to_string(h->data()[i]));
    }
    cross[static_cast<size_t>(g.rank())] = h->cross_zone_bytes_sent();
    // Per peer: rank 0 writes to its zone peer 1 and its cross peer 2, never to 3.
    if (g.rank() == 0 && (h->bytes_sent_to(3) != 0 || h->bytes_sent_to(2) != h->cross_zone_bytes_sent() ||
                          h->bytes_sent_to(1) != h->zone_bytes_sent())) {
      return Internal("rank 0's bytes by peer: " + std::to_string(h->bytes_sent_to(1)) + ", " +
                      std::to_string(h->bytes_sent_to(2)) + ", " + std::to_string(h->bytes_sent_to(3)));
    }
    inside[static_cast<size_t>(g.rank())] = h->zone_bytes_sent();
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < 4; ++r) ASSERT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
  EXPECT_EQ(count * sizeof(float), cross[0] + cross[1]) << "zone a sent to zone b";
  EXPECT_EQ(count * sizeof(float), cross[2] + cross[3]) << "zone b sent to zone a";
  // Inside a zone of 2: half the vector out in the reduce-scatter, half in the allgather.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(count * sizeof(float), inside[static_cast<size_t>(r)]) << "rank " << r;
}

TEST(HierarchicalAllreduce, RefusesZonesOfUnequalSizeAndAWrongList) {
  auto statuses = RunThreadGroup(3, "", [&](Group& g) -> Status {
    auto unequal = HierarchicalAllreduce::Create(g, {"a", "a", "b"}, 64, Deadline::After(5s));
    if (unequal.ok() || unequal.status().code() != StatusCode::kInvalidArgument ||
        unequal.status().message().find("equal size") == std::string::npos) {
      return Internal("unequal zones: " + unequal.status().ToString());
    }
    auto short_list = HierarchicalAllreduce::Create(g, {"a", "b"}, 64, Deadline::After(5s));
    if (short_list.ok() || short_list.status().code() != StatusCode::kInvalidArgument) {
      return Internal("a list of 2 zones for 3 ranks: " + short_list.status().ToString());
    }
    return Status::Ok();
  });
  for (int r = 0; r < 3; ++r) EXPECT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
}

TEST(HierarchicalAllreduce, MembersThatChoseDifferentlyAreRefusedAtSetup) {
  // Rank 3 was told the flat ring (or other zones) while the others run the
  // hierarchical allreduce over zones a,a,b,b: whoever first receives an
  // offer of the other kind refuses it, and nobody completes a setup.
  for (const char* variant : {"flat", "other zones"}) {
    auto statuses = RunThreadGroup(4, "", [&](Group& g) -> Status {
      const auto deadline = Deadline::After(10s);
      if (g.rank() == 3) {
        if (std::string(variant) == "flat") return Allreduce::Create(g, 4096, deadline).status();
        return HierarchicalAllreduce::Create(g, {"a", "b", "a", "b"}, 4096, deadline).status();
      }
      return HierarchicalAllreduce::Create(g, {"a", "a", "b", "b"}, 4096, deadline).status();
    });
    // The first member to meet a mismatched offer names the other side;
    // the rest fail as their peers give up (never a sum, never a hang).
    int refused = 0;
    for (int r = 0; r < 4; ++r) {
      const Status& st = statuses[static_cast<size_t>(r)];
      EXPECT_FALSE(st.ok()) << variant << ": rank " << r << " completed its setup";
      if (st.code() == StatusCode::kFailedPrecondition && st.message().find("chose differently") != std::string::npos) {
        ++refused;
      }
    }
    EXPECT_GE(refused, 1) << variant;
    if (std::string(variant) == "flat") {
      EXPECT_EQ(StatusCode::kFailedPrecondition, statuses[2].code()) << statuses[2].ToString();
      EXPECT_NE(std::string::npos, statuses[2].message().find("(thread 3) runs the flat ring")) << statuses[2].ToString();
    }
  }
}

TEST(HierarchicalAllreduce, MemberThatLeavesFailsTheOthersNamingIt) {
  const std::vector<std::string> zones = {"a", "a", "b", "b"};
  auto statuses = RunThreadGroup(4, "", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto h, HierarchicalAllreduce::Create(g, zones, 100000, Deadline::After(20s)));
    TENAX_RETURN_IF_ERROR(h->Run(0, 100000, 1.0f, Deadline::After(20s)));
    if (g.rank() == 3) return Status::Ok();  // leaves: its Node closes
    Status st = h->Run(0, 100000, 1.0f, Deadline::After(20s));
    if (st.ok()) return Internal("completed without thread 3");
    // Every later call fails alike.
    Status again = h->Run(0, 10, 1.0f, Deadline::After(20s));
    if (again.code() != st.code()) return Internal("a later call: " + again.ToString());
    return st;
  });
  EXPECT_OK(statuses[3]);
  // Every other member fails, naming a member that is gone. Rank 2 shares
  // its zone with rank 3 and rank 1 its cross group, so at least one of
  // them names thread 3; a member may also see one of those fail first
  // and name it instead (losses arrive in any order).
  int named_3 = 0;
  for (int r : {0, 1, 2}) {
    const Status& st = statuses[static_cast<size_t>(r)];
    ASSERT_FALSE(st.ok()) << "rank " << r << " completed without thread 3";
    EXPECT_EQ(StatusCode::kPeerLost, st.code()) << "rank " << r << ": " << st.ToString();
    EXPECT_NE(std::string::npos, st.message().find("(thread ")) << "rank " << r << ": " << st.ToString();
    if (st.message().find("(thread 3)") != std::string::npos) ++named_3;
  }
  EXPECT_GE(named_3, 1);
}

}  // namespace
}  // namespace tenax::comm
