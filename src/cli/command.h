// Shared plumbing of the `tenax` subcommands: each Add*Command registers a
// CLI11 subcommand whose callback stores its exit code in `exit_code`.
// Errors are printed as one line "tenax <cmd>: error: <message>" and map to
// exit codes: 2 for anything the user can fix (bad input, missing files,
// unwritable paths), 3 when another process or the network failed (a lost
// worker, a deadline), 130 when stopped by a signal, 1 for internal errors.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tenax/core/status.h"

namespace tenax::cli {

int ReportError(const std::string& command, const Status& status);

void AddTrainCommand(CLI::App& root, int& exit_code);
void AddEvalCommand(CLI::App& root, int& exit_code);
void AddBenchCommand(CLI::App& root, int& exit_code);
// The cluster roles: the local launcher, the coordinator and a worker.
void AddRunCommand(CLI::App& root, int& exit_code);
void AddCoordinatorCommand(CLI::App& root, int& exit_code);
void AddWorkerCommand(CLI::App& root, int& exit_code);
// `bench transport` and its hidden receiver `bench transport-peer`.
void AddBenchTransportCommands(CLI::App& bench, int& exit_code);
// `bench train`: 2-worker sync training, tenax vs PyTorch DDP.
void AddBenchTrainCommand(CLI::App& bench, int& exit_code);
// `bench allreduce` and its hidden rank `bench allreduce-rank`.
void AddBenchAllreduceCommands(CLI::App& bench, int& exit_code);

}  // namespace tenax::cli
