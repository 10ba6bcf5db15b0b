#include "tenax/coding/straggler_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace tenax::coding {
namespace {

std::unique_ptr<StragglerModel> Markov(int workers, const MarkovStragglerParams& p, uint64_t seed) {
  auto m = MakeMarkovStragglers(workers, p, seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : MakeNoStragglers();
}

std::unique_ptr<StragglerModel> Iid(int workers, const IidStragglerParams& p, uint64_t seed) {
  auto m = MakeIidStragglers(workers, p, seed);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : MakeNoStragglers();
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The chain's long-run behaviour. With p_slow = 0.02 and p_recover = 0.08 a
// worker is slow 0.2 of the time, in runs of mean 12.5 steps, active runs
// of mean 50: 4 workers x 200,000 steps hold about 12,800 cycles of each.
// The fraction's standard error, with the chain's correlation (eigenvalue
// 0.9: about 800,000 x 0.1/1.9 = 42,000 effective samples), is ~0.002, so
// a tolerance of 0.01 is 5 sigma; run lengths are geometric (sd ~ mean),
// so their means have a relative standard error of ~1/sqrt(12,800) = 0.9%
// and 5% is 5 sigma. The seed is fixed, so the test is also reproducible.
TEST(StragglerModelMarkov, StatisticsMatchTheParameters) {
  MarkovStragglerParams p;
  p.p_slow = 0.02;
  p.p_recover = 0.08;
  p.active = {1.0, 1.5};
  p.slow = {2.0, 6.0};
  constexpr int kWorkers = 4;
  constexpr int64_t kSteps = 200000;
  auto m = Markov(kWorkers, p, 42);

  int64_t slow_steps = 0, slow_runs = 0, slow_run_steps = 0, active_runs = 0, active_run_steps = 0;
  double slow_factor_sum = 0, active_factor_sum = 0;
  for (int w = 0; w < kWorkers; ++w) {
    bool state = m->Slow(w, 0);
    EXPECT_FALSE(state) << "no start_slow: every worker starts active";
    int64_t run = 0;
    for (int64_t t = 0; t < kSteps; ++t) {
      const bool slow = m->Slow(w, t);
      const double x = m->Slowdown(w, t);
      if (slow) {
        ++slow_steps;
        slow_factor_sum += x;
        ASSERT_GE(x, 2.0);
        ASSERT_LE(x, 6.0);
      } else {
        active_factor_sum += x;
        ASSERT_GE(x, 1.0);
        ASSERT_LE(x, 1.5);
      }
      if (slow != state) {  // a run ended at t-1 (the last, censored run is not counted)
        (state ? slow_runs : active_runs) += 1;
        (state ? slow_run_steps : active_run_steps) += run;
        state = slow;
        run = 0;
      }
      ++run;
    }
  }
  const double total = static_cast<double>(kWorkers * kSteps);
  const double stationary = p.p_slow / (p.p_slow + p.p_recover);
  EXPECT_NEAR(stationary, static_cast<double>(slow_steps) / total, 0.01);
  ASSERT_GT(slow_runs, 10000);
  ASSERT_GT(active_runs, 10000);
  const double mean_slow_run = static_cast<double>(slow_run_steps) / static_cast<double>(slow_runs);
  const double mean_active_run = static_cast<double>(active_run_steps) / static_cast<double>(active_runs);
  EXPECT_NEAR(1 / p.p_recover, mean_slow_run, 0.05 / p.p_recover);
  EXPECT_NEAR(1 / p.p_slow, mean_active_run, 0.05 / p.p_slow);
  // ~160,000 slow steps with factors uniform on [2, 6] (sd 1.15): the mean's
  // standard error is 0.003; ~640,000 active ones on [1, 1.5] (sd 0.14).
  EXPECT_NEAR(4.0, slow_factor_sum / static_cast<double>(slow_steps), 0.03);
  EXPECT_NEAR(1.25, active_factor_sum / (total - static_cast<double>(slow_steps)), 0.01);
}

TEST(StragglerModelMarkov, FixedSlowdownsAreExact) {
  MarkovStragglerParams p;
  p.p_slow = 0.3;
  p.p_recover = 0.3;
  auto m = Markov(3, p, 7);
  for (int w = 0; w < 3; ++w) {
    for (int64_t t = 0; t < 1000; ++t) EXPECT_EQ(m->Slow(w, t) ? 5.0 : 1.0, m->Slowdown(w, t));
  }
}

TEST(StragglerModelMarkov, StartSlowWorkersAreSlowAtStepZero) {
  MarkovStragglerParams p;
  p.p_slow = 0;
  p.p_recover = 0;  // nobody ever changes state
  p.start_slow = {1, 3};
  auto m = Markov(4, p, 1);
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{5000}}) {
    EXPECT_FALSE(m->Slow(0, t));
    EXPECT_TRUE(m->Slow(1, t));
    EXPECT_FALSE(m->Slow(2, t));
    EXPECT_TRUE(m->Slow(3, t));
    EXPECT_EQ(5.0, m->Slowdown(3, t));
    EXPECT_EQ(1.0, m->Slowdown(2, t));
  }
  EXPECT_TRUE(Contains(m->Describe(), "start slow: 1 3")) << m->Describe();
}

TEST(StragglerModelMarkov, StartSlowTakesItsFirstTransitionIntoStepOne) {
  MarkovStragglerParams p;
  p.p_slow = 0;
  p.p_recover = 1;        // slow for exactly one step
  p.start_slow = {2, 2};  // a duplicate is harmless
  auto m = Markov(3, p, 9);
  EXPECT_TRUE(m->Slow(2, 0));
  EXPECT_FALSE(m->Slow(2, 1));
  EXPECT_FALSE(m->Slow(2, 2));
  EXPECT_FALSE(m->Slow(0, 0));
}

TEST(StragglerModelMarkov, OutsideTheJobIsFullSpeed) {
  MarkovStragglerParams p;
  p.p_slow = 1;
  p.p_recover = 0;
  p.start_slow = {0};
  auto m = Markov(2, p, 3);
  EXPECT_TRUE(m->Slow(0, 0));
  EXPECT_TRUE(m->Slow(1, 1));
  for (int w : {-1, 2, 1000}) {
    EXPECT_FALSE(m->Slow(w, 3));
    EXPECT_EQ(1.0, m->Slowdown(w, 3));
  }
  EXPECT_FALSE(m->Slow(0, -1));
  EXPECT_EQ(1.0, m->Slowdown(0, -1));
}

// Each worker process asks only about itself, and may skip steps: the
// answer for (worker, step) must not depend on what was asked before.
TEST(StragglerModelDeterminism, SameSeedAgreesWhateverTheOrderOfCalls) {
  MarkovStragglerParams mp;
  mp.p_slow = 0.05;
  mp.p_recover = 0.2;
  mp.slow = {2.0, 8.0};
  mp.start_slow = {2};
  IidStragglerParams ip;
  ip.probability = 0.2;
  ip.slow = {3.0, 4.0};
  constexpr int kWorkers = 4;
  constexpr int64_t kSteps = 3000;

  for (int kind = 0; kind < 2; ++kind) {
    SCOPED_TRACE(kind == 0 ? "markov" : "iid");
    auto make = [&] { return kind == 0 ? Markov(kWorkers, mp, 1234) : Iid(kWorkers, ip, 1234); };
    // In order, step-major.
    auto a = make();
    std::vector<double> slowdown(kWorkers * kSteps);
    std::vector<bool> slow(kWorkers * kSteps);
    for (int64_t t = 0; t < kSteps; ++t) {
      for (int w = 0; w < kWorkers; ++w) {
        slowdown[static_cast<size_t>(t * kWorkers + w)] = a->Slowdown(w, t);
        slow[static_cast<size_t>(t * kWorkers + w)] = a->Slow(w, t);
      }
    }
    // Backwards, worker-major: the first call is the last step.
    auto b = make();
    for (int w = kWorkers - 1; w >= 0; --w) {
      for (int64_t t = kSteps - 1; t >= 0; --t) {
        ASSERT_EQ(slowdown[static_cast<size_t>(t * kWorkers + w)], b->Slowdown(w, t)) << w << " " << t;
        ASSERT_EQ(static_cast<bool>(slow[static_cast<size_t>(t * kWorkers + w)]), b->Slow(w, t)) << w << " " << t;
      }
    }
    // A slow worker that skips steps, one fresh model per query (separate
    // processes), and a model asked about one worker only.
    auto c = make();
    for (int w = 0; w < kWorkers; ++w) {
      for (int64_t t = 7; t < kSteps; t += 5 + (t % 7)) {
        ASSERT_EQ(slowdown[static_cast<size_t>(t * kWorkers + w)], c->Slowdown(w, t)) << w << " " << t;
        ASSERT_EQ(slowdown[static_cast<size_t>(t * kWorkers + w)], make()->Slowdown(w, t)) << w << " " << t;
      }
    }
  }
}

TEST(StragglerModelDeterminism, DifferentSeedsDiffer) {
  MarkovStragglerParams mp;
  mp.p_slow = 0.1;
  mp.p_recover = 0.1;
  IidStragglerParams ip;
  ip.probability = 0.5;
  for (int kind = 0; kind < 2; ++kind) {
    SCOPED_TRACE(kind == 0 ? "markov" : "iid");
    auto a = kind == 0 ? Markov(2, mp, 1) : Iid(2, ip, 1);
    auto b = kind == 0 ? Markov(2, mp, 2) : Iid(2, ip, 2);
    int differ = 0;
    for (int w = 0; w < 2; ++w) {
      for (int64_t t = 0; t < 2000; ++t) differ += a->Slow(w, t) != b->Slow(w, t);
    }
    // Independent chains disagree on about half the steps.
    EXPECT_GT(differ, 1000);
  }
}

// 4 workers x 100,000 steps with probability 0.1: the slow fraction's
// standard error is sqrt(0.09/400,000) = 0.0005 (tolerance 0.003); the
// joint fraction of a pair, 0.01 expected, has sd sqrt(0.0099/100,000) =
// 0.0003 per pair (tolerance 0.0015).
TEST(StragglerModelIid, SlowFractionMatchesAndWorkersAreIndependent) {
  IidStragglerParams p;
  p.probability = 0.1;
  p.slow = {2.0, 4.0};
  constexpr int kWorkers = 4;
  constexpr int64_t kSteps = 100000;
  auto m = Iid(kWorkers, p, 99);
  int64_t slow = 0, both_01 = 0, both_23 = 0, consecutive = 0;
  double factor_sum = 0;
  for (int64_t t = 0; t < kSteps; ++t) {
    bool s[kWorkers];
    for (int w = 0; w < kWorkers; ++w) {
      s[w] = m->Slow(w, t);
      const double x = m->Slowdown(w, t);
      if (s[w]) {
        ++slow;
        factor_sum += x;
        ASSERT_GE(x, 2.0);
        ASSERT_LE(x, 4.0);
      } else {
        ASSERT_EQ(1.0, x);
      }
    }
    both_01 += s[0] && s[1];
    both_23 += s[2] && s[3];
    consecutive += s[0] && m->Slow(0, t + 1);
  }
  const double n = static_cast<double>(kSteps);
  EXPECT_NEAR(0.1, static_cast<double>(slow) / (kWorkers * n), 0.003);
  EXPECT_NEAR(0.01, static_cast<double>(both_01) / n, 0.0015);
  EXPECT_NEAR(0.01, static_cast<double>(both_23) / n, 0.0015);
  EXPECT_NEAR(0.01, static_cast<double>(consecutive) / n, 0.0015);  // and across steps
  EXPECT_NEAR(3.0, factor_sum / static_cast<double>(slow), 0.02);   // sd 0.58 over ~40,000
}

TEST(StragglerModelIid, ProbabilityZeroAndOne) {
  IidStragglerParams p;
  p.probability = 0;
  auto never = Iid(2, p, 5);
  p.probability = 1;
  auto always = Iid(2, p, 5);
  for (int64_t t = 0; t < 1000; ++t) {
    EXPECT_FALSE(never->Slow(1, t));
    EXPECT_EQ(1.0, never->Slowdown(1, t));
    EXPECT_TRUE(always->Slow(1, t));
    EXPECT_EQ(5.0, always->Slowdown(1, t));
  }
  EXPECT_EQ(1.0, always->Slowdown(2, 0));  // outside the job
  EXPECT_EQ(1.0, always->Slowdown(-1, 0));
}

TEST(StragglerModelNone, EveryoneAtFullSpeed) {
  auto m = MakeNoStragglers();
  EXPECT_EQ(1.0, m->Slowdown(0, 0));
  EXPECT_FALSE(m->Slow(3, 100));
  EXPECT_EQ("none", m->Describe());
}

TEST(StragglerModelDescribe, NamesTheModelAndItsParameters) {
  MarkovStragglerParams mp;
  mp.start_slow = {3};
  auto markov = Markov(4, mp, 1);
  EXPECT_EQ("markov (p_slow 0.01, p_recover 0.01, slow 5x, active 1x, start slow: 3)", markov->Describe());
  IidStragglerParams ip;
  ip.slow = {2, 8};
  EXPECT_EQ("iid (probability 0.1, slow 2x-8x)", Iid(4, ip, 1)->Describe());
  auto trace = MakeTraceStragglers(4, {{0, 1, 2.0}});
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ("trace (1 entries, workers 0..3)", (*trace)->Describe());
}

TEST(StragglerModelValidation, RejectsBadParameters) {
  auto expect_invalid = [](const auto& r, const std::string& fragment) {
    ASSERT_FALSE(r.ok()) << fragment;
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
    EXPECT_TRUE(Contains(r.status().message(), fragment)) << r.status().message();
    EXPECT_EQ(std::string::npos, r.status().message().find('\n'));
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();

  IidStragglerParams ip;
  expect_invalid(MakeIidStragglers(0, ip, 1), "at least 1 worker");
  for (double bad : {-0.1, 1.5, nan}) {
    ip.probability = bad;
    expect_invalid(MakeIidStragglers(4, ip, 1), "stragglers.probability");
  }
  ip = {};
  for (SlowdownRange bad : {SlowdownRange{0.5, 2}, SlowdownRange{3, 2}, SlowdownRange{1, inf}, SlowdownRange{nan, 2},
                            SlowdownRange{2, 2000}}) {
    ip.slow = bad;
    expect_invalid(MakeIidStragglers(4, ip, 1), "1 <= min <= max <= 1000");
  }

  MarkovStragglerParams mp;
  expect_invalid(MakeMarkovStragglers(-1, mp, 1), "at least 1 worker");
  mp.p_slow = 2;
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "stragglers.p_slow");
  mp = {};
  mp.p_recover = -1;
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "stragglers.p_recover");
  mp = {};
  mp.active = {0.9, 1};
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "the active slowdown range");
  mp = {};
  mp.slow = {5, 4};
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "the slow slowdown range");
  mp = {};
  mp.start_slow = {0, 4};
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "worker 4, not in this job (workers 0..3)");
  mp.start_slow = {-1};
  expect_invalid(MakeMarkovStragglers(4, mp, 1), "worker -1");

  expect_invalid(MakeTraceStragglers(0, {}), "at least 1 worker");
  expect_invalid(MakeTraceStragglers(2, {{0, 2, 2.0}}), "not in this job (workers 0..1)");
  expect_invalid(MakeTraceStragglers(2, {{-1, 0, 2.0}}), "steps count from 0");
  expect_invalid(MakeTraceStragglers(2, {{0, 0, 0.5}}), "[1, 1000]");
  expect_invalid(MakeTraceStragglers(2, {{0, 0, nan}}), "[1, 1000]");
}

