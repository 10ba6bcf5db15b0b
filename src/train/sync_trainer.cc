#include "tenax/train/sync_trainer.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <optional>

#include "tenax/core/files.h"
#include "tenax/core/metrics.h"
#include "tenax/core/run_dir.h"
#include "tenax/net/keep_alive.h"
#include "tenax/coding/coded_decoder.h"
#include "exchange/allreduce_exchange.h"
#include "exchange/coded_exchange.h"
#include "tenax/train/input/data_source.h"
#include "tenax/train/trainable_model.h"
#include "tenax/train/torch_runtime.h"
#include "training_loop.h"
#include "trainer_common.h"

namespace tenax {

using namespace train_internal;

Result<TrainOutcome> TrainSync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                               comm::Group& group, const SyncRunOptions& options) {
  return GuardTorch("synchronous training failed", [&]() -> Result<TrainOutcome> {
    // Reading the data can outlast the peer timeout: the peers must keep
    // hearing from this rank meanwhile.
    TENAX_ASSIGN_OR_RETURN(DataSplits data,
                           net::RunKeepingAlive(group.node(), [&] { return OpenDataSplits(config); }));
    AllreduceExchangeOptions xo;
    xo.step_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(options.step_timeout_seconds));
    xo.bucket_bytes = config.bucket_kib > 0 ? static_cast<size_t>(config.bucket_kib) << 10 : options.bucket_bytes;
    xo.interrupt = options.interrupt;
    xo.stage_gradients = config.staging == "always";
    xo.zones = options.allreduce_zones;
    xo.hierarchical = options.hierarchical_allreduce;
    if (!xo.zones.empty() && xo.zones.size() != static_cast<size_t>(group.world())) {
      return InvalidArgument("--allreduce-zones names " + std::to_string(xo.zones.size()) + " zones for " +
                             std::to_string(group.world()) + " ranks");
    }
    if (xo.hierarchical && xo.zones.empty()) return InvalidArgument("--hierarchical-allreduce needs --allreduce-zones");
    auto exchange = MakeAllreduceExchange(group, xo);
    return RunTrainingLoop(config, effective_config, out_dir, {data.train.get(), data.test.get(), exchange.get()},
                           options.run);
  });
}

Result<PreparedTraining> PrepareTraining(const TrainConfig& config) {
  return GuardTorch("preparing training failed", [&]() -> Result<PreparedTraining> {
    TENAX_ASSIGN_OR_RETURN(DataSplits data, OpenDataSplits(config));
    TENAX_ASSIGN_OR_RETURN(auto model, MakeTrainableModel(config, data.train->info()));
    // FNV-1a over the plan's text: model, shapes, dtypes, optimizer.
    std::string plan = model->Describe() + "|" + config.optimizer + "|" + std::to_string(config.momentum);
    for (const auto& p : model->Parameters()) {
      plan += "|" + std::string(c10::toString(p.scalar_type()));
      for (int64_t d : p.sizes()) plan += "," + std::to_string(d);
    }
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : plan) h = (h ^ ch) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    PreparedTraining out;
    out.data = std::make_shared<DataSplits>(std::move(data));
    out.fingerprint = hex;
    return out;
  });
}

namespace {
Result<std::unique_ptr<coding::StragglerModel>> StragglersOf(const TrainConfig& config);
}  // namespace

