// The training set held on a device, checked on the CPU (a second copy of
// the set): the same samples, bit for bit, as the source it copies.
#include "tenax/train/input/device_resident_source.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "testing.h"

namespace tenax {
namespace {

std::unique_ptr<DataSource> FashionMnistTrain(int64_t limit) {
  TrainConfig c;
  c.data_dir = testing::kFashionMnistDir;
  auto s = OpenDataSource(c, Split::kTrain, limit);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(DeviceResidentSource, ReadsAreTheSourcesSamplesBitForBit) {
  auto host = FashionMnistTrain(5000);  // more than one load chunk
  ASSERT_TRUE(host);
  ASSERT_TRUE(host->HeldInMemory());
  EXPECT_EQ(5000 * (784 * 4 + 8), ResidentBytes(*host));
  auto resident = MakeDeviceResidentSource(*host, torch::kCPU, std::nullopt);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  DataSource& r = **resident;
  EXPECT_EQ(host->info().size, r.info().size);
  EXPECT_EQ(host->info().sample_shape, r.info().sample_shape);
  EXPECT_EQ(host->info().classes, r.info().classes);

  auto gen = at::detail::createCPUGenerator(7);
  const torch::Tensor order = r.EpochOrder(gen);
  auto gen2 = at::detail::createCPUGenerator(7);
  EXPECT_TRUE(torch::equal(order, host->EpochOrder(gen2))) << "the epoch order is the source's";
  for (int64_t begin : {0, 4090, 4950}) {  // across the chunk boundary at 4096
    const torch::Tensor idx = order.slice(0, begin, begin + 50);
    auto a = host->Read(idx);
    auto b = r.Read(idx);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(torch::equal(a->images, b->images)) << "batch at " << begin;
    EXPECT_TRUE(torch::equal(a->labels, b->labels)) << "batch at " << begin;
  }
  auto ra = host->ReadRange(4000, 4200);
  auto rb = r.ReadRange(4000, 4200);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_TRUE(torch::equal(ra->images, rb->images));
  EXPECT_TRUE(torch::equal(ra->labels, rb->labels));
  // A sample checked by value too: its labels sum to the source's.
  EXPECT_EQ(host->Labels()->sum().item<int64_t>(), rb->labels.sum().item<int64_t>() +
                                                       host->ReadRange(0, 4000)->labels.sum().item<int64_t>() +
                                                       host->ReadRange(4200, 5000)->labels.sum().item<int64_t>());
}

TEST(DeviceResidentSource, IndicesOutsideTheSetAreRefusedNamingTheSample) {
  auto host = FashionMnistTrain(100);
  ASSERT_TRUE(host);
  auto resident = MakeDeviceResidentSource(*host, torch::kCPU, std::nullopt);
  ASSERT_TRUE(resident.ok()) << resident.status().ToString();
  auto bad = (*resident)->Read(torch::tensor({3, 100}, torch::kInt64));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, bad.status().code());
  EXPECT_NE(std::string::npos, bad.status().message().find("sample 100 is outside [0, 100)")) << bad.status().message();
  auto negative = (*resident)->Read(torch::tensor({-1}, torch::kInt64));
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(std::string::npos, negative.status().message().find("sample -1")) << negative.status().message();
  EXPECT_FALSE((*resident)->ReadRange(90, 101).ok());
}

class FetchingSource final : public DataSource {
 public:
  FetchingSource() { info_ = {10, {1, 2, 2}, 2, "a fetching source"}; }
  const DatasetInfo& info() const override { return info_; }
  Result<Batch> Read(const torch::Tensor&) override { return Internal("not read"); }
  Result<Batch> ReadRange(int64_t, int64_t) override { return Internal("not read"); }

 private:
  DatasetInfo info_;
};

TEST(DeviceResidentSource, ASourceThatFetchesItsSamplesIsNotCopied) {
  FetchingSource fetching;
  auto r = MakeDeviceResidentSource(fetching, torch::kCPU, std::nullopt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code());
  EXPECT_NE(std::string::npos, r.status().message().find("a fetching source is not held in memory"))
      << r.status().message();
}

}  // namespace
}  // namespace tenax
