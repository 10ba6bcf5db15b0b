// The C++ half of tenax.torch.Manager (src/python/tenax/torch/elastic.py):
// one member of an elastic job from inside a user's PyTorch program. It
// joins the job's coordinator (tenax coordinator --job, cluster.elastic),
// forms each membership generation's group over one net::Node, and runs
// the operations of a step boundary, of the state transfer to members
// behind, and of the gradient allreduce, each as a job of a TenaxEngine
// (the Node's thread, which also keeps the connections alive between
// calls). docs/python.md "Elastic training" has the protocol as users see
// it; it mirrors the C++ elastic exchange (docs/elastic.md).
//
// Threading: every method may be called from any thread (Python's, with
// the GIL released) and waits for its job; one caller at a time.
// Failures: an operation that a new membership repairs (a lost or stuck
// member, a newer generation) throws MembershipChanged; the Manager then
// re-forms at the boundary. Anything else (a refused join, a coordinator
// gone past its deadline, bad input) throws std::runtime_error (Python's
// RuntimeError) or std::invalid_argument (ValueError). The allreduce never
// throws inside DDP's backward: its failure is kept for TakeStepError.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine.h"
#include "tenax/coord/coordinator_client.h"
#include "tenax/net/host_port.h"
#include "tenax/train/exchange/coordinator_membership.h"

namespace tenax::python {

struct MembershipChanged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ElasticMemberOptions {
  std::string coordinator;  // host:port
  std::string job_id;
  std::string secret;        // empty: TENAX_SECRET
  std::string host;          // advertised to the other members (empty: 127.0.0.1)
  std::string fingerprint;   // the state's schema: a joiner with another one is refused
  int requested_rank = -1;   // -1: a joiner, the coordinator picks its id
  // A warm spare: joins the coordinator and waits outside the group
  // (AwaitAdmission) until a loss or a leave frees a place; it then
  // enters as a joiner. Never part of a first generation.
  bool spare = false;
  std::chrono::milliseconds timeout{60000};         // every collective, the state transfer
  std::chrono::milliseconds join_timeout{120000};   // join and first roster
  std::chrono::milliseconds reform_timeout{60000};  // a boundary's wait for the next generation
};

class ElasticMember {
 public:
  enum Boundary { kContinue = 0, kReformed = 1, kLeft = 2 };
  enum Role { kNone = 0, kDonor = 1, kReceiver = 2 };

  explicit ElasticMember(ElasticMemberOptions options);  // joins; throws
  ~ElasticMember();

  struct View {
    int rank = -1, world = 0;
    uint64_t generation = 0;
    int member_id = -1;
    bool joined_late = false;  // admitted to a running job (it has no state yet)
    bool spare = false;        // waiting as a spare: not a member yet (rank -1)
    std::string why;           // the coordinator's reason for the generation ("all 3 workers joined", ...)
    std::vector<int> member_ids;  // the coordinator's ids of the generation's members, by rank
  };
  View view() const;
  std::string config_toml() const { return config_toml_; }
  // A spare's join and wait, one slice at a time (so that the caller,
  // Python, can run its signal handlers in between): kJoining while the
  // coordinator has not taken its join yet (nobody there: tried again),
  // kWaiting once it waits warm, kAdmitted once it is a member of the
  // current generation (view() has its rank; a member returns it at once),
  // kJobOver when the job had finished before it joined. Throws when the
  // coordinator refused it otherwise, failed the job, or could not be
  // reached for join_timeout.
  enum Admission { kJoining = 0, kWaiting = 1, kAdmitted = 2, kJobOver = 3 };
  Admission AwaitAdmission(std::chrono::milliseconds slice);

  // A step boundary: leaves when `leave` (a preemption notice), re-forms
  // when `failed` (the last step's collectives failed), when a member
  // leaves or joins, or when the members' agreement fails. kReformed: the
  // caller runs the state transfer next.
  Boundary StartStep(bool failed, bool leave);
  // The state transfer of a new generation: every member passes the steps
  // it applied (-1: it has no state); the members behind read the state of
  // one that has the most. Returns (that step count, this member's role).
  // A first-generation member passing -1 still holds its own initial
  // model: when no member has agreed state yet (the first generation's
  // rank 0 was lost before it gave its model), the lowest-ranked of those
  // gives its initial model to everyone (as the C++ workers' unsettled
  // models, docs/elastic.md).
  std::pair<int64_t, Role> AgreeState(int64_t applied);
  void OfferState(const std::string& bytes);  // a donor: its serialized state
  std::string FetchState();                   // a receiver: the donor's bytes, checksummed
  void CloseState();                          // every member, when the role was not kNone
  void Formed();                              // the generation formed and agreed
  // Sum of `tensor` (float32, contiguous, CPU) over the members, times
  // `scale`, in place; the Work never fails (see TakeStepError).
  c10::intrusive_ptr<c10d::Work> Allreduce(at::Tensor tensor, double scale);
  std::string TakeStepError();
  // Progress for the coordinator (and so `tenax run`'s live view and
  // fault plan): this member's steps applied, and what the script reported
  // (test_accuracy < 0: not evaluated). Sent without waiting for an answer.
  struct Progress {
    int64_t step = 0, total_steps = 0;
    double loss = 0, test_accuracy = -1, samples_per_second = 0, elapsed_seconds = 0, step_seconds = 0;
  };
  void ReportProgress(const Progress& p);
  // The end of training: a barrier, then the coordinator hears this
  // member is done (rank 0 passes the run's summary).
  void Finish(const std::string& summary_json);

 private:
  void Run(const std::string& what, TenaxEngine::Job job);  // throws as above
  Status Join(TenaxEngine& e);
  Status JoinCoordinator(net::Node& node, Deadline deadline);  // sends join_request_; sets client_, membership_
  // Forms this member's first group from `roster`: every pair afresh
  // (`all_new`, the job's first generation) or as a joiner.
  Status Enter(TenaxEngine& e, const wire::Roster& roster, bool all_new, Deadline deadline);
  Status Reform(TenaxEngine& e, Boundary& out);
  void ReportSuspects(TenaxEngine& e, const Status& why);
  void UpdateView(TenaxEngine& e, const std::string& why);

  ElasticMemberOptions options_;
  std::string config_toml_;
  std::unique_ptr<coord::CoordinatorClient> client_;   // engine thread only
  std::unique_ptr<CoordinatorMembership> membership_;  // engine thread only
  std::map<uint64_t, std::map<uint32_t, net::PeerId>> formed_;
  uint64_t failed_generation_ = 0;
  net::HostPort coordinator_;
  wire::JoinRequest join_request_;
  Deadline join_deadline_ = Deadline::After(std::chrono::milliseconds(0));
  std::optional<SteadyClock::time_point> unreachable_since_;  // a spare's coordinator (engine thread)
  bool initial_model_ = false;  // a first-generation member: it holds the script's initial model (engine thread)
  bool stop_before_first_agreement_ = false;  // the chaos test's seam (test_elastic.py)
  // The state transfer in progress (engine thread).
  std::vector<int> donors_, receivers_;
  int64_t top_ = 0;
  net::MemoryRegion arena_;
  mutable std::mutex mu_;
  View view_;  // under mu_
  std::unique_ptr<TenaxEngine> engine_;  // last: its thread stops first
};

}  // namespace tenax::python
