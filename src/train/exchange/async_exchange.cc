#include "tenax/train/exchange/async_exchange.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "tenax/core/signals.h"
#include "tenax/ps/ps_codec.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;

// One parameter-server shard as this worker sees it.
struct ShardView {
  std::string host;
  uint32_t port = 0;
  net::PeerId peer = 0;
  bool ready = false;
  uint64_t offset = 0, count = 0;
  net::RemoteRegion model, staging;
  uint64_t base_version = 0;  // the version the current unit started from
  // The shard's tail average (async.average_tail > 0; ps_wire.proto's
  // PsWelcome), and how many merges the last read of it held.
  std::optional<net::RemoteRegion> tail;
  uint64_t tail_merges = 0;
};

class AsyncExchange final : public GradientExchange, public ExchangeMembership, public ModelElsewhere {
 public:
  AsyncExchange(net::Node& node, coord::CoordinatorClient& client, AsyncExchangeOptions o)
      : node_(node), client_(client), o_(std::move(o)) {}

  int rank() const override { return finisher_ ? 0 : 1; }
  int world() const override { return 1; }
  // Workers come and go; each trains its units on whole batches.
  ExchangeMembership* membership() override { return this; }
  int64_t GlobalBatch(int64_t batch_size) const override { return batch_size; }
  BatchSlice SliceOf(int64_t global_batch) const override { return {0, global_batch}; }
  // The job's model is on the shards.
  ModelElsewhere* model_elsewhere() override { return this; }

  Status Attach(TrainableModel& model) override {
    params_ = model.Parameters();
    total_ = 0;
    for (const auto& p : params_) {
      if (p.scalar_type() != torch::kFloat32 || !p.is_contiguous()) {
        return InvalidArgument("async training needs contiguous float32 parameters");
      }
      total_ += static_cast<uint64_t>(p.numel());
    }
    flat_.assign(total_, 0.0f);
    base_.assign(total_, 0.0f);
    if (o_.kind == ps::ResultKind::kGradientSum) grad_sum_.assign(total_, 0.0f);
    return Status::Ok();
  }

  void BeginStep() override {
    for (auto& p : params_) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }

  Status FinishStep() override {
    if (o_.kind != ps::ResultKind::kGradientSum) return Status::Ok();
    // Classic asynchronous SGD: every gradient is taken at the pulled model;
    // they are summed for the shards and the local model stays put.
    size_t at = 0;
    for (auto& p : params_) {
      const auto n = static_cast<size_t>(p.numel());
      if (p.grad().defined()) {
        const float* g = p.grad().data_ptr<float>();
        for (size_t i = 0; i < n; ++i) grad_sum_[at + i] += g[i];
        p.mutable_grad().zero_();
      }
      at += n;
    }
    return Status::Ok();
  }

  Result<double> MeanOverReplicas(double local) override { return local; }
  Result<double> SumOverReplicas(double local) override { return local; }
  void Detach() override {}

  Result<int64_t> AtStepBoundary(int64_t applied) override {
    if (in_unit_) {
      if (StopRequested()) return LeaveOnNotice(applied);
      if (applied < unit_end_) {
        // Drive the node once a step: a unit can last longer than the peer
        // timeout (net::NodeOptions::peer_timeout's contract), and the
        // shards would declare an undriven worker lost mid-unit.
        node_.Progress();
        return applied;
      }
      TENAX_RETURN_IF_ERROR(Deliver(unit_.steps()));
      in_unit_ = false;
    }
    return NextUnit();
  }

  Result<bool> LoadFinalModel() override {
    if (!finisher_) return false;
    TENAX_RETURN_IF_ERROR(PullModel());
    spdlog::info("{}: pulled the final model from {} shard(s) to evaluate it", o_.worker, shards_.size());
    if (o_.average_tail > 0) {
      // Tail averaging: each shard's mean of its model after every merge of
      // the job's last o_.average_tail, kept by the shard (so it does not
      // matter which worker finishes); a shard with no merge there keeps
      // its final model.
      std::string counts;
      for (auto& [s, v] : shards_) {
        if (!v.tail) return ProtocolError("shard " + std::to_string(s) + " keeps no tail average (async.average_tail)");
        std::vector<float> mean(v.count);
        TENAX_RETURN_IF_ERROR(PullShard(s, v, *v.tail, mean.data(), &v.tail_merges));
        if (v.tail_merges > 0) {
          std::copy(mean.begin(), mean.end(), flat_.begin() + static_cast<std::ptrdiff_t>(v.offset));
        }
        counts += (counts.empty() ? "" : ", ") + std::to_string(v.tail_merges);
      }
      FlatToParams();
      spdlog::info("{}: evaluating the mean of the models after each merge of the last {:.0f}% of the job's steps "
                   "(merges averaged per shard: {})",
                   o_.worker, 100 * o_.average_tail, counts);
    }
    return true;
  }

