#include "tenax/coding/coded_decoder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "tenax/coding/coded_codec.h"
#include "tenax/coding/coded_plan.h"
#include "tenax/coding/gradient_code.h"
#include "tenax/core/deadline.h"
#include "tenax/core/run_records.h"

namespace tenax::coding {
namespace {

using Clock = std::chrono::steady_clock;
double SecondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }


class CodedDecoderRole {
 public:
  CodedDecoderRole(comm::Group& group, std::vector<float> params, const DecoderOptions& o, GradientCode code)
      : group_(group),
        node_(group.node()),
        o_(o),
        n_(group.world() - 1),
        count_(params.size()),
        code_(std::move(code)),
        decoder_(code_),
        assignment_(n_),
        detector_(n_, o.coded.slow_factor),
        shuffle_(code_),
        initial_(std::move(params)),
        momentum_(count_, 0.0f),
        update_(count_, 0.0f),
        contributed_(static_cast<size_t>(n_), 0),
        steps_without_(static_cast<size_t>(n_), 0) {}

  Result<DecoderOutcome> Run();

 private:
  CodedModelHeader* header() { return reinterpret_cast<CodedModelHeader*>(model_.data()); }
  int32_t* rows() { return reinterpret_cast<int32_t*>(model_.data() + sizeof(CodedModelHeader)); }
  float* params() { return reinterpret_cast<float*>(model_.data() + sizeof(CodedModelHeader) + kCodedRowsBytes); }
  const float* slot(int worker) const {
    return reinterpret_cast<const float*>(slots_.data()) + static_cast<size_t>(worker) * count_;
  }
  int WorkerOf(net::PeerId peer) const {
    for (int w = 0; w < n_; ++w) {
      if (group_.peer(w) == peer) return w;
    }
    return -1;
  }

  Status Welcome();
  void Publish();
  Status Announce(bool done, const std::string& summary);
  // The decoding of this step's arrivals once the scheme's rule holds.
  std::optional<Decoding> Decide(Clock::time_point now);
  void Apply(const Decoding& d);
  void AfterStep(const Decoding& d);
  nlohmann::json Summary() const;
  double ModelAbsSum() const {
    double s = 0;
    const float* p = reinterpret_cast<const float*>(model_.data() + sizeof(CodedModelHeader) + kCodedRowsBytes);
    for (size_t i = 0; i < count_; ++i) s += std::abs(static_cast<double>(p[i]));
    return s;
  }
  void Event(nlohmann::json e) {
    if (o_.on_event) o_.on_event(e);
  }

  comm::Group& group_;
  net::Node& node_;
  const DecoderOptions& o_;
  const int n_;
  const size_t count_;
  GradientCode code_;
  coding::Decoder decoder_;
  CodeAssignment assignment_;
  StragglerDetector detector_;
  ShufflePolicy shuffle_;
  std::vector<float> initial_;
  net::MemoryRegion model_, slots_;
  std::vector<float> momentum_, update_;
  bool momentum_started_ = false;

  int64_t step_ = 0;
  std::map<int64_t, Clock::time_point> published_;  // recent steps' start times (late arrivals)
  std::vector<int> arrived_;                        // this step's, in arrival order
  std::optional<Clock::time_point> first_arrival_;
  std::vector<Clock::time_point> last_heard_;  // each worker's last result (or the start)
  // Running mean of the seconds from publishing a model to an exact
  // decoding: the deadline's base until the detector has seen arrivals.
  double typical_exact_seconds_ = 0;
  // Approximate decoding: coded.deadline x what a typical fast worker takes
  // (the detector's reference, the lower median of the workers' arrival
  // times) after the step's start, once something arrived. Not the time an
  // exact decoding takes: with more slow workers than s that is a slow
  // worker's time, and the deadline would never come before it.
  std::optional<Clock::time_point> ApproxDeadline() {
    if (o_.coded.decoding != "approx" || !first_arrival_) return std::nullopt;
    const double reference = detector_.ReferenceSeconds() > 0 ? detector_.ReferenceSeconds() : typical_exact_seconds_;
    if (reference <= 0) return std::nullopt;
    return published_[step_] + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o_.coded.deadline * reference));
  }

  // Statistics for summary.json.
  int64_t exact_steps_ = 0, approx_steps_ = 0, late_results_ = 0, shuffles_ = 0, partitions_moved_ = 0;
  double coverage_sum_ = 0, error_sum_ = 0, max_error_ = 0, wait_seconds_ = 0;
  std::vector<int64_t> contributed_;  // steps each partition contributed to
  std::vector<int64_t> steps_without_;  // steps decoded without each worker's result
  std::vector<double> gradient_l1_;     // ||decoded gradient||_1 of the first steps (checks against other runs)
  int64_t straggler_events_ = 0;
};

