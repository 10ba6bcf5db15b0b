// The [coded] and [stragglers] tables of a job file (mode "coded",
// docs/coded.md). Parsed with the rest of the job by ParseTrainConfig
// (job/train_config.h), which checks them against cluster.workers;
// docs/config.md describes every key. Header-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tenax::coding {

struct CodedConfig {
  // "cyclic" | "frc" (gradient codes), "wait_all" (uncoded, every worker),
  // "ignore_stragglers" (uncoded, the fastest n-s, rescaled).
  std::string scheme = "cyclic";
  int64_t stragglers = 1;  // s: workers a step does without (not wait_all)
  // "exact": decode once n-s arrived. "approx" (codes only): also decode
  // at the deadline from whatever arrived (least squares, error reported).
  std::string decoding = "exact";
  // approx: decode no later than this multiple of the time a typical fast
  // worker takes (the lower median of the workers' running mean arrival
  // times, from the step's start), > 1.
  double deadline = 1.5;
  int64_t shuffle_every = 0;  // steps between re-mappings of partitions; 0 = never
  // How the training set is cut into the n data partitions: "random" (a
  // seeded permutation) or "by_label" (label-sorted: each partition holds
  // a few classes, as data gathered per source often does).
  std::string partitioning = "random";
  // A worker whose recent arrival time exceeds this multiple of the lower
  // median of all workers' is reported as a straggler (and moved by the shuffle).
  double slow_factor = 2.0;
  // Stop after this many seconds of training (the decoder ends the job at
  // the first step past it); 0 = train every step. For comparisons at equal
  // wall-clock time.
  double max_seconds = 0;
};

// Emulated stragglers (coding/straggler_model.h): real delays in the
// worker processes, proportional to each worker's own compute time.
struct StragglerConfig {
  std::string model = "none";  // "none" | "iid" | "markov" | "trace"
  int64_t seed = 0;            // 0 = train.seed
  double probability = 0.1;    // iid: P(slow) per worker and step
  double slowdown = 5.0;       // iid, markov: the slow state's slowdown (min)
  double slowdown_max = 0;     // 0 = slowdown (a fixed factor)
  double active_slowdown = 1.0;      // markov: the active state's slowdown (min)
  double active_slowdown_max = 0;    // 0 = active_slowdown
  double p_slow = 0.01;              // markov: P(active -> slow) per step
  double p_recover = 0.01;           // markov: P(slow -> active) per step
  std::vector<int> slow_workers;     // markov: slow at step 0
  std::string trace;                 // trace: a file of "step,worker,slowdown" lines
};

}  // namespace tenax::coding