  void DescribeInSummary(nlohmann::json& summary) const override {
    summary["shards"] = shards_.size();
    summary["result_kind"] = ps::ToString(o_.kind);
    if (finisher_ && o_.average_tail > 0) {
      nlohmann::json counts = nlohmann::json::array();
      for (const auto& [s, v] : shards_) counts.push_back(v.tail_merges);
      summary["tail_merges_averaged"] = counts;
    }
  }
  std::string Describe() const override { return "async worker " + o_.worker; }

 private:
  Result<int64_t> NextUnit();
  Result<int64_t> LeaveOnNotice(int64_t applied);
  Status Deliver(int64_t steps_done);
  Status UpdateShards(const wire::UnitGrant& grant);
  Status ConnectShard(uint32_t shard, ShardView& view);
  Status PullModel();
  // Reads a shard's region laid out as ps::ModelRegionHeader + floats
  // (its model, or its tail average) into `into` (view.count floats), and
  // the header's version into *version.
  Status PullShard(uint32_t shard, const ShardView& view, const net::RemoteRegion& region, float* into,
                   uint64_t* version);
  void ParamsToFlat();
  void FlatToParams();
  net::Node& node_;
  coord::CoordinatorClient& client_;
  AsyncExchangeOptions o_;
  std::vector<torch::Tensor> params_;
  uint64_t total_ = 0;
  std::vector<float> flat_, base_, grad_sum_;
  std::map<uint32_t, ShardView> shards_;
  bool in_unit_ = false, finisher_ = false;
  wire::UnitGrant unit_;
  int64_t unit_end_ = 0;
  int64_t delivered_ = 0, merged_ = 0;
};

void AsyncExchange::ParamsToFlat() {
  size_t at = 0;
  for (const auto& p : params_) {
    const auto n = static_cast<size_t>(p.numel());
    std::memcpy(flat_.data() + at, p.data_ptr<float>(), n * sizeof(float));
    at += n;
  }
}

void AsyncExchange::FlatToParams() {
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (auto& p : params_) {
    const auto n = static_cast<size_t>(p.numel());
    std::memcpy(p.data_ptr<float>(), flat_.data() + at, n * sizeof(float));
    at += n;
  }
}

Status AsyncExchange::ConnectShard(uint32_t shard, ShardView& v) {
  const std::string where = "shard " + std::to_string(shard) + " at " + v.host + ":" + std::to_string(v.port);
  const Deadline deadline = Deadline::After(o_.connect_timeout);
  auto peer = node_.Connect(v.host, static_cast<uint16_t>(v.port), deadline);
  if (!peer.ok()) return Status(peer.status().code(), where + ": " + peer.status().message());
  wire::PsHello hello;
  hello.set_job_id(o_.job_id);
  hello.set_plan_fingerprint(o_.plan_fingerprint);
  hello.set_worker(o_.worker);
  hello.set_param_count(total_);
  hello.set_result_kind(static_cast<uint32_t>(o_.kind));
  TENAX_RETURN_IF_ERROR(node_.SendControl(*peer, ps::kPsHelloKind, hello.SerializeAsString(), deadline));
  auto msg = node_.ReceiveControl(deadline, *peer, ps::kPsWelcomeKind);
  if (!msg.ok()) return Status(msg.status().code(), where + " did not welcome us: " + msg.status().message());
  TENAX_ASSIGN_OR_RETURN(wire::PsWelcome w, ps::DecodePsWelcome(msg->payload, where));
  if (!w.error().empty()) return Refused(where + " refused this worker: " + w.error());
  if (w.shard() != shard || w.param_offset() + w.param_count() > total_) {
    return ProtocolError(where + " answered as shard " + std::to_string(w.shard()) + " with floats beyond the model");
  }
  TENAX_ASSIGN_OR_RETURN(v.model, node_.Import(*peer, {w.model_address(), w.model_length(), w.model_rkey()}));
  TENAX_ASSIGN_OR_RETURN(v.staging, node_.Import(*peer, {w.staging_address(), w.staging_length(), w.staging_rkey()}));
  if (w.tail_length() > 0) {
    TENAX_ASSIGN_OR_RETURN(v.tail, node_.Import(*peer, {w.tail_address(), w.tail_length(), w.tail_rkey()}));
  }
  v.peer = *peer;
  v.offset = w.param_offset();
  v.count = w.param_count();
  v.ready = true;
  spdlog::info("{}: connected to {} (floats [{}, {}), rule {})", o_.worker, where, v.offset, v.offset + v.count,
               w.rule());
  return Status::Ok();
}

