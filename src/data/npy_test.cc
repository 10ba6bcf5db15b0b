// The .npy decoder and the npy data source, on files written by Debian's
// python3-numpy (run as a child process with a deadline) and on hand-made
// broken ones.
#include "tenax/data/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "tenax/train/input/data_source.h"
#include "tenax/train/input/npy_source.h"
#include "tenax/train/single_trainer.h"
#include "testing.h"

namespace tenax {
namespace {

// Runs `code` with numpy imported as np, in `dir`; returns its stdout.
std::string RunNumpy(const std::string& dir, const std::string& code) {
  const std::string script = "import os, sys\nimport numpy as np\nos.chdir(sys.argv[1])\n" + code;
  // timeout(1) is the deadline: a hung interpreter is killed, and the test fails.
  auto r = testing::RunProcess({"/usr/bin/timeout", "-s", "KILL", "120", "/usr/bin/python3", "-c", script, dir});
  EXPECT_EQ(r.exit_code, 0) << "python3-numpy failed:\n" << r.err;
  return r.out;
}

// A .npy file image with the given header dict text, padded like numpy pads.
std::vector<uint8_t> NpyBytes(const std::string& dict, const std::vector<uint8_t>& payload, uint8_t major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  for (size_t i = 0; i < prefix - 8; ++i) out.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

template <typename T>
std::vector<T> Values(const NpyArray& a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

std::string ErrorOf(const Result<NpyArray>& r) { return r.ok() ? "(no error)" : r.status().message(); }

TEST(NpyTest, DecodesWhatNumpyWrites) {
  testing::ScratchDir dir;
  RunNumpy(dir.path(), R"(
np.save('u8.npy', (np.arange(2 * 3 * 4 * 5) % 251).astype(np.uint8).reshape(2, 3, 4, 5))
np.save('i32.npy', np.array([5, -7, 2147483647, -2147483648], dtype='<i4'))
np.save('i64.npy', np.array([1 << 40, -3, 0], dtype='<i8'))
np.save('f32.npy', np.arange(6, dtype='<f4').reshape(2, 3) * np.float32(0.5) - np.float32(1))
np.save('empty.npy', np.zeros((0, 3), dtype='<f4'))
for v in (2, 3):
    with open('v%d.npy' % v, 'wb') as f:
        np.lib.format.write_array(f, np.array([7, 8, 9], dtype='<i8'), version=(v, 0))
)");
  auto u8 = ReadNpyFile(dir / "u8.npy");
  ASSERT_TRUE(u8.ok()) << u8.status().ToString();
  EXPECT_EQ(u8->dtype, NpyDtype::kUint8);
  EXPECT_EQ(u8->shape, (std::vector<int64_t>{2, 3, 4, 5}));
  std::vector<uint8_t> expected(120);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<uint8_t>(i % 251);
  EXPECT_EQ(u8->data, expected);

  // The byte-buffer decoder agrees with the file reader.
  const std::vector<uint8_t> file = testing::ReadBytes(dir / "u8.npy");
  auto from_buffer = DecodeNpy(file, "u8");
  ASSERT_TRUE(from_buffer.ok()) << from_buffer.status().ToString();
  EXPECT_EQ(from_buffer->data, expected);
  auto header = ReadNpyFileHeader(dir / "u8.npy");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->shape, u8->shape);
  EXPECT_EQ(header->data_bytes, 120u);
  EXPECT_EQ(header->data_offset, file.size() - 120);

  auto i32 = ReadNpyFile(dir / "i32.npy");
  ASSERT_TRUE(i32.ok()) << i32.status().ToString();
  EXPECT_EQ(i32->dtype, NpyDtype::kInt32);
  EXPECT_EQ(Values<int32_t>(*i32), (std::vector<int32_t>{5, -7, 2147483647, -2147483647 - 1}));
  auto i64 = ReadNpyFile(dir / "i64.npy");
  ASSERT_TRUE(i64.ok()) << i64.status().ToString();
  EXPECT_EQ(Values<int64_t>(*i64), (std::vector<int64_t>{int64_t{1} << 40, -3, 0}));
  auto f32 = ReadNpyFile(dir / "f32.npy");
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  EXPECT_EQ(f32->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<float>(*f32), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f}));
  auto empty = ReadNpyFile(dir / "empty.npy");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(empty->data.empty());
  for (const char* name : {"v2.npy", "v3.npy"}) {
    auto v = ReadNpyFile(dir / name);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(Values<int64_t>(*v), (std::vector<int64_t>{7, 8, 9})) << name;
  }
}

TEST(NpyTest, TruncatedAndTrailingBytesAreRefused) {
  testing::ScratchDir dir;
  const auto good = NpyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(DecodeNpy(good, "good").ok());

  auto truncated = good;
  truncated.pop_back();
  testing::WriteBytes(dir / "short.npy", truncated);
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "short.npy")),
            dir / "short.npy" + ": truncated: header promises 6 data bytes, file has 5");
  EXPECT_EQ(ReadNpyFile(dir / "short.npy").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ReadNpyFileHeader(dir / "short.npy").status().message(),
            dir / "short.npy" + ": truncated: header promises 6 data bytes, file has 5");

  auto trailing = good;
  trailing.insert(trailing.end(), {0, 0, 0});
  testing::WriteBytes(dir / "long.npy", trailing);
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "long.npy")), dir / "long.npy" + ": 3 unexpected bytes after the data");

  EXPECT_EQ(ErrorOf(DecodeNpy(std::span(good).first(30), "cut")),
            "cut: truncated inside the .npy header (118 bytes promised, 20 present)");
  EXPECT_EQ(ErrorOf(DecodeNpy({}, "empty")), "empty: truncated: 0 bytes, a .npy header needs at least 10");
}

