#include "reference_run.h"

#include <fmt/format.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tenax/core/files.h"
#include "tenax/core/process_supervisor.h"
#include "tenax/core/run_dir.h"
#include "tenax/core/signals.h"
#include "tenax/version.h"

namespace tenax {
namespace {

std::string Fingerprint(const ReferenceRunOptions& o) {
  auto text = ReadFileText(o.job_path, 16 << 20);
  std::string all = (text.ok() ? *text : o.job_path) + "\n" + kTenaxVersion;
  for (const auto& s : o.overrides) all += "\n" + s;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : all) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  auto j = nlohmann::json::parse(in, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

}  // namespace

Result<nlohmann::json> EnsureReferenceRun(const TrainConfig& config, const ReferenceRunOptions& o) {
  const std::string dir = RunDir(o.out_dir).reference();
  const std::string fingerprint = Fingerprint(o);
  auto kept = ReadFileText(dir + "/fingerprint", 1024);
  nlohmann::json summary = ReadJson(RunDir(dir).summary());
  if (kept.ok() && *kept == fingerprint && summary.is_object() && summary.contains("final_test_accuracy")) {
    if (o.notice) {
      o.notice(fmt::format("fault-free reference: reusing {} (test accuracy {:.4f}; same job file and settings)", dir,
                           summary.value("final_test_accuracy", 0.0)));
    }
    return summary;
  }
  std::vector<std::string> argv = {o.self, "run", o.job_path, "--out", dir, "--no-faults"};
  for (const auto& s : o.overrides) argv.insert(argv.end(), {"--set", s});
  argv.insert(argv.end(), {"--set", "report.reference=false", "--set", "report.html=false"});
  if ((config.mode == "sync" || config.mode == "coded") && config.stragglers.model != "none") {
    argv.insert(argv.end(), {"--set", "stragglers.model=\"none\""});
  }
  const std::string log = RunDir(o.out_dir).reference_log();
  if (o.notice) {
    o.notice("fault-free reference: running the same job without faults or stragglers first (" + dir + ", output in " +
             log + ")");
  }
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(o.out_dir));
  ProcessSupervisor child("reference run", std::chrono::seconds(10));
  TENAX_ASSIGN_OR_RETURN(size_t index, child.StartLogged("tenax run --no-faults (reference)", argv, log));
  const auto t0 = std::chrono::steady_clock::now();
  while (!child.exit_code(index)) {
    if (StopRequested()) {
      (void)child.Signal(index, SIGTERM);  // it stops its own children
      (void)child.WaitForExit(index, Deadline::After(std::chrono::seconds(30)));
      return Cancelled("stopped by signal " + std::to_string(StopSignal()) + " during the reference run");
    }
    child.WaitForActivity(Deadline::After(std::chrono::milliseconds(200)));
    child.Poll();
  }
  const int code = *child.exit_code(index);
  if (code != 0) {
    return Unavailable("the fault-free reference run failed with exit code " + std::to_string(code) + " (see " + log +
                       ")");
  }
  summary = ReadJson(RunDir(dir).summary());
  if (!summary.is_object() || !summary.contains("final_test_accuracy")) {
    return Internal(RunDir(dir).summary() + " is missing after the reference run");
  }
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(dir + "/fingerprint", fingerprint));
  if (o.notice) {
    o.notice(fmt::format("fault-free reference: test accuracy {:.4f} in {:.0f} s", summary.value("final_test_accuracy", 0.0),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  }
  return summary;
}

}  // namespace tenax
