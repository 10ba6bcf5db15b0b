// tenax bench python: tenax's torch.distributed backend against Gloo in the
// same run (stock DDP for three models, all_reduce from 4 KiB to 64 MiB on
// 2 and 4 processes). The measuring is bench/python_bench.py's (it runs the
// ranks of both backends and prints the table); this command finds it and
// the tenax Python package beside the build and hands over to it.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "bench_common.h"

namespace tenax::bench {
namespace {

struct PythonArgs {
  bool quick = false;
  std::string json_path;
  std::string python = "/usr/bin/python3";
  std::string package_dir;  // default: <build>/python beside <build>/src/tenax
  std::string sections, models;  // passed through ("" = the driver's default)
  int rounds = 0;
  bool keep_blas_core = false;
  bool keep_malloc = false;
  bool no_elastic_spare = false;
};

// <build>/python: where the build puts the tenax package (src/python/CMakeLists.txt).
std::string DefaultPackageDir() {
  char self[PATH_MAX] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  return (std::filesystem::path(std::string(self, static_cast<size_t>(n))).parent_path().parent_path() / "python")
      .string();
}

Status RunPython(const PythonArgs& a) {
  const std::string script = BenchFile("python_bench.py");
  std::error_code ec;
  if (!std::filesystem::exists(script, ec)) return NotFound(script + ": the bench driver is missing");
  const std::string package = a.package_dir.empty() ? DefaultPackageDir() : a.package_dir;
  if (!std::filesystem::exists(std::filesystem::path(package) / "tenax" / "__init__.py", ec)) {
    return NotFound("no tenax Python package under " + package +
                    " (build the _tenax target, or point --package-dir at the folder holding tenax/)");
  }
  const char* old = std::getenv("PYTHONPATH");
  const std::string path = package + (old && *old ? ":" + std::string(old) : "");
  ::setenv("PYTHONPATH", path.c_str(), 1);
  // The Manager's section starts a `tenax coordinator`: the tenax beside this binary.
  const auto tenax = std::filesystem::path(package).parent_path() / "src" / "tenax";
  if (!std::getenv("TENAX_BINARY") && std::filesystem::exists(tenax, ec)) ::setenv("TENAX_BINARY", tenax.c_str(), 1);
  std::vector<std::string> args = {script};
  if (a.quick) args.push_back("--quick");
  if (!a.json_path.empty()) args.insert(args.end(), {"--json", a.json_path});
  if (!a.sections.empty()) args.insert(args.end(), {"--sections", a.sections});
  if (!a.models.empty()) args.insert(args.end(), {"--models", a.models});
  if (a.rounds > 0) args.insert(args.end(), {"--rounds", std::to_string(a.rounds)});
  if (a.keep_blas_core) args.push_back("--keep-blas-core");
  if (a.keep_malloc) args.push_back("--keep-malloc");
  if (a.no_elastic_spare) args.push_back("--no-elastic-spare");
  return ExecPython(a.python, args);
}

}  // namespace

void AddPythonBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<PythonArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "python",
      "tenax's torch.distributed backend vs Gloo: stock DDP (cnn, an 11.9M MLP, a 12.8M embedding model) on 2 "
      "processes, and all_reduce 4 KiB-64 MiB on 2 and 4 processes",
      "One round and fewer steps (about 4 minutes)", a->quick, a->json_path, [a] { return RunPython(*a); }, exit_code);
  cmd->add_option("--python", a->python, "Python interpreter with torch")->capture_default_str();
  cmd->add_option("--package-dir", a->package_dir, "Folder holding the tenax package (default: <build>/python)");
  cmd->add_option("--sections", a->sections, "Parts to run, comma-separated: ddp, manager, elastic, allreduce (default: all)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            for (size_t at = 0; at <= v.size();) {
              const size_t comma = std::min(v.find(',', at), v.size());
              const std::string one = v.substr(at, comma - at);
              if (one != "ddp" && one != "manager" && one != "elastic" && one != "allreduce") {
                return "unknown section '" + one + "' (pick from ddp, manager, elastic, allreduce)";
              }
              at = comma + 1;
            }
            return "";
          },
          "LIST"));
  cmd->add_option("--models", a->models, "The DDP section's models, comma-separated: cnn, big, wide (default: all)");
  cmd->add_option("--rounds", a->rounds, "Rounds per section (default 3; 1 with --quick)")->check(CLI::Range(1, 100));
  cmd->add_flag("--keep-blas-core", a->keep_blas_core,
                "Keep the OpenBLAS kernels OpenBLAS picks itself (by default, where it fell back to SSE3 kernels "
                "on a CPU it does not know, both sides run the kernels the CPU's flags support)");
  cmd->add_flag("--keep-malloc", a->keep_malloc,
                "Keep glibc malloc's defaults (by default both sides run with mmap and trimming off, so that tensors "
                "above 32 MiB are not unmapped and faulted in again every step)");
  cmd->add_flag("--no-elastic-spare", a->no_elastic_spare,
                "The elastic section without its third side, tenax with a warm spare (TENAX_SPARE=1) that takes "
                "the lost member's place (never run with --quick)");
}

}  // namespace tenax::bench