TEST(NpyTest, WrongMagicAndVersionAreNamed) {
  // What torch.save writes: a zip archive.
  const std::vector<uint8_t> zip = {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0, 0, 0};
  EXPECT_EQ(ErrorOf(DecodeNpy(zip, "tensors.pt")),
            "tensors.pt: wrong magic number (first bytes 0x50 0x4b 0x03 0x04 0x14 0x00, expected 0x93 'NUMPY'): "
            "not a .npy file");
  auto v4 = NpyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", {1});
  v4[6] = 4;
  EXPECT_EQ(ErrorOf(DecodeNpy(v4, "v4.npy")), "v4.npy: unsupported .npy version 4.0 (known: 1.0, 2.0, 3.0)");
}

TEST(NpyTest, OversizedShapesAndHeadersAreRefusedBeforeAllocating) {
  EXPECT_EQ(
      ErrorOf(DecodeNpy(NpyBytes("{'descr': '|u1', 'fortran_order': False, 'shape': (100000, 3, 1024, 1024), }", {}),
                        "big.npy")),
      "big.npy: shape (100000, 3, 1024, 1024) of uint8 describes more than the limit of 4294967296 bytes");
  // A product that overflows 64 bits is caught, not wrapped.
  EXPECT_EQ(ErrorOf(DecodeNpy(NpyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904, "
                                       "4611686018427387904, 0), }",
                                       {}),
                              "zero.npy")),
            "(no error)");  // a zero dimension: no data, whatever the others say
  EXPECT_EQ(ErrorOf(DecodeNpy(NpyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904, "
                                       "4611686018427387904, 4), }",
                                       {}),
                              "wrap.npy")),
            "wrap.npy: shape (4611686018427387904, 4611686018427387904, 4) of int64 describes more than the limit of "
            "4294967296 bytes");
  // The limit is the caller's.
  const auto six = NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", std::vector<uint8_t>(24));
  EXPECT_EQ(ErrorOf(DecodeNpy(six, "six.npy", 23)),
            "six.npy: shape (6,) of float32 describes more than the limit of "
            "23 bytes");
  EXPECT_TRUE(DecodeNpy(six, "six.npy", 24).ok());

  std::vector<uint8_t> long_header = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0x20, 0x4e, 0, 0};  // 20000 bytes
  EXPECT_EQ(ErrorOf(DecodeNpy(long_header, "h.npy")),
            "h.npy: .npy header is 20000 bytes, more than the limit of 10000");
}

