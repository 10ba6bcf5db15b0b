// Allreduce across 1..4 ranks, each a Node on its own thread (the Node's
// threading rule), over shared memory and forced TCP; segment sizes that do
// not divide by the rank count, both algorithms, queued segments, and the
// failure paths (a member that leaves, a deadline).
#include "tenax/comm/allreduce.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <latch>
#include <random>
#include <thread>

#include "testing.h"
#include "thread_group.h"

namespace tenax::comm {
namespace {

using namespace std::chrono_literals;

using tenax::testing::RunThreadGroup;

// Element i of rank r's input: integers, so every sum is exact. The part
// that depends on i is a hash, not a short period, so data summed or copied
// to the wrong offset does not land on an equal value by accident.
float Input(int rank, size_t i, uint64_t salt) {
  uint64_t h = i * 0x9E3779B97F4A7C15ull + salt * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 31)) * 0x94D049BB133111EBull;
  h ^= h >> 29;
  return static_cast<float>((rank + 1) * 3 + static_cast<int>(h % 1024));
}
float Expected(int world, size_t i, uint64_t salt) {
  float sum = 0;
  for (int r = 0; r < world; ++r) sum += Input(r, i, salt);
  return sum;
}

// Every element of the buffer against want(i, inside the segment [off, +n)).
Status CheckBuffer(int rank, const float* buf, size_t total, size_t off, size_t n,
                   const std::function<float(size_t, bool)>& want) {
  for (size_t i = 0; i < total; ++i) {
    const float w = want(i, i >= off && i < off + n);
    if (buf[i] != w) {
      return Internal("rank " + std::to_string(rank) + " segment " + std::to_string(off) + "+" + std::to_string(n) +
                      ": element " + std::to_string(i) + " is " + std::to_string(buf[i]) + ", want " +
                      std::to_string(w));
    }
  }
  return Status::Ok();
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  int world() const { return std::get<0>(GetParam()); }
  // "shm": plain stores into mapped peer memory; "shm_puts": one-sided
  // puts over shared memory; "tcp": puts over TCP (never mappable);
  // "tcp4streams": the same over 4 TCP connections per peer, so a put's
  // pieces and the signal after it may arrive in any order.
  std::string variant() const { return std::get<1>(GetParam()); }
  std::string transports() const { return variant().rfind("tcp", 0) == 0 ? "tcp" : ""; }
  std::function<void(int, net::NodeOptions&)> configure() const {
    const int streams = variant() == "tcp4streams" ? 4 : 1;
    return [streams](int, net::NodeOptions& o) { o.tcp_streams = streams; };
  }
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
        TENAX_RETURN_IF_ERROR(CheckBuffer(g.rank(), buf, total, off, n, [&](size_t i, bool inside) {
          return inside ? Expected(g.world(), i, salt) : Input(g.rank(), i, salt);
        }));
      }
    }
    return g.Barrier(Deadline::After(20s));
  }, configure());
  for (int r = 0; r < world(); ++r) EXPECT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
}

TEST_P(AllreduceTest, ReadsItsInputFromCallerMemoryAndLeavesItUnchanged) {
  // Start's `input`: the values come from a plain vector (not transport
  // memory), the buffer holds stale values that must not leak into the sum,
  // the input must be untouched, and the bits equal those of the in-place
  // form on every rank. Rank 1 uses the in-place form: ranks may mix.
  const std::vector<std::pair<size_t, size_t>> segments = {{0, 3}, {5, 1001}, {0, 8193}, {11, 100003}};
  const size_t total = 100003 + 16;
  auto statuses = RunThreadGroup(world(), transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, total, Deadline::After(20s), options()));
    float* buf = ar->data();
    uint64_t salt = 100;
    for (auto [off, n] : segments) {
      for (int rep = 0; rep < 2; ++rep, ++salt) {
        std::vector<float> input(n);
        for (size_t i = 0; i < n; ++i) input[i] = Input(g.rank(), off + i, salt);
        const std::vector<float> kept = input;
        const bool in_place = g.rank() == 1;
        for (size_t i = 0; i < total; ++i) buf[i] = -7.0f;  // stale
        if (in_place) std::copy(input.begin(), input.end(), buf + off);
        TENAX_RETURN_IF_ERROR(ar->Start(off, n, 0.5f, in_place ? nullptr : input.data()));
        TENAX_RETURN_IF_ERROR(ar->Wait(Deadline::After(20s)));
        if (input != kept) return Internal("rank " + std::to_string(g.rank()) + ": the input was written to");
        TENAX_RETURN_IF_ERROR(CheckBuffer(g.rank(), buf, total, off, n, [&](size_t i, bool inside) {
          return inside ? Expected(g.world(), i, salt) * 0.5f : -7.0f;
        }));
      }
    }
    return g.Barrier(Deadline::After(20s));
  }, configure());
  for (int r = 0; r < world(); ++r) EXPECT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
}

