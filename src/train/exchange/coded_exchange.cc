#include "coded_exchange.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "tenax/coding/coded_codec.h"
#include "tenax/coding/coded_decoder.h"
#include "tenax/coding/coded_plan.h"
#include "tenax/coding/gradient_code.h"

namespace tenax {
namespace {

using Clock = std::chrono::steady_clock;
using coding::CodedModelHeader;


class CodedExchange final : public GradientExchange, public SampleChoice, public ModelElsewhere {
 public:
  CodedExchange(comm::Group& group, CodedExchangeOptions o)
      : group_(group), node_(group.node()), o_(std::move(o)), n_(group.world() - 1) {}

  int rank() const override { return group_.rank(); }
  int world() const override { return n_; }

  Status Attach(TrainableModel& model) override;
  void BeginStep() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.grad().zero_();
    }
    compute_start_ = Clock::now();
  }
  Status FinishStep() override;
  Result<double> MeanOverReplicas(double local) override { return local; }
  Result<double> SumOverReplicas(double local) override { return local; }
  void Detach() override {}
  Result<int64_t> AtStepBoundary(int64_t applied_steps) override;
  // The partitions of this worker, weighted by the code.
  SampleChoice* sample_choice() override { return this; }
  std::optional<WeightedSamples> SamplesOf(int64_t global_step, int64_t batch_size) override;
  // The decoder applies the updates and holds the job's model.
  ModelElsewhere* model_elsewhere() override { return this; }
  bool AppliesUpdatesLocally() const override { return false; }
  bool Finished() const override { return done_step_ >= 0 && step_ >= done_step_; }
  // Rank 0 writes the outputs: it waits for the decoder's last
  // announcement (its statistics) and reads the final model.
  Result<bool> LoadFinalModel() override;

  void DescribeInSummary(nlohmann::json& summary) const override {
    summary["workers"] = n_;
    nlohmann::json coded = nlohmann::json::parse(decoder_summary_.empty() ? "{}" : decoder_summary_, nullptr, false);
    if (coded.is_discarded()) coded = nlohmann::json::object();
    coded["straggler_model"] = o_.stragglers ? o_.stragglers->Describe() : "none";
    coded["partitioning"] = o_.coded.partitioning;
    coded["shuffle_every"] = o_.coded.shuffle_every;
    coded["rank0_slowdown_seconds"] = slept_seconds_;
    summary["coded"] = coded;
  }
  std::string Describe() const override {
    return "coded rank " + std::to_string(rank()) + " of " + std::to_string(n_) + " (" + o_.coded.scheme +
           ", s = " + std::to_string(o_.coded.stragglers) + ", decoder rank " + std::to_string(n_) + ")";
  }

 private:
  net::PeerId decoder() const { return group_.peer(n_); }
  Status ReadModel(Deadline deadline);
  Status TakeAnnouncement(const net::ControlMessage& msg);
  // Takes every announcement already here (a worker that fell behind
  // reads the newest step, and sees the last one).
  Status DrainAnnouncements();
  void MakePartitions();

  comm::Group& group_;
  net::Node& node_;
  CodedExchangeOptions o_;
  const int n_;
  std::optional<coding::GradientCode> code_;
  std::vector<torch::Tensor> params_;
  size_t count_ = 0;
  net::RemoteRegion model_remote_, slots_remote_;
  uint64_t slot_offset_ = 0;
  net::MemoryRegion read_, send_;
  std::vector<torch::Tensor> partitions_;  // int64 sample indices of each data partition
  std::vector<torch::Tensor> orders_;      // this epoch's order within each partition
  int64_t orders_epoch_ = -1;
  int64_t step_ = -1;      // the step this worker computes (the model it read)
  int64_t announced_ = -1;  // the newest step the decoder announced
  int64_t done_step_ = -1;  // the decoder's last step, once announced
  int row_ = 0;
  std::string decoder_summary_;
  Clock::time_point compute_start_;
  double slept_seconds_ = 0;
};