Result<TrainOutcome> TrainElastic(const TrainConfig& config, const ConfigDoc& effective_config,
                                  const std::string& out_dir, std::unique_ptr<comm::Group> group,
                                  ElasticMembership& membership, PreparedTraining prepared,
                                  const SyncRunOptions& options) {
  return GuardTorch("elastic training failed", [&]() -> Result<TrainOutcome> {
    auto* data = static_cast<DataSplits*>(prepared.data.get());
    if (!data) return Internal("elastic training without prepared data");
    ElasticExchangeOptions xo;
    xo.base.step_timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(options.step_timeout_seconds));
    xo.base.bucket_bytes = config.bucket_kib > 0 ? static_cast<size_t>(config.bucket_kib) << 10 : options.bucket_bytes;
    xo.base.stage_gradients = config.staging == "always";
    xo.base.hierarchical = options.hierarchical_allreduce;  // per generation, where the zones allow it
    xo.membership = &membership;
    xo.joined_late = options.joined_running_job;
    xo.first_generation_unformed = options.first_generation_unformed;
    xo.configured_workers = config.cluster.workers;
    xo.max_workers = config.cluster.max_workers;
    xo.measured_shares = config.cluster.shares == "measured";
    if (config.stragglers.model != "none") {
      TENAX_ASSIGN_OR_RETURN(auto model, StragglersOf(config));
      xo.stragglers = std::move(model);
      xo.straggler_id = options.straggler_id;
    }
    // The coordinator waits join_timeout for joiners below min_workers and
    // then fails the job: its verdict must reach us before our own wait ends.
    xo.reform_timeout = config.cluster.join_timeout() + 2 * config.cluster.peer_timeout();
    xo.before_state_offer = options.before_state_offer;
    xo.before_allreduce_offer = options.before_allreduce_offer;
    // Membership events join the run's metrics (appended: the writer may
    // change when rank 0 is lost).
    std::optional<JsonLinesWriter> events;
    GradientExchange* exchange_ptr = nullptr;
    xo.on_event = [&](const nlohmann::json& e) {
      if (!exchange_ptr || exchange_ptr->rank() != 0 || out_dir.empty()) return;
      if (!events) {
        if (!EnsureWritableDir(out_dir).ok()) return;
        auto w = JsonLinesWriter::Append(RunDir(out_dir).metrics());
        if (!w.ok()) return;
        events.emplace(std::move(*w));
      }
      (void)events->Write(e);
    };
    auto exchange = MakeElasticExchange(std::move(group), xo);
    exchange_ptr = exchange.get();
    return RunTrainingLoop(config, effective_config, out_dir, {data->train.get(), data->test.get(), exchange.get()},
                           options.run);
  });
}

Result<TrainOutcome> TrainAsync(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                                net::Node& node, coord::CoordinatorClient& client, PreparedTraining prepared,
                                AsyncExchangeOptions exchange_options, const TrainRunOptions& options) {
  return GuardTorch("asynchronous training failed", [&]() -> Result<TrainOutcome> {
    auto* data = static_cast<DataSplits*>(prepared.data.get());
    if (!data) return Internal("async training without prepared data");
    exchange_options.plan_fingerprint = prepared.fingerprint;
    auto exchange = MakeAsyncExchange(node, client, std::move(exchange_options));
    return RunTrainingLoop(config, effective_config, out_dir, {data->train.get(), data->test.get(), exchange.get()},
                           options);
  });
}

Result<ps::InitialModel> InitialFlatModel(const TrainConfig& config) {
  TENAX_ASSIGN_OR_RETURN(PreparedTraining prepared, PrepareTraining(config));
  return InitialFlatModel(config, prepared);
}

Result<ps::InitialModel> InitialFlatModel(const TrainConfig& config, const PreparedTraining& prepared) {
  return GuardTorch("building the initial model failed", [&]() -> Result<ps::InitialModel> {
    auto* data = static_cast<DataSplits*>(prepared.data.get());
    Result<std::unique_ptr<TrainableModel>> made = Internal("model not built");
    SeededModelInit(config.seed, [&] { made = MakeTrainableModel(config, data->train->info()); });
    TENAX_ASSIGN_OR_RETURN(std::unique_ptr<TrainableModel> model, std::move(made));
    ps::InitialModel out;
    out.plan_fingerprint = prepared.fingerprint;
    for (const auto& p : model->Parameters()) {
      auto c = p.detach().to(torch::kFloat32).contiguous();
      const float* v = c.data_ptr<float>();
      out.params.insert(out.params.end(), v, v + c.numel());
    }
    return out;
  });
}

namespace {

std::chrono::nanoseconds StepTimeout(const TrainConfig& config) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.cluster.step_timeout_seconds));
}

// The job's steps as the loop counts them for W = cluster.workers replicas.
int64_t CodedTotalSteps(const TrainConfig& config, int64_t train_samples) {
  const int64_t steps_per_epoch = train_samples / (config.batch_size * config.cluster.workers);
  int64_t total = steps_per_epoch * config.epochs;
  if (config.max_steps > 0) total = std::min(total, config.max_steps);
  return total;
}

