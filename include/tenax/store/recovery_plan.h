// Which lost chunks to rebuild first (layer `store`, docs/store.md): the
// three recovery policies of the store, as plans over the lost chunks.
//
// - full: every lost chunk (data and parity), in stripe order.
// - prm (Hu et al., IWQoS'22, "partial recovery"): training tolerates a
//   partly missing dataset as long as what remains still looks like the
//   whole. From the global view (every chunk's sample count and class
//   histogram) the planner picks the smallest set of lost *data* chunks to
//   rebuild first such that, with them back,
//     (1) every class's share of the available samples is within
//         `class_tolerance` (absolute) of its share in the whole dataset,
//     (2) at least `min_available` of the dataset's samples are available.
//   Greedy: while a condition fails, rebuild the lost chunk that most
//   lowers the largest class deviation (then the shortfall of samples),
//   per byte rebuilt; ties go to the lower stripe and index. Everything
//   else (the other data chunks, and all parity, which holds no samples)
//   is `later`: rebuilt in the background at low priority, or never.
// - approx (the approximate-code baseline: tiered protection): chunks are
//   ordered by importance tier (a chunk's tier is given by the caller, for
//   example from a class marked important); the first tier is rebuilt
//   first, the rest later.
//
// Pure functions, deterministic; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::store {

struct LostChunk {
  uint64_t stripe = 0;
  uint32_t index = 0;
  bool parity = false;
  uint64_t bytes = 0;                  // bytes a rebuild writes (reads are k x that)
  std::vector<uint64_t> class_counts;  // samples per class held (empty for parity)
  int tier = 0;                        // approx: 0 = most important
};

struct PrmParams {
  double class_tolerance = 0.01;  // absolute share: 0.01 = one percentage point
  double min_available = 0.9;     // share of the dataset's samples
};

struct RecoveryPlan {
  std::string policy;
  std::vector<size_t> first;  // indices into the lost chunks: rebuild before training resumes
  std::vector<size_t> later;  // rebuild in the background (or never)
  uint64_t first_bytes = 0, later_bytes = 0;
  // What training sees with `first` rebuilt (prm; full and approx report it too).
  double available_share = 0;          // available samples / all samples
  double max_class_deviation = 0;      // max over classes of |share - original share|
  double max_class_deviation_before = 0;  // with nothing rebuilt
};

// `class_totals`: the whole dataset's samples per class. InvalidArgument
// when a lost chunk's histogram has another number of classes, or holds
// more of a class than the dataset, or parameters are outside [0, 1].
Result<RecoveryPlan> PlanRecovery(const std::string& policy, const std::vector<uint64_t>& class_totals,
                                  const std::vector<LostChunk>& lost, const PrmParams& prm = {});

}  // namespace tenax::store
