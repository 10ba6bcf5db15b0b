// Decoder for NumPy's .npy format and the checks a pair of .npy files must
// pass to be a labelled image set. Free of libtorch so it can be fuzzed.
//
// .npy: the magic "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), the
// header length (uint16 for 1.0, uint32 after), a header that is a Python
// dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, ...)},
// then prod(shape) elements in C order. The decoder accepts little-endian
// uint8 ('|u1'), int32 ('<i4'), int64 ('<i8') and float32 ('<f4') in C order
// and refuses everything else by name (big-endian, fortran_order True, other
// or structured dtypes). It checks every field against the bytes present:
// wrong magic, a header over kMaxNpyHeaderBytes, a shape whose data would
// exceed `max_bytes` (products computed without overflow), truncated or
// trailing data are DataLoss errors naming the file. It never allocates more
// than the file's size.
//
// Threading: pure functions, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

enum class NpyDtype { kUint8, kInt32, kInt64, kFloat32 };

// "uint8", "int32", "int64", "float32".
const char* NpyDtypeName(NpyDtype dtype);
size_t NpyItemSize(NpyDtype dtype);

struct NpyHeader {
  NpyDtype dtype = NpyDtype::kUint8;
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  size_t data_offset = 0;      // bytes before the data (magic, lengths, header)
  uint64_t data_bytes = 0;     // prod(shape) * item size
  int64_t count() const;       // prod(shape)
};

struct NpyArray {
  NpyDtype dtype = NpyDtype::kUint8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // C order, little-endian, prod(shape) * item size bytes
  int64_t count() const;
};

// numpy's own reader refuses headers over 10000 bytes unless told otherwise.
inline constexpr size_t kMaxNpyHeaderBytes = 10000;
inline constexpr size_t kMaxNpyRank = 32;
// Per file; a file's data is decoded into memory whole.
inline constexpr size_t kDefaultNpyMaxBytes = size_t{4} << 30;

// Parses the magic, version and header at the start of `bytes` (a prefix of
// the file is enough: the data is not looked at). `name` is used in messages.
Result<NpyHeader> DecodeNpyHeader(std::span<const uint8_t> bytes, const std::string& name,
                                  size_t max_bytes = kDefaultNpyMaxBytes);

// Decodes a whole file's bytes; the data must fill the rest exactly.
Result<NpyArray> DecodeNpy(std::span<const uint8_t> bytes, const std::string& name,
                           size_t max_bytes = kDefaultNpyMaxBytes);

// Reads and decodes `path` (the file is read once, the data not copied).
Result<NpyArray> ReadNpyFile(const std::string& path, size_t max_bytes = kDefaultNpyMaxBytes);

// Reads only the header of `path` and checks that the file's size matches it.
Result<NpyHeader> ReadNpyFileHeader(const std::string& path, size_t max_bytes = kDefaultNpyMaxBytes);

// ---- A labelled image set from a pair of .npy files ----

// Label values beyond this are refused (a model with that many outputs would
// not fit anyway, and it catches labels that are really something else).
inline constexpr int64_t kMaxNpyClasses = int64_t{1} << 16;

struct NpySamples {
  NpyArray images;              // uint8 or float32; shape [N, C, H, W] (a rank-3 file gets C = 1)
  std::vector<int64_t> labels;  // N labels, each in [0, kMaxNpyClasses)
};

// Checks that `labels` holds N integers (uint8, int32 or int64), each >= 0
// and < kMaxNpyClasses, and widens them. A bad label is "mislabelled", with
// its index and value.
Result<std::vector<int64_t>> NpyLabels(const NpyArray& labels, const std::string& name);

// Checks that `images` is N x C x H x W or N x H x W of uint8 or float32
// (every float finite, every dimension but N non-zero) and that `labels`
// passes NpyLabels with as many labels as images. Names are used in messages.
Result<NpySamples> MakeNpySamples(NpyArray images, NpyArray labels, const std::string& images_name,
                                  const std::string& labels_name);

// Mean and population standard deviation of uint8 pixels scaled to [0, 1];
// std is 1 when all pixels are equal (so standardising only centres them).
struct PixelStatistics {
  double mean = 0;
  double std = 1;
};
PixelStatistics Uint8PixelStatistics(std::span<const uint8_t> pixels);

}  // namespace tenax
