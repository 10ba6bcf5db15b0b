// The user's own model: a TorchScript module saved by PyTorch
// (`torch.jit.script(model).save("net.pt")`), trained through the model seam
// in every mode. Saving writes a TorchScript file PyTorch loads back with
// torch.jit.load.
#pragma once

#include <memory>
#include <string>

#include "tenax/core/status.h"
#include "tenax/train/data_source.h"
#include "tenax/train/trainable_model.h"

namespace tenax {

// Loads `path` and checks it against the data before any training: a module
// with no parameters, a forward that fails on a [2, C, H, W] batch, or one
// that does not return [2, classes] logits is refused with one line saying
// what was found. NotFound for a missing file, DataLoss for a file that is
// not TorchScript.
Result<std::unique_ptr<TrainableModel>> LoadScriptModel(const std::string& path, const DatasetInfo& info);

}  // namespace tenax
