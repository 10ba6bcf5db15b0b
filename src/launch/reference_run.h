// The fault-free reference of a job (report.reference = true; docs/report.md):
// the same job file and overrides run by `tenax run --no-faults` into
// out_dir/reference, so that summary.json can say how far the faults moved
// the final accuracy (reference_test_accuracy). A reference whose
// fingerprint (job file bytes, overrides, tenax version) matches is reused.
//
// Threading: the launcher's thread; a stop signal stops the reference run
// (Cancelled). Its output goes to out_dir/reference.log.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/job/train_config.h"

namespace tenax {

struct ReferenceRunOptions {
  std::string self;                    // the tenax binary
  std::string job_path;
  std::vector<std::string> overrides;  // the job's "key=value"s
  std::string out_dir;                 // the run's directory; the reference goes to out_dir/reference
  std::function<void(const std::string&)> notice;
};

// The reference's summary.json (run now, or reused).
Result<nlohmann::json> EnsureReferenceRun(const TrainConfig& config, const ReferenceRunOptions& options);

}  // namespace tenax