// Rank r's random input for one step of the queued-bucket test.
std::vector<float> RandomInput(int rank, int step, size_t n) {
  std::mt19937 rng(static_cast<uint32_t>(rank * 1000 + step + 17));
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST_P(AllreduceTest, QueuedBucketsAreScaledAndBitwiseEqualOnEveryRank) {
  // Random floats (sums are not exact, so every rank must add in the same
  // order), several buckets queued before any completes, scaled by 1/p as
  // a gradient average is, fresh inputs every step; a tail outside every
  // bucket must stay as it was.
  const std::vector<std::pair<size_t, size_t>> buckets = {{0, 50000}, {50000, 300}, {50300, 20000}, {70300, 7}};
  const size_t reduced = 70307, total = reduced + 93;
  constexpr int kSteps = 3;
  // results[rank][step]: the buffer after that step's Wait.
  std::vector<std::vector<std::vector<float>>> results(static_cast<size_t>(world()));
  auto statuses = RunThreadGroup(world(), transports(), [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, total, Deadline::After(20s), options()));
    for (int step = 0; step < kSteps; ++step) {
      const std::vector<float> input = RandomInput(g.rank(), step, total);
      std::copy(input.begin(), input.end(), ar->data());
      for (auto [off, n] : buckets) TENAX_RETURN_IF_ERROR(ar->Start(off, n, 1.0f / static_cast<float>(g.world())));
      TENAX_RETURN_IF_ERROR(ar->Wait(Deadline::After(20s)));
      results[static_cast<size_t>(g.rank())].emplace_back(ar->data(), ar->data() + total);
    }
    return g.Barrier(Deadline::After(20s));
  }, configure());
  for (int r = 0; r < world(); ++r) ASSERT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
  for (int step = 0; step < kSteps; ++step) {
    // The mean of the ranks' inputs, computed here in double. A float sum of
    // at most 4 values in [-1, 1] and the scaling stay well within 1e-6.
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < world(); ++r) inputs.push_back(RandomInput(r, step, total));
    for (int r = 0; r < world(); ++r) {
      const std::vector<float>& got = results[static_cast<size_t>(r)][static_cast<size_t>(step)];
      ASSERT_EQ(got.size(), total);
      for (size_t i = 0; i < total; ++i) {
        double want = inputs[static_cast<size_t>(r)][i];  // the tail: untouched
        if (i < reduced) {
          want = 0;
          for (const auto& in : inputs) want += in[i];
          want /= world();
        }
        if (std::abs(got[i] - want) > 1e-6) {
          FAIL() << "rank " << r << " step " << step << ": element " << i << " is " << got[i] << ", want " << want;
        }
      }
      // Every rank holds the same reduced bits as rank 0.
      ASSERT_EQ(0, std::memcmp(results[0][static_cast<size_t>(step)].data(), got.data(), reduced * sizeof(float)))
          << "rank " << r << " differs from rank 0 at step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllreduceTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("shm", "shm_puts", "tcp", "tcp4streams")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" + std::get<1>(info.param);
                         });

// An emulated link's delay over TCP is in when the data becomes visible,
// not only in when the sender's put completes: each of a 2-rank ring's two
// steps waits for its peer's message, so the sum takes about two delays
// (with the delay on completions only, it took about one).
TEST(AllreduceEmulatedLink, EveryRingStepWaitsOneDelay) {
  constexpr auto kDelay = 40ms;
  const size_t count = 1 << 16;  // 256 KiB: the ring
  std::vector<double> seconds(2);
  auto statuses = RunThreadGroup(2, "tcp", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, count, Deadline::After(20s)));
    net::LinkShape shape;
    shape.delay = kDelay;
    g.node().SetLinkShape(g.peer(1 - g.rank()), shape);
    TENAX_RETURN_IF_ERROR(g.Barrier(Deadline::After(20s)));
    for (size_t i = 0; i < count; ++i) ar->data()[i] = Input(g.rank(), i, 7);
    const auto start = SteadyClock::now();
    TENAX_RETURN_IF_ERROR(ar->Run(0, count, 1.0f, Deadline::After(20s)));
    seconds[static_cast<size_t>(g.rank())] = std::chrono::duration<double>(SteadyClock::now() - start).count();
    TENAX_RETURN_IF_ERROR(CheckBuffer(g.rank(), ar->data(), count, 0, count,
                                      [&](size_t i, bool) { return Expected(2, i, 7); }));
    return g.Barrier(Deadline::After(20s));
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
    // 1.5, not 2: the ranks leave the barrier a little apart.
    EXPECT_GE(seconds[static_cast<size_t>(r)], 1.5 * std::chrono::duration<double>(kDelay).count()) << "rank " << r;
  }
}

