// Chunk files: how a data node keeps one chunk of an erasure-coded stripe
// on its disk (docs/store.md), and the only code that reads them back.
//
//   "TXCHUNK1" | u32 header length (LE) | ChunkHeader (protobuf,
//   proto/store_wire.proto) | u32 CRC-32C of the header bytes (LE) | payload
//
// The header names the chunk (dataset, stripe, index, k, m) and carries the
// payload's length and CRC-32C; both CRCs are verified on every read, so a
// flipped bit, a truncated file or a file of another chunk is DataLoss,
// never bytes handed to training. Files are written durably: a temporary
// name in the same directory, fsync, rename, fsync of the directory; only
// then is a chunk acknowledged.
//
// Pure functions plus the two file operations; thread-safe (no shared
// state). Errors name the chunk and the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store_wire.pb.h"
#include "tenax/core/status.h"

namespace tenax::store {

struct ChunkId {
  std::string dataset;
  uint64_t stripe = 0;
  uint32_t index = 0;  // 0..k-1 data, k..k+m-1 parity
  // "DATASET stripe S chunk I": for log lines and errors.
  std::string Describe() const;
  // The file name on a data node's disk: "DATASET/sSSSSSSSS.cI.chunk".
  std::string FileName() const;
  bool operator==(const ChunkId&) const = default;
};

struct ChunkMeta {
  ChunkId id;
  uint32_t k = 0, m = 0;
  uint64_t payload_bytes = 0;
  uint32_t payload_crc32c = 0;
};

// A chunk's header as chunk files and the storage protocol carry it, and back.
ChunkMeta MetaOf(const wire::ChunkHeader& h);
wire::ChunkHeader HeaderOf(const ChunkMeta& m);

// Limits on what a decoder accepts (a chunk is at most 1 GiB).
inline constexpr size_t kMaxChunkHeaderBytes = 4096;
inline constexpr uint64_t kMaxChunkPayloadBytes = uint64_t{1} << 30;

// InvalidArgument for a dataset name that is empty, longer than 128 bytes,
// or holds anything but [A-Za-z0-9._-] (it becomes a directory name), or
// starts with a dot.
Status CheckDatasetName(std::string_view name);

// The file's bytes for `payload` (payload_bytes and payload_crc32c of
// `meta` are filled in from it). InvalidArgument for a bad dataset name,
// an index outside k+m, or k+m outside 1..255.
Result<std::string> EncodeChunkFile(ChunkMeta meta, std::span<const uint8_t> payload);

struct ChunkView {
  ChunkMeta meta;
  std::span<const uint8_t> payload;  // into the decoded bytes
};
// Parses and verifies a chunk file. DataLoss (naming `what`) for a wrong
// magic, a header or payload that fails its CRC, a truncated or overlong
// file; InvalidArgument-free: every defect of the bytes is DataLoss.
Result<ChunkView> DecodeChunkFile(std::span<const uint8_t> bytes, std::string_view what);

struct Chunk {
  ChunkMeta meta;
  std::vector<uint8_t> payload;
};

// Writes `payload` as chunk `meta.id` under `dir` durably (see above) and
// returns its path. IoError naming the path on any failed write, fsync or
// rename (no partial file is left under the final name).
Result<std::string> WriteChunkFile(const std::string& dir, ChunkMeta meta, std::span<const uint8_t> payload);
// Reads and verifies a chunk file. NotFound when absent, DataLoss when
// corrupt, and DataLoss when it holds another chunk than `expected`.
Result<Chunk> ReadChunkFile(const std::string& path, const ChunkId& expected);

}  // namespace tenax::store
