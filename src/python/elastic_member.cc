#include "elastic_member.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "tenax/comm/channel_codec.h"
#include "tenax/net/auth.h"
#include "tenax/net/control_codec.h"
#include "tenax/net/host_port.h"

namespace tenax::python {
namespace {

// No state a member offers is larger (a bound on what a peer can make us allocate).
constexpr uint64_t kMaxStateBytes = uint64_t{1} << 40;

}  // namespace

ElasticMember::ElasticMember(ElasticMemberOptions options) : options_(std::move(options)) {
  engine_ = std::make_unique<TenaxEngine>([this](TenaxEngine& e) { return Join(e); },
                                          "joining elastic job '" + options_.job_id + "' at " + options_.coordinator,
                                          options_.timeout);
}

ElasticMember::~ElasticMember() {
  if (!engine_) return;
  // The coordinator connection goes before the Node it uses.
  (void)engine_->RunAndWait("close", [this](TenaxEngine&) {
    arena_ = net::MemoryRegion();
    membership_.reset();
    client_.reset();
    return Status();
  });
  engine_.reset();
}

Status ElasticMember::Join(TenaxEngine& e) {
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(options_.coordinator));
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(options_.secret));
  const std::string host = options_.host.empty() ? "127.0.0.1" : options_.host;
  net::NodeOptions no;
  no.name = "python member@" + host + "/" + std::to_string(::getpid());
  no.secret = secret;
  if (const char* t = std::getenv("TENAX_TRANSPORTS")) no.transports = t;
  if (const char* t = std::getenv("TENAX_TCP_STREAMS")) no.tcp_streams = std::atoi(t);  // Node::Create checks it
  TENAX_ASSIGN_OR_RETURN(auto node, net::Node::Create(no));
  TENAX_ASSIGN_OR_RETURN(uint16_t port, node->Listen(host, 0));
  e.SetNode(std::move(node));

  join_deadline_ = Deadline::After(options_.join_timeout);
  coordinator_ = hp;
  join_request_.set_job_id(options_.job_id);
  join_request_.set_name(host + "/" + std::to_string(::getpid()));
  join_request_.set_host(host);
  join_request_.set_port(port);
  join_request_.set_requested_rank(options_.requested_rank);
  join_request_.set_pid(static_cast<uint64_t>(::getpid()));
  join_request_.set_plan_fingerprint(options_.fingerprint);
  join_request_.set_spare(options_.spare);
  if (options_.spare) {
    // A spare joins and waits in AwaitAdmission's slices, so that its
    // caller can stop it at any time (a SIGTERM), even while the
    // coordinator is not there.
    std::lock_guard<std::mutex> lock(mu_);
    view_.spare = true;
    return Status();
  }
  TENAX_RETURN_IF_ERROR(JoinCoordinator(e.node(), join_deadline_));
  TENAX_ASSIGN_OR_RETURN(wire::Roster roster, client_->WaitRoster(join_deadline_));
  // The first generation connects every pair; a joiner of a running job
  // dials the members, stops waiting once a newer generation is out, and
  // then joins that one (worker_role.cc does the same).
  return Enter(e, roster, client_->info().generation == 0, join_deadline_);
}

Status ElasticMember::JoinCoordinator(net::Node& node, Deadline deadline) {
  TENAX_ASSIGN_OR_RETURN(client_,
                         coord::CoordinatorClient::Join(node, coordinator_.host, coordinator_.port, join_request_, deadline));
  config_toml_ = client_->info().config_toml;
  const int member_id = client_->info().rank;
  membership_ = std::make_unique<CoordinatorMembership>(*client_, options_.job_id, member_id);
  std::lock_guard<std::mutex> lock(mu_);
  view_.member_id = member_id;
  return Status();
}

