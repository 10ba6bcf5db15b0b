// `tenax run`'s check of /dev/shm before it starts a job's processes: a
// container's 64 MiB made UCX crash the workers with SIGSEGV (shared_memory.h).
#include "shared_memory.h"

#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <algorithm>

#include "testing.h"

namespace tenax {
namespace {

uint64_t Available(const std::string& dir) {
  struct statvfs fs {};
  EXPECT_EQ(::statvfs(dir.c_str(), &fs), 0) << dir;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

TEST(SharedMemoryTest, NeedGrowsWithTheJobsProcesses) {
  EXPECT_EQ(SharedMemoryNeed(13), uint64_t{13} * 16 * 1024 * 1024);  // 13 processes: 208 MiB
  EXPECT_EQ(SharedMemoryNeed(1), uint64_t{16} * 1024 * 1024);
  EXPECT_EQ(SharedMemoryNeed(0), SharedMemoryNeed(1));  // never zero: the launcher itself
}

TEST(SharedMemoryTest, TooLittleRoomIsOneLineNamingTheWaysOut) {
  testing::ScratchDir dir;
  const uint64_t free_bytes = Available(dir.path());
  ASSERT_GT(free_bytes, 0u);
  EXPECT_TRUE(CheckSharedMemory(dir.path(), free_bytes / 2, 4).ok());

  const uint64_t need = free_bytes + (uint64_t{1} << 40);  // a TiB more than there is
  Status st = CheckSharedMemory(dir.path(), need, 70000);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  const std::string& m = st.message();
  EXPECT_EQ(m.rfind(dir.path() + " has " + std::to_string(free_bytes / (1024 * 1024)), 0), 0u) << m;
  EXPECT_NE(m.find("70000 processes need about " + std::to_string(need / (1024 * 1024)) + " MiB"), std::string::npos)
      << m;
  EXPECT_NE(m.find("--shm-size"), std::string::npos) << m;
  EXPECT_NE(m.find("cluster.transports = \"tcp\""), std::string::npos) << m;
  EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 0) << m;
}

TEST(SharedMemoryTest, NoSharedMemoryFolderIsNoObstacle) {
  testing::ScratchDir dir;
  EXPECT_TRUE(CheckSharedMemory(dir / "absent", uint64_t{1} << 50, 3).ok());
}

}  // namespace
}  // namespace tenax
