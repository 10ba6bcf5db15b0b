// The elastic exchange (include/tenax/train/exchange/allreduce_exchange.h,
// docs/elastic.md): the bucketed allreduce over a group re-formed for every
// membership generation, and the state transfer that makes every member of
// a new generation start from bit-identical parameters and momentum.
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <span>
#include <thread>

#include "allreduce_exchange_impl.h"
#include "optimizer_state_key.h"
#include "tenax/comm/channel_codec.h"
#include "tenax/comm/group_zones.h"
#include "tenax/core/run_records.h"
#include "tenax/core/signals.h"
#include "tenax/net/control_codec.h"
#include "tenax/train/exchange/elastic_membership.h"
#include "tenax/job/batch_shares.h"

namespace tenax {
namespace train_internal {
namespace {

double MillisBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class ElasticExchange final : public AllreduceExchange, public ExchangeMembership {
 public:
  ElasticExchange(std::unique_ptr<comm::Group> group, ElasticExchangeOptions o)
      : AllreduceExchange(group.get(), o.base), owned_(std::move(group)), eo_(std::move(o)) {
    options_.interrupt = [this] { return Interrupt(); };
    // Ranks change with every generation: the zones, and so the choice of
    // allreduce, are worked out for each one (ChooseAllreduce).
    want_hierarchical_ = options_.hierarchical;
    options_.zones.clear();
    options_.hierarchical = false;
    prescale_ = true;
    joined_late_ = eo_.joined_late;
    has_state_ = !joined_late_;
    last_ok_ = boundary_start_ = SteadyClock::now();
  }
  ~ElasticExchange() override { AllreduceExchange::Detach(); }

  // The group re-forms at step boundaries; the configured global batch
  // is split among whoever is a member.
  ExchangeMembership* membership() override { return this; }
  int64_t GlobalBatch(int64_t batch_size) const override { return batch_size * eo_.configured_workers; }
  BatchSlice SliceOf(int64_t global_batch) const override {
    if (global_batch != global_batch_ || shares_.size() != static_cast<size_t>(world())) {
      global_batch_ = global_batch;
      shares_ = EvenShares(global_batch, world());
    }
    BatchSlice s;
    for (int r = 0; r < rank(); ++r) s.offset += shares_[static_cast<size_t>(r)];
    s.count = shares_[static_cast<size_t>(rank())];
    return s;
  }

  Status Attach(TrainableModel& model) override {
    if (world() > eo_.max_workers) {
      return InvalidArgument("generation of " + std::to_string(world()) + " members exceeds max_workers " +
                             std::to_string(eo_.max_workers));
    }
    // The flag, then (measured shares) one speed slot per possible rank.
    const size_t speed_slots = eo_.measured_shares ? static_cast<size_t>(eo_.max_workers) : 0;
    ChooseAllreduce();
    TENAX_RETURN_IF_ERROR(Prepare(model, 1 + speed_slots));
    params_ = model.Parameters();
    TENAX_ASSIGN_OR_RETURN(arena_, group_->node().Allocate(2 * layout_.params_count * sizeof(float)));
    sync_needed_ = joined_late_;
    const bool unformed = !eo_.first_generation_unformed.ok();
    Status bound = eo_.first_generation_unformed;
    if (!unformed) {
      if (eo_.before_allreduce_offer && !joined_late_) eo_.before_allreduce_offer(true);
      bound = Rebind();
      if (bound.ok() && !joined_late_) bound = BroadcastFromRankZero();
    }
    if (!bound.ok()) {
      // Like a member's failed re-form: report whom it lost and join the
      // next generation at the first step boundary (AtStepBoundary). A
      // joiner takes its state from a live donor there. A first-generation
      // member keeps its own initial model (a failed broadcast leaves the
      // parameters as they were) but marks it unsettled: the next
      // generation's state agreement (Sync) makes one member's initial
      // model everyone's. Before, a member lost while the first generation
      // set up failed the whole job (exit 3; the 60-minute soak found it
      // when a worker was descheduled past the peer timeout).
      if (!RepairedByNewMembership(bound)) return bound;
      spdlog::warn("rank {}: {} generation {} failed ({}); joining the next one", rank(),
                   unformed ? "connecting the members of" : "setting up the allreduce of", group_->generation(),
                   bound.message());
      if (!joined_late_) initial_unsettled_ = true;
      // Connected to every member (Group::Join succeeded): a re-form may
      // reuse these connections if a restarted coordinator takes this
      // generation for the stable one. Not reported as formed. (Unformed:
      // no connections, and nobody to suspect but whom the coordinator
      // already finds lost.)
      formed_[group_->generation()] = group_->ConnectionsById();
      if (!unformed) ReportSuspects(bound);
      UnpinBuffer();
      allreduce_.reset();
      buffer_ = nullptr;
      reform_needed_ = true;
      failed_generation_ = group_->generation();
      return Status::Ok();
    }
    if (!joined_late_) {
      Record(0, "first generation: " + std::to_string(world()) + " workers", {});
      NoteFormed();  // connected to everyone, and the initial model was broadcast
    }
    return Status::Ok();
  }

  Status AttachOptimizer(torch::optim::Optimizer& optimizer) override {
    sgd_ = dynamic_cast<torch::optim::SGD*>(&optimizer);
    if (!sgd_) return InvalidArgument("elastic training transfers SGD momentum; set train.optimizer = \"sgd\"");
    return Status::Ok();
  }

  void BeginStep() override {
    AllreduceExchange::BeginStep();
    NoticeStop();
    const bool change = eo_.membership->leaving() || eo_.membership->NewerPublished(group_->generation());
    buffer_[layout_.flag_slot] = change ? 1.0f : 0.0f;
    if (MeasuringShares()) {
      float* speeds = buffer_ + layout_.flag_slot + 1;
      std::memset(speeds, 0, static_cast<size_t>(eo_.max_workers) * sizeof(float));
      speeds[rank()] = static_cast<float>(seconds_per_sample_);
    }
    step_begin_ = SteadyClock::now();
  }

  Status FinishStep() override {
    SlowDownLikeAStraggler();
    const double compute_seconds = std::chrono::duration<double>(SteadyClock::now() - step_begin_).count();
    if (Status st = AllreduceExchange::FinishStep(); !st.ok()) return Failed(st);
    last_ok_ = SteadyClock::now();
    if (buffer_[layout_.flag_slot] > 0.0f) {
      reform_needed_ = true;
      boundary_start_ = SteadyClock::now();
      detected_.reset();
    }
    if (MeasuringShares()) {
      UpdateShares(compute_seconds);
      // After the update: a straggler's record carries its new share.
      if (!reform_needed_) {
        ReportStragglers(std::span<const float>(buffer_ + layout_.flag_slot + 1, static_cast<size_t>(world())));
      }
    }
    return Status::Ok();
  }

  // The loss at log points: each member's mean weighted by its share.
  Result<double> MeanOverReplicas(double local) override {
    const double weight = global_batch_ > 0 ? static_cast<double>(SliceOf(global_batch_).count) /
                                                  static_cast<double>(global_batch_)
                                            : 1.0 / world();
    auto r = AllreduceExchange::SumOverReplicas(local * weight);
    if (!r.ok()) return Failed(r.status());
    return r;
  }
  Result<double> SumOverReplicas(double local) override {
    auto r = AllreduceExchange::SumOverReplicas(local);
    if (!r.ok()) return Failed(r.status());
    return r;
  }

  Result<int64_t> AtStepBoundary(int64_t applied) override {
    NoticeStop();
    if (!reform_needed_ && !sync_needed_) return applied;
    const Deadline deadline = Deadline::After(eo_.reform_timeout);
    std::string why;
    int64_t transfer_ms = -1;
    while (reform_needed_ || sync_needed_) {
      if (reform_needed_) {
        auto view = eo_.membership->Next(std::max(group_->generation(), failed_generation_), deadline);
        if (!view.ok()) return view.status();
        // Connections are reused from the stable generation (the newest
        // one every member formed), not from this member's last one: a
        // member may have formed a generation the others skipped.
        auto known = formed_.find(view->stable_generation);
        // A generation published meanwhile supersedes this one: stop
        // waiting for its peers (a joiner of it may never come).
        auto g = comm::Group::Reform(*owned_, known == formed_.end() ? std::map<uint32_t, net::PeerId>{} : known->second,
                                     eo_.membership->job_id(), view->generation, view->rank, view->members, deadline,
                                     SupersededInterrupt(*eo_.membership, view->generation));
        formed_.erase(formed_.begin(), formed_.lower_bound(view->stable_generation));
        if (!g.ok()) {
          if (!RepairedByNewMembership(g.status())) return g.status();
          spdlog::warn("rank {}: re-forming generation {} failed ({}); waiting for the next one", rank(),
                       view->generation, g.status().message());
          failed_generation_ = view->generation;
          continue;
        }
        // The allreduce refers to the old group (its puts still pending wait
        // on its node when it is destroyed): it goes first, then the group.
        UnpinBuffer();
        allreduce_.reset();
        buffer_ = nullptr;
        owned_ = std::move(*g);
        group_ = owned_.get();
        ChooseAllreduce();
        if (eo_.before_allreduce_offer) eo_.before_allreduce_offer(false);
        if (Status st = Rebind(); !st.ok()) {
          if (!RepairedByNewMembership(st)) return st;
          ReportSuspects(st);
          failed_generation_ = group_->generation();
          continue;
        }
        why = view->why;
        shares_.clear();  // the ranks changed: even shares until members have measured again
        balanced_logged_ = false;
        reform_needed_ = false;
        sync_needed_ = true;
      }
      auto synced = Sync(applied, deadline, transfer_ms);
      if (!synced.ok()) {
        if (!RepairedByNewMembership(synced.status())) return synced.status();
        spdlog::warn("rank {}: the state agreement of generation {} failed ({}); waiting for the next one", rank(),
                     group_->generation(), synced.status().message());
        ReportSuspects(synced.status());
        reform_needed_ = true;
        failed_generation_ = group_->generation();
        continue;
      }
      applied = *synced;
      sync_needed_ = false;
      NoteFormed();
      if (why.empty()) why = "joined as rank " + std::to_string(rank());
    }
    records::Generation timing;
    const auto now = SteadyClock::now();
    if (detected_) {
      timing.detect_ms = MillisBetween(last_ok_, *detected_);
      timing.reform_ms = MillisBetween(*detected_, now);
    } else {
      timing.reform_ms = MillisBetween(boundary_start_, now);
    }
    if (transfer_ms >= 0) timing.join_transfer_ms = static_cast<double>(transfer_ms);
    Record(applied + 1, why, timing);
    detected_.reset();
    last_ok_ = now;
    return applied;
  }

  // The loop's call at the end of training: every member gets here after
  // the last step and evaluation. A barrier first, so that nobody leaves
  // while others may still address it (their lost peer would look like a
  // fault to repair).
  void Detach() override {
    if (!params_.empty() && !detached_) {
      detached_ = true;
      if (Status st = group_->Barrier(StepDeadline()); !st.ok()) {
        spdlog::warn("rank {}: the final barrier failed ({}); training itself finished", rank(), st.message());
      }
      auto [bytes, momentum] = Stage();
      state_hash_ = StateChecksum(arena_.data(), bytes);
      spdlog::info("rank {}: final model and momentum state fnv1a {:016x} (momentum {})", rank(), state_hash_,
                   momentum ? "present" : "absent");
    }
    AllreduceExchange::Detach();
  }

  void DescribeInSummary(nlohmann::json& summary) const override {
    AllreduceExchange::DescribeInSummary(summary);
    summary["elastic"] = true;
    summary["shares"] = shares_;  // the last step's split of the global batch, by rank
    summary["generations"] = generations_;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(state_hash_));
    summary["state_hash"] = hex;
  }