ElasticMember::Admission ElasticMember::AwaitAdmission(std::chrono::milliseconds slice) {
  Admission out = kWaiting;
  Run("waiting as a spare", [&](TenaxEngine& e) -> Status {
    if (!view().spare) {
      out = kAdmitted;  // a member already
      return Status();
    }
    if (!client_) {
      if (join_deadline_.Expired()) {
        return DeadlineExceeded("this spare could not join the coordinator " + options_.coordinator + " within " +
                                std::to_string(options_.join_timeout.count() / 1000) + " s");
      }
      // One attempt of at most a few seconds (nobody there: it is tried again at the next slice).
      Status st = JoinCoordinator(
          e.node(), Deadline::After(std::max(slice, std::chrono::milliseconds(2000))).Earlier(join_deadline_));
      if (st.code() == StatusCode::kDeadlineExceeded || st.code() == StatusCode::kUnavailable) {
        out = kJoining;
        return Status();
      }
      // The job ended before this spare came: it was not needed (the
      // coordinator's refusal, JobStateMachine::OnJoin).
      if (st.code() == StatusCode::kRefused && st.message().find(coord::kJobFinishedRefusal) != std::string::npos) {
        out = kJobOver;
        return Status();
      }
      return st;
    }
    // The coordinator may restart (a spare waits for as long as the job
    // runs), but one gone for join_timeout is taken for the job's end.
    if (client_->Connected()) {
      unreachable_since_.reset();
    } else if (!unreachable_since_) {
      unreachable_since_ = SteadyClock::now();
    } else if (SteadyClock::now() - *unreachable_since_ > options_.join_timeout) {
      return PeerLost("the coordinator " + options_.coordinator + " was unreachable for " +
                      std::to_string(options_.join_timeout.count() / 1000) + " s while this spare waited");
    }
    // One look every kSpareLookEvery, asleep in between. Not one blocking
    // WaitRoster per slice: the Node spins through the first 50 ms of a
    // wait (NodeOptions::sleep_when_idle), and each slice, after the trip
    // back to Python, starts a new wait: a waiting spare took 17-29% of a
    // core from the members beside it. This way about 1%, and an admission
    // is seen at most kSpareLookEvery late.
    constexpr auto kSpareLookEvery = std::chrono::milliseconds(5);
    const Deadline end = Deadline::After(slice);
    Result<wire::Roster> roster = DeadlineExceeded("");
    for (;;) {
      e.node().Progress();  // what arrived; a look with a past deadline does not drive the Node
      roster = client_->WaitRoster(Deadline::At(SteadyClock::now()));  // a look, not a wait
      if (roster.ok() || roster.status().code() != StatusCode::kDeadlineExceeded || end.Expired()) break;
      std::this_thread::sleep_for(kSpareLookEvery);  // pacing the looks, not synchronisation
    }
    if (!roster.ok()) return roster.status().code() == StatusCode::kDeadlineExceeded ? Status() : roster.status();
    // Admitted, with the usual join time from now: into a running job (even
    // one that had not formed when it came), or, in the place of a member
    // lost before the job formed, into the job's first generation
    // (generation 1), where it enters with its initial model as the others
    // do (worker_role.cc decides the same, and says why not "no stable
    // generation yet").
    TENAX_RETURN_IF_ERROR(Enter(e, *roster, roster->generation() == 1, Deadline::After(options_.join_timeout)));
    out = kAdmitted;
    return Status();
  });
  return out;
}

