// The worker role (`tenax worker`): one rank of a synchronous job, over its
// whole life: read the job file, find its rank and the coordinator, join,
// wait for the roster, connect the group (rendezvous), train with TrainSync
// while reporting progress to the coordinator and heeding its failure
// verdict, then a barrier (a rank must not leave while others may still
// write to it) and Done. The coordinator's copy of the job is the one
// trained, so every rank runs the same configuration.
//
// Process-wide effects: a worker is a process. RunWorker sets up logging
// (named "worker-<rank>") and the SIGINT/SIGTERM stop handlers.
// Threading: everything runs on the calling thread, which drives the Node.
// Failure: a failed rank reports its failure to the coordinator (which
// tells every other rank and the launcher) and returns it, prefixed with
// its rank; a stop signal returns Cancelled. Free of libtorch.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/train/progress.h"

namespace tenax {

struct WorkerOptions {
  std::string job_path;                // mode = "sync"
  std::vector<std::string> overrides;  // "key=value", applied in order
  // host:port; "" = $TENAX_COORDINATOR, then cluster.coordinator.
  std::string coordinator;
  // The rank to ask for; -1 = Open MPI's $OMPI_COMM_WORLD_RANK (or
  // $PMIX_RANK) when started by mpirun, else any free rank. Under mpirun,
  // $OMPI_COMM_WORLD_SIZE must equal cluster.workers.
  int rank = -1;
  std::string out_dir;     // rank 0's outputs; "" = runs/<job_id>
  // Mode "sync" (not elastic): the zone of every rank (index = rank), as
  // `tenax run` placed them, for the summary's bytes by link class; with
  // hierarchical_allreduce, the gradients are summed zone by zone
  // (sched::ChooseAllreduce decided it in the launcher, once for all ranks).
  // Elastic jobs: only hierarchical_allreduce, for every worker and joiner;
  // each generation then sums zone by zone when its members' zones (from
  // the emulated topology) have equal sizes (comm/group_zones.h).
  std::vector<std::string> allreduce_zones;
  bool hierarchical_allreduce = false;
  // Elastic jobs: a warm spare (`tenax run`'s cluster.spares). It prepares
  // as any joiner, joins, and waits for the generation that admits it for
  // as long as the job runs (a joiner waits cluster.join_timeout); stopped
  // while it waits (SIGTERM: the job ended or no longer needs it) it exits
  // with `unused_spare` set.
  bool spare = false;
  ProgressFn on_progress;  // this rank's progress after every step; may be empty
  // Faults a chaos test injects into this worker (the seam of
  // tests/async_cluster_test.cc and elastic_cluster_test.cc). Only the
  // `tenax worker` command fills it, from its environment
  // ($TENAX_TEST_POISON_UNIT=N, $TENAX_TEST_SIGSTOP_AS_DONOR=1,
  // $TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE=1 or =first,
  // $TENAX_TEST_SIGSTOP_BEFORE_CONNECT=1); the library itself
  // reads no test variable.
  struct InjectedFaults {
    int64_t poison_unit = -1;       // async: the first attempt of this unit delivers a NaN
    bool sigstop_as_donor = false;  // elastic: SIGSTOP itself before offering its state to a joiner
    // elastic: SIGSTOP itself after re-forming its first new generation,
    // before offering its part of that generation's allreduce
    bool sigstop_before_allreduce = false;
    // elastic: the same in the first generation, before the initial
    // model's broadcast
    bool sigstop_before_first_allreduce = false;
    // elastic: SIGSTOP itself before it connects to the first
    // generation's members (a member lost while every pair connects)
    bool sigstop_before_connect = false;
  } injected;
};

struct WorkerOutcome {
  int rank = 0;
  int world = 0;
  std::string out_dir;  // where rank 0 wrote the outputs
  bool left = false;    // elastic: left the job on a stop signal (no outcome)
  bool unused_spare = false;  // a spare stopped before any generation admitted it
  TrainOutcome train;
};

// InvalidArgument for a bad job, rank or address; Refused when the
// coordinator turns the worker away; the training failure (PeerLost,
// DeadlineExceeded...) or Cancelled otherwise.
Result<WorkerOutcome> RunWorker(const WorkerOptions& options);

}  // namespace tenax
