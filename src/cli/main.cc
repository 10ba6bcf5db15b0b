// The `tenax` command. Exceptions stop here: everything below returns Status.
#include <cstdio>
#include <string_view>

#include "command.h"
#include "tenax/version.h"

int main(int argc, char** argv) {
  // `tenax bench ...` is the separate tenax-bench program: it gets the words as typed.
  if (argc > 1 && std::string_view(argv[1]) == "bench") return tenax::cli::ExecBench(argc, argv);
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
  tenax::cli::AddServerCommand(app, exit_code);
  tenax::cli::AddStoreCommand(app, exit_code);
  tenax::cli::AddStorageCommand(app, exit_code);
  tenax::cli::AddProbeCommand(app, exit_code);
  tenax::cli::AddSchedCommand(app, exit_code);
  tenax::cli::AddK8sCommand(app, exit_code);
  tenax::cli::AddReportCommand(app, exit_code);
  tenax::cli::AddBenchCommand(app);
  // CLI11 would report a mistyped command as "A subcommand is required".
  bool known_command = false;
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
    known_command |= argc > 1 && sub->check_name(argv[1]);
  if (argc > 1 && argv[1][0] != '-' && !known_command) {
    std::fprintf(stderr, "tenax: error: unknown command '%s' (commands: train, eval, run, coordinator, worker, server, store, storage, probe, sched, k8s, report, bench; see 'tenax --help')\n",
                 argv[1]);
    return 2;
  }
  return tenax::cli::RunApp(app, argc, argv, exit_code);
}
