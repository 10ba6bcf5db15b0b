// Pieces shared by the single-process and the synchronous trainers (private
// to src/train; includes libtorch).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>

#include "tenax/train/data_tensors.h"
#include "tenax/train/fashion_mnist.h"
#include "tenax/train/model.h"
#include "tenax/train/train_config.h"

namespace tenax::train_internal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainConfig& c, ClassifierImpl& model) {
  if (c.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(model.parameters(),
                                                torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      model.parameters(), torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
}

// Loads a split and trims it to `limit` samples (0 = all).
inline Result<DataTensors> LoadSplit(const std::string& dir, Split split, int64_t limit) {
  TENAX_ASSIGN_OR_RETURN(LabeledImages raw, LoadFashionMnist(dir, split));
  return ToTensors(TakeFirst(std::move(raw), limit));
}

// Catches libtorch exceptions (programmer errors or OOM) at the library
// boundary so callers only ever see a Status.
template <typename Fn>
auto GuardTorch(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    return Internal(std::string(what) + ": " + msg.substr(0, msg.find('\n')));
  }
}

}  // namespace tenax::train_internal
