// The chaos soak, short: `tenax bench soak --quick` runs rounds of elastic,
// async and fixed sync jobs under seeded fault plans (workers killed,
// preempted, stopped and continued; a shard, a data node and the
// coordinator killed and restarted) and must end with every round ended
// well, no unit lost or merged twice, no hung round, no process or
// namespace left. Its own binary for a long timeout.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "testing.h"

namespace tenax::testing {
namespace {

using namespace std::chrono_literals;

TEST(SoakTest, RoundsOfEveryKindUnderFaultsLoseDuplicateHangAndLeakNothing) {
  ScratchDir dir;
  setenv("TENAX_SECRET", "soak-test-secret-0123456789abcdef", 1);
  // Three rounds: one of each kind (they rotate), after the three
  // fault-free references (about 3 minutes in all here). The network kind's
  // faults are covered by TopologyClusterTest (link faults) in less time.
  auto r = RunProcess({TenaxBinary(), "bench", "soak", "--quick", "--minutes", "0.01", "--min-rounds", "3", "--seed",
                       "7", "--kinds", "elastic,async,sync", "--async-references", "2", "--json", dir / "soak.json",
                       "--keep", dir / "rounds"},
                      std::chrono::milliseconds(840s));
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto report = nlohmann::json::parse(ReadText(dir / "soak.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << ReadText(dir / "soak.json");
  const auto& t = report["totals"];
  EXPECT_EQ(3, t.value("rounds", 0)) << t.dump();
  EXPECT_EQ(t.value("rounds", -1), t.value("rounds_ended_well", -2)) << t.dump();
  EXPECT_EQ(0, t.value("units_lost", -1));
  EXPECT_EQ(0, t.value("units_merged_twice", -1));
  EXPECT_EQ(0, t.value("hung_rounds", -1));
  EXPECT_EQ(0, t.value("processes_left", -1));
  EXPECT_EQ(0, t.value("namespaces_left", -1));
  EXPECT_EQ(0, t.value("elastic_state_mismatches", -1));
  EXPECT_EQ(0, t.value("steps_short", -1));
  EXPECT_EQ(0, t.value("chunks_unrecoverable", -1));
  // The faults really happened, of every kind the rounds plan.
  const auto& injected = t["faults_injected"];
  for (const char* kind : {"coordinator kill", "coordinator restart", "server kill", "server restart", "joiner start"}) {
    EXPECT_GE(injected.value(kind, 0), 1) << kind << ": " << injected.dump();
  }
  EXPECT_GE(injected.value("storage kill", 0) + injected.value("storage kill (wiped)", 0), 1) << injected.dump();
  // Every round's row agrees with the totals; async rounds counted units.
  std::set<std::string> kinds;
  for (const auto& row : report["rounds"]) {
    kinds.insert(row.value("kind", ""));
    EXPECT_TRUE(row.value("ok", false)) << row.dump();
    if (row.value("kind", "") == "async") {
      EXPECT_GT(row.value("units", 0), 0) << row.dump();
      EXPECT_EQ(0, row.value("units_lost", -1)) << row.dump();
    }
    if (row.value("kind", "") == "elastic") {
      EXPECT_TRUE(row.value("state_hashes_equal", false)) << row.dump();
      EXPECT_EQ(0, row.value("chunks_unrecoverable", -1)) << row.dump();
    }
  }
  EXPECT_EQ((std::set<std::string>{"async", "elastic", "sync"}), kinds);
  // The async reference is the mean of its two fault-free runs.
  const auto& spread = report["reference_spread"]["async"];
  ASSERT_EQ(2u, spread["runs"].size()) << report["reference_spread"].dump();
  const double a0 = spread["runs"][0].get<double>(), a1 = spread["runs"][1].get<double>();
  EXPECT_DOUBLE_EQ((a0 + a1) / 2, report["reference_test_accuracy"].value("async", 0.0));
  EXPECT_DOUBLE_EQ(std::min(a0, a1), spread.value("min", 0.0));
  EXPECT_EQ(1u, report["reference_spread"]["sync"]["runs"].size()) << "a deterministic kind runs once";
  EXPECT_TRUE(ProcessesMentioning(dir / "rounds").empty()) << "children left running";
}

}  // namespace
}  // namespace tenax::testing