  std::string Describe() const override { return "elastic " + AllreduceExchange::Describe(); }

 protected:
  float LocalScale() const override {
    if (global_batch_ <= 0) return 1.0f / static_cast<float>(world());
    return static_cast<float>(SliceOf(global_batch_).count) / static_cast<float>(global_batch_);
  }

 private:
  // The speed slots cover ranks below max_workers (the coordinator never
  // forms a larger generation).
  bool MeasuringShares() const { return eo_.measured_shares && world() <= eo_.max_workers; }

  // Every member runs this after the same step's allreduce, on the same
  // summed speed slots: the shares of the next step agree everywhere.
  void UpdateShares(double compute_seconds) {
    const int64_t mine = SliceOf(global_batch_).count;
    // A fresh process's first steps run on cold caches and allocators: they
    // would put a joiner far below its real speed (and its share with it)
    // for the many steps the smoothing takes to forget them.
    if (mine > 0 && compute_seconds > 0 && ++measured_steps_ > kColdSteps) {
      const double measured = compute_seconds / static_cast<double>(mine);
      seconds_per_sample_ =
          seconds_per_sample_ > 0 ? (1 - kSpeedSmoothing) * seconds_per_sample_ + kSpeedSmoothing * measured
                                  : measured;
    }
    if (reform_needed_) return;  // the next step belongs to a new generation
    const float* speeds = buffer_ + layout_.flag_slot + 1;
    auto next = BalancedShares(std::span<const float>(speeds, static_cast<size_t>(world())), global_batch_);
    // Hysteresis: keep the current split unless some share moves by more
    // than 2% of the global batch (measurement noise would otherwise move
    // samples back and forth every step).
    if (shares_.size() == next.size()) {
      int64_t moved = 0;
      for (size_t r = 0; r < next.size(); ++r) moved = std::max(moved, std::abs(next[r] - shares_[r]));
      if (moved * 50 <= global_batch_) return;
    }
    if (next != shares_ && !balanced_logged_ && next != EvenShares(global_batch_, world())) {
      balanced_logged_ = true;
      spdlog::info("rank {}/{}: shares of the global batch follow measured speed: {}", rank(), world(),
                   nlohmann::json(next).dump());
    }
    shares_ = std::move(next);
  }