TEST(StragglerModelTrace, ReplaysEntriesUntilTheNextOne) {
  // Out of order on purpose: the model sorts by step.
  auto m = MakeTraceStragglers(3, {{10, 0, 4.0}, {5, 0, 2.0}, {20, 0, 1.0}, {5, 2, 3.0}, {5, 2, 7.0}});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  StragglerModel& t = **m;
  EXPECT_EQ(1.0, t.Slowdown(0, 0));  // before its first entry
  EXPECT_EQ(1.0, t.Slowdown(0, 4));
  EXPECT_FALSE(t.Slow(0, 4));
  EXPECT_EQ(2.0, t.Slowdown(0, 5));
  EXPECT_EQ(2.0, t.Slowdown(0, 9));
  EXPECT_TRUE(t.Slow(0, 9));
  EXPECT_EQ(4.0, t.Slowdown(0, 10));
  EXPECT_EQ(4.0, t.Slowdown(0, 19));
  EXPECT_EQ(1.0, t.Slowdown(0, 20));  // recovered
  EXPECT_FALSE(t.Slow(0, 20));
  EXPECT_EQ(1.0, t.Slowdown(0, std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(1.0, t.Slowdown(1, 15));  // no entries
  EXPECT_EQ(7.0, t.Slowdown(2, 5));   // the later of two entries for one step
  EXPECT_EQ(7.0, t.Slowdown(2, 1000000));
  EXPECT_EQ(1.0, t.Slowdown(3, 15));  // outside the job
  EXPECT_EQ(1.0, t.Slowdown(0, -1));
}

TEST(StragglerTraceParse, AcceptsCommentsBlankLinesAndSpaces) {
  constexpr const char* kText =
      "# step,worker,slowdown\n"
      "\n"
      "  10 , 1 , 2.5   # worker 1 slows down\r\n"
      "3,0,4\n"
      "\t\n"
      "3 ,\t2,1e1\n"
      "   # only a comment\n"
      "10,0,1.0";  // no final newline
  auto t = ParseStragglerTrace(kText, "trace.csv", 3);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(4u, t->size());
  // Sorted by step, stable.
  EXPECT_EQ(3, (*t)[0].step);
  EXPECT_EQ(0, (*t)[0].worker);
  EXPECT_EQ(4.0, (*t)[0].slowdown);
  EXPECT_EQ(3, (*t)[1].step);
  EXPECT_EQ(2, (*t)[1].worker);
  EXPECT_EQ(10.0, (*t)[1].slowdown);
  EXPECT_EQ(10, (*t)[2].step);
  EXPECT_EQ(1, (*t)[2].worker);
  EXPECT_EQ(2.5, (*t)[2].slowdown);
  EXPECT_EQ(10, (*t)[3].step);
  EXPECT_EQ(0, (*t)[3].worker);
  EXPECT_EQ(1.0, (*t)[3].slowdown);

  auto m = MakeTraceStragglers(3, std::move(t).value());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(4.0, (*m)->Slowdown(0, 9));
  EXPECT_EQ(1.0, (*m)->Slowdown(0, 10));
  EXPECT_EQ(2.5, (*m)->Slowdown(1, 10));

  for (const char* empty : {"", "\n\n", "# nothing\n", "  \r\n"}) {
    auto e = ParseStragglerTrace(empty, "empty.csv", 1);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_TRUE(e->empty());
  }
}

TEST(StragglerTraceParse, RejectsBadLinesNamingTheLine) {
  struct Case {
    std::string line;
    std::string reason;
  };
  const Case cases[] = {
      {"1,2", "expected 3 comma-separated fields \"step,worker,slowdown\", got 2"},
      {"1,2,3,4", "got 4"},
      {"1,2,3,", "got 4"},
      {"x,0,2", "step 'x' is not a number"},
      {"1.5,0,2", "step '1.5' is not a number"},
      {",0,2", "step '' is not a number"},
      {"-1,0,2", "step -1 is negative"},
      {"99999999999999999999,0,2", "is not a number"},
      {"1,one,2", "worker 'one' is not a number"},
      {"1,4,2", "worker 4 is not in this job (workers 0..3)"},
      {"1,-1,2", "worker -1 is not in this job"},
      {"1,0,fast", "slowdown 'fast' is not a number"},
      {"1,0,2x", "slowdown '2x' is not a number"},
      {"1,0,", "slowdown '' is not a number"},
      {"1,0,0.5", "slowdown '0.5' is not in [1, 1000]"},
      {"1,0,-3", "is not in [1, 1000]"},
      {"1,0,1001", "slowdown '1001' is not in [1, 1000]"},
      {"1,0,inf", "slowdown 'inf' is not in [1, 1000]"},
      {"1,0,nan", "slowdown 'nan' is not in [1, 1000]"},
      {"1,0,1e999", "is not"},
      {std::string(1100, '1'), "longer than 1 KiB"},
  };
  for (const Case& c : cases) {
    // Two good lines, a blank one and a comment first: the bad line is line 5.
    const std::string text = "0,0,2\n\n# comment\n1,1,3\n" + c.line + "\n2,0,1\n";
    auto t = ParseStragglerTrace(text, "trace.csv", 4);
    ASSERT_FALSE(t.ok()) << c.line;
    EXPECT_EQ(StatusCode::kInvalidArgument, t.status().code());
    const std::string& msg = t.status().message();
    EXPECT_EQ(0u, msg.rfind("trace.csv:5: ", 0)) << msg;
    EXPECT_TRUE(Contains(msg, c.reason)) << "line '" << c.line.substr(0, 40) << "': " << msg;
    EXPECT_LT(msg.size(), 200u) << msg;
  }
  // A long line is rejected even when it is only a comment.
  auto long_comment = ParseStragglerTrace("#" + std::string(1024, 'x') + "\n", "t", 1);
  ASSERT_FALSE(long_comment.ok());
  EXPECT_TRUE(Contains(long_comment.status().message(), "t:1: ")) << long_comment.status().message();
  // 1 KiB exactly is fine.
  const std::string padded = "0,0,2" + std::string(1024 - 5, ' ');
  EXPECT_TRUE(ParseStragglerTrace(padded, "t", 1).ok());
  auto no_workers = ParseStragglerTrace("0,0,2\n", "t.csv", 0);
  ASSERT_FALSE(no_workers.ok());
  EXPECT_TRUE(Contains(no_workers.status().message(), "t.csv: ")) << no_workers.status().message();
}

TEST(StragglerTraceParse, RejectsMoreThanAMillionEntries) {
  std::string text;
  constexpr size_t kLimit = 1000000;
  text.reserve((kLimit + 1) * 6);
  for (size_t i = 0; i < kLimit; ++i) text += "0,0,2\n";
  auto at_limit = ParseStragglerTrace(text, "big.csv", 1);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status().ToString();
  EXPECT_EQ(kLimit, at_limit->size());
  text += "# one more\n1,0,3\n";
  auto over = ParseStragglerTrace(text, "big.csv", 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, over.status().code());
  EXPECT_TRUE(Contains(over.status().message(), "big.csv:1000002: more than 1,000,000 entries"))
      << over.status().message();
}

}  // namespace
}  // namespace tenax::coding
