#include "tenax/ps/parameter_server.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "coord_wire.pb.h"
#include "tenax/coord/coord_codec.h"
#include "tenax/core/signals.h"
#include "tenax/net/many_connections.h"
#include "tenax/net/node.h"
#include "tenax/ps/ps_codec.h"
#include "tenax/ps/shard_checkpoint.h"

namespace tenax::ps {
namespace {

using namespace std::chrono_literals;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ResultKind KindOf(const MergeRule& rule) { return rule.expects(); }

// A worker this shard serves: its staging region and what it sends.
struct WorkerConn {
  std::string name;
  net::MemoryRegion staging;
};

// A result checked and reported, waiting for the coordinator's verdict.
// `values` is this shard's private copy (the worker's staging memory is
// not trusted once it was read).
struct PendingResult {
  net::PeerId worker = 0;
  uint64_t base_version = 0;
  int64_t steps_done = 0, unit_steps = 0;
  int64_t start_step = 0;  // the unit's first step (tail averaging)
  bool valid = false;
  std::string reason;
  double norm = 0;
  std::vector<float> values;
  bool reported = false;  // the check reached the coordinator
};

class Shard {
 public:
  Shard(const ServerOptions& o, std::unique_ptr<net::Node> node, std::unique_ptr<MergeRule> rule)
      : o_(o), node_(std::move(node)), rule_(std::move(rule)), validator_(o.validator) {}

  Status Init(uint16_t port);
  Result<ServerOutcome> Serve();

 private:
  std::string Label(net::PeerId peer) const;
  Status ConnectCoordinator(Deadline deadline);
  bool CoordinatorUsable();
  void SendTo(net::PeerId peer, uint32_t kind, const std::string& payload);
  void OnHello(const net::ControlMessage& m);
  void OnResultReady(const net::ControlMessage& m);
  void ReportCheck(uint64_t unit, uint64_t attempt, PendingResult& p);
  Status OnVerdict(const net::ControlMessage& m);
  Status Merge(uint64_t unit, uint64_t attempt, PendingResult& p);
  void TellWorker(net::PeerId worker, uint64_t unit, uint64_t attempt, const std::string& verdict,
                  const std::string& reason);
  // Writes a checkpoint unless a merge's report may not have reached the
  // coordinator (then it waits for a later call).
  Status Checkpoint(const char* why);
  Status WriteCheckpoint(const char* why);
  // The fields that say which job, model and range a checkpoint belongs to.
  ShardCheckpoint Identity() const;
  float* params() { return reinterpret_cast<float*>(model_.data() + sizeof(ModelRegionHeader)); }
  ModelRegionHeader* header() { return reinterpret_cast<ModelRegionHeader*>(model_.data()); }
  // Tail averaging (ServerOptions::average_tail).
  bool InTail(int64_t start_step) const;
  void AddToTail();
  void PublishTail();
  std::string Where() const { return "shard " + std::to_string(o_.shard) + "/" + std::to_string(o_.shards); }

