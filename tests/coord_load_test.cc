// The coordinator under simulated members, short: `tenax bench coord-load
// --quick` drives a real coordinator with 100 async members (leases,
// progress, results checked and merged by two simulated shards, until the
// job is done) and then 32 elastic members through 12 membership changes.
// Its report must show every unit leased once and merged exactly once by
// every shard (the coordinator's own decision log), and every planned
// generation formed and recorded. Timings are reported, not asserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "testing.h"

namespace tenax::testing {
namespace {

using namespace std::chrono_literals;

TEST(CoordLoadTest, QuickRunLeasesEveryUnitOnceMergesItOncePerShardAndFormsEveryGeneration) {
  ScratchDir dir;
  setenv("TENAX_SECRET", "coord-load-test-secret-0123456789", 1);
  auto r = RunProcess({TenaxBinary(), "bench", "coord-load", "--quick", "--json", dir / "load.json"}, 150s);
  ASSERT_EQ(0, r.exit_code) << r.err;
  auto report = nlohmann::json::parse(ReadText(dir / "load.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << ReadText(dir / "load.json");
  EXPECT_TRUE(report["problems"].empty()) << report["problems"].dump();

  ASSERT_EQ(1u, report["async"].size()) << report.dump();
  const auto& a = report["async"][0];
  const int64_t members = a.value("clients", 0), units = a.value("units", 0);
  ASSERT_EQ(100, members);
  EXPECT_EQ(units, members * report.value("units_per_member", 0));
  EXPECT_EQ(members, a["join"].value("joined", 0)) << a.dump();
  const auto& lease = a["lease"];
  ASSERT_TRUE(lease.value("job_finished", false)) << a.dump();
  // Every unit leased exactly once (no lease expired, none re-issued), every
  // grant timed, and the coordinator's queue agrees.
  EXPECT_EQ(units, lease.value("leases", -1)) << a.dump();
  EXPECT_EQ(units, lease["latency"].value("count", -1));
  EXPECT_EQ(units, a["queue"].value("units", -1));
  EXPECT_EQ(units, a["queue"].value("units_issued", -1));
  EXPECT_EQ(0, a["queue"].value("units_reissued", -1));
  EXPECT_EQ(0, a["queue"].value("leases_expired", -1));
  EXPECT_EQ(units, a["queue"].value("accepted", -1));
  EXPECT_EQ(units, a["queue"].value("merged_everywhere", -1));
  // Every result handed in, merged once by each of the shards.
  EXPECT_EQ(units, a.value("results_handed_in", -1));
  EXPECT_EQ(units * a.value("shards", 0), a.value("merges_reported", -1));
  EXPECT_EQ(units, lease["merge_latency"].value("count", -1));
  EXPECT_EQ(units, a.value("units_checked", -1));
  EXPECT_EQ(0, a.value("units_lost", -1));
  EXPECT_EQ(0, a.value("units_merged_twice", -1));
  EXPECT_EQ(0, a.value("coordinator_exit_code", -1));
  EXPECT_GT(lease.value("progress_reports", 0), 0);
  EXPECT_GT(lease.value("leases_per_second", 0.0), 0.0);
  EXPECT_GT(a.value("coordinator_rss_mib", 0.0), 0.0);
  EXPECT_GE(lease.value("coordinator_cores", -1.0), 0.0);
  EXPECT_TRUE(a["errors"].empty()) << a["errors"].dump();

  ASSERT_EQ(1u, report["elastic"].size()) << report.dump();
  const auto& e = report["elastic"][0];
  EXPECT_EQ(32, e.value("clients", 0));
  const int64_t planned = e.value("generations_planned", 0);
  EXPECT_EQ(e.value("changes_planned", 0) + 1, planned);
  EXPECT_GT(planned, 1);
  EXPECT_EQ(planned, e.value("generations_formed", -1)) << e.dump();
  EXPECT_EQ(planned, e.value("generations_recorded", -1)) << e.dump();
  EXPECT_EQ(planned, e.value("stable_generation", -1)) << e.dump();
  EXPECT_EQ(0, e.value("changes_not_formed", -1));
  EXPECT_EQ(planned - 1, e["formation"].value("count", -1));
  // Leaves, joins and lost connections all took place.
  for (const char* kind : {"leave", "join", "lose"}) {
    EXPECT_GE(e["formation_by_kind"][kind].value("count", 0), 1) << kind << ": " << e.dump();
  }
  EXPECT_EQ(0, e.value("failures_announced", -1));
  EXPECT_TRUE(e["errors"].empty()) << e["errors"].dump();
}

}  // namespace
}  // namespace tenax::testing
