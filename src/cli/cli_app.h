// The command-line boundary shared by the `tenax` and `tenax-bench` programs:
// how a failed Status or a bad command line becomes one error line on stderr
// and an exit code. Exit codes: 2 for anything the user can fix (bad input,
// missing files, unwritable paths), 3 when another process or the network
// failed (a lost worker, a deadline), 130 when stopped by a signal, 1 for
// internal errors. Exceptions stop here.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tenax/core/status.h"

namespace tenax::cli {

// Prints "<program> <command>: error: <message>" and returns the exit code.
int ReportError(const std::string& command, const Status& status);

// Parses argv into `app` (whose subcommand callbacks store their exit code in
// `exit_code`) and returns the process's exit code: 0 for --help and
// --version, 2 with "<app> <subcommands>: error: ... (see '... --help')" for
// a bad command line, 1 for an exception that escaped a callback.
int RunApp(CLI::App& app, int argc, char** argv, const int& exit_code);

}  // namespace tenax::cli
