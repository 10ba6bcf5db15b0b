// File helpers that report failures as Status naming the path and the OS
// reason. Writes that produce results users rely on (summary.json,
// model.pt) go through WriteFileAtomic so a crash never leaves a partial
// file that looks valid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

// Reads a whole file. NotFound if absent, IoError if unreadable,
// InvalidArgument if larger than `max_bytes`.
Result<std::vector<uint8_t>> ReadFileBytes(const std::string& path, size_t max_bytes);
Result<std::string> ReadFileText(const std::string& path, size_t max_bytes);

// Writes `path.tmp-<pid>-<n>` (unique per call), fsyncs it, renames it over `path` and fsyncs
// the directory (so the new name survives a power cut too).
Status WriteFileAtomic(const std::string& path, std::string_view contents);

// Renames `tmp_path` over `path` after fsync, then fsyncs the directory
// (for files written by other libraries, e.g. torch::save into a temporary
// name).
Status CommitFileAtomic(const std::string& tmp_path, const std::string& path);

// Creates `dir` (and parents) if needed and proves it is writable by
// creating and removing a probe file.
Status EnsureWritableDir(const std::string& dir);

// "No such file or directory" for errno.
std::string ErrnoMessage(int err);

}  // namespace tenax
