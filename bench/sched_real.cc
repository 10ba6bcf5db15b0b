#include "sched_real.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "bench_common.h"
#include "tenax/core/files.h"

namespace tenax::bench {
namespace {

std::string JobText(const RealPlacementArgs& a, int64_t steps) {
  // 2 zones x 2 hosts x 2 slots: one zone holds the whole job.
  return fmt::format(
      "mode = \"sync\"\n[cluster]\nworkers = 4\njob_id = \"bench-sched-real\"\nstep_timeout_seconds = 120\n"
      "join_timeout_seconds = 120\n"
      "[topology]\nmode = \"auto\"\n"
      "hosts = [ {{ name = \"a1\", zone = \"zone-a\", slots = 2 }}, {{ name = \"a2\", zone = \"zone-a\", slots = 2 }},\n"
      "          {{ name = \"b1\", zone = \"zone-b\", slots = 2 }}, {{ name = \"b2\", zone = \"zone-b\", slots = 2 }} ]\n"
      "same_zone = {{ delay_ms = 0.05, bandwidth_gbps = {} }}\n"
      "cross_zone = {{ delay_ms = {}, loss = {}, bandwidth_gbps = {} }}\n"
      "[placement]\npolicy = \"network_aware\"\nprobe_seconds = 10\n"
      "[data]\ndir = \"{}\"\n[model]\nname = \"cnn\"\n"
      "[train]\nepochs = 100\nmax_steps = {}\nbatch_size = 32\nlr = 0.02\nseed = 1\nthreads = 1\n"
      "[log]\nevery_steps = 50\n",
      a.same_zone_gbps, a.cross_zone_delay_ms, a.cross_zone_loss, a.cross_zone_gbps, a.data_dir, steps);
}

}  // namespace

Result<nlohmann::json> RunRealPlacement(const RealPlacementArgs& a) {
  TENAX_ASSIGN_OR_RETURN(std::string tenax_bin, FindProgram("tenax"));
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-sched-real"));
  const int64_t steps = a.steps > 0 ? a.steps : (a.quick ? 150 : 400);
  const std::string job = work.path() + "/job.toml";
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, JobText(a, steps)));
  nlohmann::json runs = nlohmann::json::array();
  double step_seconds[2] = {0, 0};
  std::string mode;
  const char* policies[2] = {"network_aware", "spread"};
  for (int i = 0; i < 2; ++i) {
    const std::string out = work.path() + "/" + policies[i];
    std::fprintf(stderr, "sched: real run, 4 workers placed %s (%lld steps)...\n", policies[i],
                 static_cast<long long>(steps));
    auto run = RunToEnd(std::string("tenax run (") + policies[i] + ")",
                        {tenax_bin, "run", job, "--out", out, "--set", std::string("placement.policy=") + policies[i]},
                        Deadline::After(std::chrono::seconds(a.timeout_seconds)));
    if (!run.ok()) {
      return Status(run.status().code(), std::string("tenax run (") + policies[i] + ") failed: " +
                                             run.status().message() + " (its own error line is above)");
    }
    std::ifstream in(out + "/summary.json");
    auto s = nlohmann::json::parse(in, nullptr, false);
    if (s.is_discarded() || !s.contains("placement") || !(s.value("steady_samples_per_second", 0.0) > 0)) {
      return Internal(std::string("tenax run (") + policies[i] + "): summary.json without placement or throughput");
    }
    // The steady step time: the global batch over steady samples/s (start-up and evaluation excluded).
    step_seconds[i] = s.value("global_batch_size", 0.0) / s["steady_samples_per_second"].get<double>();
    mode = s["placement"].value("mode", "");
    runs.push_back({{"policy", policies[i]},
                    {"real_step_seconds", step_seconds[i]},
                    {"steps", s.value("steps", 0)},
                    {"final_test_accuracy", s.value("final_test_accuracy", 0.0)},
                    {"train_seconds", s.value("train_seconds", 0.0)},
                    {"worker_zones", s["placement"]["worker_zones"]},
                    {"slots", s["placement"]["slots"]},
                    {"worst_worker_link", s["placement"]["worst_worker_link"]},
                    {"mode", mode}});
    std::fprintf(stderr, "sched: real %-13s %.1f ms/step, workers in %zu zone(s), accuracy %.4f (%s)\n", policies[i],
                 1e3 * step_seconds[i], s["placement"]["worker_zones"].size(), s.value("final_test_accuracy", 0.0),
                 mode.c_str());
  }
  return nlohmann::json{{"mode", mode},
                        {"topology",
                         {{"hosts", "2 zones x 2 hosts x 2 slots"},
                          {"same_zone_gbps", a.same_zone_gbps},
                          {"cross_zone_gbps", a.cross_zone_gbps},
                          {"cross_zone_delay_ms", a.cross_zone_delay_ms},
                          {"cross_zone_loss", a.cross_zone_loss}}},
                        {"runs", runs},
                        {"real_step_seconds_network_aware", step_seconds[0]},
                        {"real_step_seconds_spread", step_seconds[1]},
                        {"ratio", step_seconds[0] / step_seconds[1]}};
}

}  // namespace tenax::bench
