#include "tenax/train/script_model.h"

namespace tenax {

Result<std::unique_ptr<TrainableModel>> LoadScriptModel(const std::string& path, const DatasetInfo&) {
  return FailedPrecondition(path + ": TorchScript models are not supported yet");
}

}  // namespace tenax
