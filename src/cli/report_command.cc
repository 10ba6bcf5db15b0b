// tenax report DIR [--out FILE]: (re)writes a run's self-contained HTML
// report from its metrics.jsonl and summary.json (report/html_report.h).
// Reading and rendering only; the run directory is not changed except for
// the report file itself.
#include <cstdio>
#include <memory>

#include "command.h"
#include "tenax/report/html_report.h"

namespace tenax::cli {

void AddReportCommand(CLI::App& root, int& exit_code) {
  struct ReportArgs {
    std::string dir;
    std::string out;
  };
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = root.add_subcommand("report", "Write a run's HTML report (charts, workers, faults, events)");
  cmd->add_option("dir", a->dir, "The run directory (the --out DIR of `tenax run`)")->required()->type_name("DIR");
  cmd->add_option("--out", a->out, "Write the page to FILE (default: DIR/report.html)")->type_name("FILE");
  cmd->footer(
      "The page is self-contained (inline CSS and SVG, no network): open it in any browser.\n"
      "A run that did not finish (no summary.json) still gets a report of what it recorded.\n"
      "docs/report.md describes what it shows. Exit status: 0 written, 2 not a run directory or\n"
      "the page cannot be written.");
  cmd->callback([a, &exit_code] {
    auto written = report::WriteReport(a->dir, a->out);
    if (!written.ok()) {
      exit_code = ReportError("report", written.status());
      return;
    }
    std::printf("wrote %s (%zu charts with data, %zu events%s)\n", written->path.c_str(), written->charts_with_data,
                written->events, written->finished ? "" : "; the run did not finish");
    exit_code = 0;
  });
}

}  // namespace tenax::cli