  // The emulated straggler (ElasticExchangeOptions::stragglers): a real
  // delay proportional to this step's own compute time, counted in the
  // measured time; the transport keeps moving meanwhile.
  void SlowDownLikeAStraggler() {
    ++steps_finished_;
    if (!eo_.stragglers || eo_.straggler_id < 0) return;
    const double slowdown = eo_.stragglers->Slowdown(eo_.straggler_id, steps_finished_);
    if (slowdown <= 1) return;
    const double compute = std::chrono::duration<double>(SteadyClock::now() - step_begin_).count();
    const auto until = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                std::chrono::duration<double>(std::min((slowdown - 1) * compute, 600.0)));
    while (SteadyClock::now() < until) {
      group_->node().Progress();
      std::this_thread::sleep_for(std::min<SteadyClock::duration>(until - SteadyClock::now(), std::chrono::milliseconds(20)));
    }
  }

  // Rank 0 names members whose measured seconds per sample stand out from
  // the median ({"event": "straggler"}), with hysteresis; every member sees
  // the same speeds, only rank 0 writes.
  void ReportStragglers(std::span<const float> speeds) {
    if (rank() != 0 || !eo_.on_event || speeds.size() < 2) return;
    std::vector<float> sorted(speeds.begin(), speeds.end());
    if (std::any_of(sorted.begin(), sorted.end(), [](float v) { return v <= 0; })) return;  // not all measured yet
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted.size() % 2 ? sorted[sorted.size() / 2]
                                            : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
    const auto& members = group_->members();
    for (size_t r = 0; r < speeds.size() && r < members.size(); ++r) {
      const double ratio = speeds[r] / median;
      const uint32_t id = members[r].id;
      const bool slow = slow_members_.count(id) > 0;
      // A change of state must hold for kStragglerSteps measured steps in a
      // row: 2 cores shared by 4 processes make single steps swing by 2x.
      if (slow == (ratio > (slow ? (1 + eo_.slow_factor) / 2 : eo_.slow_factor))) {
        straggler_streak_.erase(id);
        continue;
      }
      if (++straggler_streak_[id] < kStragglerSteps) continue;
      straggler_streak_.erase(id);
      if (slow) {
        slow_members_.erase(id);
      } else {
        slow_members_.insert(id);
      }
      const std::string& name = members[r].name;
      const auto slash = name.rfind('/');
      records::Straggler e;
      e.slow = !slow;  // `slow`: it was slow before this change
      e.member = name;
      e.member_id = id;
      e.rank = static_cast<int64_t>(r);
      e.step = steps_finished_;
      e.ratio = ratio;
      e.share = r < shares_.size() ? shares_[r] : 0;
      e.global_batch = global_batch_;
      if (slash != std::string::npos) e.pid = std::atoll(name.c_str() + slash + 1);
      spdlog::warn("rank {}/{}: member {} ({}) {} ({:.1f}x the median seconds per sample; share {} of {})", rank(),
                   world(), id, name, slow ? "recovered" : "is a straggler", ratio, *e.share, global_batch_);
      eo_.on_event(records::ToJson(e));
    }
  }

