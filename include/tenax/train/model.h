// Models on the libtorch C++ frontend, and their self-describing save format.
//
// A saved model.pt is a torch::serialize archive holding the module's
// parameters and buffers plus the key "tenax.model" (the model name), so
// `tenax eval --model model.pt` can rebuild the right architecture without a
// config file.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

// Maps [N, 1, 28, 28] float images to [N, 10] logits.
class ClassifierImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
};
using Classifier = std::shared_ptr<ClassifierImpl>;

const std::vector<std::string>& ModelNames();  // {"mlp", "cnn"}

// InvalidArgument for an unknown name. Parameters are drawn from torch's
// global generator: seed it first for reproducible weights.
Result<Classifier> MakeModel(const std::string& name);

// Writes the model atomically (temporary file + rename).
Status SaveModel(const Classifier& model, const std::string& name, const std::string& path);

struct LoadedModel {
  std::string name;
  Classifier model;
};
// NotFound, or DataLoss for a file that is not a tenax model.
Result<LoadedModel> LoadModel(const std::string& path);

}  // namespace tenax
