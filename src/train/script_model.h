// The user's own model: a TorchScript module saved by PyTorch
// (`torch.jit.script(model).save("net.pt")`), trained through the model seam
// in every mode. Saving writes a TorchScript file PyTorch loads back with
// torch.jit.load.
//
// The module's parameters are its trainable (requires_grad) float32
// parameters in registration order, the order PyTorch's module.parameters()
// gives; its buffers (e.g. batch-norm statistics) travel with the module but
// are not exchanged between replicas. The weights are the file's: a
// TorchScript model's initial weights are whatever the user saved, on every
// replica of a sync job (rank 0's are broadcast anyway).
// Threading: one thread of control per model, as TrainableModel.
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>

#include "tenax/core/status.h"
#include "tenax/train/input/data_source.h"
#include "tenax/train/trainable_model.h"

namespace tenax {

// Loads `path` and checks it against the data before any training: a module
// with no trainable parameters or with parameters that are not float32, a
// forward that fails on a [2, C, H, W] batch, or one that does not return
// [2, classes] float32 logits that depend on the parameters is refused
// (InvalidArgument) with one line saying what was found. NotFound for a
// missing file, DataLoss for a file that is not TorchScript (or is a tenax
// built-in model.pt, which has no forward).
Result<std::unique_ptr<TrainableModel>> LoadScriptModel(const std::string& path, const DatasetInfo& info);

// Reads a TorchScript archive onto the CPU without checking what it holds.
// NotFound, InvalidArgument for a directory, DataLoss (one line) for a file
// torch::jit::load cannot read. (A tenax built-in model.pt is such an archive
// too; see IsBuiltinArchive.)
Result<torch::jit::Module> ReadTorchScriptFile(const std::string& path);

// True for the archive of a tenax built-in model (model.h's SaveModel): it
// carries the attribute "tenax.model".
bool IsBuiltinArchive(const torch::jit::Module& module);

// A TorchScript model written by a finished run (for `tenax eval`): the
// module must have a forward; its shape is not checked against any data.
Result<std::unique_ptr<TrainableModel>> WrapTrainedScriptModule(torch::jit::Module module, const std::string& path);

}  // namespace tenax
