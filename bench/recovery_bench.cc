// tenax bench recovery: what a lost data node costs training under each
// recovery policy of the erasure-coded store (issue 12, "Numbers";
// docs/store.md). Every run is real: six `tenax storage` processes with
// their replies shaped to --link-gbps, Fashion-MNIST put into them as RS
// k+m stripes, and a `tenax train` of the cnn reading its training and test
// sets from the store (data.format = "store", a windowed chunk shuffle).
//  - no_failure: the training alone; its test accuracy is the reference.
//  - full, approx, prm: the same training; when it has done --fail-at of
//    its steps, one data node is SIGKILLed and its directory wiped, and at
//    that moment the benchmark (standing in for a failure detector) asks
//    for a recovery with policy P of the training set: by default of the
//    resident recovery service (`tenax store serve`, started with the nodes,
//    its catalog and connections open, as a cluster runs it); with
//    --recover-via process by starting `tenax store recover --policy P`
//    (what every run did before the service). Training keeps going
//    meanwhile: a read of a lost chunk decodes it from k survivors
//    (a degraded read) until the recovery has put it back, and the
//    recovery's reads compete with training's for the nodes' links.
//      full:   every lost chunk, data and parity;
//      approx: every lost chunk, the tier of data holding an
//              --important-classes sample first, parity last (--all);
//      prm:    the plan's first set (the smallest set of lost data chunks
//              that keeps every class's share within --class-tolerance and
//              --min-available of the samples); the rest is left for later
//              and, in this run, never rebuilt: training stands in for
//              those samples (PRM's partial view).
// --seeds runs all of it once per training seed: accuracy gaps (policy
// minus no_failure, in points) are averaged over the seeds, recovery times
// and bytes taken as medians; --stand-in sets data.stand_in (prm's rule
// for the samples it left for later).
// Per policy: bytes_transferred (payload bytes the recovery moved
// through the transport, read + written, counted by its client),
// recovery_seconds (from the SIGKILL until the recovery has stored
// what it rebuilt in the catalog: from then on every chunk training reads
// is read directly, or deliberately stood in for; the training picks the
// new manifest up within a second), final_test_accuracy, and what the
// training saw (degraded chunk reads, samples stood in for, its wall time
// against the no_failure run's).
//
// The rate: Fashion-MNIST is 47 MB, a cloud training set terabytes. At
// 1 Gbit/s a node's share moves in a tenth of a second, and a recover
// process's own start-up (catalog, connections) would be what is measured
// (the service removes it).
// The default 0.1 Gbit/s per node keeps the rebuild network-bound, as it
// is at cloud scale; --link-gbps 1 runs the example rate.
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>

#include "bench_common.h"
#include "tenax/core/files.h"
#include "tenax/core/signals.h"
#include "tenax/store/recovery_service.h"

