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
  bool data_on_host_too = false;
  std::string sync2_bucket_kib;
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
  if (a.data_on_host_too) args.push_back("--data-on-host-too");
  if (!a.sync2_bucket_kib.empty()) args.insert(args.end(), {"--sync2-bucket-kib", a.sync2_bucket_kib});
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
  cmd->add_flag("--data-on-host-too", a->data_on_host_too,
                "single: also run tenax with train.resident_data = \"off\" (batches gathered on the host)");
  cmd->add_option("--sync2-bucket-kib", a->sync2_bucket_kib,
                  "sync2: also run tenax with these train.bucket_kib values (comma-separated, e.g. 1024,16384)")
      ->check([](const std::string& v) {
        for (char ch : v) {
          if (!(ch == ',' || (ch >= '0' && ch <= '9'))) return std::string("a comma-separated list of KiB counts");
        }
        return std::string();
      });
}

}  // namespace tenax::bench
