// JSON-lines metrics: every record gets its wall-clock "time", and a tail
// that follows a file another process appends to returns whole records only.
#include "tenax/core/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "testing.h"

namespace tenax {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST(JsonLinesTest, EveryRecordGetsTheWallClockUnlessItHasATime) {
  testing::ScratchDir dir;
  const std::string path = dir / "m.jsonl";
  auto w = JsonLinesWriter::Open(path);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const double before = UnixNow();
  ASSERT_TRUE(w->Write({{"event", "a"}}).ok());
  const double after = UnixNow();
  ASSERT_TRUE(w->Write({{"event", "b"}, {"time", 12.5}}).ok());
  JsonLinesTail tail(path);
  auto records = tail.ReadNew();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["event"], "a");
  EXPECT_GE(records[0]["time"].get<double>(), before);
  EXPECT_LE(records[0]["time"].get<double>(), after);
  EXPECT_EQ(records[1]["time"].get<double>(), 12.5);  // kept as given
}

TEST(JsonLinesTest, ATailReturnsEachWholeRecordOnceAndWaitsForAHalfWrittenLine) {
  testing::ScratchDir dir;
  const std::string path = dir / "m.jsonl";
  JsonLinesTail tail(path);
  EXPECT_TRUE(tail.ReadNew().empty());  // no file yet
  {
    std::ofstream out(path);
    out << "{\"n\":1}\nnot json\n[1,2]\n{\"n\":2";  // the last line is still being written
  }
  auto first = tail.ReadNew();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["n"], 1);
  {
    std::ofstream out(path, std::ios::app);
    out << ",\"m\":3}\n{\"n\":4}\n";
  }
  auto second = tail.ReadNew();
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0]["n"], 2);
  EXPECT_EQ(second[0]["m"], 3);
  EXPECT_EQ(second[1]["n"], 4);
  EXPECT_TRUE(tail.ReadNew().empty());
}

}  // namespace
}  // namespace tenax