Status AsyncExchange::UpdateShards(const wire::UnitGrant& grant) {
  for (const auto& a : grant.shard_addresses()) {
    ShardView& v = shards_[a.shard()];
    const bool moved = v.host != a.host() || v.port != a.port();
    if (moved || (v.ready && !node_.PeerStatus(v.peer).ok())) {
      if (v.ready) spdlog::info("{}: shard {} moved or was lost; reconnecting", o_.worker, a.shard());
      v = ShardView{};
      v.host = a.host();
      v.port = a.port();
    }
    if (!v.ready) TENAX_RETURN_IF_ERROR(ConnectShard(a.shard(), v));
  }
  return Status::Ok();
}

Status AsyncExchange::PullShard(uint32_t shard, const ShardView& v, const net::RemoteRegion& region, float* into,
                                uint64_t* version) {
  const Deadline deadline = Deadline::After(o_.result_timeout);
  ps::ModelRegionHeader before, after;
  // A shard SIGKILLed in the middle of a merge leaves its mapped memory
  // with an odd seq forever: read until the peer is declared lost (the
  // peer timeout) or the deadline, not a fixed number of times.
  for (int attempt = 0; !deadline.Expired(); ++attempt) {
    if (Status peer = node_.PeerStatus(v.peer); !peer.ok()) return peer;
    if (attempt >= 100) {
      std::this_thread::sleep_for(1ms);  // pacing re-reads of a region being written
      node_.Progress();
    }
    net::Op h1 = node_.Get(&before, sizeof before, region, 0);
    TENAX_RETURN_IF_ERROR(node_.Wait(h1, deadline));
    if (before.magic != ps::ModelRegionHeader::kMagic || before.param_count != v.count) {
      return ProtocolError("shard " + std::to_string(shard) + "'s region has a bad header");
    }
    if (before.seq % 2 == 1) continue;  // a merge is being written: read again
    net::Op body = node_.Get(into, v.count * sizeof(float), region, sizeof(ps::ModelRegionHeader));
    TENAX_RETURN_IF_ERROR(node_.Wait(body, deadline));
    net::Op h2 = node_.Get(&after, sizeof after, region, 0);
    TENAX_RETURN_IF_ERROR(node_.Wait(h2, deadline));
    if (after.seq == before.seq) {
      *version = before.version;
      return Status::Ok();
    }
  }
  return DeadlineExceeded("shard " + std::to_string(shard) + "'s model kept changing until the deadline (seq " +
                          std::to_string(before.seq) + " then " + std::to_string(after.seq) + ", version " +
                          std::to_string(before.version) + ")");
}

Status AsyncExchange::PullModel() {
  for (auto& [s, v] : shards_) {
    if (!v.ready) return Unavailable("shard " + std::to_string(s) + " is not connected");
    TENAX_RETURN_IF_ERROR(PullShard(s, v, v.model, flat_.data() + v.offset, &v.base_version));
  }
  FlatToParams();
  return Status::Ok();
}

