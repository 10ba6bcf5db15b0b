// Allreduce across 1..4 ranks, each a Node on its own thread (the Node's
// threading rule), over shared memory and forced TCP; segment sizes that do
// not divide by the rank count, both algorithms, queued segments, and the
// failure paths (a member that leaves, a deadline).
#include "tenax/comm/allreduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <latch>
#include <random>
#include <thread>

#include "thread_group.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;

using tenax::testing::RunThreadGroup;

// Element i of rank r's input: integers, so every sum is exact.
float Input(int rank, size_t i, uint64_t salt) { return static_cast<float>((rank + 1) * 3 + static_cast<int>((i * 7 + salt) % 13)); }
float Expected(int world, size_t i, uint64_t salt) {
  float sum = 0;
  for (int r = 0; r < world; ++r) sum += Input(r, i, salt);
  return sum;
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  // "shm": plain stores into mapped peer memory; "shm_puts": one-sided
  // puts over shared memory; "tcp": puts over TCP (never mappable).
  std::string variant() const { return std::get<1>(GetParam()); }
  std::string transports() const { return variant() == "tcp" ? "tcp" : ""; }
  AllreduceOptions options() const {
    AllreduceOptions o;
    o.allow_mapping = variant() == "shm";
    return o;
  }
};

TEST_P(AllreduceTest, SumsSegmentsOfAnySizeInPlace) {
  // Sizes below, at and above the direct/ring switch, not multiples of the
  // rank count, and a segment that is not at offset 0.
  const std::vector<std::pair<size_t, size_t>> segments = {
      {0, 1}, {0, 3}, {5, 7}, {0, 1001}, {3, 8191}, {0, 8193}, {11, 100003}, {0, (1 << 20) + 5}};
  const size_t total = (1 << 20) + 16;
  auto statuses = RunThreadGroup(world(), transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, total, Deadline::After(20s), options()));
    float* buf = ar->data();
    uint64_t salt = 0;
    for (auto [off, n] : segments) {
      for (int rep = 0; rep < 3; ++rep, ++salt) {  // repeats reuse the scratch slots
        for (size_t i = 0; i < total; ++i) buf[i] = Input(g.rank(), i, salt);
        TENAX_RETURN_IF_ERROR(ar->Run(off, n, 1.0f, Deadline::After(20s)));
        for (size_t i = 0; i < total; ++i) {
          const bool inside = i >= off && i < off + n;
          const float want = inside ? Expected(g.world(), i, salt) : Input(g.rank(), i, salt);
          if (buf[i] != want) {
            return Internal("rank " + std::to_string(g.rank()) + " segment " + std::to_string(off) + "+" +
                            std::to_string(n) + ": element " + std::to_string(i) + " is " + std::to_string(buf[i]) +
                            ", want " + std::to_string(want));
          }
        }
      }
    }
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < world(); ++r) EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok()) << statuses[static_cast<size_t>(r)].ToString();
}

TEST_P(AllreduceTest, QueuedBucketsAreScaledAndBitwiseEqualOnEveryRank) {
  // Random floats (sums are not exact, so every rank must add in the same
  // order), several buckets queued before any completes, scaled by 1/p as
  // a gradient average is.
  const std::vector<std::pair<size_t, size_t>> buckets = {{0, 50000}, {50000, 300}, {50300, 20000}, {70300, 7}};
  const size_t total = 70307;
  std::vector<std::vector<float>> results(static_cast<size_t>(world()));
  auto statuses = RunThreadGroup(world(), transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, total, Deadline::After(20s), options()));
    std::mt19937 rng(static_cast<uint32_t>(g.rank()) + 17);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (size_t i = 0; i < total; ++i) ar->data()[i] = dist(rng);
    for (int step = 0; step < 3; ++step) {
      for (auto [off, n] : buckets) TENAX_RETURN_IF_ERROR(ar->Start(off, n, 1.0f / static_cast<float>(g.world())));
      TENAX_RETURN_IF_ERROR(ar->Wait(Deadline::After(20s)));
    }
    results[static_cast<size_t>(g.rank())].assign(ar->data(), ar->data() + total);
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < world(); ++r) ASSERT_TRUE(statuses[static_cast<size_t>(r)].ok()) << statuses[static_cast<size_t>(r)].ToString();
  // The mean of means stays near zero and every rank holds the same bits.
  for (int r = 1; r < world(); ++r) {
    ASSERT_EQ(0, std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(), total * sizeof(float)))
        << "rank " << r << " differs from rank 0";
  }
  if (world() > 1) {
    std::vector<float> inputs0(total);
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& v : inputs0) v = dist(rng);
    EXPECT_NE(0, std::memcmp(results[0].data(), inputs0.data(), total * sizeof(float)));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllreduceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values("shm", "shm_puts", "tcp")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

TEST(AllreduceFailure, MemberThatLeavesFailsTheOthersWithItsRank) {
  auto statuses = RunThreadGroup(3, "", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 4096, Deadline::After(20s)));
    TENAX_RETURN_IF_ERROR(ar->Run(0, 4096, 1.0f, Deadline::After(20s)));
    if (g.rank() == 2) return Status::Ok();  // leaves: its Node closes
    Status st = ar->Run(0, 4096, 1.0f, Deadline::After(20s));
    return st;
  });
  EXPECT_TRUE(statuses[2].ok());
  for (int r : {0, 1}) {
    const Status& st = statuses[static_cast<size_t>(r)];
    ASSERT_FALSE(st.ok()) << "rank " << r << " completed without rank 2";
    EXPECT_NE(std::string::npos, st.message().find("rank 2")) << st.ToString();
  }
}

TEST(AllreduceFailure, SilentMemberMeetsTheDeadline) {
  std::latch done(2);
  auto statuses = RunThreadGroup(2, "", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 100000, Deadline::After(20s)));
    Status st = Status::Ok();
    if (g.rank() == 0) {
      const auto start = SteadyClock::now();
      st = ar->Run(0, 100000, 1.0f, Deadline::After(300ms));
      if (SteadyClock::now() - start > 5s) st = Internal("deadline not honoured");
    }
    done.arrive_and_wait();  // rank 1 never joins the collective, but stays connected
    return st;
  });
  ASSERT_EQ(StatusCode::kDeadlineExceeded, statuses[0].code()) << statuses[0].ToString();
  EXPECT_NE(std::string::npos, statuses[0].message().find("waiting for rank 1")) << statuses[0].ToString();
}

TEST(AllreduceFailure, InterruptStopsAWait) {
  auto statuses = RunThreadGroup(2, "", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 64, Deadline::After(20s)));
    if (g.rank() == 1) return g.Barrier(Deadline::After(20s));
    ar->SetInterrupt([] { return Cancelled("coordinator: rank 1 failed"); });
    Status st = ar->Run(0, 64, 1.0f, Deadline::After(20s));
    Status b = g.Barrier(Deadline::After(20s));
    return st.ok() ? Internal("completed without rank 1") : (b.ok() ? st : b);
  });
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].ToString();
  EXPECT_EQ(StatusCode::kCancelled, statuses[0].code()) << statuses[0].ToString();
}

}  // namespace
}  // namespace tenax::comm
