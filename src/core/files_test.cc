#include "tenax/core/files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tenax/core/metrics.h"
#include "testing.h"

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
  ASSERT_OK(WriteFileAtomic(path, "first"));
  ASSERT_OK(WriteFileAtomic(path, "second"));
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileText(path, 100));
  EXPECT_EQ(text, "second");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++entries;
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, ReadErrorsAreTyped) {
  std::string dir = TempDir();
  EXPECT_EQ(ReadFileBytes(dir + "/absent", 10).status().ToString(), "not_found: " + dir + "/absent: no such file");
  EXPECT_EQ(ReadFileBytes(dir, 10).status().ToString(),
            "invalid_argument: " + dir + ": is a directory, expected a file");
  std::string big(100, 'x');
  big[99] = 'y';
  ASSERT_OK(WriteFileAtomic(dir + "/big", big));
  auto r = ReadFileBytes(dir + "/big", 10);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(dir + "/big: file is 100 bytes"), std::string::npos) << r.status().ToString();
  // At the limit the whole file is read, byte for byte.
  ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> bytes, ReadFileBytes(dir + "/big", 100));
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), big);
  std::filesystem::remove_all(dir);
}

TEST(FilesTest, EnsureWritableDirCreatesAndRejectsFiles) {
  std::string dir = TempDir();
  EXPECT_OK(EnsureWritableDir(dir + "/a/b/c"));
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/a/b/c"));
  ASSERT_OK(WriteFileAtomic(dir + "/file", "x"));
  Status st = EnsureWritableDir(dir + "/file/out");
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_NE(st.message().find(dir + "/file/out"), std::string::npos) << st.message();
  std::filesystem::remove_all(dir);
}

TEST(MetricsTest, WritesOneJsonObjectPerLine) {
  std::string dir = TempDir();
  ASSERT_OK_AND_ASSIGN(JsonLinesWriter w, JsonLinesWriter::Open(dir + "/metrics.jsonl"));
  ASSERT_OK(w.Write({{"step", 1}, {"loss", 2.5}}));
  ASSERT_OK(w.Write({{"step", 2}, {"loss", 1.5}}));
  EXPECT_FALSE(w.Write(nlohmann::json::array()).ok());  // not an object: refused, nothing written
  // Read while the writer is still open: every record is flushed as written.
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 2u);
  // Each record also carries when it was written (metrics_test.cc checks the value).
  for (auto& r : records) {
    EXPECT_TRUE(r["time"].is_number_float()) << r.dump();
    r.erase("time");
  }
  EXPECT_EQ(records[0], nlohmann::json({{"step", 1}, {"loss", 2.5}}));
  EXPECT_EQ(records[1], nlohmann::json({{"step", 2}, {"loss", 1.5}}));
  EXPECT_FALSE(JsonLinesWriter::Open(dir + "/missing/metrics.jsonl").ok());
  std::filesystem::remove_all(dir);
}

TEST(MetricsTest, TwoAppendingWritersKeepEveryRecordWhole) {
  std::string dir = TempDir();
  const std::string path = dir + "/metrics.jsonl";
  ASSERT_OK_AND_ASSIGN(JsonLinesWriter first, JsonLinesWriter::Open(path));
  ASSERT_OK(first.Write({{"step", 1}}));
  ASSERT_OK_AND_ASSIGN(JsonLinesWriter second, JsonLinesWriter::Append(path));  // e.g. the launcher's events
  ASSERT_OK(second.Write({{"event", "fault"}}));
  ASSERT_OK(first.Write({{"step", 2}}));  // the first writer's offset is not stale: O_APPEND
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> records;
  while (std::getline(in, line)) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  for (auto& r : records) r.erase("time");  // stamped by the writer (metrics_test.cc)
  EXPECT_EQ(records[0], nlohmann::json({{"step", 1}}));
  EXPECT_EQ(records[1], nlohmann::json({{"event", "fault"}}));
  EXPECT_EQ(records[2], nlohmann::json({{"step", 2}}));
  std::filesystem::remove_all(dir);
}

TEST(StatusTest, ResultCarriesValueOrError) {
  Result<int> good = 3;
  ASSERT_OK_AND_ASSIGN(int value, good);
  EXPECT_EQ(value, 3);
  Result<int> bad = DataLoss("chunk 7: crc mismatch");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), "data_loss: chunk 7: crc mismatch");
  EXPECT_EQ(bad.status().WithContext("node 2").message(), "node 2: chunk 7: crc mismatch");
}

}  // namespace
}  // namespace tenax
