#include "tenax/sched/k8s/file_state_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "extender_test_bodies.h"
#include "tenax/core/files.h"
#include "testing.h"

namespace tenax::sched {
namespace {

TEST(FileStateSourceTest, ReloadsWhenTheFileChangesAndKeepsTheLastGoodStateOtherwise) {
  tenax::testing::ScratchDir dir;
  const std::string path = dir / "state.json";
  Result<std::unique_ptr<FileStateSource>> missing = FileStateSource::Open(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos) << missing.status().message();

  ASSERT_TRUE(WriteFileAtomic(path, testing::ClusterStateJson()).ok());
  Result<std::unique_ptr<FileStateSource>> opened = FileStateSource::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  FileStateSource& source = **opened;
  std::shared_ptr<const ClusterSnapshot> first = source.Snapshot();
  EXPECT_EQ(first->jobs.at("resnet"), (std::vector<std::string>{"a-1"}));
  EXPECT_EQ(source.Snapshot(), first);  // unchanged file: the same snapshot, no re-read
  EXPECT_EQ(source.loads(), 1u);

  // Rewritten by rename: the next snapshot has the new placement.
  ASSERT_TRUE(WriteFileAtomic(path, R"({"jobs": {"resnet": ["b-1", "b-2"]}, "zones": {"b-1": "zone-b"}})").ok());
  std::shared_ptr<const ClusterSnapshot> second = source.Snapshot();
  EXPECT_EQ(second->jobs.at("resnet"), (std::vector<std::string>{"b-1", "b-2"}));
  EXPECT_EQ(source.loads(), 2u);

  // Overwritten in place with a broken file: the last good state stays.
  {
    std::ofstream out(path, std::ios::trunc);
    out << R"({"jobs": {"resnet": )";
  }
  EXPECT_EQ(source.Snapshot(), second);
  EXPECT_EQ(source.loads(), 2u);
  // Removed: still the last good state.
  ASSERT_EQ(std::remove(path.c_str()), 0);
  EXPECT_EQ(source.Snapshot(), second);
  // Back with a good file: picked up.
  ASSERT_TRUE(WriteFileAtomic(path, R"({"jobs": {"bert": ["a-3"]}})").ok());
  EXPECT_EQ(source.Snapshot()->jobs.count("bert"), 1u);
  EXPECT_EQ(source.loads(), 3u);
}

TEST(FileStateSourceTest, ABadFirstFileStopsTheStartWithThePathAndReason) {
  tenax::testing::ScratchDir dir;
  const std::string path = dir / "state.json";
  ASSERT_TRUE(WriteFileAtomic(path, R"({"links": [], "job": {}})").ok());
  Result<std::unique_ptr<FileStateSource>> s = FileStateSource::Open(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            path + ": cluster state: unknown key \"job\" (known: half_life_seconds, links, jobs, zones)");
}

}  // namespace
}  // namespace tenax::sched
