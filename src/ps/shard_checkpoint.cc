#include "tenax/ps/shard_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "ps_wire.pb.h"
#include "tenax/core/files.h"

namespace tenax::ps {
namespace {

constexpr char kMagic[8] = {'T', 'N', 'X', 'P', 'S', 'C', 'K', '1'};
constexpr uint32_t kMaxHeaderBytes = 64 << 10;
constexpr uint32_t kMaxShards = 64;

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

uint32_t Crc(const uint8_t* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (size > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    size -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

std::string FileName(uint32_t shard, uint64_t merges) {
  char name[64];
  std::snprintf(name, sizeof name, "shard-%u-%012llu.ckpt", shard, static_cast<unsigned long long>(merges));
  return name;
}

// The shard's checkpoint files in `dir`, newest (most merges) first.
std::vector<std::pair<uint64_t, std::string>> ListCheckpoints(const std::string& dir, uint32_t shard) {
  const std::string prefix = "shard-" + std::to_string(shard) + "-";
  std::vector<std::pair<uint64_t, std::string>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() != prefix.size() + 12 + 5 || name.substr(name.size() - 5) != ".ckpt") {
      continue;  // another shard's, a temporary file, or not ours
    }
    const std::string digits = name.substr(prefix.size(), 12);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    out.emplace_back(std::stoull(digits), e.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError(dir + ": cannot open the directory to fsync it: " + ErrnoMessage(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return IoError(dir + ": fsync failed: " + ErrnoMessage(err));
  return Status::Ok();
}

}  // namespace

std::string EncodeShardCheckpoint(const ShardCheckpoint& c) {
  wire::ShardCheckpointHeader h;
  h.set_job_id(c.job_id);
  h.set_plan_fingerprint(c.plan_fingerprint);
  h.set_shard(c.shard);
  h.set_shards(c.shards);
  h.set_param_offset(c.param_offset);
  h.set_param_count(c.params.size());
  h.set_version(c.version);
  h.set_merges(c.merges);
  h.set_rule(c.rule);
  h.set_written_unix_ms(c.written_unix_ms);
  h.set_tail_merges(c.tail_merges);
  const std::string header = h.SerializeAsString();
  std::string out(kMagic, sizeof kMagic);
  PutU32(out, static_cast<uint32_t>(header.size()));
  out += header;
  // float32 little-endian: the in-memory layout on every machine tenax runs on.
  out.append(reinterpret_cast<const char*>(c.params.data()), c.params.size() * sizeof(float));
  if (c.tail_merges > 0) {
    out.append(reinterpret_cast<const char*>(c.tail_sum.data()), c.tail_sum.size() * sizeof(double));
  }
  PutU32(out, Crc(reinterpret_cast<const uint8_t*>(out.data()), out.size()));
  return out;
}

Result<ShardCheckpoint> DecodeShardCheckpoint(std::span<const uint8_t> b, const std::string& name) {
  auto bad = [&](const std::string& why) { return DataLoss(name + ": not an intact shard checkpoint: " + why); };
  if (b.size() < sizeof kMagic + 8) return bad("truncated: " + std::to_string(b.size()) + " bytes");
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return bad("bad magic");
  const uint32_t hlen = GetU32(b.data() + sizeof kMagic);
  if (hlen > kMaxHeaderBytes || hlen > b.size() - sizeof kMagic - 8) {
    return bad("header of " + std::to_string(hlen) + " bytes in a file of " + std::to_string(b.size()));
  }
  wire::ShardCheckpointHeader h;
  if (!h.ParseFromArray(b.data() + sizeof kMagic + 4, static_cast<int>(hlen))) return bad("undecodable header");
  const uint64_t fixed = sizeof kMagic + 4 + uint64_t{hlen} + 4;
  if (h.param_count() > (std::numeric_limits<uint64_t>::max() - fixed) / (sizeof(float) + sizeof(double))) {
    return bad("header claims " + std::to_string(h.param_count()) + " floats");
  }
  const uint64_t tail_bytes = h.tail_merges() > 0 ? h.param_count() * sizeof(double) : 0;
  const uint64_t expected = fixed + h.param_count() * sizeof(float) + tail_bytes;
  if (expected != b.size()) {
    return bad("truncated or padded: " + std::to_string(b.size()) + " bytes, header says " + std::to_string(expected));
  }
  const uint32_t stored = GetU32(b.data() + b.size() - 4);
  if (stored != Crc(b.data(), b.size() - 4)) return bad("CRC mismatch (damaged bytes)");
  if (h.shards() < 1 || h.shards() > kMaxShards || h.shard() >= h.shards()) {
    return bad("shard " + std::to_string(h.shard()) + " of " + std::to_string(h.shards()));
  }
  if (h.job_id().size() > 128 || h.plan_fingerprint().size() > 128 || h.rule().size() > 32) {
    return bad("overlong names in the header");
  }
  ShardCheckpoint c;
  c.job_id = h.job_id();
  c.plan_fingerprint = h.plan_fingerprint();
  c.shard = h.shard();
  c.shards = h.shards();
  c.param_offset = h.param_offset();
  c.version = h.version();
  c.merges = h.merges();
  c.rule = h.rule();
  c.written_unix_ms = h.written_unix_ms();
  c.params.resize(h.param_count());
  std::memcpy(c.params.data(), b.data() + sizeof kMagic + 4 + hlen, h.param_count() * sizeof(float));
  c.tail_merges = h.tail_merges();
  if (c.tail_merges > 0) {
    c.tail_sum.resize(h.param_count());
    std::memcpy(c.tail_sum.data(), b.data() + sizeof kMagic + 4 + hlen + h.param_count() * sizeof(float),
                tail_bytes);
  }
  return c;
}

Status WriteShardCheckpoint(const std::string& dir, const ShardCheckpoint& c, int keep) {
  if (keep < 2) return InvalidArgument("a shard keeps at least 2 checkpoints (asked for " + std::to_string(keep) + ")");
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(dir + "/" + FileName(c.shard, c.merges), EncodeShardCheckpoint(c)));
  TENAX_RETURN_IF_ERROR(FsyncDir(dir));
  const auto files = ListCheckpoints(dir, c.shard);
  for (size_t i = static_cast<size_t>(keep); i < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(files[i].second, ec);
    if (ec) return IoError(files[i].second + ": cannot remove an old checkpoint: " + ec.message());
  }
  return Status::Ok();
}

Result<std::optional<LoadedCheckpoint>> LoadNewestShardCheckpoint(const std::string& dir, const ShardCheckpoint& e) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::optional<LoadedCheckpoint>();
  LoadedCheckpoint out;
  // The model's floats and, with tail averaging, as many float64 sums.
  const uint64_t max_bytes = 64 * 1024 + 64 + e.params.size() * (sizeof(float) + sizeof(double));
  for (const auto& file : ListCheckpoints(dir, e.shard)) {
    const std::string& path = file.second;
    auto bytes = ReadFileBytes(path, max_bytes);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kIoError) return bytes.status();
      out.skipped.push_back(path + ": " + bytes.status().message());
      continue;
    }
    auto c = DecodeShardCheckpoint(*bytes, path);
    if (!c.ok()) {
      out.skipped.push_back(c.status().message());
      continue;
    }
    auto mismatch = [&](const std::string& what, const std::string& has, const std::string& want) {
      return FailedPrecondition(path + " is a checkpoint of " + what + " " + has + ", this server's is " + want +
                                " (a directory of another job: use a fresh one)");
    };
    if (c->job_id != e.job_id) return mismatch("job", c->job_id, e.job_id);
    if (c->shard != e.shard || c->shards != e.shards) {
      return mismatch("shard", std::to_string(c->shard) + "/" + std::to_string(c->shards),
                      std::to_string(e.shard) + "/" + std::to_string(e.shards));
    }
    if (c->param_offset != e.param_offset || c->params.size() != e.params.size()) {
      return mismatch("floats", "[" + std::to_string(c->param_offset) + ", +" + std::to_string(c->params.size()) + ")",
                      "[" + std::to_string(e.param_offset) + ", +" + std::to_string(e.params.size()) + ")");
    }
    if (c->plan_fingerprint != e.plan_fingerprint) return mismatch("model plan", c->plan_fingerprint, e.plan_fingerprint);
    out.checkpoint = std::move(*c);
    out.path = path;
    return std::optional<LoadedCheckpoint>(std::move(out));
  }
  // Checkpoints existed but none is intact: starting over would silently
  // lose every merge they held (and the coordinator would not re-issue them).
  if (!out.skipped.empty()) {
    std::string all;
    for (const auto& s : out.skipped) all += (all.empty() ? "" : "; ") + s;
    return DataLoss("no intact checkpoint of shard " + std::to_string(e.shard) + " in " + dir + ": " + all);
  }
  return std::optional<LoadedCheckpoint>();
}

}  // namespace tenax::ps