TEST(NpyTest, UnsupportedLayoutsAndTypesAreNamed) {
  testing::ScratchDir dir;
  RunNumpy(dir.path(), R"(
np.save('be.npy', np.arange(4, dtype='>i4'))
np.save('fortran.npy', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))
np.save('f64.npy', np.zeros(3))
np.save('struct.npy', np.zeros(2, dtype=[('a', '<i4'), ('b', '<f4')]))
)");
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "be.npy")),
            dir / "be.npy" +
                ": element type '>i4' is big-endian; supported: little-endian uint8 ('|u1'), int32 ('<i4'), int64 "
                "('<i8') and float32 ('<f4') (convert with arr.astype(arr.dtype.newbyteorder('<')))");
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "fortran.npy")),
            dir / "fortran.npy" +
                ": fortran_order is True (column-major data, shape (2, 3)); save a C-ordered array: np.save(path, "
                "np.ascontiguousarray(arr))");
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "f64.npy")),
            dir / "f64.npy" +
                ": element type '<f8' is not supported; supported: uint8 ('|u1'), int32 ('<i4'), int64 ('<i8') and "
                "float32 ('<f4')");
  EXPECT_EQ(ErrorOf(ReadNpyFile(dir / "struct.npy")),
            dir / "struct.npy" + ": 'descr' is not a type string like '<f4' (structured dtypes are not supported)");
}

TEST(NpyTest, MalformedHeadersAreRefused) {
  auto error = [](const std::string& dict) { return ErrorOf(DecodeNpy(NpyBytes(dict, {}), "m.npy")); };
  EXPECT_EQ(error("{'descr': '|u1', 'shape': (0,), }"), "m.npy: .npy header lacks the key 'fortran_order'");
  EXPECT_EQ(error("{'descr': '|u1', 'fortran_order': False, 'shape': (0,), 'x': 1}"),
            "m.npy: malformed .npy header: expected a string, True, False or a tuple at byte 61 of the header: "
            "'{'descr': '|u1', 'fortran_order': False, 'shape': (0,), 'x': 1}                 ...'");
  EXPECT_EQ(error("{'descr': '|u1', 'fortran_order': False, 'shape': (0,), 'x': ()}"),
            "m.npy: .npy header has an unexpected key 'x'");
  EXPECT_EQ(error("{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (0,)}"),
            "m.npy: .npy header repeats the key 'descr'");
  EXPECT_NE(error("{'descr': '|u1', 'fortran_order': False, 'shape': (3)}").find("needs a trailing comma"),
            std::string::npos);
  EXPECT_NE(error("{'descr': '|u1', 'fortran_order': False, 'shape': (-3,)}").find("negative dimension"),
            std::string::npos);
  EXPECT_NE(error("{'descr': '|u1', 'fortran_order': 0, 'shape': (3,)}").find("malformed .npy header"),
            std::string::npos);
  EXPECT_EQ(error("{'descr': '|u1', 'fortran_order': False, 'shape': (0,)}"), "(no error)");
}

// ---- The data source ----

TrainConfig NpyConfig(const testing::ScratchDir& dir) {
  TrainConfig c;
  c.data_format = kNpyFormat;
  c.train_images = dir / "train_x.npy";
  c.train_labels = dir / "train_y.npy";
  c.test_images = dir / "test_x.npy";
  c.test_labels = dir / "test_y.npy";
  return c;
}

std::string ErrorOf(const Result<DataSplits>& r) { return r.ok() ? "(no error)" : r.status().message(); }