Status ElasticMember::Enter(TenaxEngine& e, const wire::Roster& roster, bool all_new, Deadline deadline) {
  net::Node& n = e.node();
  const int member_id = client_->info().rank;
  TENAX_ASSIGN_OR_RETURN(MembershipView view, ViewOf(roster, member_id, false));
  initial_model_ = all_new;
  // The chaos test's seams (test_elastic.py), read at this process
  // boundary: a member lost while the first generation connects, or once
  // it connected and before it gave its initial model.
  const char* stop_at = std::getenv("TENAX_TEST_SIGSTOP");
  stop_before_first_agreement_ = all_new && stop_at && std::string(stop_at) == "before-first-agreement";
  if (const char* v = stop_at; all_new && v && std::string(v) == "before-connect") {
    std::fprintf(stderr, "tenax: injected fault: stopping this member (SIGSTOP) before it connects to generation %llu\n",
                 static_cast<unsigned long long>(view.generation));
    ::raise(SIGSTOP);
  }
  auto group = all_new ? comm::Group::Connect(n, options_.job_id, view.generation, view.rank, view.members, deadline,
                                              SupersededInterrupt(*membership_, view.generation))
                       : comm::Group::Join(n, options_.job_id, view.generation, view.rank, view.members, deadline,
                                           SupersededInterrupt(*membership_, view.generation));
  // A first generation that lost a member while it connected costs only
  // that member: nobody holds state yet (it moves at the first start_step),
  // so the others form the next generation, every pair afresh, as a
  // joiner whose generation was superseded does.
  const bool repairable_first = all_new && !group.ok() &&
                                (RepairedByNewMembership(group.status()) ||
                                 group.status().code() == StatusCode::kUnavailable);
  if (repairable_first) {
    std::fprintf(stderr, "tenax: rank %d: connecting the members of generation %llu failed (%s); joining the next one\n",
                 view.rank, static_cast<unsigned long long>(view.generation), group.status().message().c_str());
  }
  while ((!all_new || repairable_first) && !group.ok() && !deadline.Expired()) {
    auto next = membership_->Next(view.generation, Deadline::After(std::chrono::seconds(10)).Earlier(deadline));
    if (!next.ok()) break;
    view = std::move(*next);
    group = comm::Group::Join(n, options_.job_id, view.generation, view.rank, view.members, deadline,
                              SupersededInterrupt(*membership_, view.generation));
  }
  if (!group.ok()) {
    if (all_new) client_->ReportFailure(group.status().message());
    return group.status();
  }
  e.SetGroup(std::move(*group));
  {
    std::lock_guard<std::mutex> lock(mu_);
    view_.joined_late = !all_new;
    view_.spare = false;
  }
  UpdateView(e, !view.why.empty() ? view.why
                : all_new        ? "first generation"
                                 : "joined a running job");
  return Status();
}

void ElasticMember::UpdateView(TenaxEngine& e, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  view_.rank = e.group().rank();
  view_.world = e.group().world();
  view_.generation = e.group().generation();
  view_.why = why;
  view_.member_ids.clear();
  for (const comm::GroupMember& m : e.group().members()) view_.member_ids.push_back(static_cast<int>(m.id));
}

ElasticMember::View ElasticMember::view() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

void ElasticMember::Run(const std::string& what, TenaxEngine::Job job) {
  const Status st = engine_->RunAndWait(what, std::move(job));
  if (st.ok()) return;
  if (RepairedByNewMembership(st)) throw MembershipChanged(st.message());
  if (st.code() == StatusCode::kInvalidArgument) throw std::invalid_argument(st.message());
  throw std::runtime_error(st.message());
}

void ElasticMember::ReportSuspects(TenaxEngine& e, const Status& why) {
  comm::Group& g = e.group();
  for (int r = 0; r < g.world(); ++r) {
    if (r == g.rank()) continue;
    if (!e.node().PeerStatus(g.peer(r)).ok()) {
      membership_->ReportSuspect(g.members()[static_cast<size_t>(r)].id, why.message());
    }
  }
}

ElasticMember::Boundary ElasticMember::StartStep(bool failed, bool leave) {
  Boundary out = kContinue;
  Run("a step boundary", [&](TenaxEngine& e) -> Status {
    if (leave && !membership_->leaving()) membership_->Leave("stopped by a preemption notice (SIGTERM)");
    bool change = failed;
    if (failed) {
      ReportSuspects(e, PeerLost("the step's allreduce failed"));
    } else {
      // Every member passes the same flag sum: all re-form, or none.
      float flag = membership_->leaving() || membership_->NewerPublished(e.group().generation()) ? 1.0f : 0.0f;
      if (Status st = e.FastSum(&flag, 1, 1.0f); !st.ok()) {
        if (!RepairedByNewMembership(st)) return st;
        ReportSuspects(e, st);
        change = true;
      } else {
        change = flag > 0.0f;
      }
    }
    if (!change) return Status();
    return Reform(e, out);
  });
  return out;
}

