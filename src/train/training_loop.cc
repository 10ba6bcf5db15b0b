#include "training_loop.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "tenax/core/files.h"
#include "tenax/core/metrics.h"
#include "tenax/core/run_dir.h"
#include "tenax/core/run_records.h"
#include "tenax/core/seeds.h"
#include "tenax/core/signals.h"
#include "tenax/train/device.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/train/torch_runtime.h"
#include "tenax/version.h"
#include "trainer_common.h"

namespace tenax {
namespace {

using namespace train_internal;

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainConfig& c, std::vector<torch::Tensor> params) {
  if (c.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(std::move(params),
                                                torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      std::move(params), torch::optim::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// The run's outputs on the writing replica: config.toml and metrics.jsonl
// now, the model and summary.json (last, atomically) at the end.
class RunOutputs {
 public:
  static Result<RunOutputs> Open(bool writer, const std::string& out_dir, const ConfigDoc& effective_config) {
    RunOutputs o;
    o.dir_ = out_dir;
    if (!writer) return o;
    o.writer_ = true;
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(out_dir));
    std::error_code ec;
    std::filesystem::remove(o.summary_path(), ec);
    if (ec) return IoError(o.summary_path() + ": cannot remove the previous run's summary: " + ec.message());
    std::ostringstream toml_text;
    toml_text << effective_config.table() << "\n";
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(RunDir(out_dir).config(), toml_text.str()));
    // Under `tenax run` the launcher started the file (its own records
    // come first) and removed the previous run's.
    const char* run_metrics = std::getenv(kRunMetricsEnvVar);
    const bool appended = run_metrics && *run_metrics;
    TENAX_ASSIGN_OR_RETURN(JsonLinesWriter w, appended ? JsonLinesWriter::Append(RunDir(out_dir).metrics())
                                                       : JsonLinesWriter::Open(RunDir(out_dir).metrics()));
    o.metrics_.emplace(std::move(w));
    return o;
  }
  Status Record(const nlohmann::json& record) { return metrics_ ? metrics_->Write(record) : Status::Ok(); }
  // A replica that becomes rank 0 later (elastic: the first rank 0 was
  // lost) continues the metrics of the run.
  Status BecomeWriter() {
    if (writer_) return Status::Ok();
    TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir_));
    TENAX_ASSIGN_OR_RETURN(JsonLinesWriter w, JsonLinesWriter::Append(RunDir(dir_).metrics()));
    metrics_.emplace(std::move(w));
    writer_ = true;
    return Status::Ok();
  }
  std::string summary_path() const { return RunDir(dir_).summary(); }
  std::string model_path() const { return RunDir(dir_).model(); }
  bool writer() const { return writer_; }

 private:
  bool writer_ = false;
  std::string dir_;
  std::optional<JsonLinesWriter> metrics_;
};

// Where the loop stands; turned into the progress every trainer reports.
struct LoopPosition {
  int64_t epoch, epochs, step, steps_per_epoch, global_step, total_steps, log_every_steps;
  int64_t samples;
  double train_seconds;
  double interval_loss;
  int64_t interval_steps;
  Clock::time_point wall_start;
};

