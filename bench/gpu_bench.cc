// tenax bench gpu: tenax against PyTorch on the same GPU in the same run
// (single process: cnn at batch 64 and 512, ResNet-18 at 128; two processes
// sharing the GPU against DDP over Gloo; elastic on the GPU), and on any
// machine the cost of staging gradients through host buffers on the CPU.
// The measuring is bench/gpu_bench.py's; this command finds it and the
// tenax binary beside it and hands over.
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "bench_common.h"

namespace tenax::bench {
namespace {

struct GpuArgs {
  bool quick = false;
  std::string json_path;
  std::string python = "python3";
  std::string sections = "single,sync2,elastic,staging";
};

Status RunGpu(const GpuArgs& a) {
  const std::string script = BenchFile("gpu_bench.py");
  std::error_code ec;
  if (!std::filesystem::exists(script, ec)) return NotFound(script + ": the bench driver is missing");
  TENAX_ASSIGN_OR_RETURN(std::string self, SelfExe());
  const auto tenax = std::filesystem::path(self).parent_path() / "tenax";
  if (!std::getenv("TENAX_BINARY")) ::setenv("TENAX_BINARY", tenax.c_str(), 1);
  std::vector<std::string> args = {script, "--python", a.python, "--sections", a.sections};
  if (a.quick) args.push_back("--quick");
  if (!a.json_path.empty()) args.insert(args.end(), {"--json", a.json_path});
  return ExecPython(a.python, args);
}

}  // namespace

void AddGpuBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<GpuArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "gpu",
      "tenax vs PyTorch on one GPU: single process (cnn b64/b512, ResNet-18 b128), 2 processes sharing the GPU vs "
      "DDP-Gloo, elastic on the GPU; on any machine: the CPU cost of staged gradients",
      "Fewer steps, one round (a few minutes on an H100)", a->quick, a->json_path, [a] { return RunGpu(*a); },
      exit_code);
  cmd->add_option("--python", a->python, "Python interpreter with torch (and torchvision for ResNet-18)")
      ->capture_default_str();
  cmd->add_option("--sections", a->sections, "Comma-separated: single, sync2, elastic, staging")
      ->capture_default_str();
}

}  // namespace tenax::bench