Status ElasticMember::Reform(TenaxEngine& e, Boundary& out) {
  const Deadline deadline = Deadline::After(options_.reform_timeout);
  for (;;) {
    auto view = membership_->Next(std::max(e.group().generation(), failed_generation_), deadline);
    if (!view.ok()) {
      if (view.status().code() == StatusCode::kCancelled && membership_->leaving()) {
        out = kLeft;
        return Status();
      }
      return view.status();
    }
    // Connections are reused from the stable generation (the newest one
    // every member formed), as in the C++ elastic exchange.
    auto known = formed_.find(view->stable_generation);
    std::unique_ptr<comm::Group> old = e.TakeGroup();
    auto g = comm::Group::Reform(*old, known == formed_.end() ? std::map<uint32_t, net::PeerId>{} : known->second,
                                 options_.job_id, view->generation, view->rank, view->members, deadline,
                                 SupersededInterrupt(*membership_, view->generation));
    formed_.erase(formed_.begin(), formed_.lower_bound(view->stable_generation));
    if (!g.ok()) {
      e.SetGroup(std::move(old));
      if (!RepairedByNewMembership(g.status())) return g.status();
      failed_generation_ = view->generation;
      continue;
    }
    e.SetGroup(std::move(*g));
    old.reset();
    UpdateView(e, view->why);
    out = kReformed;
    return Status();
  }
}

std::pair<int64_t, ElasticMember::Role> ElasticMember::AgreeState(int64_t applied) {
  Role role = kNone;
  Run("the state agreement", [&](TenaxEngine& e) -> Status {
    if (std::exchange(stop_before_first_agreement_, false)) {
      std::fprintf(stderr, "tenax: injected fault: stopping this member (SIGSTOP) before its first state agreement\n");
      ::raise(SIGSTOP);
    }
    const int w = e.group().world(), me = e.group().rank();
    // Each member claims 2 x (steps applied + 1), 1 for an initial model
    // of its own (unsettled), 0 for nothing; the highest claim gives the
    // state (exact in float32 below 2^23 steps).
    std::vector<float> counts(static_cast<size_t>(w), 0.0f);
    counts[static_cast<size_t>(me)] = applied >= 0 ? 2.0f * static_cast<float>(applied + 1) : initial_model_ ? 1.0f : 0.0f;
    TENAX_RETURN_IF_ERROR(e.FastSum(counts.data(), counts.size(), 1.0f));
    int64_t top = 0;
    std::vector<int64_t> c(static_cast<size_t>(w));
    for (int r = 0; r < w; ++r) top = std::max(top, c[static_cast<size_t>(r)] = std::llround(counts[static_cast<size_t>(r)]));
    if (top == 0) {
      return FailedPrecondition("no member of generation " + std::to_string(e.group().generation()) +
                                " holds the state");
    }
    donors_.clear();
    receivers_.clear();
    if (top == 1) {
      // Only unsettled initial models: the lowest rank's becomes everyone's.
      const int donor = static_cast<int>(std::find(c.begin(), c.end(), 1) - c.begin());
      for (int r = 0; r < w; ++r) (r == donor ? donors_ : receivers_).push_back(r);
    } else {
      for (int r = 0; r < w; ++r) (c[static_cast<size_t>(r)] == top ? donors_ : receivers_).push_back(r);
    }
    top_ = top == 1 ? 0 : top / 2 - 1;
    if (!receivers_.empty()) role = std::count(donors_.begin(), donors_.end(), me) > 0 ? kDonor : kReceiver;
    return Status();
  });
  return {top_, role};
}