namespace tenax::bench {
namespace {

using namespace std::chrono_literals;

struct RecoveryArgs {
  bool quick = false;
  std::string json_path;
  double link_gbps = 0.1;
  int64_t epochs = 0;  // 0 = 2 quick, 4 full
  double fail_at = 0.25;
  int64_t k = 4, m = 2;
  int64_t chunk_kib = 256;
  int64_t victim = 2;
  double min_available = 0.9;
  double class_tolerance = 0.01;
  std::string important_classes = "0,2,4,6";
  int64_t shuffle_window = 8;
  int64_t cache_chunks = 16;
  int64_t batch_size = 64;
  double lr = 0.02;
  int64_t threads = 1;
  std::string data_dir = kDefaultFashionMnistDir;
  int64_t timeout_seconds = 900;
  std::string recover_via = "service";  // service | process
  std::vector<int64_t> seeds = {1};
  std::vector<std::string> policies = {"full", "approx", "prm"};
  std::string stand_in = "neighbour";
  std::vector<int> important;  // important_classes, parsed by RunRecovery
};

constexpr int kNodes = 6;
constexpr const char* kTrainSet = "fashion-mnist-train";
constexpr const char* kTestSet = "fashion-mnist-test";

std::string JobText(const RecoveryArgs& a, const std::string& catalog, int64_t seed) {
  return fmt::format(
      "[data]\nformat = \"store\"\ncatalog = \"{}\"\ntrain_dataset = \"{}\"\ntest_dataset = \"{}\"\n"
      "cache_chunks = {}\nshuffle_window_chunks = {}\nstand_in = \"{}\"\n[model]\nname = \"cnn\"\n"
      "[train]\nepochs = {}\nbatch_size = {}\noptimizer = \"sgd\"\nlr = {}\nmomentum = 0.9\nseed = {}\nthreads = {}\n"
      "[log]\nevery_steps = 10\n",
      catalog, kTrainSet, kTestSet, a.cache_chunks, a.shuffle_window, a.stand_in, a.epochs, a.batch_size, a.lr, seed,
      a.threads);
}

// The highest training step metrics.jsonl records so far (0 if none).
int64_t StepReached(const std::string& metrics) {
  std::ifstream in(metrics);
  std::string line;
  int64_t step = 0;
  while (std::getline(in, line)) {
    auto r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.value("event", "") == "train") step = std::max<int64_t>(step, r.value("step", 0));
  }
  return step;
}

Result<nlohmann::json> ParseJsonLine(const std::vector<std::string>& lines, const std::string& what) {
  auto objects = JsonObjectLines(lines);
  if (objects.empty()) return Internal(what + " printed no JSON result");
  return objects.back();
}

// One run: a fresh store of six nodes, the training, and (policy != "")
// the failure and the recovery.
Result<nlohmann::json> RunOne(const RecoveryArgs& a, const std::string& tenax_bin, const std::string& work,
                              const std::string& policy, int64_t seed) {
  const std::string name = policy.empty() ? "no_failure" : policy;
  const std::string dir = work + "/seed-" + std::to_string(seed) + "/" + name, catalog = dir + "/catalog.db",
                    out = dir + "/train";
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(dir));
  const Deadline deadline = Deadline::After(std::chrono::seconds(a.timeout_seconds));
  const std::string gbps = fmt::format("{}", a.link_gbps);

  // The data nodes, each its own group so that one can be killed alone.
  std::vector<std::unique_ptr<PeerGroup>> nodes;
  std::vector<std::string> node_flags;
  for (int i = 0; i < kNodes; ++i) {
    const std::string node = "node-" + std::to_string(i);
    nodes.push_back(std::make_unique<PeerGroup>());
    TENAX_RETURN_IF_ERROR(nodes.back()->Start(
        "tenax storage " + node, {tenax_bin, "storage", "--dir", dir + "/" + node, "--name", node, "--listen",
                                  "127.0.0.1:0", "--link-gbps", gbps, "--log-level", "warn"}));
    TENAX_ASSIGN_OR_RETURN(std::string line,
                           nodes.back()->WaitForLine(
                               0, [](const std::string& l) { return l.find("listening on port ") != std::string::npos; },
                               deadline));
    int port = 0;
    std::istringstream(line.substr(line.find("listening on port ") + 18)) >> port;
    if (port <= 0) return Internal("tenax storage " + node + " printed no port: " + line);
    node_flags.insert(node_flags.end(), {"--node", "127.0.0.1:" + std::to_string(port)});
  }

  // Ingest both splits (the catalog learns the nodes with the first).
  int64_t train_records = 0;
  for (const std::string split : {"train", "test"}) {
    std::vector<std::string> argv = {tenax_bin, "store", "put", "--catalog", catalog, "--data", a.data_dir,
                                     "--split", split, "--k", std::to_string(a.k), "--m", std::to_string(a.m),
                                     "--chunk-bytes", std::to_string(a.chunk_kib * 1024), "--json"};
    if (split == "train") argv.insert(argv.end(), node_flags.begin(), node_flags.end());
    TENAX_ASSIGN_OR_RETURN(auto lines, RunToEnd("tenax store put (" + split + ")", argv, deadline));
    TENAX_ASSIGN_OR_RETURN(nlohmann::json put, ParseJsonLine(lines, "tenax store put"));
    if (split == "train") train_records = put.value("records", int64_t{0});
  }

