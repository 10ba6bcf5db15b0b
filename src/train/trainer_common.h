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
#include "tenax/train/single_trainer.h"
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

// Where a training loop stands after a step; both trainers report it the
// same way (progress callback, log points every `log_every_steps` and at
// each epoch's end).
struct LoopPosition {
  int64_t epoch, epochs, step, steps_per_epoch, global_step, total_steps, log_every_steps;
  int64_t samples;
  double train_seconds;
  double interval_loss;
  int64_t interval_steps;
  Clock::time_point wall_start;
};

inline TrainProgress MakeProgress(const LoopPosition& l) {
  TrainProgress p;
  p.epoch = l.epoch;
  p.epochs = l.epochs;
  p.step_in_epoch = l.step;
  p.steps_per_epoch = l.steps_per_epoch;
  p.global_step = l.global_step;
  p.total_steps = l.total_steps;
  p.samples_per_second = l.samples / std::max(l.train_seconds, 1e-9);
  p.elapsed_seconds = SecondsSince(l.wall_start);
  p.eta_seconds = l.train_seconds / l.global_step * (l.total_steps - l.global_step);
  p.loss = l.interval_loss / l.interval_steps;
  const bool epoch_done = l.step == l.steps_per_epoch || l.global_step == l.total_steps;
  p.log_point = l.global_step % l.log_every_steps == 0 || epoch_done;
  return p;
}

inline bool EpochDone(const TrainProgress& p) {
  return p.step_in_epoch == p.steps_per_epoch || p.global_step == p.total_steps;
}

}  // namespace tenax::train_internal
