// tenax-bench: the benchmarks that compare tenax with its peers in the same
// run. Users reach it as `tenax bench ...` (the tenax binary execs this
// program, found next to itself); it also runs as its own peer processes
// (the hidden allreduce-rank and transport-peer subcommands).
#include "bench_common.h"
#include "cli_app.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tenax bench: benchmarks that run tenax and its peer in the same run.\n"
      "Run 'tenax bench <benchmark> --help' for the options of a benchmark.",
      "tenax bench"};
  app.require_subcommand(1);
  int exit_code = 0;
  tenax::bench::AddTransportBenchmark(app, exit_code);
  tenax::bench::AddTrainBenchmark(app, exit_code);
  tenax::bench::AddAllreduceBenchmark(app, exit_code);
  tenax::bench::AddTrainSingleBenchmark(app, exit_code);
  tenax::bench::AddElasticBenchmark(app, exit_code);
  tenax::bench::AddPreemptionBenchmark(app, exit_code);
  tenax::bench::AddSoakBenchmark(app, exit_code);
  tenax::bench::AddCoordLoadBenchmark(app, exit_code);
  tenax::bench::AddStragglersBenchmark(app, exit_code);
  tenax::bench::AddEcBenchmark(app, exit_code);
  tenax::bench::AddRecoveryBenchmark(app, exit_code);
  tenax::bench::AddMigrateBenchmark(app, exit_code);
  tenax::bench::AddSchedBenchmark(app, exit_code);
  tenax::bench::AddPythonBenchmark(app, exit_code);
  tenax::bench::AddGpuBenchmark(app, exit_code);
  return tenax::cli::RunApp(app, argc, argv, exit_code);
}
