#include "tenax/data/idx.h"

#include <zlib.h>

#include <algorithm>

#include "tenax/core/files.h"

namespace tenax {
namespace {

constexpr uint8_t kUbyte = 0x08;
constexpr size_t kMaxRank = 4;

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string Hex(uint8_t b) {
  static const char* kDigits = "0123456789abcdef";
  return std::string("0x") + kDigits[b >> 4] + kDigits[b & 15];
}

}  // namespace

// Deflate expands at most ~1032:1.
constexpr size_t kMaxDeflateRatio = 1032;

Result<std::vector<uint8_t>> Gunzip(std::span<const uint8_t> gz, size_t max_bytes, const std::string& name) {
  z_stream zs{};
  // 16 + MAX_WBITS: gzip wrapper only.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return Internal(name + ": zlib init failed");
  // The gzip trailer's ISIZE (the inflated size mod 2^32) sizes the buffer
  // in one go (one byte more: room to see the end without growing); it is
  // only a hint (a lying or multi-member file grows the
  // buffer below, and max_bytes still bounds it).
  size_t hint = gz.size() * 4;
  if (gz.size() >= 18) {
    const uint8_t* t = gz.data() + gz.size() - 4;
    hint = static_cast<size_t>(t[0]) | static_cast<size_t>(t[1]) << 8 | static_cast<size_t>(t[2]) << 16 |
           static_cast<size_t>(t[3]) << 24;
    hint = std::min(hint, gz.size() * kMaxDeflateRatio);  // a small file cannot claim gigabytes
  }
  std::vector<uint8_t> out;
  out.resize(std::min<size_t>(max_bytes, std::max<size_t>(hint + 1, 1 << 16)));
  zs.next_in = const_cast<Bytef*>(gz.data());
  size_t in_left = gz.size();
  size_t produced = 0;
  Status status;
  while (true) {
    if (produced == out.size()) {
      if (out.size() >= max_bytes) {
        status = DataLoss(name + ": decompresses to more than " + std::to_string(max_bytes) + " bytes");
        break;
      }
      out.resize(std::min(max_bytes, out.size() * 2));
    }
    uInt in_chunk = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
    zs.avail_in = in_chunk;
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - produced, 1u << 30));
    uInt out_before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    produced += out_before - zs.avail_out;
    in_left -= in_chunk - zs.avail_in;
    if (rc == Z_STREAM_END) {
      if (in_left == 0) break;
      // Concatenated gzip members are valid gzip; anything else is garbage.
      if (inflateReset(&zs) != Z_OK) {
        status = DataLoss(name + ": corrupt gzip data after the first member");
        break;
      }
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_out == 0) continue;  // needs more room: grow
    if (rc == Z_BUF_ERROR) {
      status = DataLoss(name + ": gzip data is truncated");
      break;
    }
    status = DataLoss(name + ": corrupt gzip data (" + (zs.msg ? zs.msg : "zlib error") + ")");
    break;
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  out.resize(produced);
  return out;
}

Result<IdxArray> DecodeIdx(std::span<const uint8_t> bytes, const std::string& name, size_t max_bytes) {
  std::vector<uint8_t> inflated;
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    TENAX_ASSIGN_OR_RETURN(inflated, Gunzip(bytes, max_bytes, name));
    bytes = inflated;
  }
  if (bytes.size() < 4) {
    return DataLoss(name + ": truncated: " + std::to_string(bytes.size()) + " bytes, an IDX header needs at least 4");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    return DataLoss(name + ": wrong magic number (first bytes " + Hex(bytes[0]) + " " + Hex(bytes[1]) +
                    ", expected 0x00 0x00): not an IDX file");
  }
  if (bytes[2] != kUbyte) {
    return DataLoss(name + ": unsupported IDX element type " + Hex(bytes[2]) + " (only 0x08, unsigned byte)");
  }
  size_t rank = bytes[3];
  if (rank == 0 || rank > kMaxRank) {
    return DataLoss(name + ": IDX rank " + std::to_string(rank) + " is out of range 1.." + std::to_string(kMaxRank));
  }
  size_t header = 4 + 4 * rank;
  if (bytes.size() < header) return DataLoss(name + ": truncated inside the IDX header");
  IdxArray arr;
  uint64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    uint32_t d = ReadBigEndian32(bytes.data() + 4 + 4 * i);
    arr.dims.push_back(d);
    count *= d;
    if (count > max_bytes) {
      return DataLoss(name + ": IDX dimensions describe more than " + std::to_string(max_bytes) + " bytes");
    }
  }
  size_t payload = bytes.size() - header;
  if (payload < count) {
    return DataLoss(name + ": truncated: header promises " + std::to_string(count) + " data bytes, file has " +
                    std::to_string(payload));
  }
  if (payload > count) {
    return DataLoss(name + ": " + std::to_string(payload - count) + " unexpected bytes after the data");
  }
  arr.data.assign(bytes.begin() + static_cast<ptrdiff_t>(header), bytes.end());
  return arr;
}

Result<IdxArray> ReadIdxFile(const std::string& path, size_t max_bytes) {
  TENAX_ASSIGN_OR_RETURN(auto bytes, ReadFileBytes(path, max_bytes));
  return DecodeIdx(bytes, path, max_bytes);
}

}  // namespace tenax