Status CodedDecoderRole::Welcome() {
  TENAX_ASSIGN_OR_RETURN(model_, node_.Allocate(CodedModelRegionBytes(count_)));
  TENAX_ASSIGN_OR_RETURN(slots_, node_.Allocate(count_ * sizeof(float) * static_cast<size_t>(n_)));
  std::memset(model_.data(), 0, model_.size());
  std::memset(slots_.data(), 0, slots_.size());
  CodedModelHeader h;
  h.param_count = count_;
  h.workers = static_cast<uint64_t>(n_);
  std::memcpy(model_.data(), &h, sizeof h);
  std::memcpy(params(), initial_.data(), count_ * sizeof(float));
  for (int w = 0; w < n_; ++w) rows()[w] = assignment_.row_of(w);
  const Deadline deadline = Deadline::After(std::chrono::seconds(30));
  for (int w = 0; w < n_; ++w) {
    TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor m, node_.Share(model_, group_.peer(w)));
    TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor s, node_.Share(slots_, group_.peer(w)));
    wire::CodedWelcome msg;
    msg.set_workers(static_cast<uint32_t>(n_));
    msg.set_param_count(count_);
    msg.set_model_address(m.address);
    msg.set_model_length(m.length);
    msg.set_model_rkey(m.rkey);
    msg.set_slots_address(s.address);
    msg.set_slots_length(s.length);
    msg.set_slots_rkey(s.rkey);
    msg.set_slot_offset(static_cast<uint64_t>(w) * count_ * sizeof(float));
    msg.set_scheme(o_.coded.scheme);
    TENAX_RETURN_IF_ERROR(node_.SendControl(group_.peer(w), kCodedWelcomeKind, msg.SerializeAsString(), deadline));
  }
  return Status::Ok();
}

void CodedDecoderRole::Publish() {
  // Seqlock: readers that see an odd or changed seq read again.
  std::atomic_ref<uint64_t> seq(header()->seq);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  for (int w = 0; w < n_; ++w) rows()[w] = assignment_.row_of(w);
  std::atomic_ref<int64_t>(header()->step).store(step_, std::memory_order_relaxed);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  published_[step_] = Clock::now();
  while (published_.size() > 4096) published_.erase(published_.begin());
}

Status CodedDecoderRole::Announce(bool done, const std::string& summary) {
  wire::CodedStep msg;
  msg.set_step(step_);
  msg.set_done(done);
  msg.set_summary_json(summary);
  const std::string bytes = msg.SerializeAsString();
  for (int w = 0; w < n_; ++w) {
    if (!node_.PeerStatus(group_.peer(w)).ok()) continue;  // a lost worker is done without
    Status st = node_.SendControl(group_.peer(w), kCodedStepKind, bytes, Deadline::After(std::chrono::seconds(5)));
    if (!st.ok()) spdlog::warn("decoder: step {} not announced to {}: {}", step_, group_.Describe(w), st.message());
  }
  return Status::Ok();
}