// Uint8 images are scaled and standardised by the training images' mean and
// std (numpy's own computation is the reference), for both splits.
TEST(NpySourceTest, Uint8ImagesAreStandardisedByTheTrainingStatistics) {
  testing::ScratchDir dir;
  const std::string stats = RunNumpy(dir.path(), R"(
rng = np.random.default_rng(3)
train = rng.integers(0, 256, size=(6, 3, 4, 5), dtype=np.uint8)
np.save('train_x.npy', train)
np.save('train_y.npy', np.array([0, 1, 0, 1, 0, 2], dtype=np.int64))
np.save('test_x.npy', rng.integers(0, 256, size=(3, 3, 4, 5), dtype=np.uint8))
np.save('test_y.npy', np.array([2, 0, 1], dtype=np.uint8))
x = train.astype(np.float64) / 255
print('%.17g %.17g' % (x.mean(), x.std()))
)");
  double mean = 0, std = 0;
  ASSERT_EQ(std::sscanf(stats.c_str(), "%lf %lf", &mean, &std), 2) << stats;
  const TrainConfig c = NpyConfig(dir);
  auto d = OpenDataSplits(c);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->train->info().size, 6);
  EXPECT_EQ(d->train->info().sample_shape, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(d->train->info().classes, 3);
  EXPECT_EQ(d->test->info().classes, 3);

  for (auto [source, file] : {std::pair{d->train.get(), "train_x.npy"}, std::pair{d->test.get(), "test_x.npy"}}) {
    auto raw = ReadNpyFile(dir / file);
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    auto batch = source->ReadRange(0, source->info().size);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ASSERT_EQ(batch->images.numel(), static_cast<int64_t>(raw->data.size()));
    const float* got = batch->images.data_ptr<float>();
    for (size_t i = 0; i < raw->data.size(); ++i) {
      ASSERT_NEAR(got[i], (raw->data[i] / 255.0 - mean) / std, 1e-5) << file << " element " << i;
    }
  }
  auto labels = d->test->ReadRange(0, 3);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_TRUE(torch::equal(labels->labels, torch::tensor({2, 0, 1}, torch::kInt64)));
  // Labels() (the coded exchange partitions by them) without reading images.
  auto all_labels = d->train->Labels();
  ASSERT_TRUE(all_labels.ok()) << all_labels.status().ToString();
  EXPECT_TRUE(torch::equal(*all_labels, torch::tensor({0, 1, 0, 1, 0, 2}, torch::kInt64)));

  // A limit trims the split; the class count still comes from the whole file.
  auto first4 = OpenDataSource(c, Split::kTrain, 4);
  ASSERT_TRUE(first4.ok()) << first4.status().ToString();
  EXPECT_EQ((*first4)->info().size, 4);
  EXPECT_EQ((*first4)->info().classes, 3);
  auto trimmed = (*first4)->ReadRange(0, 4);
  auto whole = d->train->ReadRange(0, 4);
  ASSERT_TRUE(trimmed.ok() && whole.ok());
  EXPECT_TRUE(torch::equal(trimmed->images, whole->images));
  EXPECT_TRUE(torch::equal(trimmed->labels, torch::tensor({0, 1, 0, 1}, torch::kInt64)));

  // Opened alone (as `tenax eval` does), the test split gets the same values.
  auto test_alone = OpenDataSource(c, Split::kTest, 0);
  ASSERT_TRUE(test_alone.ok()) << test_alone.status().ToString();
  EXPECT_EQ((*test_alone)->info().classes, 3);
  auto a = (*test_alone)->ReadRange(0, 3);
  auto b = d->test->ReadRange(0, 3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(torch::equal(a->images, b->images));
}

TEST(NpySourceTest, Float32ImagesAreUsedAsGivenAndRank3GetsOneChannel) {
  testing::ScratchDir dir;
  RunNumpy(dir.path(), R"(
np.save('train_x.npy', np.arange(5 * 4 * 3, dtype='<f4').reshape(5, 4, 3) * np.float32(0.25) - np.float32(2))
np.save('train_y.npy', np.array([3, 1, 0, 2, 1], dtype=np.int32))
np.save('test_x.npy', -np.arange(2 * 4 * 3, dtype='<f4').reshape(2, 4, 3))
np.save('test_y.npy', np.array([3, 3], dtype=np.int32))
)");
  auto d = OpenDataSplits(NpyConfig(dir));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->train->info().sample_shape, (std::vector<int64_t>{1, 4, 3}));
  EXPECT_EQ(d->train->info().classes, 4);
  auto train = d->train->ReadRange(0, 5);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->images.sizes(), (std::vector<int64_t>{5, 1, 4, 3}));
  EXPECT_TRUE(torch::equal(train->images, torch::arange(60, torch::kFloat32).reshape({5, 1, 4, 3}) * 0.25 - 2));
  EXPECT_TRUE(torch::equal(train->labels, torch::tensor({3, 1, 0, 2, 1}, torch::kInt64)));
  auto picked = d->test->Read(torch::tensor({1, 0}, torch::kInt64));
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ(picked->images[0][0][0][0].item<float>(), -12.0f);
  EXPECT_EQ(picked->images[1][0][3][2].item<float>(), -11.0f);
}

