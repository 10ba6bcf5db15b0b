#include "training_loop.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "tenax/core/config_secret.h"
#include "tenax/core/files.h"
#include "tenax/core/metrics.h"
#include "tenax/core/run_dir.h"
#include "tenax/core/run_records.h"
#include "tenax/core/seeds.h"
#include "tenax/core/signals.h"
#include "tenax/train/device.h"
#include "tenax/train/input/device_resident_source.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/train/torch_runtime.h"
#include "tenax/version.h"
#include "foreach_sgd.h"
#include "trainer_common.h"

namespace tenax {
namespace {

using namespace train_internal;

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const TrainConfig& c, std::vector<torch::Tensor> params) {
  if (c.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(std::move(params),
                                                torch::optim::AdamOptions(c.lr).weight_decay(c.weight_decay));
  }
  return std::make_unique<ForeachSgd>(
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
    toml_text << WithoutSecret(effective_config.table()) << "\n";
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

}  // namespace

Status OutOfMemoryStatus(const std::string& device, int64_t step, int64_t batch, const std::vector<int64_t>& sample_shape,
                         const std::string& model, const std::vector<int64_t>& parameter_counts, const std::string& what) {
  int64_t params = 0;
  for (int64_t n : parameter_counts) params += n;
  const std::string first_line = what.substr(0, what.find('\n'));
  return Unavailable(
      fmt::format("out of memory on {} {}: batch {} of {} samples, model {} with {:.1f}M parameters ({} MiB, and about "
                  "as much again for gradients and optimizer state); lower train.batch_size or use a smaller model "
                  "(libtorch: {})",
                  device, step == 0 ? "at start" : "at step " + std::to_string(step + 1), batch,
                  ShapeText(sample_shape), model, static_cast<double>(params) / 1e6, (params * 4) >> 20,
                  first_line.substr(0, 160)));
}

namespace {

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

// One run of the loop: what it sets up, where it stands, and its steps.
// The phases are methods so that each reads on its own; the state they
// share is the run's position and its counters.
class TrainingRun {
 public:
  TrainingRun(const TrainConfig& c, const TrainingParts& parts, const TrainRunOptions& options)
      : c_(c),
        options_(options),
        train_(*parts.train),
        test_(*parts.test),
        exchange_(*parts.exchange),
        membership_(exchange_.membership()),
        elsewhere_(exchange_.model_elsewhere()),
        chooser_(exchange_.sample_choice()),
        wall_start_(Clock::now()) {}

  Status Setup(const ConfigDoc& effective_config, const std::string& out_dir);
  Result<TrainOutcome> Run();
  // The device ran out of memory: one line with what asked for it.
  Status OutOfMemory(const c10::OutOfMemoryError& e) const {
    std::vector<int64_t> params;
    if (model_) {
      for (const auto& p : model_->Parameters()) params.push_back(p.numel());
    }
    return OutOfMemoryStatus(DescribeDevice(device_), global_step_, b_, train_.info().sample_shape,
                             model_ ? model_->Describe() : c_.model, params, e.what_without_backtrace());
  }

 private:
  // The model, built under the seeded generator on the CPU (the same
  // initial weights on every device), saved first if asked, then moved.
  Status BuildModel();
  void LogStart() const;
  // One step from the boundary: false when the run is over, and a step
  // the membership interrupted is simply not counted.
  Result<bool> Step();
  torch::Tensor IndicesOf(int64_t step, const std::optional<SampleChoice::WeightedSamples>& weighted);
  // Forward and backward; returns the mean loss of the samples read.
  torch::Tensor ForwardBackward(const Batch& batch, const std::optional<SampleChoice::WeightedSamples>& weighted);
  // The loss this step adds to the interval: every step on the CPU; on a
  // GPU 0 until the log point, where the interval's sum is read once.
  double ReadLoss(const torch::Tensor& loss, bool log_step);
  Status AtLogPoint(TrainProgress& p, int64_t epoch);
  // Each replica evaluates its share of the test set; the counts add up.
  // A membership change in between: re-form, and count again.
  Status EvaluateEpoch(TrainProgress& p, int64_t epoch);
  Result<TrainOutcome> Finish();
  uint64_t ParameterHash() const;
  nlohmann::json Summary() const;
  // The loop's records go to whoever is rank 0 now (elastic: it may change).
  Status Record(const nlohmann::json& r) {
    if (exchange_.rank() == 0) TENAX_RETURN_IF_ERROR(out_.BecomeWriter());
    return exchange_.rank() == 0 ? out_.Record(r) : Status::Ok();
  }

  const TrainConfig& c_;
  const TrainRunOptions& options_;
  DataSource& train_;
  DataSource& test_;
  // Where steps read their batches: train_, or its copy on the GPU.
  DataSource* reader_ = nullptr;
  std::unique_ptr<DataSource> resident_train_;
  GradientExchange& exchange_;
  ExchangeMembership* membership_;
  ModelElsewhere* elsewhere_;
  SampleChoice* chooser_;
  const Clock::time_point wall_start_;

  torch::Device device_{torch::kCPU};
  std::optional<c10::Stream> copy_stream_;
  // On a GPU the host runs ahead of the kernels: the loss is read back
  // (a wait for the device) only at log points, where a non-finite loss is
  // caught too; on the CPU every step.
  bool read_loss_each_step_ = true;
  int64_t threads_ = 0, n_ = 0, t_ = 0, b_ = 0, global_batch_ = 0;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, epochs_ = 0;
  RunOutputs out_;
  std::unique_ptr<TrainableModel> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;

  TrainOutcome outcome_;
  double train_seconds_ = 0, steady_seconds_ = 0;
  int64_t steady_samples_ = 0, samples_ = 0, global_step_ = 0;
  double interval_loss_ = 0;
  torch::Tensor interval_loss_on_device_;  // GPU: the interval's losses, summed where they are
  int64_t interval_steps_ = 0;
  bool first_interval_ = true;
  double test_accuracy_ = 0;
  torch::Tensor perm_;
  int64_t perm_epoch_ = 0;
};

Status TrainingRun::Setup(const ConfigDoc& effective_config, const std::string& out_dir) {
  const int rank = exchange_.rank(), world = exchange_.world();
  // Before the threads are set: asking libtorch whether it has a GPU
  // must not change the thread count afterwards (it made CPU training 30x
  // slower, docs/gpu.md).
  TENAX_ASSIGN_OR_RETURN(device_, ResolveDevice(c_.device));
  threads_ = ConfigureTorchThreads(c_.threads);
  copy_stream_ = CopyStream(device_);
  read_loss_each_step_ = !device_.is_cuda();
  reader_ = &train_;
  if (device_.is_cuda() && c_.resident_data == "auto" && train_.HeldInMemory() &&
      ResidentBytes(train_) <= kDeviceResidentMaxBytes) {
    auto resident = MakeDeviceResidentSource(train_, device_, copy_stream_);
    if (resident.ok()) {
      resident_train_ = std::move(*resident);
      reader_ = resident_train_.get();
      spdlog::info("training data held on {} ({} MiB): batches are gathered there", device_.str(),
                   ResidentBytes(train_) >> 20);
    } else {
      spdlog::warn("training data stays on the host: {}", resident.status().message());
    }
  }
  n_ = train_.info().size;
  t_ = test_.info().size;
  b_ = c_.batch_size;
  global_batch_ = GlobalBatchOf(exchange_, b_);
  if (global_batch_ > n_) {
    return InvalidArgument(world > 1 ? std::to_string(world) + " workers x batch " + std::to_string(b_) +
                                           " exceed the " + std::to_string(n_) + " training samples"
                                     : "train.batch_size " + std::to_string(b_) + " exceeds the " +
                                           std::to_string(n_) + " training samples");
  }
  TENAX_ASSIGN_OR_RETURN(out_, RunOutputs::Open(rank == 0, out_dir, effective_config));
  TENAX_RETURN_IF_ERROR(BuildModel());
  optimizer_ = MakeOptimizer(c_, model_->Parameters());
  if (membership_) TENAX_RETURN_IF_ERROR(membership_->AttachOptimizer(*optimizer_));
  model_->SetTraining(true);

  // One replica keeps the last partial batch; replicas drop a partial global
  // batch (every rank must read a full slice). A changing membership acts
  // on stop signals itself (at a step boundary).
  const bool keep_partial = world == 1 && global_batch_ == b_ && membership_ == nullptr;
  steps_per_epoch_ = keep_partial ? (n_ + b_ - 1) / b_ : n_ / global_batch_;
  total_steps_ = steps_per_epoch_ * c_.epochs;
  if (c_.max_steps > 0) total_steps_ = std::min(total_steps_, c_.max_steps);
  epochs_ = (total_steps_ + steps_per_epoch_ - 1) / steps_per_epoch_;
  LogStart();
  return Status::Ok();
}

Status TrainingRun::BuildModel() {
  // The initial weights come from torch's process-wide generator.
  Result<std::unique_ptr<TrainableModel>> made = Internal("model not built");
  SeededModelInit(c_.seed, [&] { made = MakeTrainableModel(c_, train_.info()); });
  TENAX_ASSIGN_OR_RETURN(model_, std::move(made));
  if (!options_.initial_model_path.empty() && exchange_.rank() == 0) {  // before the broadcast: rank 0's are the ones
    TENAX_RETURN_IF_ERROR(model_->Save(options_.initial_model_path));
  }
  model_->To(device_);
  return exchange_.Attach(*model_);
}

void TrainingRun::LogStart() const {
  spdlog::info("{}: model {} on {}, {} training samples ({}, {} classes) / {} test samples, {} epoch(s) of {} steps, "
               "batch {}{}, {} lr {:g}{}, {} thread(s)",
               exchange_.Describe(), model_->Describe(), DescribeDevice(device_), n_,
               ShapeText(train_.info().sample_shape), train_.info().classes, t_, epochs_, steps_per_epoch_, b_,
               global_batch_ != b_ ? fmt::format(" per rank ({} global)", global_batch_) : "", c_.optimizer, c_.lr,
               c_.optimizer == "sgd" ? fmt::format(" momentum {:g}", c_.momentum) : std::string(), threads_);
}

Result<TrainOutcome> TrainingRun::Run() {
  while (true) {
    if (membership_ == nullptr && StopRequested()) {
      return Cancelled("training stopped by signal " + std::to_string(StopSignal()));
    }
    TENAX_ASSIGN_OR_RETURN(bool more, Step());
    if (!more) break;
  }
  return Finish();
}

torch::Tensor TrainingRun::IndicesOf(int64_t step, const std::optional<SampleChoice::WeightedSamples>& weighted) {
  if (weighted) return weighted->indices;
  const BatchSlice slice = ReplicaSlice(exchange_, global_batch_);
  const int64_t begin = (step - 1) * global_batch_ + slice.offset;
  return perm_.slice(0, begin, std::min(n_, begin + slice.count));
}

torch::Tensor TrainingRun::ForwardBackward(const Batch& batch,
                                           const std::optional<SampleChoice::WeightedSamples>& weighted) {
  if (!weighted) {
    torch::Tensor loss = torch::nn::functional::cross_entropy(model_->Forward(batch.images), batch.labels);
    loss.backward();
    return loss;
  }
  auto per_sample =
      torch::nn::functional::cross_entropy(model_->Forward(batch.images), batch.labels,
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  (per_sample * weighted->weights).sum().backward();
  return per_sample.detach().mean();
}

double TrainingRun::ReadLoss(const torch::Tensor& loss, bool log_step) {
  if (read_loss_each_step_) return loss.item<double>();
  interval_loss_on_device_ =
      interval_loss_on_device_.defined() ? interval_loss_on_device_ + loss.detach() : loss.detach().clone();
  if (!log_step) return 0;
  const double sum = interval_loss_on_device_.item<double>();  // the host waits for the device here
  interval_loss_on_device_ = torch::Tensor();
  return sum;
}

Result<bool> TrainingRun::Step() {
  // The step boundary: an elastic exchange may re-form here and move us.
  TENAX_ASSIGN_OR_RETURN(global_step_, exchange_.AtStepBoundary(global_step_));
  if (global_step_ >= total_steps_ || (elsewhere_ && elsewhere_->Finished())) return false;
  const int64_t epoch = global_step_ / steps_per_epoch_ + 1, step = global_step_ % steps_per_epoch_ + 1;
  if (perm_epoch_ != epoch) {
    auto gen = at::detail::createCPUGenerator(DeriveSeed(static_cast<uint64_t>(c_.seed), static_cast<uint64_t>(epoch)));
    perm_ = train_.EpochOrder(gen);
    perm_epoch_ = epoch;
  }
  const auto step_start = Clock::now();
  std::optional<SampleChoice::WeightedSamples> weighted;
  if (chooser_) weighted = chooser_->SamplesOf(global_step_, b_);
  TENAX_ASSIGN_OR_RETURN(Batch batch, reader_->Read(IndicesOf(step, weighted)));
  batch.images = ToDeviceAhead(batch.images, device_, copy_stream_);
  batch.labels = ToDeviceAhead(batch.labels, device_, copy_stream_);
  exchange_.BeginStep();
  const torch::Tensor loss = ForwardBackward(batch, weighted);  // what is reported: the mean loss of the samples read
  if (Status st = exchange_.FinishStep(); !st.ok()) {
    if (st.code() == StatusCode::kAborted) return true;  // not applied: back to the boundary
    return st;
  }
  if (!elsewhere_ || elsewhere_->AppliesUpdatesLocally()) optimizer_->step();
  const bool log_step =
      (global_step_ + 1) % c_.log_every_steps == 0 || step == steps_per_epoch_ || global_step_ + 1 == total_steps_;
  const double local_loss = ReadLoss(loss, log_step);
  const double step_seconds = SecondsSince(step_start);

  const int64_t step_samples = std::min(global_batch_, n_ - (step - 1) * global_batch_);
  ++global_step_;
  samples_ += step_samples;
  train_seconds_ += step_seconds;
  if (global_step_ > options_.warmup_steps) {
    steady_seconds_ += step_seconds;
    steady_samples_ += step_samples;
  }
  if (!std::isfinite(local_loss)) {
    return InvalidArgument("loss became " + std::to_string(local_loss) +
                           (read_loss_each_step_ ? " at step " : " by step ") + std::to_string(global_step_) +
                           (exchange_.world() > 1 ? " on rank " + std::to_string(exchange_.rank()) : "") +
                           "; lower train.lr (now " + std::to_string(c_.lr) + ")");
  }
  interval_loss_ += local_loss;
  ++interval_steps_;

  TrainProgress p = MakeProgress({epoch, epochs_, step, steps_per_epoch_, global_step_, total_steps_,
                                  c_.log_every_steps, samples_, train_seconds_, interval_loss_, interval_steps_,
                                  wall_start_});
  p.step_seconds = step_seconds;
  if (!read_loss_each_step_ && !p.log_point) p.loss = outcome_.final_train_loss;  // the last one read
  if (p.log_point) TENAX_RETURN_IF_ERROR(AtLogPoint(p, epoch));
  const bool epoch_done = step == steps_per_epoch_ || global_step_ == total_steps_;
  if (epoch_done && !elsewhere_) TENAX_RETURN_IF_ERROR(EvaluateEpoch(p, epoch));  // a model elsewhere is not ours
  if (options_.on_progress) options_.on_progress(p);
  return true;
}

Status TrainingRun::AtLogPoint(TrainProgress& p, int64_t epoch) {
  // The mean loss over every replica's samples (same steps everywhere);
  // this replica's own when a member was lost meanwhile.
  auto mean = exchange_.MeanOverReplicas(p.loss);
  if (!mean.ok() && mean.status().code() != StatusCode::kAborted) return mean.status();
  if (mean.ok()) p.loss = *mean;
  outcome_.final_train_loss = p.loss;
  if (first_interval_) outcome_.first_train_loss = p.loss, first_interval_ = false;
  TENAX_RETURN_IF_ERROR(
      Record(records::ToJson(records::Train{epoch, global_step_, p.loss, p.samples_per_second, p.elapsed_seconds})));
  interval_loss_ = 0;
  interval_steps_ = 0;
  return Status::Ok();
}

Status TrainingRun::EvaluateEpoch(TrainProgress& p, int64_t epoch) {
  while (true) {
    const int r = exchange_.rank(), w = exchange_.world();
    TENAX_ASSIGN_OR_RETURN(int64_t correct, CountCorrect(*model_, test_, t_ * r / w, t_ * (r + 1) / w));
    auto all_correct = exchange_.SumOverReplicas(static_cast<double>(correct));
    if (all_correct.ok()) {
      test_accuracy_ = t_ == 0 ? 0.0 : *all_correct / static_cast<double>(t_);
      break;
    }
    if (all_correct.status().code() != StatusCode::kAborted) return all_correct.status();
    TENAX_ASSIGN_OR_RETURN(int64_t applied, exchange_.AtStepBoundary(global_step_));
    if (applied != global_step_) {
      return Internal("the membership moved from step " + std::to_string(global_step_) + " to " +
                      std::to_string(applied) + " during an evaluation");
    }
  }
  p.test_accuracy = test_accuracy_;
  return Record(records::ToJson(
      records::Epoch{epoch, global_step_, outcome_.final_train_loss, test_accuracy_, SecondsSince(wall_start_)}));
}

uint64_t TrainingRun::ParameterHash() const {
  uint64_t h = StateChecksum(nullptr, 0);
  for (const auto& p : model_->Parameters()) {
    const torch::Tensor host = p.detach().to(torch::kCPU).contiguous();
    h = StateChecksum(static_cast<const uint8_t*>(host.data_ptr()), host.nbytes(), h);
  }
  return h;
}

nlohmann::json TrainingRun::Summary() const {
  int64_t parameters = 0;
  for (const auto& p : model_->Parameters()) parameters += p.numel();
  return {
      {"mode", c_.mode},
      {"model", model_->Describe()},
      {"epochs", epochs_},
      {"steps", global_step_},
      {"batch_size", b_},
      {"optimizer", c_.optimizer},
      {"lr", c_.lr},
      {"seed", c_.seed},
      {"threads", threads_},
      {"device", DescribeDevice(device_)},
      {"parameter_hash", fmt::format("{:016x}", outcome_.parameter_hash)},
      {"train_samples", n_},
      {"test_samples", t_},
      {"sample_shape", train_.info().sample_shape},
      {"classes", train_.info().classes},
      {"final_test_accuracy", outcome_.final_test_accuracy},
      {"final_train_loss", outcome_.final_train_loss},
      {"wall_seconds", SecondsSince(wall_start_)},
      {"train_seconds", train_seconds_},
      {"samples_per_second", outcome_.samples_per_second},
      {"steady_samples_per_second", outcome_.steady_samples_per_second},
      {"tenax_version", kTenaxVersion},
      {"parameters", parameters},
  };
}

Result<TrainOutcome> TrainingRun::Finish() {
  exchange_.Detach();
  bool final_model = false;
  if (elsewhere_) {
    TENAX_ASSIGN_OR_RETURN(final_model, elsewhere_->LoadFinalModel());
  }
  if (final_model && exchange_.rank() == 0) {
    TENAX_ASSIGN_OR_RETURN(int64_t correct, CountCorrect(*model_, test_, 0, t_));
    test_accuracy_ = t_ == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(t_);
    TENAX_RETURN_IF_ERROR(Record(records::ToJson(records::Final{global_step_, test_accuracy_, SecondsSince(wall_start_)})));
  }
  outcome_.final_test_accuracy = test_accuracy_;
  outcome_.parameter_hash = ParameterHash();
  spdlog::info("{}: final parameters fnv1a {:016x}", exchange_.Describe(), outcome_.parameter_hash);
  outcome_.samples_per_second = samples_ / std::max(train_seconds_, 1e-9);
  outcome_.steady_samples_per_second =
      steady_samples_ > 0 ? steady_samples_ / std::max(steady_seconds_, 1e-9) : outcome_.samples_per_second;
  outcome_.summary = Summary();
  exchange_.DescribeInSummary(outcome_.summary);
  reader_->AddToSummary(outcome_.summary);
  if (exchange_.rank() == 0) {
    TENAX_RETURN_IF_ERROR(out_.BecomeWriter());
    TENAX_RETURN_IF_ERROR(model_->Save(out_.model_path()));
    outcome_.summary["model_path"] = out_.model_path();
    TENAX_RETURN_IF_ERROR(WriteFileAtomic(out_.summary_path(), outcome_.summary.dump(2) + "\n"));
  }
  return outcome_;
}

Result<TrainOutcome> Loop(const TrainConfig& c, const ConfigDoc& effective_config, const std::string& out_dir,
                          const TrainingParts& parts, const TrainRunOptions& options) {
  TrainingRun run(c, parts, options);
  try {
    TENAX_RETURN_IF_ERROR(run.Setup(effective_config, out_dir));
    return run.Run();
  } catch (const c10::OutOfMemoryError& e) {
    return run.OutOfMemory(e);
  }
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