  void NoticeStop() {
    if (StopRequested() && !eo_.membership->leaving()) {
      spdlog::info("rank {}: signal {}: leaving the job at the next step boundary", rank(), StopSignal());
      eo_.membership->Leave("stopped by signal " + std::to_string(StopSignal()));
    }
  }

  // Consulted while a collective waits: a lost member aborts it at once.
  Status Interrupt() {
    NoticeStop();
    return group_->Health();
  }

  // A collective failed: report who, and re-form at the step boundary.
  Status Failed(const Status& st) {
    if (!RepairedByNewMembership(st)) return st;
    if (!detected_) detected_ = SteadyClock::now();
    ReportSuspects(st);
    reform_needed_ = true;
    return Aborted("membership changes (" + st.message() + ")");
  }

  void ReportSuspects(const Status& st) {
    for (int r = 0; r < world(); ++r) {
      if (r == rank()) continue;
      const auto& m = group_->members()[static_cast<size_t>(r)];
      const bool lost = !group_->node().PeerStatus(group_->peer(r)).ok();
      const bool stuck = st.code() == StatusCode::kDeadlineExceeded && allreduce_ && allreduce_->waiting_for() == r;
      if (lost || stuck) eo_.membership->ReportSuspect(m.id, st.message());
    }
  }