// Every bad pair of files is refused naming the file and what is wrong.
TEST(NpySourceTest, BadFilesAreRefusedNamingTheFile) {
  testing::ScratchDir dir;
  RunNumpy(dir.path(), R"(
u8 = lambda *s: np.zeros(s, dtype=np.uint8)
np.save('x4.npy', u8(4, 2, 3, 3))
np.save('x3.npy', u8(3, 2, 3, 3))
np.save('x_other.npy', u8(4, 2, 3, 4))
np.save('x_rank2.npy', u8(4, 10))
np.save('x_f32.npy', np.zeros((4, 2, 3, 3), dtype='<f4'))
np.save('x_i64.npy', np.zeros((4, 2, 3, 3), dtype='<i8'))
nan = np.zeros((4, 2, 3, 3), dtype='<f4'); nan[2, 1, 0, 0] = np.nan
np.save('x_nan.npy', nan)
np.save('y4.npy', np.array([0, 1, 2, 1]))
np.save('y4_beyond.npy', np.array([0, 5, 2, 1], dtype=np.uint8))
np.save('y4_negative.npy', np.array([0, 1, -1, 2], dtype=np.int64))
np.save('y4_zero.npy', np.zeros(4, dtype=np.int32))
np.save('y4_float.npy', np.zeros(4, dtype='<f4'))
np.save('y4_rank2.npy', np.zeros((4, 1), dtype=np.int64))
)");
  auto open = [&](const std::string& train_x, const std::string& train_y, const std::string& test_x,
                  const std::string& test_y) {
    TrainConfig c = NpyConfig(dir);
    c.train_images = dir / train_x;
    c.train_labels = dir / train_y;
    c.test_images = dir / test_x;
    c.test_labels = dir / test_y;
    return ErrorOf(OpenDataSplits(c));
  };
  EXPECT_EQ(open("x4.npy", "y4.npy", "x4.npy", "y4.npy"), "(no error)");
  EXPECT_EQ(open("x4.npy", "y4.npy", "x3.npy", "y4.npy"),
            dir / "x3.npy" + " holds 3 images but " + dir / "y4.npy" + " holds 4 labels");
  EXPECT_EQ(open("x4.npy", "y4_negative.npy", "x4.npy", "y4.npy"),
            dir / "y4_negative.npy" + ": mislabelled: label -1 at index 2 is negative");
  EXPECT_EQ(open("x4.npy", "y4.npy", "x4.npy", "y4_beyond.npy"),
            dir / "y4_beyond.npy" + ": mislabelled: label 5 at index 1 is not one of the 3 classes of the training " +
                "labels (" + dir / "y4.npy" + ")");
  EXPECT_EQ(open("x4.npy", "y4_zero.npy", "x4.npy", "y4.npy"),
            dir / "y4_zero.npy" +
                ": labels name 1 class(es); training needs at least 2 (labels are class indices 0, 1, ...)");
  EXPECT_EQ(open("x_rank2.npy", "y4.npy", "x4.npy", "y4.npy"),
            dir / "x_rank2.npy" + ": images need 4 dimensions (N, C, H, W) or 3 (N, H, W), found shape (4, 10)");
  EXPECT_EQ(open("y4.npy", "y4.npy", "x4.npy", "y4.npy"),
            dir / "y4.npy" +
                ": images need 4 dimensions (N, C, H, W) or 3 (N, H, W), found shape (4,) (is this a labels file?)");
  EXPECT_EQ(open("x4.npy", "y4_rank2.npy", "x4.npy", "y4.npy"),
            dir / "y4_rank2.npy" + ": labels need 1 dimension (N), found shape (4, 1)");
  EXPECT_EQ(open("x4.npy", "x4.npy", "x4.npy", "y4.npy"),
            dir / "x4.npy" + ": labels need 1 dimension (N), found shape (4, 2, 3, 3) (is this an images file?)");
  EXPECT_EQ(open("x4.npy", "y4_float.npy", "x4.npy", "y4.npy"),
            dir / "y4_float.npy" + ": labels must be integers (uint8, int32 or int64), found float32");
  EXPECT_EQ(open("x_i64.npy", "y4.npy", "x4.npy", "y4.npy"),
            dir / "x_i64.npy" + ": images must be uint8 or float32, found int64");
  EXPECT_EQ(open("x_nan.npy", "y4.npy", "x_nan.npy", "y4.npy"),
            dir / "x_nan.npy" + ": value nan of sample 2 is not finite");
  EXPECT_EQ(open("x4.npy", "y4.npy", "x_f32.npy", "y4.npy"),
            dir / "x_f32.npy" + ": images are float32 but the training images (" + dir / "x4.npy" +
                ") are uint8: both splits need the same element type");
  EXPECT_EQ(open("x4.npy", "y4.npy", "x_other.npy", "y4.npy"),
            "npy test (" + dir / "x_other.npy" + ", " + dir / "y4.npy" +
                "; uint8 standardised by the training mean 0.0000 and std 1.0000): samples have another shape than "
                "the training data's");
  EXPECT_EQ(open("x4.npy", "y4.npy", "missing.npy", "y4.npy"), dir / "missing.npy" + ": no such file");
}