std::optional<Decoding> CodedDecoderRole::Decide(Clock::time_point now) {
  const int n = n_, s = static_cast<int>(o_.coded.stragglers);
  std::vector<int> arrived = arrived_;
  std::sort(arrived.begin(), arrived.end());
  auto by_rows = [&](const Decoding& rows_decoding) {
    // The code decodes rows; name the workers that computed them.
    Decoding d = rows_decoding;
    for (int& r : d.workers) r = assignment_.worker_of(r);
    return d;
  };
  std::vector<int> rows;
  for (int w : arrived) rows.push_back(assignment_.row_of(w));
  const std::string& scheme = o_.coded.scheme;
  if (scheme == "wait_all" || scheme == "ignore_stragglers") {
    const int need = scheme == "wait_all" ? n : n - s;
    if (static_cast<int>(arrived.size()) < need) return std::nullopt;
    // Uncoded: each arrival holds one partition; rescale to the full count.
    Decoding d;
    d.workers = arrived;
    d.coeffs.assign(arrived.size(), static_cast<double>(n) / static_cast<double>(arrived.size()));
    d.exact = static_cast<int>(arrived.size()) == n;
    d.error = std::sqrt(static_cast<double>(n - static_cast<int>(arrived.size())) / n);
    return d;
  }
  if (static_cast<int>(arrived.size()) >= n - s) {
    if (auto exact = decoder_.DecodeExact(rows); exact.ok()) return by_rows(*exact);
  }
  if (std::optional<Clock::time_point> deadline = ApproxDeadline(); deadline && now >= *deadline) {
    if (auto approx = decoder_.Decode(rows); approx.ok()) return by_rows(*approx);
  }
  return std::nullopt;
}