  // The training.
  const std::string job = dir + "/job.toml";
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(job, JobText(a, catalog, seed)));

  // The resident recovery service, its catalog and connections open before
  // the failure (as a cluster runs it), and this bench's connection to it.
  PeerGroup service;
  std::unique_ptr<store::RecoveryServiceClient> asker;
  if (!policy.empty() && a.recover_via == "service") {
    TENAX_RETURN_IF_ERROR(service.Start("tenax store serve", {tenax_bin, "store", "serve", "--catalog", catalog,
                                                              "--link-gbps", gbps, "--log-level", "warn"}));
    TENAX_ASSIGN_OR_RETURN(std::string line,
                           service.WaitForLine(
                               0, [](const std::string& l) { return l.find("listening on port ") != std::string::npos; },
                               deadline));
    int port = 0;
    std::istringstream(line.substr(line.find("listening on port ") + 18)) >> port;
    if (port <= 0) return Internal("tenax store serve printed no port: " + line);
    TENAX_ASSIGN_OR_RETURN(asker, store::RecoveryServiceClient::Connect("127.0.0.1:" + std::to_string(port), "",
                                                                        std::chrono::milliseconds(10000)));
  }
  PeerGroup train;
  TENAX_RETURN_IF_ERROR(train.Start("tenax train (" + name + ")", {tenax_bin, "train", "--config", job, "--out", out}));
  std::fprintf(stderr, "recovery: %-10s training from the store (%d nodes, RS %lld+%lld, %.3g Gbit/s per node)\n",
               name.c_str(), kNodes, static_cast<long long>(a.k), static_cast<long long>(a.m), a.link_gbps);

  nlohmann::json result = {{"policy", name}};
  if (!policy.empty()) {
    // steps per epoch: the whole batches of the training set as put.
    const int64_t steps = a.epochs * (train_records / a.batch_size);
    const int64_t fail_step = std::max<int64_t>(1, static_cast<int64_t>(a.fail_at * static_cast<double>(steps)));
    while (StepReached(out + "/metrics.jsonl") < fail_step) {
      if (train.Exited(0)) return Internal("tenax train (" + name + ") ended before step " + std::to_string(fail_step));
      if (deadline.Expired()) return DeadlineExceeded("tenax train (" + name + ") did not reach step " +
                                                      std::to_string(fail_step) + " in time");
      if (StopRequested()) return Cancelled("stopped by signal " + std::to_string(StopSignal()));
      std::this_thread::sleep_for(20ms);
    }
    const std::string victim = "node-" + std::to_string(a.victim);
    const auto failed_at = std::chrono::steady_clock::now();
    nodes[static_cast<size_t>(a.victim)]->Kill();
    std::error_code ec;
    std::filesystem::remove_all(dir + "/" + victim, ec);
    if (ec) return IoError(dir + "/" + victim + ": cannot wipe: " + ec.message());
    std::fprintf(stderr, "recovery: %-10s %s SIGKILLed and wiped at step %lld; recovering with %s (%s)\n",
                 name.c_str(), victim.c_str(), static_cast<long long>(StepReached(out + "/metrics.jsonl")),
                 policy.c_str(), asker ? "the resident service" : "a tenax store recover process");

    nlohmann::json rec;
    if (asker) {
      store::RecoveryRequest request;
      request.dataset = kTrainSet;
      request.options.policy = policy;
      request.options.rebuild_later = policy == "approx";  // as --all
      request.options.prm.min_available = a.min_available;
      request.options.prm.class_tolerance = a.class_tolerance;
      if (policy == "approx") {
        request.important_classes = a.important;
      }
      TENAX_ASSIGN_OR_RETURN(store::RecoveryAnswer answer, asker->Recover(request, deadline));
      rec = answer.report;
    } else {
      std::vector<std::string> argv = {tenax_bin, "store", "recover", "--catalog", catalog, "--dataset", kTrainSet,
                                       "--policy", policy, "--link-gbps", gbps, "--json"};
      if (policy == "approx") argv.insert(argv.end(), {"--all", "--important-classes", a.important_classes});
      if (policy == "prm") {
        argv.insert(argv.end(), {"--min-available", fmt::format("{}", a.min_available), "--class-tolerance",
                                 fmt::format("{}", a.class_tolerance)});
      }
      TENAX_ASSIGN_OR_RETURN(auto lines, RunToEnd("tenax store recover (" + policy + ")", argv, deadline));
      TENAX_ASSIGN_OR_RETURN(rec, ParseJsonLine(lines, "tenax store recover"));
    }
    const double recovery_seconds = Seconds(std::chrono::steady_clock::now() - failed_at).count();
    if (!rec.contains("results") || rec["results"].size() != 1 || !rec.contains("transport_bytes")) {
      return Internal("the recovery printed an unexpected report: " + rec.dump());
    }
    const nlohmann::json& r = rec["results"][0];
    const nlohmann::json& t = rec["transport_bytes"];
    result["bytes_transferred"] = t.value("read", uint64_t{0}) + t.value("written", uint64_t{0});
    result["recovery_seconds"] = recovery_seconds;
    result["rebuild_seconds"] = r.value("seconds", 0.0);
    result["transport_bytes_read"] = t.value("read", uint64_t{0});
    result["transport_bytes_written"] = t.value("written", uint64_t{0});
    result["lost_chunks"] = r.value("lost_chunks", 0);
    result["chunks_rebuilt"] = r.value("chunks_rebuilt", 0);
    result["later_chunks"] = r.value("later_chunks", 0);
    // prm's later set stays lost in this run; approx (--all) and full rebuild theirs.
    result["later_bytes_not_moved"] = policy == "prm" ? r.value("later_bytes", uint64_t{0}) : uint64_t{0};
    result["available_share"] = r.value("available_share", 0.0);
    result["max_class_deviation"] = r.value("max_class_deviation", 0.0);
    result["failed_at_step"] = fail_step;
    std::fprintf(stderr, "recovery: %-10s rebuilt %lld of %lld lost chunks in %.2f s, %.1f MiB moved\n", name.c_str(),
                 static_cast<long long>(result["chunks_rebuilt"].get<int64_t>()),
                 static_cast<long long>(result["lost_chunks"].get<int64_t>()), recovery_seconds,
                 static_cast<double>(result["bytes_transferred"].get<uint64_t>()) / (1 << 20));
  }
  if (Status st = train.Wait(deadline, "--timeout"); !st.ok()) {
    return Status(st.code(), "tenax train (" + name + "): " + st.message() + " (its own error line is above)");
  }
  std::ifstream in(out + "/summary.json");
  auto s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object() || !s.contains("store")) {
    return Internal("tenax train (" + name + "): summary.json unreadable or without its store statistics");
  }
  result["final_test_accuracy"] = s.value("final_test_accuracy", 0.0);
  result["train_wall_seconds"] = s.value("wall_seconds", 0.0);
  result["degraded_chunk_reads"] = s["store"].value("degraded_chunks", 0);
  result["substituted_samples"] = s["store"].value("substituted_samples", 0);
  result["train_transport_bytes_read"] = s["store"].value("transport_bytes_read", 0);
  std::fprintf(stderr, "recovery: %-10s accuracy %.4f, training %.1f s, %lld degraded chunk reads, %lld samples stood in\n",
               name.c_str(), result["final_test_accuracy"].get<double>(), result["train_wall_seconds"].get<double>(),
               static_cast<long long>(result["degraded_chunk_reads"].get<int64_t>()),
               static_cast<long long>(result["substituted_samples"].get<int64_t>()));
  for (auto& n : nodes) n->Stop();
  service.Stop();
  result["seed"] = seed;
  return result;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Status RunRecovery(RecoveryArgs a) {
  TENAX_ASSIGN_OR_RETURN(std::string tenax_bin, FindProgram("tenax"));
  if (a.epochs == 0) a.epochs = a.quick ? 2 : 4;
  {
    // Checked here, once: a bad list is one error line, not an exception mid-run.
    std::istringstream in(a.important_classes);
    for (std::string part; std::getline(in, part, ',');) {
      char* end = nullptr;
      const long cls = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || cls < 0 || cls > 255) {
        return InvalidArgument("--important-classes: '" + part + "' is not a class number 0..255");
      }
      a.important.push_back(static_cast<int>(cls));
    }
  }
  if (a.k + a.m > kNodes) {
    return InvalidArgument("--k " + std::to_string(a.k) + " + --m " + std::to_string(a.m) + " exceed the " +
                           std::to_string(kNodes) + " data nodes (a stripe puts each chunk on its own node)");
  }
  for (const std::string& p : a.policies) {
    if (p != "full" && p != "approx" && p != "prm") {
      return InvalidArgument("--policies: '" + p + "' is not a recovery policy (full, approx, prm)");
    }
  }
  UseFreshSecret();
  TENAX_ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Create("tenax-bench-recovery"));
  nlohmann::json results = nlohmann::json::array(), references = nlohmann::json::array();
  std::map<std::string, std::vector<double>> gaps, seconds, bytes;
  for (int64_t seed : a.seeds) {
    TENAX_ASSIGN_OR_RETURN(nlohmann::json reference, RunOne(a, tenax_bin, work.path(), "", seed));
    references.push_back(reference);
    for (const std::string& policy : a.policies) {
      TENAX_ASSIGN_OR_RETURN(nlohmann::json r, RunOne(a, tenax_bin, work.path(), policy, seed));
      r["accuracy_gap_points"] =
          100 * (r["final_test_accuracy"].get<double>() - reference["final_test_accuracy"].get<double>());
      r["train_seconds_vs_no_failure"] =
          r["train_wall_seconds"].get<double>() - reference["train_wall_seconds"].get<double>();
      gaps[policy].push_back(r["accuracy_gap_points"].get<double>());
      seconds[policy].push_back(r["recovery_seconds"].get<double>());
      bytes[policy].push_back(static_cast<double>(r["bytes_transferred"].get<uint64_t>()));
      results.push_back(r);
    }
  }
  nlohmann::json per_policy = nlohmann::json::object();
  for (const std::string& policy : a.policies) {
    const auto& g = gaps[policy];
    per_policy[policy] = {{"mean_accuracy_gap_points", std::accumulate(g.begin(), g.end(), 0.0) / static_cast<double>(g.size())},
                          {"accuracy_gap_points", g},
                          {"median_recovery_seconds", Median(seconds[policy])},
                          {"recovery_seconds", seconds[policy]},
                          {"median_bytes_transferred", Median(bytes[policy])}};
  }
  nlohmann::json report = {{"benchmark", "recovery"},
                           {"quick", a.quick},
                           {"recover_via", a.recover_via},
                           {"seeds", a.seeds},
                           {"stand_in", a.stand_in},
                           {"data_nodes", kNodes},
                           {"k", a.k},
                           {"m", a.m},
                           {"chunk_bytes", a.chunk_kib * 1024},
                           {"link_gbps_per_node", a.link_gbps},
                           {"epochs", a.epochs},
                           {"fail_at", a.fail_at},
                           {"prm_min_available", a.min_available},
                           {"prm_class_tolerance", a.class_tolerance},
                           {"approx_important_classes", a.important_classes},
                           {"no_failure", references},
                           {"results", results},
                           {"policies", per_policy}};
  // The ratio of medians over the seeds (one seed: that run's ratio).
  if (per_policy.contains("prm") && per_policy.contains("full")) {
    const double bytes_ratio = Median(bytes["prm"]) / std::max(1.0, Median(bytes["full"]));
    const double seconds_ratio = Median(seconds["prm"]) / Median(seconds["full"]);
    report["prm_vs_full_bytes_transferred"] = bytes_ratio;
    report["prm_vs_full_recovery_seconds"] = seconds_ratio;
    report["targets"] = {{"prm_bytes_at_most_0_35x_full", bytes_ratio <= 0.35},
                         {"prm_recovery_seconds_at_most_0_45x_full", seconds_ratio <= 0.45},
                         {"prm_mean_accuracy_gap_at_least_minus_0_3_point",
                          per_policy["prm"]["mean_accuracy_gap_points"].get<double>() >= -0.3}};
    std::fprintf(stderr,
                 "recovery: prm / full over %zu seed(s): bytes %.3fx, recovery seconds %.3fx (medians %.2f / %.2f s); "
                 "prm accuracy %+.2f points on average (full %+.2f)\n",
                 a.seeds.size(), bytes_ratio, seconds_ratio, Median(seconds["prm"]), Median(seconds["full"]),
                 per_policy["prm"]["mean_accuracy_gap_points"].get<double>(),
                 per_policy["full"]["mean_accuracy_gap_points"].get<double>());
  }
  std::printf("%s\n", report.dump(2).c_str());
  return WriteJsonReport(a.json_path, report);
}

}  // namespace

