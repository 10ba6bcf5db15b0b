#include "tenax/core/files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tenax/core/metrics.h"

namespace tenax {
namespace {

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("tenax-files-test-" + std::to_string(::getpid()) + "-" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(FilesTest, AtomicWriteReplacesAndLeavesNoTemporary) {
  std::string dir = TempDir();
  std::string path = dir + "/summary.json";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  auto text = ReadFileText(path, 100);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++entries;
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, ReadErrorsAreTyped) {
  std::string dir = TempDir();
  EXPECT_EQ(ReadFileBytes(dir + "/absent", 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ReadFileBytes(dir, 10).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteFileAtomic(dir + "/big", std::string(100, 'x')).ok());
  auto r = ReadFileBytes(dir + "/big", 10);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("big"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, EnsureWritableDirCreatesAndRejectsFiles) {
  std::string dir = TempDir();
  EXPECT_TRUE(EnsureWritableDir(dir + "/a/b/c").ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/a/b/c"));
  ASSERT_TRUE(WriteFileAtomic(dir + "/file", "x").ok());
  Status st = EnsureWritableDir(dir + "/file/out");
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(dir + "/file/out"), std::string::npos) << st.message();
  std::filesystem::remove_all(dir);
}

TEST(MetricsTest, WritesOneJsonObjectPerLine) {
  std::string dir = TempDir();
  auto w = JsonLinesWriter::Open(dir + "/metrics.jsonl");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write({{"step", 1}, {"loss", 2.5}}).ok());
  ASSERT_TRUE(w->Write({{"step", 2}, {"loss", 1.5}}).ok());
  EXPECT_FALSE(w->Write(nlohmann::json::array()).ok());
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"], ++n);
  }
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(JsonLinesWriter::Open(dir + "/missing/metrics.jsonl").ok());
  std::filesystem::remove_all(dir);
}

TEST(StatusTest, ResultCarriesValueOrError) {
  Result<int> good = 3;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 3);
  Result<int> bad = DataLoss("chunk 7: crc mismatch");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), "data_loss: chunk 7: crc mismatch");
  EXPECT_EQ(bad.status().WithContext("node 2").message(), "node 2: chunk 7: crc mismatch");
}

}  // namespace
}  // namespace tenax