Result<std::unique_ptr<coding::StragglerModel>> StragglersOf(const TrainConfig& config) {
  const coding::StragglerConfig& m = config.stragglers;
  const int n = static_cast<int>(config.cluster.workers);
  const uint64_t seed = static_cast<uint64_t>(m.seed != 0 ? m.seed : config.seed);
  if (m.model == "iid") {
    coding::IidStragglerParams p;
    p.probability = m.probability;
    p.slow = {m.slowdown, m.slowdown_max};
    return coding::MakeIidStragglers(n, p, seed);
  }
  if (m.model == "markov") {
    coding::MarkovStragglerParams p;
    p.p_slow = m.p_slow;
    p.p_recover = m.p_recover;
    p.active = {m.active_slowdown, m.active_slowdown_max};
    p.slow = {m.slowdown, m.slowdown_max};
    p.start_slow = m.slow_workers;
    return coding::MakeMarkovStragglers(n, p, seed);
  }
  if (m.model == "trace") {
    TENAX_ASSIGN_OR_RETURN(std::string text, ReadFileText(m.trace, 64 << 20));
    TENAX_ASSIGN_OR_RETURN(auto entries, coding::ParseStragglerTrace(text, m.trace, n));
    return coding::MakeTraceStragglers(n, std::move(entries));
  }
  return coding::MakeNoStragglers();
}

}  // namespace

Result<TrainOutcome> TrainCoded(const TrainConfig& config, const ConfigDoc& effective_config, const std::string& out_dir,
                                comm::Group& group, const SyncRunOptions& options) {
  return GuardTorch("coded training failed", [&]() -> Result<TrainOutcome> {
    TENAX_ASSIGN_OR_RETURN(DataSplits data,
                           net::RunKeepingAlive(group.node(), [&] { return OpenDataSplits(config); }));
    CodedExchangeOptions xo;
    xo.coded = config.coded;
    xo.code_seed = static_cast<uint64_t>(config.seed);
    xo.seed = config.seed;
    TENAX_ASSIGN_OR_RETURN(xo.train_labels, data.train->Labels());
    TENAX_ASSIGN_OR_RETURN(xo.stragglers, StragglersOf(config));
    xo.step_timeout = StepTimeout(config);
    auto exchange = MakeCodedExchange(group, std::move(xo));
    return RunTrainingLoop(config, effective_config, out_dir, {data.train.get(), data.test.get(), exchange.get()},
                           options.run);
  });
}

Result<nlohmann::json> DecodeCoded(const TrainConfig& config, const std::string& out_dir, comm::Group& group,
                                   const std::function<void(int64_t step, int64_t total)>& on_step) {
  return GuardTorch("decoding failed", [&]() -> Result<nlohmann::json> {
    // One read of the data serves the model's shapes and the partition sizes.
    TENAX_ASSIGN_OR_RETURN(PreparedTraining prepared,
                           net::RunKeepingAlive(group.node(), [&] { return PrepareTraining(config); }));
    TENAX_ASSIGN_OR_RETURN(ps::InitialModel initial, InitialFlatModel(config, prepared));
    const DatasetInfo& info = static_cast<const DataSplits*>(prepared.data.get())->train->info();
    int64_t sample_bytes = static_cast<int64_t>(sizeof(float));
    for (int64_t d : info.sample_shape) sample_bytes *= d;
    coding::DecoderOptions o;
    o.coded = config.coded;
    o.code_seed = static_cast<uint64_t>(config.seed);
    o.total_steps = CodedTotalSteps(config, info.size);
    o.lr = config.lr;
    o.momentum = config.momentum;
    o.weight_decay = config.weight_decay;
    o.partition_bytes = info.size / config.cluster.workers * (sample_bytes + static_cast<int64_t>(sizeof(int64_t)));
    o.step_timeout = StepTimeout(config);
    std::optional<JsonLinesWriter> events;
    if (!out_dir.empty() && EnsureWritableDir(out_dir).ok()) {
      auto w = JsonLinesWriter::Open(RunDir(out_dir).decoder_events());
      if (w.ok()) events.emplace(std::move(*w));
    }
    o.on_event = [&](const nlohmann::json& e) {
      if (events) (void)events->Write(e);
    };
    o.on_step = [&](int64_t step) {
      if (on_step) on_step(step, o.total_steps);
    };
    TENAX_ASSIGN_OR_RETURN(coding::DecoderOutcome out, coding::RunDecoder(group, std::move(initial.params), o));
    return out.summary;
  });
}

}  // namespace tenax
