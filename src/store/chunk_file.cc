#include "tenax/store/chunk_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "store_wire.pb.h"
#include "tenax/core/checksum.h"
#include "tenax/core/files.h"

namespace tenax::store {
namespace {

constexpr char kMagic[8] = {'T', 'X', 'C', 'H', 'U', 'N', 'K', '1'};

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

Status CheckShape(const ChunkMeta& meta) {
  TENAX_RETURN_IF_ERROR(CheckDatasetName(meta.id.dataset));
  if (meta.k < 1 || meta.k + meta.m > 255) {
    return InvalidArgument(meta.id.Describe() + ": k = " + std::to_string(meta.k) + ", m = " +
                           std::to_string(meta.m) + " (need k >= 1 and k + m <= 255)");
  }
  if (meta.id.index >= meta.k + meta.m) {
    return InvalidArgument(meta.id.Describe() + ": index outside the stripe's " + std::to_string(meta.k + meta.m) +
                           " chunks");
  }
  return Status::Ok();
}

}  // namespace

std::string ChunkId::Describe() const {
  return dataset + " stripe " + std::to_string(stripe) + " chunk " + std::to_string(index);
}

std::string ChunkId::FileName() const {
  char stripe_part[32];
  std::snprintf(stripe_part, sizeof stripe_part, "s%08llu", static_cast<unsigned long long>(stripe));
  return dataset + "/" + stripe_part + ".c" + std::to_string(index) + ".chunk";
}

Status CheckDatasetName(std::string_view name) {
  if (name.empty() || name.size() > 128 || name.front() == '.') {
    return InvalidArgument("dataset name \"" + std::string(name.substr(0, 160)) +
                           "\": use 1 to 128 characters from A-Z a-z 0-9 . _ -, not starting with a dot");
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) {
      return InvalidArgument("dataset name \"" + std::string(name) +
                             "\": use only A-Z a-z 0-9 . _ - (it names a directory on every data node)");
    }
  }
  return Status::Ok();
}

ChunkMeta MetaOf(const wire::ChunkHeader& h) {
  ChunkMeta m;
  m.id = {h.dataset(), h.stripe(), h.index()};
  m.k = h.k();
  m.m = h.m();
  m.payload_bytes = h.payload_bytes();
  m.payload_crc32c = h.payload_crc32c();
  return m;
}

wire::ChunkHeader HeaderOf(const ChunkMeta& m) {
  wire::ChunkHeader h;
  h.set_dataset(m.id.dataset);
  h.set_stripe(m.id.stripe);
  h.set_index(m.id.index);
  h.set_k(m.k);
  h.set_m(m.m);
  h.set_payload_bytes(m.payload_bytes);
  h.set_payload_crc32c(m.payload_crc32c);
  return h;
}

Result<std::string> EncodeChunkFile(ChunkMeta meta, std::span<const uint8_t> payload) {
  TENAX_RETURN_IF_ERROR(CheckShape(meta));
  if (payload.size() > kMaxChunkPayloadBytes) {
    return InvalidArgument(meta.id.Describe() + ": " + std::to_string(payload.size()) +
                           " bytes exceed the chunk limit of 1 GiB");
  }
  meta.payload_bytes = payload.size();
  meta.payload_crc32c = Crc32c(payload);
  const std::string header = HeaderOf(meta).SerializeAsString();
  std::string out;
  out.reserve(sizeof kMagic + 8 + header.size() + payload.size());
  out.append(kMagic, sizeof kMagic);
  PutU32(out, static_cast<uint32_t>(header.size()));
  out += header;
  PutU32(out, Crc32c(header));
  out.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  return out;
}

Result<ChunkView> DecodeChunkFile(std::span<const uint8_t> bytes, std::string_view what) {
  const std::string w(what);
  if (bytes.size() < sizeof kMagic + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return DataLoss(w + ": not a tenax chunk file (no TXCHUNK1 magic in its " + std::to_string(bytes.size()) +
                    " bytes)");
  }
  const uint32_t header_len = GetU32(bytes.data() + sizeof kMagic);
  if (header_len > kMaxChunkHeaderBytes || bytes.size() < sizeof kMagic + 8 + header_len) {
    return DataLoss(w + ": chunk header length " + std::to_string(header_len) + " does not fit the file (" +
                    std::to_string(bytes.size()) + " bytes)");
  }
  const uint8_t* header = bytes.data() + sizeof kMagic + 4;
  const uint32_t header_crc = GetU32(header + header_len);
  if (Crc32c(std::span<const uint8_t>(header, header_len)) != header_crc) {
    return DataLoss(w + ": chunk header fails its CRC-32C (corrupt)");
  }
  wire::ChunkHeader h;
  if (!h.ParseFromArray(header, static_cast<int>(header_len))) {
    return DataLoss(w + ": chunk header does not parse");
  }
  ChunkView v;
  v.meta = MetaOf(h);
  if (Status st = CheckShape(v.meta); !st.ok()) return DataLoss(w + ": chunk header: " + st.message());
  const size_t offset = sizeof kMagic + 8 + header_len;
  if (v.meta.payload_bytes > kMaxChunkPayloadBytes || bytes.size() - offset != v.meta.payload_bytes) {
    return DataLoss(w + ": " + v.meta.id.Describe() + " should hold " + std::to_string(v.meta.payload_bytes) +
                    " payload bytes, the file has " + std::to_string(bytes.size() - offset) +
                    " (truncated or overlong)");
  }
  v.payload = bytes.subspan(offset);
  if (Crc32c(v.payload) != v.meta.payload_crc32c) {
    return DataLoss(w + ": " + v.meta.id.Describe() + " fails its payload CRC-32C (corrupt bytes on disk)");
  }
  return v;
}

Result<std::string> WriteChunkFile(const std::string& dir, ChunkMeta meta, std::span<const uint8_t> payload) {
  TENAX_ASSIGN_OR_RETURN(std::string bytes, EncodeChunkFile(meta, payload));
  const std::string path = dir + "/" + meta.id.FileName();
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(std::filesystem::path(path).parent_path().string()));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  return path;
}

Result<Chunk> ReadChunkFile(const std::string& path, const ChunkId& expected) {
  auto bytes = ReadFileBytes(path, kMaxChunkPayloadBytes + kMaxChunkHeaderBytes + 16);
  if (!bytes.ok()) {
    if (bytes.status().code() == StatusCode::kInvalidArgument) return DataLoss(bytes.status().message());
    return bytes.status();
  }
  TENAX_ASSIGN_OR_RETURN(ChunkView v, DecodeChunkFile(*bytes, path));
  if (!(v.meta.id == expected)) {
    return DataLoss(path + ": holds " + v.meta.id.Describe() + ", expected " + expected.Describe());
  }
  Chunk c;
  c.meta = v.meta;
  const size_t offset = bytes->size() - v.payload.size();
  c.payload = std::move(*bytes);
  c.payload.erase(c.payload.begin(), c.payload.begin() + static_cast<std::ptrdiff_t>(offset));
  return c;
}

}  // namespace tenax::store
