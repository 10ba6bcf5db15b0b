// tenax run JOB.toml --out DIR: the local launcher (launch/local_launcher.h)
// with its live view on stderr (live_view.h): the job's progress, every
// worker's state and a line per event; plain lines when stderr is not a
// terminal. With an emulated topology the launcher re-runs itself inside
// the network namespaces: that child inherits stderr and shows the view
// (it makes the same terminal check); this process only forwards.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "command.h"
#include "live_view.h"
#include "progress_bar.h"
#include "tenax/report/html_report.h"
#include "tenax/core/run_dir.h"
#include "tenax/launch/local_launcher.h"

namespace tenax::cli {
namespace {

Status RunJob(LaunchOptions options) {
  LiveViewOptions view_options;
  view_options.interactive = StderrIsInteractive();
  view_options.terminal_size = StderrTerminalSize;
  view_options.clock = RunClock();  // a re-run inside a topology goes on with this run's times
  LiveView view(stderr, std::move(view_options));
  // The callbacks come on the launcher's thread, after it set up its
  // logger: from then on its log lines go around the view's block.
  options.on_progress = [&view](const TrainProgress& p) {
    view.RouteLogging();
    view.Progress(p);
  };
  options.on_notice = [&view](const std::string& text) {
    view.RouteLogging();
    view.Event(text);
  };
  options.on_workers = [&view](const std::vector<WorkerStatus>& workers) {
    view.RouteLogging();
    view.Workers(workers);
  };
  auto outcome = LaunchLocalJob(options);
  view.Finish();
  if (!outcome.ok()) return outcome.status();
  // The report, once summary.json is complete (with a topology: here, after
  // the launcher inside it finished and the reference was added).
  if (outcome->write_report) {
    auto written = report::WriteReport(options.out_dir, RunDir(options.out_dir).report());
    if (written.ok()) {
      std::fprintf(stderr, "report: %s (%zu charts, %zu events; open it in a browser)\n", written->path.c_str(),
                   written->charts_with_data, written->events);
    } else {
      // The job succeeded and its files are there: `tenax report DIR` can try again.
      std::fprintf(stderr, "tenax run: could not write the report: %s\n", written.status().message().c_str());
    }
  }
  if (outcome->reported_by_child) return Status::Ok();  // the launcher inside the emulated topology did
  const auto& s = outcome->summary;
  std::printf("final test accuracy %.4f with %lld workers, %.1f s, %.0f samples/s\n",
              s.value("final_test_accuracy", 0.0), static_cast<long long>(outcome->workers),
              s.value("launcher_wall_seconds", 0.0), s.value("samples_per_second", 0.0));
  // What this run wrote (a worker command writes no model.pt or config.toml).
  std::string files;
  for (const char* name : {"summary.json", "metrics.jsonl", "model.pt", "config.toml", "report.html"}) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(options.out_dir) / name, ec)) files += std::string(name) + ",";
  }
  std::printf("outputs: %s/{%slogs/}\n", options.out_dir.c_str(), files.c_str());
  return Status::Ok();
}

}  // namespace

void AddRunCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<LaunchOptions>();
  CLI::App* cmd = root.add_subcommand("run", "Run a multi-process job on this machine (coordinator + workers)");
  cmd->add_option("job", a->job_path, "Job file (TOML, mode = \"sync\", \"async\" or \"coded\"), e.g. examples/quickstart.toml")
      ->required()
      ->type_name("JOB.toml");
  cmd->add_option("--out", a->out_dir, "Run directory (created if needed)")->required()->type_name("DIR");
  cmd->add_option("--set", a->overrides, "Override a job key, e.g. --set cluster.workers=4 (repeatable)")
      ->type_name("KEY=VALUE");
  cmd->add_flag("--no-faults", a->without_faults,
                "Run without the job's fault plan (tenax run uses it for the fault-free reference run; also set "
                "stragglers.model=\"none\")");
  cmd->footer(
      "Outputs in DIR: logs/{coordinator,worker-N}.log, metrics.jsonl, model.pt, config.toml,\n"
      "coordinator.db (the job's state) and summary.json (written last, only on success).\n"
      "Exit status: 0 done, 2 bad input, 3 a worker or the network failed, 130 stopped (every child is stopped).");
  cmd->callback([a, &exit_code] {
    Status st = RunJob(*a);
    exit_code = st.ok() ? 0 : ReportError("run", st);
  });
}

}  // namespace tenax::cli