// The issue's end-to-end check: uint8 3 x 32 x 32 images of 7 classes train
// through the single-process trainer with a built-in model, which is built
// for the data's shape and class count.
TEST(NpySourceTest, TrainsEndToEndWithTheDataShapeAndClasses) {
  testing::ScratchDir dir;
  RunNumpy(dir.path(), R"(
rng = np.random.default_rng(0)
def split(n, images, labels):
    y = rng.integers(0, 7, size=n)
    y[:7] = np.arange(7)
    # Class c brightens rows 4c..4c+3 of every channel: learnable in a few steps.
    x = rng.integers(0, 100, size=(n, 3, 32, 32))
    for i in range(n):
        x[i, :, 4 * y[i]:4 * y[i] + 4, :] += 150
    np.save(images, x.astype(np.uint8))
    np.save(labels, y.astype(np.int64))
split(512, 'train_x.npy', 'train_y.npy')
split(128, 'test_x.npy', 'test_y.npy')
)");
  ConfigDoc doc;
  for (const std::string& o : std::vector<std::string>{
           "data.format=npy", "data.train_images=" + dir / "train_x.npy", "data.train_labels=" + dir / "train_y.npy",
           "data.test_images=" + dir / "test_x.npy", "data.test_labels=" + dir / "test_y.npy", "model.name=mlp",
           "train.epochs=5", "train.max_steps=40", "train.batch_size=32", "train.threads=2", "log.every_steps=10"}) {
    ASSERT_TRUE(doc.Override(o).ok()) << o;
  }
  auto config = ParseTrainConfig(doc);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  auto out = TrainSingle(*config, doc, dir / "run", {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_GT(out->final_test_accuracy, 0.8);  // chance is 1/7
  EXPECT_LT(out->final_train_loss, 0.5 * out->first_train_loss);
  auto summary = nlohmann::json::parse(testing::ReadText(dir / "run/summary.json"));
  EXPECT_EQ(summary["sample_shape"], nlohmann::json::array({3, 32, 32}));
  EXPECT_EQ(summary["classes"], 7);
  EXPECT_EQ(summary["train_samples"], 512);
  EXPECT_EQ(summary["test_samples"], 128);
  EXPECT_EQ(summary["steps"], 40);
}

TEST(NpyConfigTest, TheShippedExampleIsValid) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/own_data.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->data_format, kNpyFormat);
  EXPECT_EQ(c->train_images, "own_data/train_images.npy");
  EXPECT_EQ(c->test_labels, "own_data/test_labels.npy");
}

TEST(NpyConfigTest, NpyFormatWithoutItsFilesIsRefusedWithTheLine) {
  auto parse = [](std::string_view text) {
    auto doc = ConfigDoc::Parse(text, "job.toml");
    EXPECT_TRUE(doc.ok()) << doc.status().ToString();
    return doc.ok() ? ParseTrainConfig(*doc).status() : doc.status();
  };
  EXPECT_EQ(parse("mode = \"single\"\n[data]\nformat = \"npy\"\ntrain_images = \"x.npy\"\n").message(),
            "job.toml:3: 'data.format' is \"npy\" but 'data.train_labels' (a .npy file) is not set");
  EXPECT_EQ(parse("[data]\nformat = \"npy\"\ntrain_images = \"\"\n").message(),
            "job.toml:3: 'data.train_images' must name a .npy file when data.format = \"npy\"");
  EXPECT_EQ(parse("[data]\nformat = \"npy\"\ndir = \"/tmp\"\n").message(),
            "job.toml:3: 'data.dir' only applies to data.format = \"fashion-mnist\" (npy reads data.train_images "
            "etc.)");
  EXPECT_TRUE(parse("[data]\nformat = \"npy\"\ntrain_images = \"a\"\ntrain_labels = \"b\"\ntest_images = \"c\"\n"
                    "test_labels = \"d\"\n")
                  .ok());
}

}  // namespace
}  // namespace tenax
