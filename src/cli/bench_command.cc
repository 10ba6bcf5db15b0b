// tenax bench: the benchmarks are a separate program, tenax-bench (built from
// bench/ next to the tenax binary), so the product neither links their peers
// (gRPC) nor carries paths to their scripts. `tenax bench ...` becomes that
// program, with the same pid, so signals, output and exit status are its own.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "command.h"
#include "tenax/core/files.h"

namespace tenax::cli {

void AddBenchCommand(CLI::App& root) {
  // Never parsed here (main() execs tenax-bench first): this entry lists the command in 'tenax --help'.
  root.add_subcommand("bench", "Benchmarks that run tenax and its peer in the same run (see 'tenax bench --help')")
      ->allow_extras();
}

int ExecBench(int argc, char** argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return ReportError("bench", Internal("cannot find the tenax binary (/proc/self/exe): " + ec.message()));
  const std::string program = (self.parent_path() / "tenax-bench").string();
  std::vector<char*> args = {const_cast<char*>(program.c_str())};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(program.c_str(), args.data());
  return ReportError("bench", NotFound(program + ": cannot run the benchmark program: " + ErrnoMessage(errno) +
                                       " (build the CMake target tenax-bench; it belongs next to the tenax binary)"));
}

}  // namespace tenax::cli