Result<int64_t> AsyncExchange::NextUnit() {
  while (true) {
    if (StopRequested()) return LeaveOnNotice(-1);
    TENAX_ASSIGN_OR_RETURN(wire::UnitGrant g, client_.RequestUnit(o_.worker, Deadline::After(o_.grant_timeout)));
    if (g.total_steps() != o_.total_steps) {
      return FailedPrecondition("the coordinator's queue covers " + std::to_string(g.total_steps()) +
                                " steps, this worker's job " + std::to_string(o_.total_steps) +
                                " (different data or configuration)");
    }
    if (g.state() == "wait") {
      std::this_thread::sleep_for(50ms);  // pacing the next ask; the coordinator holds no lease for us
      node_.Progress();
      continue;
    }
    if (g.state() == "done") {
      finisher_ = g.finisher();
      if (finisher_) {
        Status st = UpdateShards(g);
        if (!st.ok()) return st;
      }
      spdlog::info("{}: every unit is done ({} delivered here, {} merged){}", o_.worker, delivered_, merged_,
                   finisher_ ? "; this worker finishes the job" : "");
      return g.total_steps();
    }
    if (Status st = UpdateShards(g); !st.ok()) {
      // A shard that is not reachable (restarting): give the unit back and ask again.
      spdlog::warn("{}: {}; giving unit {} back", o_.worker, st.message(), g.unit());
      client_.ReleaseUnit(g.unit(), g.attempt(), st.message());
      if (st.code() == StatusCode::kRefused) return st;
      std::this_thread::sleep_for(200ms);  // pacing: the shard is restarting
      continue;
    }
    if (Status st = PullModel(); !st.ok()) {
      // A shard that died or is restarting: give the unit back and ask again.
      spdlog::warn("{}: reading the model failed ({}); giving unit {} back", o_.worker, st.message(), g.unit());
      client_.ReleaseUnit(g.unit(), g.attempt(), st.message());
      std::this_thread::sleep_for(200ms);  // pacing: the shard is restarting
      continue;
    }
    base_ = flat_;
    if (o_.kind == ps::ResultKind::kGradientSum) std::fill(grad_sum_.begin(), grad_sum_.end(), 0.0f);
    unit_ = g;
    unit_end_ = g.start_step() + g.steps();
    in_unit_ = true;
    spdlog::debug("{}: unit {} attempt {}: steps [{}, {})", o_.worker, g.unit(), g.attempt(), g.start_step(), unit_end_);
    return g.start_step();
  }
}