  // Copies parameters then momentum into the arena; returns the bytes used
  // and whether every parameter has a momentum buffer.
  std::pair<size_t, bool> Stage() {
    uint8_t* out = arena_.data();
    size_t off = 0;
    torch::NoGradGuard no_grad;
    auto host = [&](const torch::Tensor& p) {  // the arena's bytes for `p` at `off`, as a tensor
      return torch::from_blob(out + off, p.sizes(), torch::kFloat32);
    };
    for (const auto& p : params_) {
      host(p).copy_(p);  // from wherever the parameter lives (a GPU: a device-to-host copy)
      off += p.numel() * sizeof(float);
    }
    bool momentum = sgd_ != nullptr;
    for (const auto& p : params_) {
      auto* buf = MomentumOf(p);
      if (!buf) momentum = false;
    }
    for (const auto& p : params_) {
      auto* buf = momentum ? MomentumOf(p) : nullptr;
      if (buf) host(p).copy_(*buf);
      else std::memset(out + off, 0, p.numel() * sizeof(float));
      off += p.numel() * sizeof(float);
    }
    return {off, momentum};
  }

  torch::Tensor* MomentumOf(const torch::Tensor& p) {
    if (!sgd_) return nullptr;
    auto it = sgd_->state().find(OptimizerStateKey(p));
    if (it == sgd_->state().end()) return nullptr;
    auto& st = static_cast<torch::optim::SGDParamState&>(*it->second);
    if (!st.momentum_buffer().defined()) return nullptr;
    return &const_cast<torch::Tensor&>(st.momentum_buffer());
  }

