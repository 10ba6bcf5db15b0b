// A training set kept on the GPU: every decoded sample of a source held in
// memory (the idx and npy sources) copied once onto the device, so that a
// step's batch is an index_select there, with nothing gathered, pinned or
// copied on the host but the step's indices. On a launch-bound model (the
// built-in cnn on a fast GPU) the host's per-step work decides the speed,
// and this takes the batch out of it. The samples are the source's floats,
// bit for bit, in the same order: a run trains the same with or without.
//
// Contract: as DataSource (data_source.h); Read and ReadRange return
// tensors on the device (ReadRange: views of the resident set), Labels and
// EpochOrder are the source's. Ownership: the source must outlive this
// one. Threading: the training thread only. Failure: bad indices are
// InvalidArgument (checked on the host, before anything runs on the
// device); a device out of memory while copying the set is
// Unavailable naming the set's size (the caller then reads from the
// host as before).
#pragma once

#include <memory>
#include <optional>

#include "tenax/train/input/data_source.h"

namespace tenax {

// A set larger than this stays on the host (its batches are pinned and
// copied ahead instead): it leaves the GPU's memory to the model.
inline constexpr int64_t kDeviceResidentMaxBytes = int64_t{2} << 30;

// The bytes a copy of `source`'s decoded samples (float32 images, int64
// labels) takes.
int64_t ResidentBytes(const DataSource& source);

// Copies `source` (HeldInMemory()) onto `device`; the indices of each Read
// go there on `copy_stream` (ToDeviceAhead). `device` may be the CPU (the
// tests: the same reads, from a second copy).
Result<std::unique_ptr<DataSource>> MakeDeviceResidentSource(DataSource& source, torch::Device device,
                                                             std::optional<c10::Stream> copy_stream);

}  // namespace tenax
