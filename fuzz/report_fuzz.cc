// Fuzzes the run-directory loader (report/run_record.h) and the page built
// from what it loads (report/html_report.h). The input is up to four files
// separated by NUL bytes: metrics.jsonl, summary.json, reference/metrics.jsonl,
// reference/summary.json (a missing part is a missing file). Any bytes load
// (the loader is tolerant by contract) and render to a page whose only script
// is its own render check: text from the run never becomes markup.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tenax/report/html_report.h"
#include "tenax/report/run_record.h"

namespace {

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() < 3) {
    const size_t nul = input.find('\0', start);
    if (nul == std::string::npos) break;
    parts.push_back(input.substr(start, nul - start));
    start = nul + 1;
  }
  parts.push_back(input.substr(start));

  tenax::report::RunFiles files;
  files.dir = "fuzz-run";
  files.metrics = parts[0];
  if (parts.size() > 1) files.summary = parts[1];
  if (parts.size() > 2) files.reference_metrics = parts[2];
  if (parts.size() > 3) files.reference_summary = parts[3];
  auto record = tenax::report::ParseRunRecord(files);
  if (!record.ok()) std::abort();  // only a missing metrics.jsonl is an error

  const std::string html = tenax::report::RenderReportHtml(*record);
  if (Count(html, "<script") != 1) std::abort();
  if (Count(html, "<svg class=\"chart\"") != 5) std::abort();
  if (Count(html, "</svg>") != 5) std::abort();
  return 0;
}