  void Apply(bool momentum) {
    torch::NoGradGuard no_grad;
    const float* in = reinterpret_cast<const float*>(arena_.data());
    for (auto& p : params_) {
      p.copy_(torch::from_blob(const_cast<float*>(in), p.sizes(), torch::kFloat32));
      in += p.numel();
    }
    if (!sgd_) return;
    for (auto& p : params_) {
      const auto key = OptimizerStateKey(p);
      if (!momentum) {
        sgd_->state().erase(key);
        continue;
      }
      auto value = torch::from_blob(const_cast<float*>(in), p.sizes(), torch::kFloat32).clone().to(p.device());
      in += p.numel();
      auto it = sgd_->state().find(key);
      if (it == sgd_->state().end()) {
        auto st = std::make_unique<torch::optim::SGDParamState>();
        st->momentum_buffer(value);
        sgd_->state()[key] = std::move(st);
      } else {
        static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer(value);
      }
    }
  }

  // Every member of a new generation: agree on the steps applied, and let
  // the members behind read the state of one that is not.
  //
  // Each member claims 2 x (steps applied + 1), one less while its model
  // is an unsettled initial one (initial_unsettled_), 0 without a model;
  // the claims are exact in a float up to 2^24 (8 million steps). The
  // highest claim gives the model. When it is an unsettled one, only the
  // lowest rank that claims it donates: the others may hold a different
  // initial model, and every member must start from the same.
  Result<int64_t> Sync(int64_t applied, Deadline deadline, int64_t& transfer_ms) {
    const int w = world(), me = rank();
    if (layout_.total < static_cast<size_t>(w)) return FailedPrecondition("a model too small for elastic training");
    std::memset(buffer_, 0, static_cast<size_t>(w) * sizeof(float));
    buffer_[me] = has_state_ ? static_cast<float>(2 * (applied + 1) - (initial_unsettled_ ? 1 : 0)) : 0.0f;
    TENAX_RETURN_IF_ERROR(allreduce_->Run(0, static_cast<size_t>(w), 1.0f, deadline));
    std::vector<int64_t> counts(static_cast<size_t>(w));
    int64_t top = 0;
    for (int r = 0; r < w; ++r) top = std::max(top, counts[static_cast<size_t>(r)] = std::llround(buffer_[r]));
    if (top == 0) return FailedPrecondition("no member of generation " + std::to_string(group_->generation()) +
                                            " holds the model");
    const int64_t steps = (top + 1) / 2 - 1;
    const bool one_donor = top % 2 == 1;
    std::vector<int> donors, receivers;
    for (int r = 0; r < w; ++r) {
      const bool donor = counts[static_cast<size_t>(r)] == top && !(one_donor && !donors.empty());
      (donor ? donors : receivers).push_back(r);
    }
    if (receivers.empty()) {
      initial_unsettled_ = false;  // one member alone: its model is the job's
      return steps;
    }
    const auto t0 = SteadyClock::now();
    auto donor_of = [&](size_t i) { return donors[i % donors.size()]; };
    if (std::find(donors.begin(), donors.end(), me) != donors.end()) {
      if (eo_.before_state_offer && donor_of(0) == me) eo_.before_state_offer();
      auto [bytes, momentum] = Stage();
      const uint64_t sum = StateChecksum(arena_.data(), bytes);
      for (size_t i = 0; i < receivers.size(); ++i) {
        if (donor_of(i) != me) continue;
        const net::PeerId peer = group_->peer(receivers[i]);
        TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor d, group_->node().Share(arena_, peer));
        wire::StateOffer offer;
        offer.set_generation(group_->generation());
        offer.set_applied_steps(steps);
        offer.set_bytes(bytes);
        offer.set_checksum(sum);
        offer.set_has_momentum(momentum);
        offer.set_region(net::EncodeRegion(d.address, d.length, d.rkey));
        TENAX_RETURN_IF_ERROR(
            group_->node().SendControl(peer, comm::kStateOfferKind, offer.SerializeAsString(), deadline));
      }
      spdlog::info("rank {}: sending the state of step {} to rank(s) behind", me, steps);
    } else {
      const size_t index = static_cast<size_t>(std::find(receivers.begin(), receivers.end(), me) - receivers.begin());
      const int donor = donor_of(index);
      const net::PeerId peer = group_->peer(donor);
      wire::StateOffer offer;
      do {  // offers of an older generation (a superseded re-form) are dropped
        auto msg = group_->node().ReceiveControl(deadline, peer, comm::kStateOfferKind);
        if (!msg.ok()) return Status(msg.status().code(), "no state from donor " + group_->Describe(donor) + ": " +
                                                             msg.status().message());
        TENAX_ASSIGN_OR_RETURN(offer, comm::DecodeStateOffer(msg->payload, group_->Describe(donor)));
      } while (offer.generation() < group_->generation());
      const size_t expected = 2 * layout_.params_count * sizeof(float);
      if (offer.bytes() != expected || offer.applied_steps() != steps) {
        return FailedPrecondition("donor " + group_->Describe(donor) + " offers " + std::to_string(offer.bytes()) +
                                  " bytes of step " + std::to_string(offer.applied_steps()) + ", this model needs " +
                                  std::to_string(expected) + " bytes of step " + std::to_string(steps));
      }
      TENAX_ASSIGN_OR_RETURN(net::DecodedRegion d, net::DecodeRegion(offer.region(), group_->Describe(donor)));
      TENAX_ASSIGN_OR_RETURN(net::RemoteRegion remote,
                             group_->node().Import(peer, net::RegionDescriptor{d.address, d.length, d.rkey}));
      net::Op op = group_->node().Get(arena_.data(), offer.bytes(), remote, 0);
      TENAX_RETURN_IF_ERROR(group_->node().Wait(op, deadline));
      const uint64_t sum = StateChecksum(arena_.data(), offer.bytes());
      if (sum != offer.checksum()) {
        return DataLoss("state read from donor " + group_->Describe(donor) + " has checksum " + std::to_string(sum) +
                        ", the donor's is " + std::to_string(offer.checksum()));
      }
      Apply(offer.has_momentum());
      has_state_ = true;
      initial_unsettled_ = false;  // it holds the donor's model: the one every member gets
      spdlog::info("rank {}: read the state of step {} ({} bytes) from {} in {:.1f} ms", me, steps, offer.bytes(),
                   group_->Describe(donor), MillisBetween(t0, SteadyClock::now()));
    }
    // Closes the transfer: after it, donors may overwrite their arenas.
    buffer_[0] = 0.0f;
    TENAX_RETURN_IF_ERROR(allreduce_->Run(0, 1, 1.0f, deadline));
    initial_unsettled_ = false;  // every member read the donors' model
    transfer_ms = static_cast<int64_t>(MillisBetween(t0, SteadyClock::now()));
    return steps;
  }

