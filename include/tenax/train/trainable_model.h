// The model seam of the training loop: a built-in module (mlp, cnn) or the
// user's own TorchScript module saved by PyTorch, trained the same way in
// every mode.
//
// Contract
// - Forward maps float32 images [N, C, H, W] to logits [N, classes].
// - Parameters() lists the trainable tensors in registration order, the same
//   order on every replica; they are leaf tensors whose .grad the exchange may
//   point at its own memory. The list is fixed for the model's life.
// - Forward takes images on the model's device (To); a file the loader
//   reads back holds CPU tensors.
// - Save writes a file the matching loader reads back (built-in: tenax's
//   model.pt archive, read by `tenax eval`; TorchScript: a TorchScript file
//   PyTorch loads with torch.jit.load), atomically (temporary name + rename).
// - Threading: one thread of control. Failure: Save returns IoError; Forward
//   may throw c10::Error for a programmer error, which the loop turns into a
//   Status at its boundary.
// Ownership: the loop owns the model; exchanges and optimizers keep
// references to its parameters.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/train/input/data_source.h"
#include "tenax/job/train_config.h"

namespace tenax {

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  virtual torch::Tensor Forward(const torch::Tensor& images) = 0;
  virtual std::vector<torch::Tensor> Parameters() = 0;
  virtual void SetTraining(bool training) = 0;
  virtual bool IsTraining() const = 0;
  // Moves the parameters (and buffers) to `device`, keeping each
  // parameter's identity (its data is replaced), so references taken
  // earlier stay valid. Call before the optimizer is built.
  virtual void To(torch::Device device) = 0;
  // Writes the model with its tensors on the CPU (a file any machine
  // reads), wherever they live while training.
  virtual Status Save(const std::string& path) = 0;
  // "cnn", "mlp" or "torchscript:<path>", for logs and summary.json.
  virtual std::string Describe() const = 0;
};

// Builds the job's model for data of `info`'s shape and class count: a
// built-in (model.name) or the TorchScript file at model.path. A TorchScript
// module with no parameters, whose forward does not take [N, C, H, W] or does
// not return [N, classes] is refused with one line saying what was found.
// Weights come from torch's process-wide generator (see torch_runtime.h):
// call it under SeededModelInit for reproducible weights.
Result<std::unique_ptr<TrainableModel>> MakeTrainableModel(const TrainConfig& config, const DatasetInfo& info);

// A model written by a finished run (Save above): a tenax model.pt archive
// or a TorchScript file. NotFound, or DataLoss for anything else.
Result<std::unique_ptr<TrainableModel>> LoadTrainedModel(const std::string& path);

// Counts the samples in [begin, end) of `data` whose arg-max logit is their
// label, in eval mode without grad (the model's mode is restored). Batches
// of 128: batches of 1000 made the cnn's im2col buffers hundreds of MB, freshly
// mapped and page-faulted every batch, and evaluation 4x slower (tenax eval of
// the quickstart model: 4.8 s at 1000, 1.5 s at 128, 1.6 s at 256, 1.9 s at 64).
Result<int64_t> CountCorrect(TrainableModel& model, DataSource& data, int64_t begin, int64_t end,
                             int64_t batch_size = 128);

}  // namespace tenax