  const ServerOptions& o_;
  std::unique_ptr<net::Node> node_;
  std::unique_ptr<MergeRule> rule_;
  ResultValidator validator_;
  uint16_t port_ = 0;
  std::string plan_;
  uint64_t total_floats_ = 0, offset_ = 0, count_ = 0;
  net::MemoryRegion model_;
  // Tail averaging: the per-float sum of the model after each merge of a
  // unit in the job's tail (double: thousands of merges of floats), how
  // many, and the region the finisher reads their mean from (the model
  // region's layout; its header's version = tail_merges_). The job's steps
  // come with the coordinator's welcome (0 until then: nothing is in the
  // tail before the shard has it).
  std::vector<double> tail_sum_;
  uint64_t tail_merges_ = 0;
  net::MemoryRegion tail_;
  int64_t total_steps_ = 0;
  uint64_t version_ = 0, merges_ = 0, since_checkpoint_ = 0, rejected_ = 0, restored_merges_ = 0;
  net::PeerId coordinator_ = 0;
  bool said_hello_ = false;
  bool coordinator_connected_ = false;
  SteadyClock::time_point next_attempt_{};
  std::map<net::PeerId, WorkerConn> workers_;
  std::map<std::pair<uint64_t, uint64_t>, PendingResult> pending_;
  // What this process merged: (unit, attempt) -> (merge_seq, version). A
  // "merge" verdict told again after a reconnect for one of these re-sends
  // its report (the first may have died with a restarted coordinator).
  std::map<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>> merged_;
  // Merges whose report has not been sent (the coordinator was away).
  std::set<std::pair<uint64_t, uint64_t>> unreported_;
  void ReportMerged(uint64_t unit, uint64_t attempt, uint64_t merge_seq, uint64_t version);
};

std::string Shard::Label(net::PeerId peer) const {
  auto info = node_->Info(peer);
  return info.ok() ? info->address + (info->name.empty() ? "" : " (" + info->name + ")") : std::to_string(peer);
}

Status Shard::Init(uint16_t port) {
  port_ = port;
  if (!o_.initial_model) return InvalidArgument("no initial model for the parameter server");
  TENAX_ASSIGN_OR_RETURN(InitialModel initial, o_.initial_model());
  plan_ = initial.plan_fingerprint;
  total_floats_ = initial.params.size();
  if (o_.shards < 1 || o_.shards > coord::kMaxShards || o_.shard >= o_.shards) {
    return InvalidArgument("server shard " + std::to_string(o_.shard) + " of " + std::to_string(o_.shards) +
                           ": need 0 <= shard < shards <= " + std::to_string(coord::kMaxShards));
  }
  if (o_.shards > total_floats_) {
    return InvalidArgument("async.servers = " + std::to_string(o_.shards) + " exceeds the model's " +
                           std::to_string(total_floats_) + " parameters (each shard needs at least one)");
  }
  offset_ = total_floats_ * o_.shard / o_.shards;
  count_ = total_floats_ * (o_.shard + 1) / o_.shards - offset_;
  TENAX_ASSIGN_OR_RETURN(model_, node_->Allocate(sizeof(ModelRegionHeader) + count_ * sizeof(float)));
  std::memcpy(params(), initial.params.data() + offset_, count_ * sizeof(float));

  ShardCheckpoint expect = Identity();
  expect.params.resize(count_);
  TENAX_ASSIGN_OR_RETURN(auto loaded, LoadNewestShardCheckpoint(o_.checkpoint_dir, expect));
  if (loaded) {
    for (const auto& s : loaded->skipped) spdlog::warn("{}: skipped a damaged checkpoint: {}", Where(), s);
    std::memcpy(params(), loaded->checkpoint.params.data(), count_ * sizeof(float));
    version_ = loaded->checkpoint.version;
    merges_ = restored_merges_ = loaded->checkpoint.merges;
    tail_merges_ = loaded->checkpoint.tail_merges;
    tail_sum_ = std::move(loaded->checkpoint.tail_sum);
    spdlog::info("{}: continuing from {} (version {}, {} merges)", Where(), loaded->path, version_, merges_);
  } else {
    spdlog::info("{}: fresh start from the initial model (no checkpoint in {})", Where(), o_.checkpoint_dir);
  }
  ModelRegionHeader h;
  h.seq = 2;
  h.version = version_;
  h.param_count = count_;
  std::memcpy(model_.data(), &h, sizeof h);
  if (o_.average_tail > 0) {
    TENAX_ASSIGN_OR_RETURN(tail_, node_->Allocate(sizeof(ModelRegionHeader) + count_ * sizeof(float)));
    ModelRegionHeader t;
    t.seq = 2;
    t.param_count = count_;
    std::memcpy(tail_.data(), &t, sizeof t);
    if (tail_merges_ > 0) PublishTail();
  }
  spdlog::info("{}: floats [{}, {}) of {}, rule {}, listening on {}:{}", Where(), offset_, offset_ + count_,
               total_floats_, rule_->name(), o_.listen_host, port_);
  return Status::Ok();
}

void Shard::SendTo(net::PeerId peer, uint32_t kind, const std::string& payload) {
  if (Status st = node_->SendControl(peer, kind, payload, Deadline::After(2s)); !st.ok()) {
    spdlog::warn("{}: message to {} not sent: {}", Where(), Label(peer), st.message());
  }
}

Status Shard::ConnectCoordinator(Deadline deadline) {
  const std::string where = o_.coordinator_host + ":" + std::to_string(o_.coordinator_port);
  TENAX_ASSIGN_OR_RETURN(net::PeerId peer, node_->Connect(o_.coordinator_host, o_.coordinator_port, deadline));
  wire::ShardHello hello;
  hello.set_job_id(o_.job_id);
  hello.set_shard(o_.shard);
  hello.set_shards(o_.shards);
  hello.set_restored_merges(restored_merges_);
  hello.set_first_hello(!said_hello_);
  hello.set_host(o_.listen_host);
  hello.set_port(port_);
  TENAX_RETURN_IF_ERROR(node_->SendControl(peer, coord::kShardHelloKind, hello.SerializeAsString(), deadline));
  auto msg = node_->ReceiveControl(deadline, peer, coord::kShardWelcomeKind);
  if (!msg.ok()) {
    return Status(msg.status().code(), "coordinator " + where + " did not answer: " + msg.status().message());
  }
  TENAX_ASSIGN_OR_RETURN(auto welcome, coord::DecodeShardWelcome(msg->payload, "coordinator " + where));
  if (!welcome.error().empty()) return Refused("coordinator " + where + " refused " + Where() + ": " + welcome.error());
  // Only this process's first hello re-opens units (the coordinator
  // checks first_hello); a reconnect lost nothing.
  if (welcome.reopened_units() > 0) {
    spdlog::info("{}: the coordinator re-issues {} unit(s) merged after the checkpoint", Where(),
                 welcome.reopened_units());
  }
  said_hello_ = true;
  total_steps_ = welcome.total_steps();
  coordinator_ = peer;
  coordinator_connected_ = true;
  for (auto& [key, p] : pending_) p.reported = false;  // the checks are sent again
  return Status::Ok();
}

bool Shard::CoordinatorUsable() {
  if (coordinator_connected_ && node_->PeerStatus(coordinator_).ok()) return true;
  if (coordinator_connected_) {
    spdlog::warn("{}: lost the coordinator ({}); reconnecting", Where(), node_->PeerStatus(coordinator_).message());
    coordinator_connected_ = false;
  }
  const auto now = SteadyClock::now();
  if (now < next_attempt_) return false;
  next_attempt_ = now + 1s;
  if (Status st = ConnectCoordinator(Deadline::After(1s)); !st.ok()) {
    spdlog::debug("{}: reconnect failed: {}", Where(), st.message());
    return false;
  }
  spdlog::info("{}: reconnected to the coordinator", Where());
  return true;
}

void Shard::OnHello(const net::ControlMessage& m) {
  const std::string label = Label(m.from);
  auto refuse = [&](const std::string& why) {
    spdlog::warn("{}: refusing {}: {}", Where(), label, why);
    wire::PsWelcome w;
    w.set_error(why);
    SendTo(m.from, kPsWelcomeKind, w.SerializeAsString());
    node_->Disconnect(m.from, Deadline::After(500ms));
  };
  auto hello = DecodePsHello(m.payload, label);
  if (!hello.ok()) return refuse(hello.status().message());
  if (hello->job_id() != o_.job_id) return refuse("a worker of job \"" + hello->job_id() + "\", this is \"" + o_.job_id + "\"");
  if (hello->plan_fingerprint() != plan_ || hello->param_count() != total_floats_) {
    return refuse("a worker of another model (plan " + hello->plan_fingerprint() + ", " +
                  std::to_string(hello->param_count()) + " floats; this job's: " + plan_ + ", " +
                  std::to_string(total_floats_) + ")");
  }
  if (hello->result_kind() != static_cast<uint32_t>(KindOf(*rule_))) {
    return refuse(std::string("results of kind ") + ToString(static_cast<ResultKind>(hello->result_kind())) +
                  ", rule " + rule_->name() + " merges " + ToString(KindOf(*rule_)));
  }
  auto staging = node_->Allocate(count_ * sizeof(float));
  if (!staging.ok()) return refuse("no staging memory: " + staging.status().message());
  auto model_desc = node_->Share(model_, m.from);
  auto staging_desc = node_->Share(*staging, m.from);
  if (!model_desc.ok() || !staging_desc.ok()) return refuse("cannot share regions");
  std::optional<net::RegionDescriptor> tail_desc;
  if (o_.average_tail > 0) {
    auto d = node_->Share(tail_, m.from);
    if (!d.ok()) return refuse("cannot share the tail average's region: " + d.status().message());
    tail_desc = *d;
  }
  wire::PsWelcome w;
  w.set_shard(o_.shard);
  w.set_shards(o_.shards);
  w.set_param_offset(offset_);
  w.set_param_count(count_);
  w.set_model_address(model_desc->address);
  w.set_model_length(model_desc->length);
  w.set_model_rkey(model_desc->rkey);
  w.set_staging_address(staging_desc->address);
  w.set_staging_length(staging_desc->length);
  w.set_staging_rkey(staging_desc->rkey);
  w.set_rule(rule_->name());
  if (tail_desc) {
    w.set_tail_address(tail_desc->address);
    w.set_tail_length(tail_desc->length);
    w.set_tail_rkey(tail_desc->rkey);
  }
  workers_[m.from] = WorkerConn{hello->worker(), std::move(*staging)};
  SendTo(m.from, kPsWelcomeKind, w.SerializeAsString());
  spdlog::info("{}: serving worker {} ({})", Where(), hello->worker(), label);
}

void Shard::OnResultReady(const net::ControlMessage& m) {
  const std::string label = Label(m.from);
  auto it = workers_.find(m.from);
  auto ready = DecodeResultReady(m.payload, label);
  if (it == workers_.end() || !ready.ok()) {
    spdlog::warn("{}: dropping {}: {}", Where(), label,
                 it == workers_.end() ? "a result before its hello" : ready.status().message());
    node_->Disconnect(m.from, Deadline::After(500ms));
    return;
  }
  const auto key = std::make_pair(ready->unit(), ready->attempt());
  if (pending_.count(key)) {
    TellWorker(m.from, key.first, key.second, "duplicate", "this result is already waiting for its verdict");
    return;
  }
  PendingResult p;
  p.worker = m.from;
  p.base_version = ready->base_version();
  p.steps_done = ready->steps_done();
  p.unit_steps = ready->unit_steps();
  p.start_step = ready->start_step();
  const float* staged = reinterpret_cast<const float*>(it->second.staging.data());
  p.values.assign(staged, staged + count_);
  p.norm = UpdateNorm(KindOf(*rule_), p.values, std::span<const float>(params(), count_));
  Status check = ready->result_kind() != static_cast<uint32_t>(KindOf(*rule_))
                     ? InvalidArgument(std::string("a result of kind ") +
                                       ToString(static_cast<ResultKind>(ready->result_kind())) + " for rule " +
                                       rule_->name())
                 : ready->base_version() > version_
                     ? InvalidArgument("base version " + std::to_string(ready->base_version()) +
                                       " is newer than this shard's " + std::to_string(version_))
                     : validator_.Check(p.values, count_, p.norm);
  p.valid = check.ok();
  p.reason = check.ok() ? "" : check.message();
  if (!p.valid) {
    ++rejected_;
    spdlog::warn("{}: result of unit {} attempt {} from {} is invalid: {}", Where(), key.first, key.second,
                 it->second.name, p.reason);
  }
  auto& stored = pending_[key] = std::move(p);
  ReportCheck(key.first, key.second, stored);
}

void Shard::ReportCheck(uint64_t unit, uint64_t attempt, PendingResult& p) {
  if (!CoordinatorUsable()) return;  // sent again once reconnected
  wire::ShardCheck c;
  c.set_unit(unit);
  c.set_attempt(attempt);
  c.set_shard(o_.shard);
  c.set_valid(p.valid);
  c.set_reason(p.reason);
  c.set_steps_done(p.steps_done);
  if (node_->SendControl(coordinator_, coord::kShardCheckKind, c.SerializeAsString(), Deadline::After(2s)).ok()) {
    p.reported = true;
  }
}

void Shard::TellWorker(net::PeerId worker, uint64_t unit, uint64_t attempt, const std::string& verdict,
                       const std::string& reason) {
  if (!node_->PeerStatus(worker).ok()) return;  // gone: its lease expires or was decided
  wire::ResultOutcome r;
  r.set_unit(unit);
  r.set_attempt(attempt);
  r.set_verdict(verdict);
  r.set_reason(reason);
  r.set_version(version_);
  SendTo(worker, kResultOutcomeKind, r.SerializeAsString());
}

Status Shard::Merge(uint64_t unit, uint64_t attempt, PendingResult& p) {
  if (!p.valid) return Internal("the coordinator accepted a result this shard found invalid");
  MergeInput in;
  in.result = p.values;
  in.staleness = static_cast<int64_t>(version_ >= p.base_version ? version_ - p.base_version : 0);
  in.steps_done = p.steps_done;
  in.unit_steps = p.unit_steps;
  SeqlockWrite(*header(), version_ + 1, [&] { rule_->Apply(std::span<float>(params(), count_), in); });
  ++version_;
  ++merges_;
  validator_.RecordAccepted(p.norm);
  if (InTail(p.start_step)) AddToTail();
  spdlog::debug("{}: merged unit {} attempt {} (staleness {}, weight {:.3f}) -> version {}", Where(), unit, attempt,
                in.staleness, rule_->Weight(in), version_);
  merged_[{unit, attempt}] = {merges_, version_};
  // Reported before any checkpoint holds the merge (Checkpoint), so that a
  // restart on that checkpoint never re-opens it.
  ReportMerged(unit, attempt, merges_, version_);
  if (++since_checkpoint_ >= static_cast<uint64_t>(o_.checkpoint_every)) TENAX_RETURN_IF_ERROR(Checkpoint("periodic"));
  return Status::Ok();
}

void Shard::ReportMerged(uint64_t unit, uint64_t attempt, uint64_t merge_seq, uint64_t version) {
  const auto key = std::make_pair(unit, attempt);
  // Until sent, no checkpoint is written (Checkpoint); the coordinator
  // repeats its verdict after the reconnect, and this is called again.
  unreported_.insert(key);
  if (!CoordinatorUsable()) return;
  wire::ShardMerged mm;
  mm.set_unit(unit);
  mm.set_attempt(attempt);
  mm.set_shard(o_.shard);
  mm.set_merge_seq(merge_seq);
  mm.set_version(version);
  const Status st = node_->SendControl(coordinator_, coord::kShardMergedKind, mm.SerializeAsString(), Deadline::After(2s));
  if (!st.ok()) {
    spdlog::warn("{}: the report of unit {} attempt {}'s merge was not sent: {}", Where(), unit, attempt, st.message());
    return;
  }
  unreported_.erase(key);
}

Status Shard::OnVerdict(const net::ControlMessage& m) {
  TENAX_ASSIGN_OR_RETURN(auto v, coord::DecodeShardVerdict(m.payload, "coordinator"));
  const auto key = std::make_pair(v.unit(), v.attempt());
  auto it = pending_.find(key);
  if (v.verdict() == "pending") return Status::Ok();
  if (it == pending_.end() && v.verdict() == "merge") {
    if (auto done = merged_.find(key); done != merged_.end()) {
      // Told again after a reconnect: this shard merged it; the report may
      // have been lost with the old coordinator.
      ReportMerged(key.first, key.second, done->second.first, done->second.second);
      return Status::Ok();
    }
  }
  if (it == pending_.end()) {
    // Rejections go to every shard; one that never got this result has nothing to drop.
    spdlog::debug("{}: verdict {} on unit {} attempt {}, which is not waiting here", Where(), v.verdict(), key.first,
                  key.second);
    return Status::Ok();
  }
  if (v.verdict() == "merge") {
    TENAX_RETURN_IF_ERROR(Merge(key.first, key.second, it->second));
    TellWorker(it->second.worker, key.first, key.second, "merged", "");
  } else {
    spdlog::info("{}: unit {} attempt {}: {} {}", Where(), key.first, key.second, v.verdict(), v.reason());
    TellWorker(it->second.worker, key.first, key.second, v.verdict(), v.reason());
  }
  pending_.erase(it);
  return Status::Ok();
}

bool Shard::InTail(int64_t start_step) const {
  return o_.average_tail > 0 && total_steps_ > 0 &&
         static_cast<double>(start_step) >= (1 - o_.average_tail) * static_cast<double>(total_steps_);
}

void Shard::AddToTail() {
  if (tail_sum_.size() != count_) tail_sum_.assign(count_, 0.0);
  const float* m = params();
  for (uint64_t i = 0; i < count_; ++i) tail_sum_[i] += m[i];
  ++tail_merges_;
  PublishTail();
}

void Shard::PublishTail() {
  auto* h = reinterpret_cast<ModelRegionHeader*>(tail_.data());
  float* mean = reinterpret_cast<float*>(tail_.data() + sizeof(ModelRegionHeader));
  const double n = static_cast<double>(tail_merges_);
  SeqlockWrite(*h, tail_merges_, [&] {
    for (uint64_t i = 0; i < count_; ++i) mean[i] = static_cast<float>(tail_sum_[i] / n);
  });
}

ShardCheckpoint Shard::Identity() const {
  ShardCheckpoint c;
  c.job_id = o_.job_id;
  c.plan_fingerprint = plan_;
  c.shard = o_.shard;
  c.shards = o_.shards;
  c.param_offset = offset_;
  return c;
}

Status Shard::Checkpoint(const char* why) {
  // Never a checkpoint holding a merge the coordinator may not know of. A
  // shard SIGKILLed after writing one but before its report arrived left
  // the unit "accepted" at the coordinator, which re-opened it when the
  // shard came back on that checkpoint: the unit was merged a second time
  // into a model that already held it (found by the tail-averaging test;
  // the coordinator's log showed it merged once). So every report is out
  // and flushed to the coordinator first, or the checkpoint waits for a
  // later merge; skipping one costs only re-training (a restart re-opens
  // every merge after the older checkpoint it finds).
  if (!unreported_.empty()) {
    spdlog::info("{}: checkpoint ({}) postponed: {} merge(s) not yet reported to the coordinator", Where(), why,
                 unreported_.size());
    return Status::Ok();
  }
  const Status flushed = coordinator_connected_ ? node_->Flush(coordinator_, Deadline::After(2s))
                                                : Unavailable("not connected to the coordinator");
  if (!flushed.ok()) {
    spdlog::info("{}: checkpoint ({}) postponed: the merge reports may not have reached the coordinator: {}", Where(),
                 why, flushed.message());
    return Status::Ok();
  }
  if (o_.sigkill_after_checkpoint_of > 0 && merges_ >= o_.sigkill_after_checkpoint_of) {
    TENAX_RETURN_IF_ERROR(WriteCheckpoint(why));
    ::raise(SIGKILL);  // test seam (ServerOptions)
  }
  return WriteCheckpoint(why);
}

Status Shard::WriteCheckpoint(const char* why) {
  ShardCheckpoint c = Identity();
  c.version = version_;
  c.merges = merges_;
  c.rule = rule_->name();
  c.written_unix_ms = WallMs();
  c.params.assign(params(), params() + count_);
  if (tail_merges_ > 0) {
    c.tail_merges = tail_merges_;
    c.tail_sum = tail_sum_;
  }
  TENAX_RETURN_IF_ERROR(WriteShardCheckpoint(o_.checkpoint_dir, c));
  since_checkpoint_ = 0;
  spdlog::debug("{}: checkpoint ({}) at version {}, {} merges", Where(), why, version_, merges_);
  return Status::Ok();
}

Result<ServerOutcome> Shard::Serve() {
  const Deadline join_deadline = Deadline::After(o_.join_timeout);
  while (true) {
    Status st = ConnectCoordinator(join_deadline.Earlier(Deadline::After(2s)));
    if (st.ok()) break;
    if (st.code() == StatusCode::kRefused) return st;
    if (join_deadline.Expired()) {
      return DeadlineExceeded("coordinator " + o_.coordinator_host + ":" + std::to_string(o_.coordinator_port) +
                              " did not answer within the join timeout (" + st.message() + ")");
    }
    if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
    std::this_thread::sleep_for(100ms);  // retry pacing, not synchronisation
  }
  spdlog::info("{}: registered with the coordinator", Where());
  while (true) {
    if (StopRequested()) {
      TENAX_RETURN_IF_ERROR(Checkpoint("stop"));
      return Cancelled(Where() + " stopped by signal " + std::to_string(StopSignal()) + " at version " +
                       std::to_string(version_));
    }
    while (node_->Accept(Deadline::At(SteadyClock::now())).ok()) {
    }
    // Node waits poll: an idle shard sleeps between polls so that it does
    // not take a core from the workers (pacing, not synchronisation:
    // messages wait in UCX meanwhile).
    node_->Progress();
    auto msg = node_->ReceiveControl(Deadline::At(SteadyClock::now()));
    if (!msg.ok()) std::this_thread::sleep_for(1ms);
    if (msg.ok()) {
      const bool from_coordinator = coordinator_connected_ && msg->from == coordinator_;
      if (msg->kind == kPsHelloKind) {
        OnHello(*msg);
      } else if (msg->kind == kResultReadyKind) {
        OnResultReady(*msg);
      } else if (from_coordinator && msg->kind == coord::kShardVerdictKind) {
        TENAX_RETURN_IF_ERROR(OnVerdict(*msg));
      } else if (from_coordinator && msg->kind == coord::kDoneKind) {
        TENAX_RETURN_IF_ERROR(Checkpoint("job done"));
        spdlog::info("{}: the job is done: version {}, {} merges ({} of them averaged for the tail), {} results "
                     "rejected here",
                     Where(), version_, merges_, tail_merges_, rejected_);
        return ServerOutcome{version_, merges_, rejected_, restored_merges_};
      } else if (from_coordinator && msg->kind == coord::kFailureKind) {
        TENAX_RETURN_IF_ERROR(Checkpoint("job failed"));
        auto f = coord::DecodeFailure(msg->payload, "coordinator");
        return FailedPrecondition("the job failed: " + (f.ok() ? f->reason() : f.status().message()));
      } else {
        spdlog::warn("{}: dropping {}: unexpected message kind {}", Where(), Label(msg->from), msg->kind);
        node_->Disconnect(msg->from, Deadline::After(500ms));
      }
    }
    // Checks and merge reports not yet delivered (the coordinator was
    // away) go out again.
    if (CoordinatorUsable()) {
      for (auto& [key, p] : pending_) {
        if (!p.reported) ReportCheck(key.first, key.second, p);
      }
      const auto unreported = unreported_;
      for (const auto& key : unreported) {
        const auto& [merge_seq, version] = merged_.at(key);
        ReportMerged(key.first, key.second, merge_seq, version);
      }
    }
    // Workers that are gone: their staging and waiting results go.
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (node_->PeerStatus(it->first).ok()) {
        ++it;
        continue;
      }
      spdlog::info("{}: worker {} is gone ({})", Where(), it->second.name, node_->PeerStatus(it->first).message());
      it = workers_.erase(it);
    }
  }
}

}  // namespace

Result<ServerOutcome> RunServer(const ServerOptions& o) {
  TENAX_RETURN_IF_ERROR(ValidateMergeParams(o.merge));
  TENAX_RETURN_IF_ERROR(ValidateValidatorOptions(o.validator));
  if (o.checkpoint_every < 1) return InvalidArgument("async.checkpoint_every must be >= 1");
  if (o.checkpoint_dir.empty()) return InvalidArgument("the server needs a checkpoint directory");
  if (o.coordinator_port == 0) return InvalidArgument("the server needs the coordinator's port");
  TENAX_ASSIGN_OR_RETURN(auto rule, MakeMergeRule(o.merge));
  net::NodeOptions no;
  no.name = "server-" + std::to_string(o.shard);
  no.secret = o.secret;
  no.transports = o.transports;
  no.tcp_streams = o.tcp_streams;
  no.peer_timeout = o.peer_timeout;
  no.max_peers = net::kFleetPeers;  // every worker of the job pushes to every shard
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(o.listen_host, 0));
  Shard shard(o, std::move(node), std::move(rule));
  TENAX_RETURN_IF_ERROR(shard.Init(port));
  return shard.Serve();
}

}  // namespace tenax::ps