Status CodedExchange::Attach(TrainableModel& model) {
  if (n_ < 1 || rank() >= n_) return InvalidArgument("a coded worker must be one of ranks 0..world-2");
  TENAX_ASSIGN_OR_RETURN(coding::GradientCode code, coding::CodeOfScheme(o_.coded, n_, o_.code_seed));
  code_.emplace(std::move(code));
  params_ = model.Parameters();
  for (const auto& p : params_) {
    if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
      return InvalidArgument("coded training needs contiguous float32 parameters");
    }
    count_ += static_cast<size_t>(p.numel());
  }
  const Deadline deadline = Deadline::After(o_.step_timeout);
  const std::string who = group_.Describe(n_);
  TENAX_ASSIGN_OR_RETURN(net::ControlMessage msg,
                         coding::ReceivePatiently(node_, coding::kCodedWelcomeKind, deadline, decoder()));
  TENAX_ASSIGN_OR_RETURN(wire::CodedWelcome w, coding::DecodeCodedWelcome(msg.payload, who));
  if (w.workers() != static_cast<uint32_t>(n_) || w.param_count() != count_ ||
      w.slot_offset() != static_cast<uint64_t>(rank()) * count_ * sizeof(float)) {
    return ProtocolError("decoder " + who + " describes " + std::to_string(w.workers()) + " workers and " +
                         std::to_string(w.param_count()) + " floats; this worker has " + std::to_string(n_) +
                         " workers and a model of " + std::to_string(count_) + " floats");
  }
  TENAX_ASSIGN_OR_RETURN(model_remote_, node_.Import(decoder(), {w.model_address(), w.model_length(), w.model_rkey()}));
  TENAX_ASSIGN_OR_RETURN(slots_remote_, node_.Import(decoder(), {w.slots_address(), w.slots_length(), w.slots_rkey()}));
  slot_offset_ = w.slot_offset();
  TENAX_ASSIGN_OR_RETURN(read_, node_.Allocate(coding::CodedModelRegionBytes(count_)));
  TENAX_ASSIGN_OR_RETURN(send_, node_.Allocate(count_ * sizeof(float)));
  MakePartitions();
  return Status::Ok();
}

void CodedExchange::MakePartitions() {
  const torch::Tensor labels = o_.train_labels.to(torch::kInt64);
  const int64_t total = labels.size(0), size = total / n_;
  torch::Tensor order;
  if (o_.coded.partitioning == "by_label") {
    order = std::get<1>(labels.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false));
  } else {
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(o_.seed) * 0x9e3779b97f4a7c15ull + 17);
    order = torch::randperm(total, gen, torch::TensorOptions().dtype(torch::kInt64));
  }
  partitions_.clear();
  for (int j = 0; j < n_; ++j) partitions_.push_back(order.slice(0, j * size, (j + 1) * size).clone());
}

std::optional<SampleChoice::WeightedSamples> CodedExchange::SamplesOf(int64_t global_step, int64_t batch_size) {
  const int64_t size = partitions_.empty() ? 0 : partitions_[0].size(0);
  const int64_t steps_per_epoch = std::max<int64_t>(1, size / batch_size);
  const int64_t epoch = global_step / steps_per_epoch, within = global_step % steps_per_epoch;
  if (epoch != orders_epoch_) {
    orders_.clear();
    for (int j = 0; j < n_; ++j) {
      auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(o_.seed) * 1000003ull +
                                                static_cast<uint64_t>(epoch) * 131ull + static_cast<uint64_t>(j) + 1);
      orders_.push_back(torch::randperm(size, gen, torch::TensorOptions().dtype(torch::kInt64)));
    }
    orders_epoch_ = epoch;
  }
  std::vector<torch::Tensor> indices, weights;
  for (int j : code_->Partitions(row_)) {
    const double coefficient = code_->At(row_, j);
    if (coefficient == 0) continue;
    auto picked = orders_[static_cast<size_t>(j)].slice(0, within * batch_size, (within + 1) * batch_size);
    indices.push_back(partitions_[static_cast<size_t>(j)].index_select(0, picked));
    weights.push_back(torch::full({picked.size(0)}, coefficient / static_cast<double>(n_ * batch_size),
                                  torch::TensorOptions().dtype(torch::kFloat32)));
  }
  return WeightedSamples{torch::cat(indices), torch::cat(weights)};
}

Status CodedExchange::ReadModel(Deadline deadline) {
  CodedModelHeader before, after;
  for (int attempt = 0; !deadline.Expired(); ++attempt) {
    TENAX_RETURN_IF_ERROR(node_.PeerStatus(decoder()));
    if (attempt >= 100) std::this_thread::sleep_for(std::chrono::microseconds(200));  // pacing re-reads
    net::Op h1 = node_.Get(&before, sizeof before, model_remote_, 0);
    TENAX_RETURN_IF_ERROR(node_.Wait(h1, deadline));
    if (before.magic != CodedModelHeader::kMagic || before.param_count != count_ ||
        before.workers != static_cast<uint64_t>(n_)) {
      return ProtocolError("decoder " + group_.Describe(n_) + "'s model region has a bad header");
    }
    if (before.seq % 2 == 1) continue;  // being written: read again
    net::Op body = node_.Get(read_.data(), read_.size(), model_remote_, 0);
    TENAX_RETURN_IF_ERROR(node_.Wait(body, deadline));
    net::Op h2 = node_.Get(&after, sizeof after, model_remote_, 0);
    TENAX_RETURN_IF_ERROR(node_.Wait(h2, deadline));
    if (after.seq != before.seq) continue;
    const auto* rows = reinterpret_cast<const int32_t*>(read_.data() + sizeof(CodedModelHeader));
    const int row = rows[rank()];
    if (row < 0 || row >= n_) return ProtocolError("decoder assigned row " + std::to_string(row) + " to this worker");
    const auto* values =
        reinterpret_cast<const float*>(read_.data() + sizeof(CodedModelHeader) + coding::kCodedRowsBytes);
    torch::NoGradGuard no_grad;
    size_t offset = 0;
    for (auto& p : params_) {
      std::memcpy(p.data_ptr<float>(), values + offset, static_cast<size_t>(p.numel()) * sizeof(float));
      offset += static_cast<size_t>(p.numel());
    }
    row_ = row;
    step_ = before.step;
    return Status::Ok();
  }
  return DeadlineExceeded("the decoder's model kept changing until the deadline");
}