  // `g` brings the timings; the rest is filled here. Goes to on_event
  // (a "generation" record) and to the summary's "generations".
  void Record(int64_t first_step, const std::string& why, records::Generation g) {
    for (const auto& m : group_->members()) g.members.push_back(m.id);
    g.number = static_cast<int64_t>(group_->generation());
    g.first_step = first_step;
    g.why = why;
    spdlog::info("rank {}/{}: generation {} from step {} ({}); detect {:.0f} ms, re-form {:.0f} ms, join copy {:.0f} ms; "
                 "allreduce: {}",
                 rank(), world(), g.number, first_step, why, g.detect_ms.value_or(0), g.reform_ms.value_or(0),
                 g.join_transfer_ms.value_or(0), allreduce_why_);
    nlohmann::json e = records::ToJson(g);
    e["allreduce"] = allreduce_ ? allreduce_->algorithm() : "none";
    e["allreduce_why"] = allreduce_why_;
    if (eo_.on_event) eo_.on_event(e);
    e.erase("event");
    generations_.push_back(std::move(e));
  }

  // This generation's allreduce: zone by zone when it was asked for
  // (--hierarchical-allreduce: the launcher's cost model preferred it for
  // the placed workers) and the members' zones, from the emulated topology,
  // allow it (two or more zones of equal size); the flat ring otherwise.
  // Every member works it out from the same roster and links file, so all
  // choose alike; the collective's setup refuses members that did not.
  void ChooseAllreduce() {
    const comm::GroupZones z = comm::ZonesOfGroup(*group_);
    options_.zones = z.zone_of_rank;  // also counts the summary's bytes by link class
    options_.hierarchical = false;
    if (!want_hierarchical_) {
      allreduce_why_ = "flat ring";
      return;
    }
    const std::string why_not = z.zone_of_rank.empty() ? z.why_unknown : comm::WhyNotHierarchical(z.zone_of_rank);
    options_.hierarchical = why_not.empty();
    allreduce_why_ = options_.hierarchical ? "zone by zone (" + comm::DescribeZones(z.zone_of_rank) + ")"
                                           : "flat ring, " + why_not;
  }

