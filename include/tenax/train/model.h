// The built-in models on the libtorch C++ frontend, and their self-describing
// save format.
//
// A saved model.pt is a torch::serialize archive holding the module's
// parameters and buffers plus the keys "tenax.model" (the model name),
// "tenax.input_shape" ([C, H, W]) and "tenax.classes", so `tenax eval --model
// model.pt` can rebuild the right architecture without a config file. Files
// written before the shape keys existed are read as Fashion-MNIST models
// ([1, 28, 28], 10 classes).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax {

// Maps [N, C, H, W] float images to [N, classes] logits.
class ClassifierImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor images) = 0;
};
using Classifier = std::shared_ptr<ClassifierImpl>;

const std::vector<std::string>& ModelNames();  // {"mlp", "cnn"}

// The shape of Fashion-MNIST: the default of the built-ins.
inline const std::vector<int64_t> kFashionMnistShape = {1, 28, 28};
inline constexpr int64_t kFashionMnistClassCount = 10;

// InvalidArgument for an unknown name or a shape the architecture cannot take
// (the cnn needs H, W >= 12). Parameters are drawn from torch's global
// generator: seed it first (train/torch_runtime.h) for reproducible weights.
Result<Classifier> MakeModel(const std::string& name, const std::vector<int64_t>& sample_shape = kFashionMnistShape,
                             int64_t classes = kFashionMnistClassCount);

// Writes the model atomically (temporary file + rename).
Status SaveModel(const Classifier& model, const std::string& name, const std::vector<int64_t>& sample_shape,
                 int64_t classes, const std::string& path);

struct LoadedModel {
  std::string name;
  std::vector<int64_t> sample_shape;
  int64_t classes = 0;
  Classifier model;
};
// NotFound, or DataLoss for a file that is not a tenax model.
Result<LoadedModel> LoadModel(const std::string& path);

}  // namespace tenax
