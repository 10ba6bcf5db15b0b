// Cooperative stop on SIGINT/SIGTERM: the handler only sets a flag; long
// loops poll StopRequested() and return a Cancelled status, so outputs are
// either complete or absent, never half-written.
#pragma once

namespace tenax {

// Installs handlers for SIGINT and SIGTERM. Idempotent.
void InstallStopHandlers();
bool StopRequested();
// The signal that requested the stop, or 0.
int StopSignal();
// Forgets a stop request (a long-lived process that handled it, and tests).
void ClearStopRequest();

}  // namespace tenax
