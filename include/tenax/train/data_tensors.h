// Fashion-MNIST samples as libtorch tensors, normalised once up front so a
// training step is two index_select calls and no per-sample work.
#pragma once

#include <torch/torch.h>

#include "tenax/train/fashion_mnist.h"
#include "tenax/train/model.h"

namespace tenax {

// Per-pixel mean and standard deviation of the Fashion-MNIST training set.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct DataTensors {
  torch::Tensor images;  // float32 [N, 1, 28, 28], (x/255 - mean) / std
  torch::Tensor labels;  // int64 [N]
  int64_t size() const { return labels.size(0); }
};

DataTensors ToTensors(const LabeledImages& data);

// Fraction of samples whose arg-max logit is the label (no grad, eval mode,
// batches of `batch_size`). Restores the module's train/eval mode.
double EvaluateAccuracy(ClassifierImpl& model, const DataTensors& data, int64_t batch_size = 1000);

}  // namespace tenax
