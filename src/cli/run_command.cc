// tenax run JOB.toml --out DIR: the local launcher (train/local_launcher.h)
// with a progress bar for the whole job on stderr.
#include <cstdio>

#include "command.h"
#include "progress_bar.h"
#include "tenax/train/local_launcher.h"

namespace tenax::cli {
namespace {

Status RunJob(LaunchOptions options) {
  ProgressRenderer renderer(StderrIsInteractive());
  options.on_progress = [&renderer](const TrainProgress& p) { renderer(p); };
  options.on_notice = [&renderer](const std::string& text) {
    renderer.Finish();
    std::fprintf(stderr, "tenax run: %s\n", text.c_str());
  };
  auto outcome = LaunchLocalJob(options);
  renderer.Finish();
  if (!outcome.ok()) return outcome.status();
  if (outcome->reported_by_child) return Status::Ok();  // the launcher inside the emulated topology did
  const auto& s = outcome->summary;
  std::printf("final test accuracy %.4f with %lld workers, %.1f s, %.0f samples/s\n",
              s.value("final_test_accuracy", 0.0), static_cast<long long>(outcome->workers),
              s.value("launcher_wall_seconds", 0.0), s.value("samples_per_second", 0.0));
  std::printf("outputs: %s/{summary.json,metrics.jsonl,model.pt,config.toml,logs/}\n", options.out_dir.c_str());
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
