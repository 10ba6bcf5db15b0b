// tenax worker --job FILE [--coordinator HOST:PORT] [--rank N] [--out DIR]
// One rank of a synchronous job; the role is roles/worker_role.h.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "command.h"
#include "progress_bar.h"
#include "tenax/roles/worker_role.h"

namespace tenax::cli {
namespace {

Status RunWorkerCommand(const WorkerOptions& options) {
  ProgressRenderer renderer(false);  // log lines: a worker's output goes to its log
  WorkerOptions o = options;
  // The chaos tests' fault injection (WorkerOptions::injected), read here
  // at the process boundary only.
  if (const char* v = std::getenv("TENAX_TEST_POISON_UNIT")) o.injected.poison_unit = std::atoll(v);
  if (const char* v = std::getenv("TENAX_TEST_SIGSTOP_AS_DONOR")) o.injected.sigstop_as_donor = std::string(v) == "1";
  if (const char* v = std::getenv("TENAX_TEST_SIGSTOP_BEFORE_CONNECT")) o.injected.sigstop_before_connect = std::string(v) == "1";
  if (const char* v = std::getenv("TENAX_TEST_SIGSTOP_BEFORE_ALLREDUCE")) {
    o.injected.sigstop_before_allreduce = std::string(v) == "1";
    o.injected.sigstop_before_first_allreduce = std::string(v) == "first";
  }
  o.on_progress = [&renderer](const TrainProgress& p) {
    if (p.log_point) renderer(p);
  };
  TENAX_ASSIGN_OR_RETURN(WorkerOutcome outcome, RunWorker(o));
  if (outcome.unused_spare) {
    std::printf("stopped while waiting as a spare: the job did not need it\n");
    return Status::Ok();
  }
  if (outcome.left) {
    std::printf("left the job at a step boundary; the other workers go on\n");
    return Status::Ok();
  }
  if (outcome.rank == 0) {
    std::printf("final test accuracy %.4f, %d workers, %.0f samples/s; outputs in %s\n",
                outcome.train.final_test_accuracy, outcome.world, outcome.train.samples_per_second,
                outcome.out_dir.c_str());
  }
  return Status::Ok();
}

}  // namespace

void AddWorkerCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<WorkerOptions>();
  CLI::App* cmd = root.add_subcommand("worker", "One rank of a synchronous job (started by 'tenax run' or mpirun)");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"sync\", \"async\" or \"coded\")")->required()->type_name("FILE");
  cmd->add_option("--coordinator", a->coordinator,
                  "Coordinator address (default: $TENAX_COORDINATOR, then cluster.coordinator)")
      ->type_name("HOST:PORT");
  cmd->add_option("--rank", a->rank, "Ask for this rank (default: $OMPI_COMM_WORLD_RANK, else any)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--out", a->out_dir, "Output directory of rank 0 (default: runs/<job_id>)")->type_name("DIR");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->add_option("--allreduce-zones", a->allreduce_zones,
                  "Zone of every rank, comma-separated in rank order (set by 'tenax run' from its placement): "
                  "the summary counts bytes by link class")
      ->delimiter(',')
      ->type_name("ZONE,...");
  cmd->add_flag("--hierarchical-allreduce", a->hierarchical_allreduce,
                "Sum the gradients zone by zone (every rank must be given the same; needs --allreduce-zones; "
                "elastic jobs: in every generation whose members' zones, from the emulated topology, have equal sizes)");
  cmd->add_flag("--spare", a->spare,
                "Elastic jobs: wait as a warm spare for as long as the job runs, until a generation admits this "
                "worker in a lost member's place (set by 'tenax run' for cluster.spares); SIGTERM while waiting exits 0");
  cmd->footer("Exit status: 0 done, 2 bad input or refused, 3 another rank or the network failed, 130 stopped.");
  cmd->callback([a, &exit_code] {
    Status st = RunWorkerCommand(*a);
    exit_code = st.ok() ? 0 : ReportError("worker", st);
  });
}

}  // namespace tenax::cli