Result<int64_t> CodedExchange::AtStepBoundary(int64_t applied_steps) {
  (void)applied_steps;  // the decoder's step is the one that counts
  const Deadline deadline = Deadline::After(o_.step_timeout);
  // The next step after the one computed; a worker that fell behind takes
  // the newest announced (older announcements are drained).
  while (announced_ <= step_) {
    auto msg = coding::ReceivePatiently(node_, coding::kCodedStepKind, deadline, decoder());
    if (!msg.ok()) {
      if (msg.status().code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded("rank " + std::to_string(rank()) + ": the decoder published no step after " +
                                std::to_string(step_) + " within the step timeout");
      }
      return msg.status();
    }
    TENAX_RETURN_IF_ERROR(TakeAnnouncement(*msg));
  }
  TENAX_RETURN_IF_ERROR(DrainAnnouncements());
  TENAX_RETURN_IF_ERROR(ReadModel(deadline));
  return step_;
}

Status CodedExchange::TakeAnnouncement(const net::ControlMessage& msg) {
  TENAX_ASSIGN_OR_RETURN(wire::CodedStep s, coding::DecodeCodedStep(msg.payload, group_.Describe(n_)));
  announced_ = std::max(announced_, s.step());
  if (s.done()) decoder_summary_ = s.summary_json(), done_step_ = s.step();
  return Status::Ok();
}

Status CodedExchange::DrainAnnouncements() {
  node_.Progress();
  while (true) {
    auto msg = node_.ReceiveControl(Deadline::After(std::chrono::nanoseconds(0)), decoder(), coding::kCodedStepKind);
    if (!msg.ok()) return msg.status().code() == StatusCode::kDeadlineExceeded ? Status::Ok() : msg.status();
    TENAX_RETURN_IF_ERROR(TakeAnnouncement(*msg));
  }
}

Result<bool> CodedExchange::LoadFinalModel() {
  if (rank() != 0) return false;
  const Deadline deadline = Deadline::After(o_.step_timeout);
  while (done_step_ < 0) {
    auto msg = coding::ReceivePatiently(node_, coding::kCodedStepKind, deadline, decoder());
    if (!msg.ok()) {
      return Status(msg.status().code(), "rank 0: no last step from the decoder: " + msg.status().message());
    }
    TENAX_RETURN_IF_ERROR(TakeAnnouncement(*msg));
  }
  if (step_ < done_step_) TENAX_RETURN_IF_ERROR(ReadModel(deadline));
  return true;
}

Status CodedExchange::FinishStep() {
  const double compute = std::chrono::duration<double>(Clock::now() - compute_start_).count();
  // The emulated straggler: a real delay proportional to this step's own
  // compute time; the transport keeps moving meanwhile (heartbeats).
  if (o_.stragglers) {
    const double slowdown = o_.stragglers->Slowdown(rank(), step_);
    if (slowdown > 1) {
      const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(std::min((slowdown - 1) * compute, 600.0)));
      while (Clock::now() < until) {
        node_.Progress();
        std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(20)));
      }
      slept_seconds_ += (slowdown - 1) * compute;
    }
  }
  auto* out = reinterpret_cast<float*>(send_.data());
  size_t offset = 0;
  for (const auto& p : params_) {
    const auto k = static_cast<size_t>(p.numel());
    if (p.grad().defined()) {
      std::memcpy(out + offset, p.grad().contiguous().data_ptr<float>(), k * sizeof(float));
    } else {
      std::fill(out + offset, out + offset + k, 0.0f);
    }
    offset += k;
  }
  const Deadline deadline = Deadline::After(o_.step_timeout);
  net::Op put = node_.Put(send_.data(), send_.size(), slots_remote_, slot_offset_);
  TENAX_RETURN_IF_ERROR(node_.Wait(put, deadline));
  TENAX_RETURN_IF_ERROR(node_.Flush(decoder(), deadline));  // visible at the decoder before it hears of it
  wire::CodedReady ready;
  ready.set_step(step_);
  ready.set_compute_seconds(compute);
  return node_.SendControl(decoder(), coding::kCodedReadyKind, ready.SerializeAsString(), deadline);
}

}  // namespace

std::unique_ptr<GradientExchange> MakeCodedExchange(comm::Group& group, CodedExchangeOptions options) {
  return std::make_unique<CodedExchange>(group, std::move(options));
}

}  // namespace tenax
