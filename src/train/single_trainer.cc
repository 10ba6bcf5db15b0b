#include "tenax/train/single_trainer.h"

#include <spdlog/spdlog.h>

#include "tenax/train/input/data_source.h"
#include "exchange/local_exchange.h"
#include "training_loop.h"
#include "trainer_common.h"

namespace tenax {

using namespace train_internal;

Result<TrainOutcome> TrainSingle(const TrainConfig& config, const ConfigDoc& effective_config,
                                 const std::string& out_dir, const TrainRunOptions& options) {
  return GuardTorch("training failed", [&]() -> Result<TrainOutcome> {
    // Data first: a bad dataset fails before any output file is created.
    TENAX_ASSIGN_OR_RETURN(DataSplits data, OpenDataSplits(config));
    spdlog::info("data: {} and {}", data.train->info().description, data.test->info().description);
    auto exchange = MakeLocalExchange();
    return RunTrainingLoop(config, effective_config, out_dir, {data.train.get(), data.test.get(), exchange.get()},
                           options);
  });
}

Result<EvalOutcome> EvaluateModelFile(const std::string& model_path, const TrainConfig& data_config, int64_t threads) {
  return GuardTorch("evaluation failed", [&]() -> Result<EvalOutcome> {
    ConfigureTorchThreads(threads);
    TENAX_ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model, LoadTrainedModel(model_path));
    TENAX_ASSIGN_OR_RETURN(std::unique_ptr<DataSource> test,
                           OpenDataSource(data_config, Split::kTest, data_config.test_limit));
    EvalOutcome out;
    out.model_name = model->Describe();
    out.samples = test->info().size;
    TENAX_ASSIGN_OR_RETURN(int64_t correct, CountCorrect(*model, *test, 0, out.samples));
    out.test_accuracy = out.samples == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(out.samples);
    return out;
  });
}

}  // namespace tenax