void ElasticMember::OfferState(const std::string& bytes) {
  Run("offering the state", [&](TenaxEngine& e) -> Status {
    comm::Group& g = e.group();
    // Framed as [u64 length][bytes][zeros to a multiple of 4]: state offers
    // carry whole 4-byte words (comm::DecodeStateOffer).
    const uint64_t length = bytes.size();
    const size_t framed = (sizeof(length) + bytes.size() + 3) / 4 * 4;
    if (arena_.size() < framed || !arena_.data()) {
      arena_ = net::MemoryRegion();
      TENAX_ASSIGN_OR_RETURN(arena_, e.node().Allocate(framed));
    }
    std::memcpy(arena_.data(), &length, sizeof(length));
    std::memcpy(arena_.data() + sizeof(length), bytes.data(), bytes.size());
    std::memset(arena_.data() + sizeof(length) + bytes.size(), 0, framed - sizeof(length) - bytes.size());
    const uint64_t sum = StateChecksum(arena_.data(), framed);
    for (size_t i = 0; i < receivers_.size(); ++i) {
      if (donors_[i % donors_.size()] != g.rank()) continue;
      const net::PeerId peer = g.peer(receivers_[i]);
      TENAX_ASSIGN_OR_RETURN(net::RegionDescriptor d, e.node().Share(arena_, peer));
      wire::StateOffer offer;
      offer.set_generation(g.generation());
      offer.set_applied_steps(top_);
      offer.set_bytes(framed);
      offer.set_checksum(sum);
      offer.set_region(net::EncodeRegion(d.address, d.length, d.rkey));
      TENAX_RETURN_IF_ERROR(e.node().SendControl(peer, comm::kStateOfferKind, offer.SerializeAsString(), e.OpDeadline()));
    }
    return Status();
  });
}

std::string ElasticMember::FetchState() {
  std::string out;
  Run("reading the state", [&](TenaxEngine& e) -> Status {
    comm::Group& g = e.group();
    const size_t index =
        static_cast<size_t>(std::find(receivers_.begin(), receivers_.end(), g.rank()) - receivers_.begin());
    const int donor = donors_[index % donors_.size()];
    const net::PeerId peer = g.peer(donor);
    const Deadline deadline = e.OpDeadline();
    wire::StateOffer offer;
    do {  // offers of an older generation (a superseded re-form) are dropped
      auto msg = e.node().ReceiveControl(deadline, peer, comm::kStateOfferKind);
      if (!msg.ok()) {
        return Status(msg.status().code(), "no state from donor " + g.Describe(donor) + ": " + msg.status().message());
      }
      TENAX_ASSIGN_OR_RETURN(offer, comm::DecodeStateOffer(msg->payload, g.Describe(donor)));
    } while (offer.generation() < g.generation());
    if (offer.applied_steps() != top_ || offer.bytes() > kMaxStateBytes) {
      return ProtocolError("donor " + g.Describe(donor) + " offers " + std::to_string(offer.bytes()) +
                           " bytes of step " + std::to_string(offer.applied_steps()) + ", the members agreed on step " +
                           std::to_string(top_));
    }
    TENAX_ASSIGN_OR_RETURN(net::DecodedRegion d, net::DecodeRegion(offer.region(), g.Describe(donor)));
    if (d.length < offer.bytes()) return ProtocolError("donor " + g.Describe(donor) + " shares fewer bytes than it offers");
    TENAX_ASSIGN_OR_RETURN(net::RemoteRegion remote, e.node().Import(peer, net::RegionDescriptor{d.address, d.length, d.rkey}));
    if (arena_.size() < offer.bytes() || !arena_.data()) {
      arena_ = net::MemoryRegion();
      TENAX_ASSIGN_OR_RETURN(arena_, e.node().Allocate(std::max<size_t>(offer.bytes(), 1)));
    }
    net::Op op = e.node().Get(arena_.data(), offer.bytes(), remote, 0);
    TENAX_RETURN_IF_ERROR(e.node().Wait(op, deadline));
    const uint64_t sum = StateChecksum(arena_.data(), offer.bytes());
    if (sum != offer.checksum()) {
      return DataLoss("state read from donor " + g.Describe(donor) + " has checksum " + std::to_string(sum) +
                      ", the donor's is " + std::to_string(offer.checksum()));
    }
    uint64_t length = 0;
    if (offer.bytes() >= sizeof(length)) std::memcpy(&length, arena_.data(), sizeof(length));
    if (offer.bytes() < sizeof(length) || length > offer.bytes() - sizeof(length)) {
      return ProtocolError("donor " + g.Describe(donor) + "'s state frame says " + std::to_string(length) +
                           " bytes in " + std::to_string(offer.bytes()));
    }
    out.assign(reinterpret_cast<const char*>(arena_.data()) + sizeof(length), length);
    return Status();
  });
  return out;
}