Status AsyncExchange::Deliver(int64_t steps_done) {
  // The result, whole; each shard gets its slice.
  if (o_.kind == ps::ResultKind::kGradientSum) {
    flat_ = grad_sum_;
  } else {
    ParamsToFlat();
    if (o_.kind == ps::ResultKind::kDelta) {
      for (size_t i = 0; i < total_; ++i) flat_[i] -= base_[i];
    }
  }
  if (static_cast<int64_t>(unit_.unit()) == o_.poison_unit && unit_.attempt() == 1 && total_ > 0) {
    flat_[0] = std::numeric_limits<float>::quiet_NaN();
    spdlog::warn("{}: injected fault: unit {} carries a NaN", o_.worker, unit_.unit());
  }
  const Deadline deadline = Deadline::After(o_.result_timeout);
  std::vector<uint32_t> targets;
  for (uint32_t s : unit_.shards()) {
    auto it = shards_.find(s);
    if (it == shards_.end() || !it->second.ready || !node_.PeerStatus(it->second.peer).ok()) {
      spdlog::warn("{}: shard {} is gone; its part of unit {} waits for the lease to expire", o_.worker, s, unit_.unit());
      continue;
    }
    ShardView& v = it->second;
    net::Op put = node_.Put(flat_.data() + v.offset, v.count * sizeof(float), v.staging, 0);
    Status landed = node_.Wait(put, deadline);
    // Landed at the shard before it hears of it (a put's completion is
    // local; over TCP the bytes may still be on their way).
    if (landed.ok()) landed = node_.Flush(v.peer, deadline);
    if (!landed.ok()) {
      spdlog::warn("{}: putting unit {} into shard {} failed: {}", o_.worker, unit_.unit(), s, landed.message());
      continue;
    }
    wire::ResultReady r;
    r.set_unit(unit_.unit());
    r.set_attempt(unit_.attempt());
    r.set_steps_done(steps_done);
    r.set_unit_steps(unit_.steps());
    r.set_start_step(unit_.start_step());
    r.set_base_version(v.base_version);
    r.set_result_kind(static_cast<uint32_t>(o_.kind));
    if (Status st = node_.SendControl(v.peer, ps::kResultReadyKind, r.SerializeAsString(), deadline); st.ok()) {
      targets.push_back(s);
    }
  }
  ++delivered_;
  // An attempt is accepted only once every shard of the unit has checked
  // its part. A shard that never got this result, or died before it
  // answered, holds the attempt back until its lease expires, and the other
  // shards' outcomes would not come before then: waiting for them left the
  // worker idle for up to a step timeout (a 10-minute soak: 14 s of a
  // 20 s job). Give the unit back at once instead; it is issued again as
  // soon as the shard is back, and this worker takes the next one. (A unit
  // already accepted is not released: the coordinator refuses, and every
  // shard still merges it.)
  auto give_back = [&](uint32_t shard, const std::string& why) {
    spdlog::warn("{}: unit {} attempt {}: shard {} {}; giving the unit back", o_.worker, unit_.unit(),
                 unit_.attempt(), shard, why);
    client_.ReleaseUnit(unit_.unit(), unit_.attempt(), "shard " + std::to_string(shard) + " " + why);
  };
  for (uint32_t s : unit_.shards()) {
    if (std::find(targets.begin(), targets.end(), s) == targets.end()) {
      give_back(s, "did not get the result");
      return Status::Ok();
    }
  }
  int merged_here = 0;
  std::vector<uint32_t> waiting = targets;  // shards whose outcome has not come
  for (uint32_t s : targets) {
    ShardView& v = shards_[s];
    while (true) {
      // Short waits: a shard that dies must not hold us for the whole deadline.
      auto msg = node_.ReceiveControl(deadline.Earlier(Deadline::After(100ms)), v.peer, ps::kResultOutcomeKind);
      if (!msg.ok()) {
        for (uint32_t t : waiting) {
          if (Status lost = node_.PeerStatus(shards_[t].peer); !lost.ok()) {
            give_back(t, "was lost before it answered (" + lost.message() + ")");
            return Status::Ok();
          }
        }
        if (!deadline.Expired() && msg.status().code() == StatusCode::kDeadlineExceeded) continue;
        spdlog::warn("{}: no outcome of unit {} from shard {}: {}", o_.worker, unit_.unit(), s, msg.status().message());
        break;
      }
      TENAX_ASSIGN_OR_RETURN(wire::ResultOutcome out, ps::DecodeResultOutcome(msg->payload, "shard " + std::to_string(s)));
      if (out.unit() != unit_.unit() || out.attempt() != unit_.attempt()) continue;  // an older unit's late answer
      waiting.erase(std::remove(waiting.begin(), waiting.end(), s), waiting.end());
      if (out.verdict() == "merged") {
        ++merged_here;
      } else {
        spdlog::info("{}: unit {} attempt {} at shard {}: {} {}", o_.worker, out.unit(), out.attempt(), s,
                     out.verdict(), out.reason());
      }
      break;
    }
  }
  if (merged_here == static_cast<int>(unit_.shards_size())) ++merged_;
  return Status::Ok();
}

Result<int64_t> AsyncExchange::LeaveOnNotice(int64_t applied) {
  const std::string sig = std::to_string(StopSignal());
  std::string what = "no unit in hand";
  if (in_unit_) {
    const int64_t done = applied - unit_.start_step();
    if (done >= 1) {
      TENAX_RETURN_IF_ERROR(Deliver(done));
      what = "returned " + std::to_string(done) + " of the " + std::to_string(unit_.steps()) + " steps of unit " +
             std::to_string(unit_.unit()) + " as a partial result";
    } else {
      client_.ReleaseUnit(unit_.unit(), unit_.attempt(), "stopped by signal " + sig + " before its first step");
      what = "gave unit " + std::to_string(unit_.unit()) + " back";
    }
    in_unit_ = false;
  }
  client_.Leave("preemption notice (signal " + sig + ")");
  spdlog::info("{}: preemption notice (signal {}): {}; leaving", o_.worker, sig, what);
  return Cancelled("left the job on signal " + sig + ": " + what);
}

}  // namespace

std::unique_ptr<GradientExchange> MakeAsyncExchange(net::Node& node, coord::CoordinatorClient& client,
                                                    AsyncExchangeOptions options) {
  return std::make_unique<AsyncExchange>(node, client, std::move(options));
}

}  // namespace tenax
