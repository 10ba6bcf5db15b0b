#include "tenax/train/sync_trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <filesystem>
#include <sstream>

#include "tenax/comm/allreduce.h"
#include "tenax/core/files.h"
#include "tenax/core/metrics.h"
#include "tenax/core/signals.h"
#include "tenax/version.h"
#include "trainer_common.h"

namespace tenax {
namespace {

using namespace train_internal;

// The allreduce buffer holds every parameter's gradient, then two scalars
// reduced at log points and epoch ends: the loss and the count of correct
// test predictions.
struct GradientLayout {
  struct Slot {
    torch::Tensor param;
    size_t offset = 0, count = 0;
    size_t bucket = 0;
  };
  std::vector<Slot> slots;  // in reverse registration order
  struct Bucket {
    size_t offset = 0, count = 0, params = 0;
  };
  std::vector<Bucket> buckets;
  size_t params_count = 0;  // floats of all gradients
  size_t loss_slot = 0, correct_slot = 0, total = 0;
};

GradientLayout PlanGradients(ClassifierImpl& model, size_t bucket_bytes) {
  GradientLayout g;
  auto params = model.parameters();
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    GradientLayout::Slot s;
    s.param = *it;
    s.offset = g.params_count;
    s.count = static_cast<size_t>(it->numel());
    g.params_count += s.count;
    if (g.buckets.empty() || g.buckets.back().count * sizeof(float) >= bucket_bytes) {
      g.buckets.push_back({s.offset, 0, 0});
    }
    g.buckets.back().count += s.count;
    g.buckets.back().params += 1;
    s.bucket = g.buckets.size() - 1;
    g.slots.push_back(s);
  }
  g.loss_slot = g.params_count;
  g.correct_slot = g.params_count + 1;
  g.total = g.params_count + 2;
  return g;
}

// Counts correct predictions on [begin, end) of the test set.
int64_t CountCorrect(ClassifierImpl& model, const DataTensors& test, int64_t begin, int64_t end) {
  torch::NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  for (int64_t i = begin; i < end; i += 1000) {
    const int64_t j = std::min(end, i + 1000);
    auto logits = model.forward(test.images.slice(0, i, j));
    correct += logits.argmax(1).eq(test.labels.slice(0, i, j)).sum().item<int64_t>();
  }
  model.train();
  return correct;
}

Result<TrainOutcome> TrainSyncImpl(const TrainConfig& c, const ConfigDoc& effective_config, const std::string& out_dir,
                                   comm::Group& group, const SyncRunOptions& options) {
  const auto wall_start = Clock::now();
  const int rank = group.rank(), world = group.world();
  const bool writer = rank == 0;
  const auto step_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(options.step_timeout_seconds));
  const std::string summary_path = out_dir + "/summary.json";
  if (writer) {
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(out_dir));
    std::error_code ec;
    std::filesystem::remove(summary_path, ec);
    if (ec) return IoError(summary_path + ": cannot remove the previous run's summary: " + ec.message());
  }
  const int64_t threads = ResolveThreads(c.threads);
  torch::set_num_threads(static_cast<int>(threads));

  TENAX_ASSIGN_OR_RETURN(DataTensors train, LoadSplit(c.data_dir, Split::kTrain, c.train_limit));
  TENAX_ASSIGN_OR_RETURN(DataTensors test, LoadSplit(c.data_dir, Split::kTest, c.test_limit));
  const int64_t n = train.size();
  const int64_t b = c.batch_size;
  const int64_t global_batch = b * world;
  if (global_batch > n) {
    return InvalidArgument(std::to_string(world) + " workers x batch " + std::to_string(b) + " exceed the " +
                           std::to_string(n) + " training samples");
  }
  std::optional<JsonLinesWriter> metrics;
  if (writer) {
    std::ostringstream toml_text;
    toml_text << effective_config.table() << "\n";
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(out_dir + "/config.toml", toml_text.str()));
    TENAX_ASSIGN_OR_RETURN(JsonLinesWriter w, JsonLinesWriter::Open(out_dir + "/metrics.jsonl"));
    metrics.emplace(std::move(w));
  }

  // The initial weights come from torch's process-wide generator: seed and
  // draw under a lock so that ranks running as threads of one process (the
  // tests) draw exactly what separate processes would.
  Result<Classifier> made = InvalidArgument("unset");
  {
    static std::mutex generator_mutex;
    std::lock_guard<std::mutex> lock(generator_mutex);
    torch::manual_seed(static_cast<uint64_t>(c.seed));
    made = MakeModel(c.model);
  }
  TENAX_ASSIGN_OR_RETURN(Classifier model, std::move(made));
  GradientLayout layout = PlanGradients(*model, options.bucket_bytes);
  TENAX_ASSIGN_OR_RETURN(auto allreduce, comm::Allreduce::Create(group, layout.total, Deadline::After(step_timeout)));
  allreduce->SetInterrupt(options.interrupt);
  float* buffer = allreduce->data();

  // The initial model is rank 0's: broadcast as a sum where the others
  // contribute zeros (x + 0 == x exactly).
  {
    torch::NoGradGuard no_grad;
    std::memset(buffer, 0, layout.params_count * sizeof(float));
    if (rank == 0) {
      for (auto& s : layout.slots) {
        std::memcpy(buffer + s.offset, s.param.contiguous().data_ptr<float>(), s.count * sizeof(float));
      }
    }
    TENAX_RETURN_IF_ERROR(allreduce->Run(0, layout.params_count, 1.0f, Deadline::After(step_timeout)));
    for (auto& s : layout.slots) {
      s.param.copy_(torch::from_blob(buffer + s.offset, s.param.sizes(), torch::kFloat32));
    }
  }
  // Gradients live in the allreduce buffer; autograd accumulates into them.
  for (auto& s : layout.slots) {
    s.param.mutable_grad() = torch::from_blob(buffer + s.offset, s.param.sizes(), torch::kFloat32);
  }

  // Bucket hooks: a bucket whose parameters are all accumulated starts its
  // allreduce (in bucket order, the same on every rank).
  const float inv_world = 1.0f / static_cast<float>(world);
  std::vector<size_t> pending(layout.buckets.size());
  size_t next_bucket = 0;
  Status hook_status;
  auto launch_ready = [&](bool all) {
    while (next_bucket < layout.buckets.size() && (all || pending[next_bucket] == 0)) {
      const auto& bk = layout.buckets[next_bucket++];
      if (hook_status.ok()) hook_status = allreduce->Start(bk.offset, bk.count, inv_world);
    }
    if (hook_status.ok()) {
      auto polled = allreduce->Poll();
      if (!polled.ok()) hook_status = polled.status();
    }
  };
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  for (auto& s : layout.slots) {
    auto acc = torch::autograd::impl::grad_accumulator(s.param);
    const size_t bucket = s.bucket;
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [&, bucket](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (pending[bucket] > 0 && --pending[bucket] == 0) launch_ready(false);
          return outputs;
        }));
    accumulators.push_back(std::move(acc));
  }

  auto optimizer = MakeOptimizer(c, *model);
  model->train();
  const int64_t steps_per_epoch = n / global_batch;
  int64_t total_steps = steps_per_epoch * c.epochs;
  if (c.max_steps > 0) total_steps = std::min(total_steps, c.max_steps);
  const int64_t epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  spdlog::info("rank {}/{}: model {} ({} parameters in {} buckets), {} training samples, {} epoch(s) of {} steps, "
               "batch {} per rank ({} global), {} lr {:g}, {} thread(s)",
               rank, world, c.model, layout.params_count, layout.buckets.size(), n, epochs, steps_per_epoch, b,
               global_batch, c.optimizer, c.lr, threads);

  TrainOutcome outcome;
  double train_seconds = 0, steady_seconds = 0;
  int64_t steady_samples = 0, samples = 0, global_step = 0;
  double interval_loss = 0;
  int64_t interval_steps = 0;
  bool first_interval = true;
  double test_accuracy = 0;

  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(c.seed + epoch));
    auto perm = torch::randperm(n, gen, torch::TensorOptions().dtype(torch::kInt64));
    for (int64_t step = 1; step <= steps_per_epoch && global_step < total_steps; ++step) {
      if (StopRequested()) return Cancelled("training stopped by signal " + std::to_string(StopSignal()));
      const auto step_start = Clock::now();
      const int64_t begin = (step - 1) * global_batch + rank * b;
      auto idx = perm.slice(0, begin, begin + b);
      auto x = train.images.index_select(0, idx);
      auto y = train.labels.index_select(0, idx);
      std::memset(buffer, 0, layout.params_count * sizeof(float));  // zero_grad, in the buffer
      for (size_t i = 0; i < pending.size(); ++i) pending[i] = layout.buckets[i].params;
      next_bucket = 0;
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      launch_ready(true);  // buckets whose parameters got no gradient
      TENAX_RETURN_IF_ERROR(hook_status);
      TENAX_RETURN_IF_ERROR(allreduce->Wait(Deadline::After(step_timeout)));
      optimizer->step();
      const double local_loss = loss.item<double>();
      const double step_seconds = SecondsSince(step_start);

      ++global_step;
      samples += global_batch;
      train_seconds += step_seconds;
      if (global_step > options.run.warmup_steps) {
        steady_seconds += step_seconds;
        steady_samples += global_batch;
      }
      if (!std::isfinite(local_loss)) {
        return InvalidArgument("loss became " + std::to_string(local_loss) + " at step " +
                               std::to_string(global_step) + " on rank " + std::to_string(rank) +
                               "; lower train.lr (now " + std::to_string(c.lr) + ")");
      }
      interval_loss += local_loss;
      ++interval_steps;

      TrainProgress p = MakeProgress({epoch, epochs, step, steps_per_epoch, global_step, total_steps,
                                      c.log_every_steps, samples, train_seconds, interval_loss, interval_steps,
                                      wall_start});
      const bool epoch_done = EpochDone(p);
      if (p.log_point) {
        // The mean loss over every rank's samples (same steps on every rank).
        buffer[layout.loss_slot] = static_cast<float>(p.loss);
        TENAX_RETURN_IF_ERROR(allreduce->Run(layout.loss_slot, 1, inv_world, Deadline::After(step_timeout)));
        p.loss = buffer[layout.loss_slot];
        outcome.final_train_loss = p.loss;
        if (first_interval) outcome.first_train_loss = p.loss, first_interval = false;
        if (metrics) {
          TENAX_RETURN_IF_ERROR(metrics->Write({{"event", "train"},
                                                {"epoch", epoch},
                                                {"step", global_step},
                                                {"loss", p.loss},
                                                {"samples_per_second", p.samples_per_second},
                                                {"elapsed_seconds", p.elapsed_seconds}}));
        }
        interval_loss = 0;
        interval_steps = 0;
      }
      if (epoch_done) {
        // Each rank evaluates its share of the test set; the counts add up.
        const int64_t t = test.size();
        buffer[layout.correct_slot] =
            static_cast<float>(CountCorrect(*model, test, t * rank / world, t * (rank + 1) / world));
        TENAX_RETURN_IF_ERROR(allreduce->Run(layout.correct_slot, 1, 1.0f, Deadline::After(step_timeout)));
        test_accuracy = static_cast<double>(buffer[layout.correct_slot]) / static_cast<double>(t);
        p.test_accuracy = test_accuracy;
        if (metrics) {
          TENAX_RETURN_IF_ERROR(metrics->Write({{"event", "epoch"},
                                                {"epoch", epoch},
                                                {"step", global_step},
                                                {"train_loss", outcome.final_train_loss},
                                                {"test_accuracy", test_accuracy},
                                                {"elapsed_seconds", SecondsSince(wall_start)}}));
        }
      }
      if (options.run.on_progress) options.run.on_progress(p);
    }
  }

  outcome.final_test_accuracy = test_accuracy;
  outcome.samples_per_second = samples / std::max(train_seconds, 1e-9);
  outcome.steady_samples_per_second =
      steady_samples > 0 ? steady_samples / std::max(steady_seconds, 1e-9) : outcome.samples_per_second;
  outcome.summary = {
      {"mode", "sync"},
      {"workers", world},
      {"model", c.model},
      {"epochs", epochs},
      {"steps", global_step},
      {"batch_size", b},
      {"global_batch_size", global_batch},
      {"optimizer", c.optimizer},
      {"lr", c.lr},
      {"seed", c.seed},
      {"threads", threads},
      {"train_samples", n},
      {"test_samples", test.size()},
      {"final_test_accuracy", outcome.final_test_accuracy},
      {"final_train_loss", outcome.final_train_loss},
      {"wall_seconds", SecondsSince(wall_start)},
      {"train_seconds", train_seconds},
      {"samples_per_second", outcome.samples_per_second},
      {"steady_samples_per_second", outcome.steady_samples_per_second},
      {"tenax_version", kTenaxVersion},
  };
  if (writer) {
    // The parameters, not the grads that alias the allreduce buffer.
    for (auto& s : layout.slots) s.param.mutable_grad() = torch::Tensor();
    TENAX_RETURN_IF_ERROR(SaveModel(model, c.model, out_dir + "/model.pt"));
    outcome.summary["model_path"] = out_dir + "/model.pt";
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(summary_path, outcome.summary.dump(2) + "\n"));
  }
  return outcome;
}

}  // namespace

Result<TrainOutcome> TrainSync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                               comm::Group& group, const SyncRunOptions& options) {
  return GuardTorch("synchronous training failed", [&]() -> Result<TrainOutcome> {
    return TrainSyncImpl(config, effective_config, out_dir, group, options);
  });
}

}  // namespace tenax
