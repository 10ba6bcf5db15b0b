// The self-contained HTML report of a run (DIR/report.html): headline
// numbers, test accuracy and training loss against the fault-free reference,
// the workers' timeline with the events, bytes moved by purpose, cost, the
// faults with the system's reactions and the event list. Inline CSS and SVG
// only (no network, fonts or images by URL); a small inline script writes a
// render check (<pre id="render-check">chart=NAME marks=K points=N ...) that a
// headless browser can read back. docs/report.md describes the page.
//
// Pure rendering plus one atomic file write; no threads.
#pragma once

#include <string>

#include "tenax/core/status.h"
#include "tenax/report/run_record.h"

namespace tenax::report {

// The whole page. Every text that comes from the run is escaped.
std::string RenderReportHtml(const RunRecord& record);

// What WriteReport did, for the command's one line.
struct ReportWritten {
  std::string path;
  size_t charts_with_data = 0;
  size_t events = 0;
  bool finished = false;
};

// Loads `dir` (run_record.h's errors) and writes the page to `out_path`
// atomically (DIR/report.html when empty), so a viewer never sees half a page.
Result<ReportWritten> WriteReport(const std::string& dir, const std::string& out_path);

}  // namespace tenax::report
