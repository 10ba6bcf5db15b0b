// train.device on this process's libtorch, and the device seam's CPU
// behaviour (the GPU side runs in gpu_test.cc on the GPU machine).
#include "tenax/train/device.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <vector>

namespace tenax {
namespace {

bool HaveGpu() { return torch::cuda::is_available() && torch::cuda::device_count() > 0; }

TEST(Device, AutoIsTheGpuWhenThereIsOneElseTheCpu) {
  auto d = ResolveDevice("auto");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(HaveGpu() ? torch::kCUDA : torch::kCPU, d->type());
  auto cpu = ResolveDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(torch::kCPU, cpu->type());
  EXPECT_EQ("cpu", DescribeDevice(*cpu));
}

TEST(Device, AGpuThatIsNotThereIsRefusedNamingAutoAsTheFix) {
  auto d = ResolveDevice("cuda");
  if (HaveGpu()) {
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(torch::Device(torch::kCUDA, 0), *d);
  } else {
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(StatusCode::kInvalidArgument, d.status().code());
    EXPECT_NE(std::string::npos, d.status().message().find("asks for a GPU")) << d.status().message();
    EXPECT_NE(std::string::npos, d.status().message().find("\"auto\"")) << d.status().message();
  }
  const int64_t visible = HaveGpu() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  auto beyond = ResolveDevice("cuda:" + std::to_string(visible));
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, beyond.status().code());
  if (HaveGpu()) {
    EXPECT_NE(std::string::npos, beyond.status().message().find(std::to_string(visible) + " GPU(s) are visible"))
        << beyond.status().message();
  }
  EXPECT_FALSE(ResolveDevice("tpu").ok());
}

TEST(Device, OnTheCpuCopiesAreImmediateAndMarkersAreDone) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_FALSE(CopyStream(cpu).has_value());
  torch::Tensor staging = HostStaging(cpu, 5);
  EXPECT_TRUE(torch::equal(staging, torch::zeros({5})));
  const torch::Tensor src = torch::arange(5, torch::kFloat32);
  CopyOnStream(std::nullopt, src, staging);
  EXPECT_TRUE(torch::equal(staging, src));
  DeviceMarker m;
  m.Record(cpu);
  EXPECT_TRUE(m.Done());
  const torch::Tensor batch = torch::ones({2, 3});
  EXPECT_EQ(batch.data_ptr(), ToDeviceAhead(batch, cpu, std::nullopt).data_ptr()) << "a CPU batch is used as is";
}

TEST(Device, HostPinIsInactiveWhereThereIsNoCudaRuntime) {
  std::vector<float> memory(1024, 1.0f);
  HostPin cpu(torch::kCPU, memory.data(), memory.size() * sizeof(float));
  EXPECT_FALSE(cpu.active()) << "the CPU needs no page-locked memory";
  EXPECT_EQ("", cpu.error());
  if (at::hasCUDA()) return;  // a CUDA libtorch finds the runtime (gpu_test.cc pins there)
  HostPin cuda(torch::Device(torch::kCUDA, 0), memory.data(), memory.size() * sizeof(float));
  EXPECT_FALSE(cuda.active());
  EXPECT_EQ("the CUDA runtime's cudaHostRegister was not found in this process", cuda.error());
  HostPin moved = std::move(cuda);
  EXPECT_FALSE(moved.active());
  EXPECT_EQ(1.0f, memory[1023]) << "the memory is left as it was";
}

}  // namespace
}  // namespace tenax
