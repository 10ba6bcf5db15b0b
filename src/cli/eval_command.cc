// tenax eval --model DIR/model.pt [--data DIR | --job JOB.toml]
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/train/single_trainer.h"

namespace tenax::cli {
namespace {

struct EvalArgs {
  std::string model_path;
  std::string data_dir = kDefaultFashionMnistDir;
  std::string job_path;
  int64_t limit = -1;
  int64_t threads = 0;
  bool json = false;
};

int RunEval(const EvalArgs& args) {
  // The test split: a job file's [data] section (any format), else the
  // Fashion-MNIST files in --data.
  TrainConfig data;
  if (!args.job_path.empty()) {
    auto doc = ConfigDoc::Load(args.job_path);
    if (!doc.ok()) return ReportError("eval", doc.status());
    auto parsed = ParseTrainConfig(*doc);
    if (!parsed.ok()) return ReportError("eval", parsed.status());
    data = *parsed;
  } else {
    data.data_dir = args.data_dir;
  }
  if (args.limit >= 0) data.test_limit = args.limit;
  auto out = EvaluateModelFile(args.model_path, data, args.threads);
  if (!out.ok()) return ReportError("eval", out.status());
  if (args.json) {
    nlohmann::json j = {{"model", out->model_name},
                        {"model_path", args.model_path},
                        {"test_samples", out->samples},
                        {"test_accuracy", out->test_accuracy}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("test accuracy %.4f (%lld test samples, model %s)\n", out->test_accuracy,
                static_cast<long long>(out->samples), out->model_name.c_str());
  }
  return 0;
}

}  // namespace

void AddEvalCommand(CLI::App& root, int& exit_code) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = root.add_subcommand("eval", "Print the test accuracy of a saved model");
  cmd->add_option("--model", args->model_path, "A model.pt written by 'tenax train' or 'tenax run' (built-in or TorchScript)")
      ->required()
      ->type_name("FILE");
  auto* data_opt = cmd->add_option("--data", args->data_dir, "Directory of the Fashion-MNIST idx files")
                       ->type_name("DIR")
                       ->capture_default_str();
  cmd->add_option("--job", args->job_path, "Take the test split from this job file's [data] section (e.g. npy files)")
      ->type_name("JOB.toml")
      ->excludes(data_opt);
  cmd->add_option("--limit", args->limit, "Evaluate only the first N test samples (0 = all; default: the job's data.test_limit, else all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cmd->add_option("--threads", args->threads, "Compute threads (0 = one per core)")
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  cmd->add_flag("--json", args->json, "Print one JSON object instead of a sentence");
  cmd->callback([args, &exit_code] { exit_code = RunEval(*args); });
}

}  // namespace tenax::cli