void AddRecoveryBenchmark(CLI::App& bench, int& exit_code) {
  auto a = std::make_shared<RecoveryArgs>();
  CLI::App* cmd = AddBenchmark(
      bench, "recovery",
      "A data node of the erasure-coded store SIGKILLed and wiped mid-training: bytes moved, time to recover and "
      "final accuracy under the full, approx and prm recovery policies, against the same training without a failure "
      "(6 storage processes, RS 4+2, the cnn reading from the store)",
      "2 epochs per run (4 runs, about 3 minutes)", a->quick, a->json_path, [a] { return RunRecovery(*a); },
      exit_code);
  cmd->add_option("--link-gbps", a->link_gbps,
                  "Emulated link of every data node (its replies) and of the recovery's writes, Gbit/s")
      ->check(CLI::Range(0.001, 400.0))
      ->capture_default_str();
  cmd->add_option("--epochs", a->epochs, "Epochs per training (default 2 quick, 4 full)")
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->add_option("--fail-at", a->fail_at, "Share of the training's steps done when the node fails")
      ->check(CLI::Range(0.01, 0.9))
      ->capture_default_str();
  cmd->add_option("--k", a->k, "Data chunks per stripe")->check(CLI::Range(int64_t{1}, int64_t{5}))->capture_default_str();
  cmd->add_option("--m", a->m, "Parity chunks per stripe (k + m <= 6 nodes)")
      ->check(CLI::Range(int64_t{1}, int64_t{5}))
      ->capture_default_str();
  cmd->add_option("--chunk-kib", a->chunk_kib, "Target KiB per data chunk")
      ->check(CLI::Range(int64_t{1}, int64_t{16384}))
      ->capture_default_str();
  cmd->add_option("--victim", a->victim, "The data node that fails (0..5)")
      ->check(CLI::Range(int64_t{0}, int64_t{5}))
      ->capture_default_str();
  cmd->add_option("--min-available", a->min_available, "prm: share of the samples that must be available")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--class-tolerance", a->class_tolerance, "prm: largest allowed change of a class's share")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--important-classes", a->important_classes, "approx: classes whose chunks are rebuilt first")
      ->capture_default_str();
  cmd->add_option("--shuffle-window", a->shuffle_window, "Training: data.shuffle_window_chunks")
      ->check(CLI::Range(int64_t{0}, int64_t{1 << 20}))
      ->capture_default_str();
  cmd->add_option("--cache-chunks", a->cache_chunks, "Training: data.cache_chunks")
      ->check(CLI::Range(int64_t{1}, int64_t{1 << 20}))
      ->capture_default_str();
  cmd->add_option("--batch-size", a->batch_size, "Training batch")
      ->check(CLI::Range(int64_t{1}, int64_t{15000}))
      ->capture_default_str();
  cmd->add_option("--lr", a->lr, "SGD learning rate")->check(CLI::Range(1e-6, 10.0))->capture_default_str();
  cmd->add_option("--threads", a->threads, "Training compute threads (the data nodes need the other core)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->capture_default_str();
  cmd->add_option("--data", a->data_dir, "Fashion-MNIST directory")->capture_default_str();
  cmd->add_option("--recover-via", a->recover_via,
                  "Who rebuilds at the failure: the resident recovery service ('tenax store serve', started with the "
                  "nodes) or a 'tenax store recover' process started then")
      ->check(CLI::IsMember({"service", "process"}))
      ->capture_default_str();
  cmd->add_option("--seeds", a->seeds, "Training seeds: every run (no_failure and each policy) once per seed; "
                                       "accuracy gaps are averaged, times and bytes taken as medians")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  cmd->add_option("--policies", a->policies, "Recovery policies to run (full, approx, prm)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--stand-in", a->stand_in,
                  "prm: data.stand_in of the training (neighbour: the next live chunk's sample; batch: another "
                  "sample of the same batch)")
      ->check(CLI::IsMember({"neighbour", "batch"}))
      ->capture_default_str();
  cmd->add_option("--timeout", a->timeout_seconds, "Time limit of one run, seconds")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}))
      ->capture_default_str();
}

}  // namespace tenax::bench
