// tenax coordinator --job FILE --state DB [--port N] [--port-file F]
//                   [--metrics-listen H:P [--metrics-port-file F]] [--set k=v]
// The role is roles/coordinator_role.h.
#include "command.h"
#include "tenax/roles/coordinator_role.h"

namespace tenax::cli {

void AddCoordinatorCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<CoordinatorRoleOptions>();
  CLI::App* cmd =
      root.add_subcommand("coordinator", "Serve one job's membership, ranks and rendezvous (state in SQLite)");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"sync\", \"async\" or \"coded\")")->required()->type_name("FILE");
  cmd->add_option("--state", a->state_path,
                  "SQLite state file; a restart with the same file resumes the job "
                  "(default: <job_id>.coordinator.db)")
      ->type_name("FILE");
  cmd->add_option("--port", a->port, "Listen port (default: from cluster.coordinator; 0 = any)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--port-file", a->port_file, "Write the bound port here once listening")->type_name("FILE");
  cmd->add_option("--metrics-listen", a->metrics_listen,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics (port 0 = any free port; "
                  "docs/metrics.md)")
      ->type_name("HOST:PORT");
  cmd->add_option("--metrics-port-file", a->metrics_port_file, "Write the metrics port here once listening")
      ->type_name("FILE");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer("Exit status: 0 job finished, 2 bad input, 3 a worker failed or a deadline passed, 130 stopped.");
  cmd->callback([a, &exit_code] {
    Status st = RunCoordinatorRole(*a);
    exit_code = st.ok() ? 0 : ReportError("coordinator", st);
  });
}

}  // namespace tenax::cli
