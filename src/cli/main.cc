// The `tenax` command. Exceptions stop here: everything below returns Status.
#include <cstdio>
#include <iostream>

#include "command.h"
#include "tenax/version.h"

namespace tenax::cli {

int ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "tenax %s: error: %s\n", command.c_str(), status.message().c_str());
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kCancelled:
      return 130;
    case StatusCode::kInternal:
      return 1;
    case StatusCode::kPeerLost:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnavailable:
      return 3;  // another process or the network failed
    default:
      return 2;
  }
}

}  // namespace tenax::cli

int main(int argc, char** argv) {
  CLI::App app{
      "tenax: train deep-learning models on cheap, unreliable machines.\n"
      "Run 'tenax <command> --help' for the options of a command.",
      "tenax"};
  app.set_version_flag("--version", std::string("tenax ") + tenax::kTenaxVersion);
  app.require_subcommand(1);
  int exit_code = 0;
  tenax::cli::AddTrainCommand(app, exit_code);
  tenax::cli::AddEvalCommand(app, exit_code);
  tenax::cli::AddRunCommand(app, exit_code);
  tenax::cli::AddCoordinatorCommand(app, exit_code);
  tenax::cli::AddWorkerCommand(app, exit_code);
  tenax::cli::AddBenchCommand(app, exit_code);
  // CLI11 would report a mistyped command as "A subcommand is required".
  bool known_command = false;
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
    known_command |= argc > 1 && sub->check_name(argv[1]);
  if (argc > 1 && argv[1][0] != '-' && !known_command) {
    std::fprintf(stderr, "tenax: error: unknown command '%s' (commands: train, eval, run, coordinator, worker, bench; see 'tenax --help')\n",
                 argv[1]);
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = "tenax";
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::fprintf(stderr, "%s: error: %s (see '%s --help')\n", where.c_str(), e.what(), where.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax: internal error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
