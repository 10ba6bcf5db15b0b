// Checkpoints of one parameter-server shard: its part of the model, its
// version and merge count, written atomically and checked on load.
//
// File: <dir>/shard-<shard>-<merges, 12 digits>.ckpt, laid out as
//   "TNXPSCK1" (8 bytes) | u32 LE header length | wire::ShardCheckpointHeader
//   (proto/ps_wire.proto) | param_count float32 LE values | (when the
//   header's tail_merges > 0) param_count float64 LE tail sums | u32 LE
//   CRC-32 (zlib) of every byte before it.
// Written to a temporary file, fsync'ed, renamed into place and the
// directory fsync'ed, so a crash leaves either the old set of files or the
// new one, never a torn file under a final name; a torn or flipped file
// (disk damage, a hand edit) fails the CRC and is skipped for the previous
// one on load.
//
// Threading: free functions, no shared state. Failures name the file:
// IoError for the file system, DataLoss for a damaged file (bad magic,
// header, length or CRC), FailedPrecondition for a valid checkpoint of
// another job, shard layout or model plan.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::ps {

struct ShardCheckpoint {
  std::string job_id;
  std::string plan_fingerprint;  // the model's parameter names/shapes hash
  uint32_t shard = 0, shards = 1;
  uint64_t param_offset = 0;     // this shard's range of the flat model
  uint64_t version = 0;          // the shard's model version (bumps per merge)
  uint64_t merges = 0;           // merges folded in so far (merge_seq of the last one)
  std::string rule;              // the merge rule's name
  int64_t written_unix_ms = 0;
  std::vector<float> params;     // param_count = params.size()
  // Tail averaging (parameter_server.h): how many merges tail_sum holds,
  // and their per-float sum (params.size() values when tail_merges > 0,
  // else empty).
  uint64_t tail_merges = 0;
  std::vector<double> tail_sum;
};

// The bytes of a checkpoint file (encoder and decoder are exact inverses).
std::string EncodeShardCheckpoint(const ShardCheckpoint& checkpoint);
// DataLoss for anything that is not a whole, intact checkpoint; `name`
// (the file) is in the message. Fuzzed (fuzz/shard_checkpoint_fuzz.cc).
Result<ShardCheckpoint> DecodeShardCheckpoint(std::span<const uint8_t> bytes, const std::string& name);

// Writes <dir>/shard-<s>-<merges>.ckpt atomically (creating dir), then
// removes that shard's older checkpoints beyond the newest `keep` (>= 2, so
// a damaged newest one still has a predecessor).
Status WriteShardCheckpoint(const std::string& dir, const ShardCheckpoint& checkpoint, int keep = 2);

struct LoadedCheckpoint {
  ShardCheckpoint checkpoint;
  std::string path;
  // Newer files of this shard that were skipped, each "path: why" (the
  // caller logs them).
  std::vector<std::string> skipped;
};

// The newest intact checkpoint of `shard` in `dir` whose job id, shard,
// shard count, offset, length and plan match `expect` (its params' size is
// the expected length; version/merges/params are ignored); nullopt when
// the directory has none (a fresh start). A damaged file is skipped (listed
// in `skipped`); a valid file that does not match `expect` is
// FailedPrecondition (the directory belongs to another job: never silently
// start over on it).
Result<std::optional<LoadedCheckpoint>> LoadNewestShardCheckpoint(const std::string& dir, const ShardCheckpoint& expect);

}  // namespace tenax::ps