// Over a link with a delay, a ring step of one piece waits one delay for
// its message; with pieces in flight (the window) those waits overlap, so
// a tensor of many pieces costs about one piece's delays, not all of them.
// Same ranks, same link, same data: only the window differs.
TEST(AllreduceEmulatedLink, PiecesInFlightOverlapTheDelay) {
  constexpr auto kDelay = 10ms;
  constexpr int kRanks = 3;            // 4 ring steps per piece
  constexpr size_t kPieceBytes = 16 << 10;
  const size_t count = 16 * kPieceBytes / sizeof(float);  // 16 pieces
  std::vector<std::array<double, 2>> seconds(kRanks);
  auto statuses = RunThreadGroup(kRanks, "tcp", [&](Group& g) -> Status {
    std::array<std::unique_ptr<Allreduce>, 2> ars;
    for (size_t w = 0; w < 2; ++w) {
      AllreduceOptions o;
      o.ring_piece_bytes = kPieceBytes;
      o.ring_window = w == 0 ? 1 : 8;
      TENAX_ASSIGN_OR_RETURN(ars[w], Allreduce::Create(g, count, Deadline::After(20s), o));
    }
    net::LinkShape shape;
    shape.delay = kDelay;
    for (int r = 0; r < kRanks; ++r) {
      if (r != g.rank()) g.node().SetLinkShape(g.peer(r), shape);
    }
    for (size_t w = 0; w < 2; ++w) {
      Allreduce& ar = *ars[w];
      for (size_t i = 0; i < count; ++i) ar.data()[i] = Input(g.rank(), i, 5);
      TENAX_RETURN_IF_ERROR(g.Barrier(Deadline::After(20s)));
      const auto start = SteadyClock::now();
      TENAX_RETURN_IF_ERROR(ar.Run(0, count, 1.0f, Deadline::After(20s)));
      seconds[static_cast<size_t>(g.rank())][w] = std::chrono::duration<double>(SteadyClock::now() - start).count();
      TENAX_RETURN_IF_ERROR(CheckBuffer(g.rank(), ar.data(), count, 0, count,
                                        [&](size_t i, bool) { return Expected(kRanks, i, 5); }));
    }
    return g.Barrier(Deadline::After(20s));
  });
  const double delay = std::chrono::duration<double>(kDelay).count();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_OK(statuses[static_cast<size_t>(r)]) << "rank " << r;
    const auto [one, eight] = seconds[static_cast<size_t>(r)];
    // One piece at a time: 16 pieces x 4 steps, each waiting a delay (at least half of them, loosely).
    EXPECT_GE(one, 32 * delay) << "rank " << r;
    // Eight at a time: the waits overlap (ideally 2 x 4 delays, plus the ranks' start skew).
    EXPECT_LT(eight, one / 3) << "rank " << r << ": window 8 took " << eight << " s, window 1 " << one << " s";
  }
}

// Members whose options shape the scratch region differently (here the
// window) are refused at setup, naming the sizes, never silently mixed.
TEST(AllreduceSetup, DifferentWindowsAreRefused) {
  auto statuses = RunThreadGroup(2, "tcp", [&](Group& g) -> Status {
    AllreduceOptions o;
    o.ring_window = g.rank() == 0 ? 4 : 8;
    return Allreduce::Create(g, 1 << 16, Deadline::After(20s), o).status();
  });
  for (int r = 0; r < 2; ++r) {
    const Status& st = statuses[static_cast<size_t>(r)];
    ASSERT_EQ(StatusCode::kProtocolError, st.code()) << "rank " << r << ": " << st.ToString();
    EXPECT_NE(std::string::npos, st.message().find("different ring piece or window options")) << st.ToString();
  }
}

TEST(AllreduceFailure, MemberThatLeavesFailsTheOthersWithItsRank) {
  auto statuses = RunThreadGroup(3, "", [&](Group& g) -> Status {
    TENAX_ASSIGN_OR_RETURN(auto ar, Allreduce::Create(g, 4096, Deadline::After(20s)));
    TENAX_RETURN_IF_ERROR(ar->Run(0, 4096, 1.0f, Deadline::After(20s)));
    if (g.rank() == 2) return Status::Ok();  // leaves: its Node closes
    Status st = ar->Run(0, 4096, 1.0f, Deadline::After(20s));
    return st;
  });
  EXPECT_OK(statuses[2]);
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
  EXPECT_OK(statuses[1]);
  EXPECT_EQ(StatusCode::kCancelled, statuses[0].code()) << statuses[0].ToString();
}

}  // namespace
}  // namespace tenax::comm
