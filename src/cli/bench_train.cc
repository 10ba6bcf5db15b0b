// tenax bench train: synchronous data-parallel training with 2 workers,
// tenax (`tenax run`: coordinator + 2 worker processes, allreduce over the
// transport) against PyTorch DDP (Gloo backend, 2 processes,
// bench/pytorch_ddp_train.py), on the same model, per-worker batch, data,
// data order, optimizer, epoch and thread count, in the same run. Rounds
// alternate the two so drift on a noisy 2-core machine hits both.
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/core/subprocess.h"
#include "tenax/train/fashion_mnist.h"

#ifndef TENAX_SOURCE_DIR
#define TENAX_SOURCE_DIR "."
#endif

namespace tenax::cli {
namespace {

struct BenchDistArgs {
  bool quick = false;
  std::string json_path;
  std::string model = "cnn";
  int64_t batch_size = 64;  // per worker
  double lr = 0.02;
  int64_t epochs = 1;
  int64_t rounds = 0;  // 0 = 1 with --quick, else 3
  int64_t warmup_steps = 10;
  std::string data_dir = kDefaultFashionMnistDir;
  std::string python = "/usr/bin/python3";
  std::string script = std::string(TENAX_SOURCE_DIR) + "/bench/pytorch_ddp_train.py";
};

constexpr int kWorkers = 2;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string SelfPath() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "tenax" : p.string();
}

// A port nobody listens on right now (for DDP's rendezvous).
Result<int> FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return IoError("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return IoError("cannot find a free port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<nlohmann::json> RunTenax(const BenchDistArgs& a, const std::string& work) {
  const std::string job = work + "/job.toml", out = work + "/tenax";
  std::string text = fmt::format(
      "mode = \"sync\"\n[cluster]\nworkers = {}\njob_id = \"bench-train\"\n[data]\ndir = \"{}\"\n"
      "[model]\nname = \"{}\"\n[train]\nepochs = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\n"
      "momentum = 0.9\nseed = 1\nthreads = 1\n[log]\nevery_steps = 100\n",
      kWorkers, a.data_dir, a.model, a.epochs, a.batch_size, a.lr);
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, text));
  TENAX_ASSIGN_OR_RETURN(ProcessOutput p, RunAndCapture({SelfPath(), "run", job, "--out", out}));
  if (p.exit_code != 0) return Internal("tenax run exited with status " + std::to_string(p.exit_code) + "; logs in " + out + "/logs");
  std::ifstream in(out + "/summary.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return Internal(out + "/summary.json unreadable");
  return j;
}

Result<nlohmann::json> RunDdp(const BenchDistArgs& a) {
  TENAX_ASSIGN_OR_RETURN(int port, FreePort());
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int r = 0; r < kWorkers; ++r) {
    TENAX_ASSIGN_OR_RETURN(auto child,
                           ChildProcess::Start({a.python, a.script, "--rank", std::to_string(r), "--world",
                                                std::to_string(kWorkers), "--master-port", std::to_string(port),
                                                "--model", a.model, "--batch-size", std::to_string(a.batch_size),
                                                "--threads", "1", "--epochs", std::to_string(a.epochs), "--lr",
                                                fmt::format("{}", a.lr), "--momentum", "0.9", "--seed", "1",
                                                "--warmup-steps", std::to_string(a.warmup_steps), "--data",
                                                a.data_dir}));
    ranks.push_back(std::move(child));
  }
  std::string last;
  while (true) {
    auto line = ranks[0]->ReadLine();
    if (!line.ok()) break;
    if (!line->empty() && (*line)[0] == '{') last = *line;
  }
  last += ranks[0]->TakeRemainder();
  int codes = 0;
  for (auto& r : ranks) codes |= r->Wait();
  if (codes != 0) return Internal("PyTorch DDP peer (" + a.script + ") failed");
  auto j = nlohmann::json::parse(last, nullptr, false);
  if (j.is_discarded() || !j.contains("samples_per_second")) return Internal("DDP peer printed no JSON result");
  return j;
}