void ElasticMember::CloseState() {
  // After it, donors may reuse their arenas.
  Run("closing the state transfer", [](TenaxEngine& e) -> Status {
    float zero = 0.0f;
    return e.FastSum(&zero, 1, 1.0f);
  });
}

void ElasticMember::Formed() {
  Run("noting the generation formed", [this](TenaxEngine& e) -> Status {
    formed_[e.group().generation()] = e.group().ConnectionsById();
    membership_->Formed(e.group().generation());
    return Status();
  });
}

c10::intrusive_ptr<c10d::Work> ElasticMember::Allreduce(at::Tensor tensor, double scale) {
  if (tensor.device().type() != c10::DeviceType::CPU) {
    throw std::invalid_argument("tenax.torch.Manager.allreduce: a " + tensor.device().str() +
                                " tensor; this build of tenax is CPU-only");
  }
  if (tensor.scalar_type() != at::kFloat || !tensor.is_contiguous()) {
    throw std::invalid_argument("tenax.torch.Manager.allreduce takes contiguous float32 tensors (got " +
                                std::string(c10::toString(tensor.scalar_type())) +
                                (tensor.is_contiguous() ? "" : ", not contiguous") + ")");
  }
  const float s = static_cast<float>(scale);
  return engine_->Submit(
      c10d::OpType::ALLREDUCE, "the step's allreduce", {tensor},
      [tensor, s](TenaxEngine& e) { return e.FastSum(tensor.data_ptr<float>(), static_cast<size_t>(tensor.numel()), s); },
      /*tolerant=*/true);
}

std::string ElasticMember::TakeStepError() {
  const Status st = engine_->TakeTolerated();
  return st.ok() ? std::string() : st.message();
}

void ElasticMember::ReportProgress(const Progress& p) {
  Run("reporting progress", [this, p](TenaxEngine& e) -> Status {
    wire::Progress w;
    w.set_rank(static_cast<uint32_t>(e.rank()));
    w.set_step(p.step);
    w.set_total_steps(p.total_steps);
    w.set_epoch(1);
    w.set_epochs(1);
    w.set_steps_per_epoch(p.total_steps);
    w.set_loss(p.loss);
    w.set_test_accuracy(p.test_accuracy);
    w.set_samples_per_second(p.samples_per_second);
    w.set_elapsed_seconds(p.elapsed_seconds);
    w.set_step_seconds(p.step_seconds);
    client_->ReportProgress(w);
    return Status();
  });
}

void ElasticMember::Finish(const std::string& summary_json) {
  Run("finishing", [&](TenaxEngine& e) -> Status {
    float zero = 0.0f;  // nobody reports done while others may still address it
    TENAX_RETURN_IF_ERROR(e.FastSum(&zero, 1, 1.0f));
    return client_->ReportDone(summary_json, Deadline::After(std::chrono::seconds(30)));
  });
}

}  // namespace tenax::python