void CodedDecoderRole::Apply(const Decoding& d) {
  // g = sum_i a_i f_i; then SGD exactly as torch::optim::SGD (dampening 0):
  // d_p = g + wd * p; buf = momentum * buf + d_p (buf = d_p at first); p -= lr * buf.
  std::fill(update_.begin(), update_.end(), 0.0f);
  for (size_t k = 0; k < d.workers.size(); ++k) {
    const float a = static_cast<float>(d.coeffs[k]);
    if (a == 0.0f) continue;
    const float* f = slot(d.workers[k]);
    for (size_t i = 0; i < count_; ++i) update_[i] += a * f[i];
  }
  if (gradient_l1_.size() < 1000) {
    double l1 = 0;
    for (float g : update_) l1 += std::abs(static_cast<double>(g));
    gradient_l1_.push_back(l1);
  }
  float* p = params();
  const float lr = static_cast<float>(o_.lr), mu = static_cast<float>(o_.momentum),
              wd = static_cast<float>(o_.weight_decay);
  std::atomic_ref<uint64_t> seq(header()->seq);
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t i = 0; i < count_; ++i) {
    float g = update_[i];
    if (wd != 0.0f) g += wd * p[i];
    if (mu != 0.0f) {
      momentum_[i] = momentum_started_ ? mu * momentum_[i] + g : g;
      g = momentum_[i];
    }
    p[i] -= lr * g;
  }
  momentum_started_ = true;
  seq.store(seq.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void CodedDecoderRole::AfterStep(const Decoding& d) {
  const std::vector<double> weights = PartitionWeights(code_, assignment_, d.workers, d.coeffs);
  const double coverage = Coverage(weights);
  for (size_t j = 0; j < weights.size(); ++j) contributed_[j] += weights[j] >= 0.5 ? 1 : 0;
  coverage_sum_ += coverage;
  error_sum_ += d.error;
  max_error_ = std::max(max_error_, d.error);
  (d.exact ? exact_steps_ : approx_steps_) += 1;
  for (int w = 0; w < n_; ++w) {
    if (std::find(d.workers.begin(), d.workers.end(), w) == d.workers.end()) ++steps_without_[static_cast<size_t>(w)];
  }

  // Workers silent for longer than usual: their silence is an observation.
  const auto now = Clock::now();
  for (int w = 0; w < n_; ++w) detector_.ObserveSilence(w, SecondsBetween(last_heard_[static_cast<size_t>(w)], now));
  const std::vector<int> changed = detector_.Update();
  bool newly_slow = false;
  for (int w : changed) {
    ++straggler_events_;
    const bool slow = detector_.slow(w);
    newly_slow = newly_slow || slow;
    const double ratio = detector_.Ratio(w);
    spdlog::info("decoder: {} {} ({:.1f}x a typical worker's arrival time) at step {}", group_.Describe(w),
                 slow ? "is a straggler" : "is no longer a straggler", ratio, step_);
    records::Straggler e;
    e.slow = slow;
    e.worker = w;
    e.ratio = ratio;
    e.step = step_;
    Event(records::ToJson(e));
  }
  shuffle_.ObserveStep(assignment_, detector_.slow_workers());
  // Every shuffle_every steps, and at once when a worker became a straggler
  // (the detector feeds the shuffle).
  if (o_.coded.shuffle_every > 0 && (step_ % o_.coded.shuffle_every == 0 || newly_slow) &&
      step_ < o_.total_steps) {
    ShuffleResult next = shuffle_.Next(assignment_, detector_.slow_workers());
    if (next.rows != assignment_.rows()) {
      ++shuffles_;
      partitions_moved_ += next.partitions_moved;
      (void)assignment_.Set(next.rows);
      spdlog::debug("decoder: shuffle at step {}: {} partition copies moved", step_, next.partitions_moved);
      Event(records::ToJson(records::Shuffle{step_, next.rows, static_cast<int64_t>(next.partitions_moved),
                                             static_cast<int64_t>(next.partitions_moved * o_.partition_bytes)}));
    }
  }
}

nlohmann::json CodedDecoderRole::Summary() const {
  const double steps = static_cast<double>(std::max<int64_t>(step_, 1));
  double min_share = 1;
  for (int64_t c : contributed_) min_share = std::min(min_share, static_cast<double>(c) / steps);
  return {{"scheme", o_.coded.scheme},
          {"stragglers_tolerated", o_.coded.stragglers},
          {"decoding", o_.coded.decoding},
          {"decoded_steps", step_},
          {"exact_steps", exact_steps_},
          {"approx_steps", approx_steps_},
          {"coverage", coverage_sum_ / steps},
          {"min_partition_share", min_share},
          {"mean_decoding_error", error_sum_ / steps},
          {"max_decoding_error", max_error_},
          {"late_results", late_results_},
          {"decoder_wait_seconds", wait_seconds_},
          {"seconds_per_iteration", wait_seconds_ / steps},
          {"shuffles", shuffles_},
          {"shuffle_bytes_moved", partitions_moved_ * o_.partition_bytes},
          {"straggler_events", straggler_events_},
          {"steps_without_worker", steps_without_},
          {"gradient_l1", gradient_l1_},
          {"model_abs_sum", ModelAbsSum()}};
}

Result<DecoderOutcome> CodedDecoderRole::Run() {
  TENAX_RETURN_IF_ERROR(Welcome());
  spdlog::info("decoder: {} workers, scheme {} (s = {}, {} decoding), {} floats, {} steps", n_, o_.coded.scheme,
               o_.coded.stragglers, o_.coded.decoding, count_, o_.total_steps);
  Publish();
  TENAX_RETURN_IF_ERROR(Announce(step_ >= o_.total_steps, step_ >= o_.total_steps ? Summary().dump() : ""));
  auto step_started = Clock::now();
  const auto training_started = step_started;
  last_heard_.assign(static_cast<size_t>(n_), training_started);
  int64_t last_step = o_.total_steps;
  while (step_ < last_step) {
    const Clock::time_point now = Clock::now();
    if (std::optional<Decoding> d = Decide(now)) {
      Apply(*d);
      wait_seconds_ += SecondsBetween(step_started, now);
      if (d->exact) {
        const double took = SecondsBetween(published_[step_], now);
        typical_exact_seconds_ =
            typical_exact_seconds_ > 0 ? 0.8 * typical_exact_seconds_ + 0.2 * took : took;
      }
      ++step_;
      AfterStep(*d);
      arrived_.clear();
      first_arrival_.reset();
      Publish();
      if (o_.coded.max_seconds > 0 && SecondsBetween(training_started, Clock::now()) >= o_.coded.max_seconds &&
          step_ < last_step) {
        spdlog::info("decoder: coded.max_seconds ({:g} s) reached at step {}: the job ends here", o_.coded.max_seconds,
                     step_);
        last_step = step_;
      }
      const bool done = step_ >= last_step;
      TENAX_RETURN_IF_ERROR(Announce(done, done ? Summary().dump() : ""));
      if (o_.on_step) o_.on_step(step_);
      step_started = Clock::now();
      continue;
    }
    if (SecondsBetween(step_started, now) > std::chrono::duration<double>(o_.step_timeout).count()) {
      std::string missing;
      for (int w = 0; w < n_; ++w) {
        if (std::find(arrived_.begin(), arrived_.end(), w) == arrived_.end()) {
          missing += (missing.empty() ? "" : ", ") + group_.Describe(w);
        }
      }
      return DeadlineExceeded("decoder: step " + std::to_string(step_) + " could not be decoded within the step timeout (" +
                              o_.coded.scheme + "); no result from " + missing);
    }
    // Wait for the next result, or until the approximate deadline or the
    // step timeout, whichever comes first.
    auto until = step_started + std::chrono::duration_cast<Clock::duration>(o_.step_timeout);
    if (std::optional<Clock::time_point> deadline = ApproxDeadline()) {
      until = std::min(until, *deadline + std::chrono::microseconds(1));
    }
    auto msg = ReceivePatiently(node_, kCodedReadyKind, Deadline::At(until));
    if (!msg.ok()) {
      if (msg.status().code() == StatusCode::kDeadlineExceeded) continue;
      // A lost worker: its messages end; the scheme decides whether we can go on.
      spdlog::warn("decoder: {}", msg.status().message());
      continue;
    }
    const int w = WorkerOf(msg->from);
    if (w < 0) {
      spdlog::warn("decoder: a result notice from a peer that is not a worker of this job; ignored");
      continue;
    }
    auto ready = DecodeCodedReady(msg->payload, group_.Describe(w));
    if (!ready.ok()) {
      spdlog::warn("decoder: {}; ignored", ready.status().message());
      continue;
    }
    const auto arrival = Clock::now();
    last_heard_[static_cast<size_t>(w)] = arrival;
    spdlog::debug("decoder: {} step {} arrived at step {} (compute {:.1f} ms)", group_.Describe(w), ready->step(), step_,
                  ready->compute_seconds() * 1e3);
    if (auto it = published_.find(ready->step()); it != published_.end()) {
      detector_.Observe(w, SecondsBetween(it->second, arrival));
    }
    if (ready->step() == step_) {
      if (std::find(arrived_.begin(), arrived_.end(), w) == arrived_.end()) {
        arrived_.push_back(w);
        if (!first_arrival_) first_arrival_ = arrival;
      }
    } else if (ready->step() < step_) {
      ++late_results_;  // not used: the step was decoded without it
    } else {
      spdlog::warn("decoder: {} announced step {} before it was published (now {}); ignored", group_.Describe(w),
                   ready->step(), step_);
    }
  }
  DecoderOutcome out;
  out.summary = Summary();
  out.params.assign(params(), params() + count_);
  spdlog::info("decoder: done after {} steps ({} exact, {} approximate, coverage {:.3f}, {} late results)", step_,
               exact_steps_, approx_steps_, out.summary["coverage"].get<double>(), late_results_);
  return out;
}

}  // namespace