Status RunBenchTrain(BenchDistArgs a) {
  if (a.rounds == 0) a.rounds = a.quick ? 1 : 3;
  std::error_code ec;
  if (!std::filesystem::exists(a.script, ec)) return NotFound(a.script + ": DDP benchmark script not found (--script)");
  const std::string work = std::filesystem::temp_directory_path().string() + "/tenax-bench-train-" + std::to_string(::getpid());
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(work));
  std::vector<double> tenax_sps, ddp_sps;
  nlohmann::json tenax_last, ddp_last;
  for (int64_t r = 1; r <= a.rounds; ++r) {
    if (StopRequested()) return Cancelled("benchmark stopped");
    spdlog::info("round {}/{}: tenax sync, {} workers, {} epoch(s), batch {} per worker", r, a.rounds, kWorkers,
                 a.epochs, a.batch_size);
    TENAX_ASSIGN_OR_RETURN(tenax_last, RunTenax(a, work));
    tenax_sps.push_back(tenax_last["steady_samples_per_second"].get<double>());
    spdlog::info("round {}/{}: tenax {:.0f} samples/s, accuracy {:.4f}; PyTorch DDP ...", r, a.rounds,
                 tenax_sps.back(), tenax_last["final_test_accuracy"].get<double>());
    TENAX_ASSIGN_OR_RETURN(ddp_last, RunDdp(a));
    ddp_sps.push_back(ddp_last["samples_per_second"].get<double>());
    spdlog::info("round {}/{}: DDP {:.0f} samples/s, accuracy {:.4f}", r, a.rounds, ddp_sps.back(),
                 ddp_last["test_accuracy"].get<double>());
  }
  std::filesystem::remove_all(work, ec);
  const double t = Median(tenax_sps), d = Median(ddp_sps);
  const double ta = tenax_last["final_test_accuracy"].get<double>(), da = ddp_last["test_accuracy"].get<double>();
  nlohmann::json result = {
      {"benchmark", "train"},
      {"quick", a.quick},
      {"workers", kWorkers},
      {"model", a.model},
      {"batch_size_per_worker", a.batch_size},
      {"epochs", a.epochs},
      {"rounds", a.rounds},
      {"threads_per_worker", 1},
      {"optimizer", "sgd"},
      {"lr", a.lr},
      {"momentum", 0.9},
      {"tenax_samples_per_second", t},
      {"ddp_samples_per_second", d},
      {"ratio", t / d},
      {"tenax_test_accuracy", ta},
      {"ddp_test_accuracy", da},
      {"accuracy_gap_points", (ta - da) * 100},
      {"tenax_rounds", tenax_sps},
      {"ddp_rounds", ddp_sps},
  };
  std::printf("%-34s %12s %10s\n", "train (2 workers, sync)", "samples/s", "accuracy");
  std::printf("%-34s %12.0f %10.4f\n", "tenax (tenax run)", t, ta);
  std::printf("%-34s %12.0f %10.4f\n", "pytorch DDP (gloo)", d, da);
  std::printf("ratio tenax/DDP %.3f (target >= 1.2 at equal accuracy within 1 point: gap %.2f points)\n", t / d,
              (ta - da) * 100);
  if (!a.json_path.empty()) TENAX_RETURN_IF_ERROR(WriteFileAtomic(a.json_path, result.dump(2) + "\n"));
  return Status::Ok();
}

}  // namespace

void AddBenchTrainCommand(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<BenchDistArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "train", "Data-parallel training, 2 workers: tenax sync vs PyTorch DDP (Gloo), same model, data and batch");
  cmd->add_flag("--quick", a->quick, "One round instead of three (under 4 minutes)");
  cmd->add_option("--json", a->json_path, "Write the result as JSON to FILE")->type_name("FILE");
  cmd->add_option("--model", a->model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}))->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "Samples per step per worker")
      ->check(CLI::Range(int64_t{1}, int64_t{30000}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "SGD learning rate (momentum 0.9)")->check(CLI::Range(1e-9, 10.0))->capture_default_str();
  cmd->add_option("--epochs", a->epochs, "Epochs per run")->check(CLI::Range(int64_t{1}, int64_t{100}))->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "Alternating rounds per side (default 1 quick, 3 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd->add_option("--python", a->python, "Python interpreter with torch")->capture_default_str();
  cmd->add_option("--script", a->script, "The DDP peer script")->capture_default_str();
  cmd->callback([a, &exit_code] {
    InitLogging("bench");
    InstallStopHandlers();
    Status st = RunBenchTrain(*a);
    exit_code = st.ok() ? 0 : ReportError("bench train", st);
  });
}

}  // namespace tenax::cli