  std::unique_ptr<comm::Group> owned_;
  ElasticExchangeOptions eo_;
  bool want_hierarchical_ = false;
  std::string allreduce_why_;
  bool joined_late_ = false, has_state_ = true, reform_needed_ = false, sync_needed_ = false, detached_ = false;
  // A first-generation member whose setup failed: its model is its own
  // initial one, maybe not rank 0's (Sync settles it).
  bool initial_unsettled_ = false;
  uint64_t failed_generation_ = 0;
  // This member's connections of each generation it formed (member id ->
  // peer), from the stable one on: Reform reuses the stable one's.
  std::map<uint64_t, std::map<uint32_t, net::PeerId>> formed_;
  void NoteFormed() {
    formed_[group_->generation()] = group_->ConnectionsById();
    eo_.membership->Formed(group_->generation());
  }
  mutable int64_t global_batch_ = 0;
  // Samples per rank of the current generation's steps (SliceOf, UpdateShares).
  mutable std::vector<int64_t> shares_;
  // This member's seconds per sample (forward and backward), smoothed over
  // steps; 0 until the first step is measured.
  static constexpr double kSpeedSmoothing = 0.05;
  static constexpr int kColdSteps = 5;  // not measured: a process's first steps
  int measured_steps_ = 0;
  double seconds_per_sample_ = 0;
  bool balanced_logged_ = false;
  int64_t steps_finished_ = 0;       // steps this process finished (the straggler model's step)
  std::set<uint32_t> slow_members_;  // rank 0: members reported slow and not yet recovered
  std::map<uint32_t, int> straggler_streak_;  // rank 0: steps in a row a member's state looked changed
  static constexpr int kStragglerSteps = 10;
  SteadyClock::time_point step_begin_;
  std::vector<torch::Tensor> params_;
  torch::optim::SGD* sgd_ = nullptr;
  net::MemoryRegion arena_;
  SteadyClock::time_point last_ok_, boundary_start_;
  std::optional<SteadyClock::time_point> detected_;
  std::vector<nlohmann::json> generations_;
  uint64_t state_hash_ = 0;
};

}  // namespace
}  // namespace train_internal

std::unique_ptr<GradientExchange> MakeElasticExchange(std::unique_ptr<comm::Group> group,
                                                      const ElasticExchangeOptions& options) {
  return std::make_unique<train_internal::ElasticExchange>(std::move(group), options);
}

}  // namespace tenax
