// What the launcher adds to the summary.json the job's rank 0 wrote
// (launch/local_launcher.h writes the result). Pure functions of their
// inputs but ReadJobSummary; no threads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tenax/core/status.h"

namespace tenax {

// DIR/summary.json as the job's rank 0 wrote it, read once the job has
// ended; Internal when it is missing or not a JSON object.
Result<nlohmann::json> ReadJobSummary(const std::string& out_dir);

// Bytes the job moved, by purpose (summary.json "bytes_moved"; the
// report's chart). Gradients: a ring allreduce moves 2 (W-1)/W of the
// gradient per member and step, for each generation's steps at its size;
// models: each state copy to a joiner (parameters and momentum); recovery:
// what the store recoveries of every worker read and wrote (the summary
// has rank 0's only, so the caller sums them); shuffling: a coded job's
// partition re-mappings (from the decoder's summary).
nlohmann::json BytesMoved(const nlohmann::json& summary, double recovery_bytes);

// "test accuracy 0.8865 against 0.8925 without faults (-0.60 points)".
std::string AccuracyAgainstReference(const nlohmann::json& summary);

// Every injected fault (and unplanned failure) with the system's reaction
// and time to recover: entry i is the fault injector's record i (or, past
// its records, the reaction itself: stragglers and unplanned failures
// have none) with the reaction's fault, target, reaction, recovered,
// recovered_seconds and time (unix seconds, the report's one clock).
nlohmann::json MergeFaultRecords(const nlohmann::json& executed, const nlohmann::json& reactions);

}  // namespace tenax
