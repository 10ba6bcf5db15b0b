// Shared plumbing of the `tenax` subcommands: each Add*Command registers a
// CLI11 subcommand whose callback stores its exit code in `exit_code`.
// Errors are printed as one line "tenax <cmd>: error: <message>" and map to
// exit codes as cli_app.h says.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli_app.h"
#include "tenax/core/status.h"

namespace tenax::cli {

void AddTrainCommand(CLI::App& root, int& exit_code);
void AddEvalCommand(CLI::App& root, int& exit_code);
// Lists `bench` in --help; main() hands `tenax bench ...` to ExecBench.
void AddBenchCommand(CLI::App& root);
// Replaces this process with the tenax-bench program next to the tenax
// binary, passing argv[2..] as typed; returns 2 (after one error line naming
// the path) only if that program cannot be run.
int ExecBench(int argc, char** argv);
// The cluster roles: the local launcher, the coordinator and a worker.
void AddRunCommand(CLI::App& root, int& exit_code);
void AddCoordinatorCommand(CLI::App& root, int& exit_code);
void AddWorkerCommand(CLI::App& root, int& exit_code);
void AddServerCommand(CLI::App& root, int& exit_code);
// The erasure-coded dataset store (store/store_client.h).
void AddStoreCommand(CLI::App& root, int& exit_code);
// One data node of the store (store/storage_node.h).
void AddStorageCommand(CLI::App& root, int& exit_code);
// A network probe agent, or the coordinator's link matrix (sched/probe/probe_agent.h).
void AddProbeCommand(CLI::App& root, int& exit_code);
// The Kubernetes scheduler extender (sched/k8s/extender_server.h).
void AddSchedCommand(CLI::App& root, int& exit_code);
// The Kubernetes manifests of a job (sched/k8s/k8s_manifests.h).
void AddK8sCommand(CLI::App& root, int& exit_code);
// A run's self-contained HTML report (report/html_report.h).
void AddReportCommand(CLI::App& root, int& exit_code);

}  // namespace tenax::cli
