#include "tenax/train/npy_source.h"

namespace tenax {

Result<std::unique_ptr<DataSource>> OpenNpySource(const TrainConfig& config, Split, int64_t, int64_t) {
  return FailedPrecondition(config.train_images + ": .npy data is not supported yet");
}

}  // namespace tenax
