// Process-wide logging on spdlog, to stderr. Every line carries the process
// name (role and rank once there are several processes) so that interleaved
// logs of a cluster can be told apart.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace tenax {

// Installs the default logger named `process_name` ("train", "worker-3").
// `level` is one of trace, debug, info, warn, error; unknown -> info.
void InitLogging(const std::string& process_name, const std::string& level = "info");

}  // namespace tenax
