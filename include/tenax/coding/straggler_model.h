// Emulated stragglers (layer `coding`; docs/coded.md, "Stragglers:
// detection and emulation"): how much slower worker w is at training step
// t. Mode "coded" turns a slowdown x into a real delay: the worker sleeps
// (x-1) x its own measured compute time of that step, so the delay scales
// with the machine and a slow worker does not steal the others' cores.
//
// Models:
//  - none:   every worker at full speed (slowdown 1).
//  - iid:    each (worker, step) is slow independently with `probability`;
//            a slow step's factor is drawn uniformly from `slow`.
//  - markov: each worker is a two-state chain, active <-> slow, with
//            P(active -> slow) = p_slow and P(slow -> active) = p_recover per
//            step. In the long run a worker is slow p_slow/(p_slow+p_recover)
//            of the steps, in runs of mean length 1/p_recover (active runs
//            1/p_slow). Each step's factor is drawn uniformly from its
//            state's range (per step, not once per run).
//  - trace:  recorded (step, worker, slowdown) entries replayed.
//
// Determinism (the reason for the design): every worker process builds its
// own model and asks only about itself, and a slow worker may skip steps
// (it asks for step 7, then 12). So an answer depends only on (seed,
// worker, step), never on which calls came before or in which order: the
// randomness is a stateless hash (splitmix64) of (seed, stream, worker,
// step), and the Markov state at step t is the chain iterated from step 0
// with those per-step uniforms. The hash is fixed by this file's
// implementation; processes of one job run one binary.
//
// Threading: a model is not thread-safe (the Markov model caches the states
// it has computed, one bit per worker and step up to the highest step
// asked, so calls are amortised O(1)). Use one per thread or guard it.
//
// Failures: the factories and the trace parser return InvalidArgument with
// one line saying what would work; a built model never fails.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::coding {

// A slowdown drawn uniformly in [min, max]. 1 is full speed; valid ranges
// have 1 <= min <= max <= 1000, both finite (min == max: a fixed factor).
struct SlowdownRange {
  double min = 1.0;
  double max = 1.0;
};

struct IidStragglerParams {
  double probability = 0.1;      // P(slow) per (worker, step), in [0, 1]
  SlowdownRange slow{5.0, 5.0};  // the factor of a slow step
};

struct MarkovStragglerParams {
  double p_slow = 0.01;     // P(active -> slow) per step, in [0, 1]
  double p_recover = 0.01;  // P(slow -> active) per step, in [0, 1]
  SlowdownRange active{1.0, 1.0};
  SlowdownRange slow{5.0, 5.0};
  // Workers slow at step 0 (the others start active); duplicates are
  // harmless. Every worker's chain takes its first transition into step 1.
  std::vector<int> start_slow;
};

// From `step` on, `worker` runs at `slowdown` until its next entry (1 before
// its first). Of two entries for the same worker and step, the later one in
// the input wins.
struct TraceEntry {
  int64_t step = 0;
  int worker = 0;
  double slowdown = 1.0;
};

class StragglerModel {
 public:
  virtual ~StragglerModel() = default;
  // The factor by which `worker` is slower at `step`: finite and >= 1; 1 for
  // a worker outside [0, workers) or a negative step.
  virtual double Slowdown(int worker, int64_t step) = 0;
  // The model's state: iid drew the step slow, markov is in the slow state
  // (even if the slow range is {1, 1}), trace has a slowdown above 1. False
  // where Slowdown is 1 by the rule above.
  virtual bool Slow(int worker, int64_t step) = 0;
  // One line for logs and run summaries, e.g. "markov (p_slow 0.01,
  // p_recover 0.01, slow 5x, active 1x, start slow: 3)".
  virtual std::string Describe() const = 0;
};

std::unique_ptr<StragglerModel> MakeNoStragglers();

// InvalidArgument for workers < 1, a probability outside [0, 1] (or NaN), a
// SlowdownRange that is not valid (above), or start_slow naming a worker
// outside [0, workers).
Result<std::unique_ptr<StragglerModel>> MakeIidStragglers(int workers, const IidStragglerParams& params, uint64_t seed);
Result<std::unique_ptr<StragglerModel>> MakeMarkovStragglers(int workers, const MarkovStragglerParams& params,
                                                             uint64_t seed);
// Entries in any order (the model sorts them by step, stable).
// InvalidArgument for workers < 1, a worker outside [0, workers), a
// negative step, or a slowdown not in [1, 1000].
Result<std::unique_ptr<StragglerModel>> MakeTraceStragglers(int workers, std::vector<TraceEntry> entries);

// The text form of a trace: one entry a line, "step,worker,slowdown"
// (decimal; step and worker integers; spaces and tabs around fields
// allowed; CRLF line ends accepted), '#' starts a comment, blank lines are
// ignored. The result is sorted by step (stable: lines of one step keep
// their order). Errors are InvalidArgument naming `source` and the line,
// e.g. "trace.csv:3: worker 7 is not in this job (workers 0..3)", for: a
// line of more than 1 KiB, not 3 fields, a field that is not a number, a
// negative step, a worker outside [0, workers), a slowdown below 1, above
// 1000 or not finite, or more than 1,000,000 entries. Also for workers < 1.
// Linear in the text's size; safe on any bytes (fuzzed).
Result<std::vector<TraceEntry>> ParseStragglerTrace(std::string_view text, const std::string& source, int workers);

}  // namespace tenax::coding
