// Running a child program and collecting its standard output (benchmarks run
// their peers this way). The child inherits stderr, so its diagnostics reach
// the user directly.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

struct ProcessOutput {
  int exit_code = 0;  // 128 + signal number if killed by a signal
  std::string stdout_text;
};

// Starts argv[0] (searched in PATH) and waits for it. NotFound if it cannot
// be started; a non-zero exit is reported in exit_code, not as an error.
Result<ProcessOutput> RunAndCapture(const std::vector<std::string>& argv);

}  // namespace tenax
