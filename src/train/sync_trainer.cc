#include "tenax/train/sync_trainer.h"

#include "tenax/net/keep_alive.h"
#include "tenax/train/allreduce_exchange.h"
#include "tenax/train/data_source.h"
#include "tenax/train/training_loop.h"
#include "trainer_common.h"

namespace tenax {

using namespace train_internal;

Result<TrainOutcome> TrainSync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                               comm::Group& group, const SyncRunOptions& options) {
  return GuardTorch("synchronous training failed", [&]() -> Result<TrainOutcome> {
    // Reading the data can outlast the peer timeout: the peers must keep
    // hearing from this rank meanwhile.
    TENAX_ASSIGN_OR_RETURN(DataSplits data,
                           net::RunKeepingAlive(group.node(), [&] { return OpenDataSplits(config); }));
    AllreduceExchangeOptions xo;
    xo.step_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(options.step_timeout_seconds));
    xo.bucket_bytes = options.bucket_bytes;
    xo.interrupt = options.interrupt;
    auto exchange = MakeAllreduceExchange(group, xo);
    return RunTrainingLoop(config, effective_config, out_dir, {data.train.get(), data.test.get(), exchange.get()},
                           options.run);
  });
}

}  // namespace tenax