Result<net::ControlMessage> ReceivePatiently(net::Node& node, uint32_t kind, Deadline deadline,
                                             std::optional<net::PeerId> from) {
  constexpr uint32_t kSpinsBeforeYield = 2048, kSpinsBeforeSleep = 4096;
  for (uint32_t spins = 1;; ++spins) {
    node.Progress();
    auto m = node.ReceiveControl(Deadline::After(std::chrono::nanoseconds(0)), from, kind);
    if (m.ok() || m.status().code() != StatusCode::kDeadlineExceeded) return m;
    if (deadline.Expired()) return DeadlineExceeded("no message before the deadline");
    if (spins > kSpinsBeforeSleep) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else if (spins > kSpinsBeforeYield) {
      std::this_thread::yield();
    }
  }
}

Result<DecoderOutcome> RunDecoder(comm::Group& group, std::vector<float> initial_params, const DecoderOptions& options) {
  const int n = group.world() - 1;
  if (n < 1 || group.rank() != n) {
    return InvalidArgument("the decoder must be the last rank of a group of workers + 1 (rank " +
                           std::to_string(group.rank()) + " of " + std::to_string(group.world()) + ")");
  }
  if (initial_params.empty()) return InvalidArgument("the decoder needs the initial model");
  TENAX_ASSIGN_OR_RETURN(GradientCode code, CodeOfScheme(options.coded, n, options.code_seed));
  CodedDecoderRole d(group, std::move(initial_params), options, std::move(code));
  return d.Run();
}

}  // namespace tenax::coding