TrainProgress MakeProgress(const LoopPosition& l) {
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

Result<TrainOutcome> Loop(const TrainConfig& c, const ConfigDoc& effective_config, const std::string& out_dir,
                          const TrainingParts& parts, const TrainRunOptions& options) {
  const auto wall_start = Clock::now();
  DataSource& train = *parts.train;
  DataSource& test = *parts.test;
  GradientExchange& exchange = *parts.exchange;
  const int rank = exchange.rank(), world = exchange.world();
  // Before the threads are set: asking libtorch whether it has a GPU
  // must not change the thread count afterwards.
  TENAX_ASSIGN_OR_RETURN(const torch::Device device, ResolveDevice(c.device));
  const int64_t threads = ConfigureTorchThreads(c.threads);
  const std::optional<c10::Stream> copy_stream = CopyStream(device);
  // On a GPU the host runs ahead of the kernels: the loss is read back
  // (a wait for the device) only at log points, where a non-finite loss is
  // caught too; on the CPU every step.
  const bool read_loss_each_step = !device.is_cuda();

  const int64_t n = train.info().size, t = test.info().size;
  ExchangeMembership* membership = exchange.membership();
  ModelElsewhere* elsewhere = exchange.model_elsewhere();
  SampleChoice* chooser = exchange.sample_choice();
  // A changing membership acts on stop signals itself (at a step boundary).
  const bool exchange_handles_stop = membership != nullptr;
  const int64_t b = c.batch_size, global_batch = GlobalBatchOf(exchange, b);
  if (global_batch > n) {
    return InvalidArgument(world > 1 ? std::to_string(world) + " workers x batch " + std::to_string(b) + " exceed the " +
                                           std::to_string(n) + " training samples"
                                     : "train.batch_size " + std::to_string(b) + " exceeds the " + std::to_string(n) +
                                           " training samples");
  }
  TENAX_ASSIGN_OR_RETURN(RunOutputs out, RunOutputs::Open(rank == 0, out_dir, effective_config));

  // The initial weights come from torch's process-wide generator.
  Result<std::unique_ptr<TrainableModel>> made = Internal("model not built");
  SeededModelInit(c.seed, [&] { made = MakeTrainableModel(c, train.info()); });
  TENAX_ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model, std::move(made));
  if (!options.initial_model_path.empty() && rank == 0) {  // before the broadcast: rank 0's are the ones
    TENAX_RETURN_IF_ERROR(model->Save(options.initial_model_path));
  }
  model->To(device);
  TENAX_RETURN_IF_ERROR(exchange.Attach(*model));
  auto optimizer = MakeOptimizer(c, model->Parameters());
  if (membership) {
    TENAX_RETURN_IF_ERROR(membership->AttachOptimizer(*optimizer));
  }
  model->SetTraining(true);

  // One replica keeps the last partial batch; replicas drop a partial global
  // batch (every rank must read a full slice).
  const bool keep_partial = world == 1 && global_batch == b && !exchange_handles_stop;
  const int64_t steps_per_epoch = keep_partial ? (n + b - 1) / b : n / global_batch;
  int64_t total_steps = steps_per_epoch * c.epochs;
  if (c.max_steps > 0) total_steps = std::min(total_steps, c.max_steps);
  const int64_t epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  spdlog::info("{}: model {} on {}, {} training samples ({}, {} classes) / {} test samples, {} epoch(s) of {} steps, "
               "batch {}{}, {} lr {:g}{}, {} thread(s)",
               exchange.Describe(), model->Describe(), DescribeDevice(device), n, ShapeText(train.info().sample_shape), train.info().classes,
               t, epochs, steps_per_epoch, b, global_batch != b ? fmt::format(" per rank ({} global)", global_batch) : "",
               c.optimizer, c.lr, c.optimizer == "sgd" ? fmt::format(" momentum {:g}", c.momentum) : std::string(),
               threads);

  TrainOutcome outcome;
  double train_seconds = 0, steady_seconds = 0;
  int64_t steady_samples = 0, samples = 0, global_step = 0;
  double interval_loss = 0;
  torch::Tensor interval_loss_on_device;  // GPU: the interval's losses, summed where they are
  int64_t interval_steps = 0;
  bool first_interval = true;
  double test_accuracy = 0;
  torch::Tensor perm;
  int64_t perm_epoch = 0;
  // The loop's records go to whoever is rank 0 now (elastic: it may change).
  auto record = [&](const nlohmann::json& r) -> Status {
    if (exchange.rank() == 0) TENAX_RETURN_IF_ERROR(out.BecomeWriter());
    return exchange.rank() == 0 ? out.Record(r) : Status::Ok();
  };

  while (true) {
    if (!exchange_handles_stop && StopRequested()) {
      return Cancelled("training stopped by signal " + std::to_string(StopSignal()));
    }
    // The step boundary: an elastic exchange may re-form here and move us.
    TENAX_ASSIGN_OR_RETURN(global_step, exchange.AtStepBoundary(global_step));
    if (global_step >= total_steps || (elsewhere && elsewhere->Finished())) break;
    const int64_t epoch = global_step / steps_per_epoch + 1, step = global_step % steps_per_epoch + 1;
    if (perm_epoch != epoch) {
      auto gen = at::detail::createCPUGenerator(DeriveSeed(static_cast<uint64_t>(c.seed), static_cast<uint64_t>(epoch)));
      perm = train.EpochOrder(gen);
      perm_epoch = epoch;
    }
    const auto step_start = Clock::now();
    std::optional<SampleChoice::WeightedSamples> weighted;
    if (chooser) weighted = chooser->SamplesOf(global_step, b);
    torch::Tensor indices;
    if (weighted) {
      indices = weighted->indices;
    } else {
      const BatchSlice slice = ReplicaSlice(exchange, global_batch);
      const int64_t begin = (step - 1) * global_batch + slice.offset;
      indices = perm.slice(0, begin, std::min(n, begin + slice.count));
    }
    TENAX_ASSIGN_OR_RETURN(Batch batch, train.Read(indices));
    batch.images = ToDeviceAhead(batch.images, device, copy_stream);
    batch.labels = ToDeviceAhead(batch.labels, device, copy_stream);
    exchange.BeginStep();
    torch::Tensor loss;  // what is reported: the mean loss of the samples read
    if (weighted) {
      auto per_sample = torch::nn::functional::cross_entropy(
          model->Forward(batch.images), batch.labels,
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      (per_sample * weighted->weights).sum().backward();
      loss = per_sample.detach().mean();
    } else {
      loss = torch::nn::functional::cross_entropy(model->Forward(batch.images), batch.labels);
      loss.backward();
    }
    if (Status st = exchange.FinishStep(); !st.ok()) {
      if (st.code() == StatusCode::kAborted) continue;  // not applied: back to the boundary
      return st;
    }
    if (!elsewhere || elsewhere->AppliesUpdatesLocally()) optimizer->step();
    const bool log_step = (global_step + 1) % c.log_every_steps == 0 || step == steps_per_epoch ||
                          global_step + 1 == total_steps;
    double local_loss = 0;
    if (read_loss_each_step) {
      local_loss = loss.item<double>();
    } else {
      interval_loss_on_device =
          interval_loss_on_device.defined() ? interval_loss_on_device + loss.detach() : loss.detach().clone();
      if (log_step) {  // the interval's sum, read once (the host waits for the device here)
        local_loss = interval_loss_on_device.item<double>();
        interval_loss_on_device = torch::Tensor();
      }
    }
    const double step_seconds = SecondsSince(step_start);

    const int64_t step_samples = std::min(global_batch, n - (step - 1) * global_batch);
    ++global_step;
    samples += step_samples;
    train_seconds += step_seconds;
    if (global_step > options.warmup_steps) {
      steady_seconds += step_seconds;
      steady_samples += step_samples;
    }
    if (!std::isfinite(local_loss)) {
      return InvalidArgument("loss became " + std::to_string(local_loss) +
                             (read_loss_each_step ? " at step " : " by step ") + std::to_string(global_step) +
                             (world > 1 ? " on rank " + std::to_string(exchange.rank()) : "") + "; lower train.lr (now " +
                             std::to_string(c.lr) + ")");
    }
    interval_loss += local_loss;
    ++interval_steps;

    TrainProgress p = MakeProgress({epoch, epochs, step, steps_per_epoch, global_step, total_steps, c.log_every_steps,
                                    samples, train_seconds, interval_loss, interval_steps, wall_start});
    p.step_seconds = step_seconds;
    if (!read_loss_each_step && !p.log_point) p.loss = outcome.final_train_loss;  // the last one read
    const bool epoch_done = step == steps_per_epoch || global_step == total_steps;
    if (p.log_point) {
      // The mean loss over every replica's samples (same steps everywhere);
      // this replica's own when a member was lost meanwhile.
      auto mean = exchange.MeanOverReplicas(p.loss);
      if (!mean.ok() && mean.status().code() != StatusCode::kAborted) return mean.status();
      if (mean.ok()) p.loss = *mean;
      outcome.final_train_loss = p.loss;
      if (first_interval) outcome.first_train_loss = p.loss, first_interval = false;
      TENAX_RETURN_IF_ERROR(
          record(records::ToJson(records::Train{epoch, global_step, p.loss, p.samples_per_second, p.elapsed_seconds})));
      interval_loss = 0;
      interval_steps = 0;
    }
    if (epoch_done && !elsewhere) {  // a model elsewhere is not this replica's to evaluate
      // Each replica evaluates its share of the test set; the counts add up.
      // A membership change in between: re-form, and count again.
      while (true) {
        const int r = exchange.rank(), w = exchange.world();
        TENAX_ASSIGN_OR_RETURN(int64_t correct, CountCorrect(*model, test, t * r / w, t * (r + 1) / w));
        auto all_correct = exchange.SumOverReplicas(static_cast<double>(correct));
        if (all_correct.ok()) {
          test_accuracy = t == 0 ? 0.0 : *all_correct / static_cast<double>(t);
          break;
        }
        if (all_correct.status().code() != StatusCode::kAborted) return all_correct.status();
        TENAX_ASSIGN_OR_RETURN(int64_t applied, exchange.AtStepBoundary(global_step));
        if (applied != global_step) {
          return Internal("the membership moved from step " + std::to_string(global_step) + " to " +
                          std::to_string(applied) + " during an evaluation");
        }
      }
      p.test_accuracy = test_accuracy;
      TENAX_RETURN_IF_ERROR(record(records::ToJson(records::Epoch{
          epoch, global_step, outcome.final_train_loss, test_accuracy, SecondsSince(wall_start)})));
    }
    if (options.on_progress) options.on_progress(p);
  }
  exchange.Detach();
  bool final_model = false;
  if (elsewhere) {
    TENAX_ASSIGN_OR_RETURN(final_model, elsewhere->LoadFinalModel());
  }
  if (final_model && exchange.rank() == 0) {
    TENAX_ASSIGN_OR_RETURN(int64_t correct, CountCorrect(*model, test, 0, t));
    test_accuracy = t == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(t);
    TENAX_RETURN_IF_ERROR(
        record(records::ToJson(records::Final{global_step, test_accuracy, SecondsSince(wall_start)})));
  }

  outcome.final_test_accuracy = test_accuracy;
  {
    uint64_t h = StateChecksum(nullptr, 0);
    for (const auto& p : model->Parameters()) {
      const torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
      h = StateChecksum(static_cast<const uint8_t*>(host.data_ptr()), host.nbytes(), h);
    }
    outcome.parameter_hash = h;
    spdlog::info("{}: final parameters fnv1a {:016x}", exchange.Describe(), h);
  }
  outcome.samples_per_second = samples / std::max(train_seconds, 1e-9);
  outcome.steady_samples_per_second =
      steady_samples > 0 ? steady_samples / std::max(steady_seconds, 1e-9) : outcome.samples_per_second;
  outcome.summary = {
      {"mode", c.mode},
      {"model", model->Describe()},
      {"epochs", epochs},
      {"steps", global_step},
      {"batch_size", b},
      {"optimizer", c.optimizer},
      {"lr", c.lr},
      {"seed", c.seed},
      {"threads", threads},
      {"device", DescribeDevice(device)},
      {"parameter_hash", fmt::format("{:016x}", outcome.parameter_hash)},
      {"train_samples", n},
      {"test_samples", t},
      {"sample_shape", train.info().sample_shape},
      {"classes", train.info().classes},
      {"final_test_accuracy", outcome.final_test_accuracy},
      {"final_train_loss", outcome.final_train_loss},
      {"wall_seconds", SecondsSince(wall_start)},
      {"train_seconds", train_seconds},
      {"samples_per_second", outcome.samples_per_second},
      {"steady_samples_per_second", outcome.steady_samples_per_second},
      {"tenax_version", kTenaxVersion},
      {"parameters", [&] {
         int64_t count = 0;
         for (const auto& t : model->Parameters()) count += t.numel();
         return count;
       }()},
  };
  exchange.DescribeInSummary(outcome.summary);
  train.AddToSummary(outcome.summary);
  if (exchange.rank() == 0) {
    TENAX_RETURN_IF_ERROR(out.BecomeWriter());
    TENAX_RETURN_IF_ERROR(model->Save(out.model_path()));
    outcome.summary["model_path"] = out.model_path();
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(out.summary_path(), outcome.summary.dump(2) + "\n"));
  }
  return outcome;
}

}  // namespace

Result<TrainOutcome> RunTrainingLoop(const TrainConfig& config, const ConfigDoc& effective_config,
                                     const std::string& out_dir, const TrainingParts& parts,
                                     const TrainRunOptions& options) {
  return GuardTorch("training failed", [&]() -> Result<TrainOutcome> {
    return Loop(config, effective_config, out_dir, parts, options);
  });
}

}  // namespace tenax
