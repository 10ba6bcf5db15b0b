// tenax train --config FILE --out DIR [--set key=value ...]
#include <cstdio>
#include <memory>

#include "command.h"
#include "job_file.h"
#include "progress_bar.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/train/single_trainer.h"
#include "tenax/job/train_config.h"

namespace tenax::cli {
namespace {

struct TrainArgs {
  std::string config_path;
  std::string out_dir;
  std::vector<std::string> overrides;
  std::string initial_model_path;
};

int RunTrain(const TrainArgs& args) {
  auto doc = LoadConfigWithOverrides(args.config_path, args.overrides);
  if (!doc.ok()) return ReportError("train", doc.status());
  auto config = ParseTrainConfig(*doc);
  if (!config.ok()) return ReportError("train", config.status());
  if (config->mode != "single") {
    return ReportError("train", InvalidArgument(args.config_path + ": mode \"" + config->mode +
                                                "\" is a multi-process job; run it with 'tenax run " +
                                                args.config_path + " --out DIR'"));
  }

  InitLogging("train", config->log_level);
  InstallStopHandlers();
  ProgressRenderer renderer(StderrIsInteractive());
  TrainRunOptions options;
  options.on_progress = [&renderer](const TrainProgress& p) { renderer(p); };
  options.initial_model_path = args.initial_model_path;
  auto outcome = TrainSingle(*config, *doc, args.out_dir, options);
  renderer.Finish();
  if (!outcome.ok()) return ReportError("train", outcome.status());

  const auto& s = outcome->summary;
  std::printf("final test accuracy %.4f after %lld epoch(s), %lld steps, %.1f s, %.0f samples/s\n",
              outcome->final_test_accuracy, static_cast<long long>(s["epochs"].get<int64_t>()),
              static_cast<long long>(s["steps"].get<int64_t>()), s["wall_seconds"].get<double>(),
              outcome->samples_per_second);
  std::printf("outputs: %s/{summary.json,metrics.jsonl,model.pt,config.toml}\n", args.out_dir.c_str());
  return 0;
}

}  // namespace

void AddTrainCommand(CLI::App& root, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = root.add_subcommand("train", "Train a model in this process on Fashion-MNIST");
  cmd->add_option("--config", args->config_path, "Job file (TOML), e.g. examples/single.toml")
      ->required()
      ->type_name("FILE");
  cmd->add_option("--out", args->out_dir, "Output directory (created if needed)")->required()->type_name("DIR");
  cmd->add_option("--set", args->overrides, "Override a config key, e.g. --set train.epochs=1 (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--save-initial-model", args->initial_model_path,
                  "Also save the model as initialised, before the first step (to start another framework from "
                  "the same weights; `tenax eval` reads it)")
      ->type_name("FILE");
  cmd->footer(
      "Outputs in DIR: metrics.jsonl (one JSON record per log interval and epoch), model.pt,\n"
      "config.toml (the effective configuration) and summary.json (written last, only on success).\n"
      "Exit status: 0 done, 2 bad input (config, flags, dataset, output dir), 130 stopped, 1 internal error.");
  cmd->callback([args, &exit_code] { exit_code = RunTrain(*args); });
}

}  // namespace tenax::cli
