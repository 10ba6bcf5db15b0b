// Which allreduce a sync or elastic job's members run (layer `sched`,
// docs/placement.md): the flat ring, or the zone-hierarchical one
// (comm/hierarchical_allreduce.h) when the members span zones and the cost
// model (RingAllreduceSeconds and HierarchicalAllreduceSeconds over the
// probes' worst links) says it is cheaper.
//
// The flat ring stays, with the reason said, for: one zone; zones of
// unequal size (the hierarchical step needs one member per zone in each
// cross group); and any pair of members on different hosts whose link no
// probe has measured (the estimate would be a guess).
//
// Pure and thread-compatible: the same members and links give the same
// choice on every member, so the members agree without talking.
#pragma once

#include <string>
#include <vector>

#include "tenax/sched/probe/link_metrics.h"

namespace tenax::sched {

struct AllreduceChoice {
  bool hierarchical = false;
  std::string reason;             // one line for the run's summary
  std::vector<std::string> zones; // by rank: the zone names the hierarchical step uses
  int zone_count = 1, zone_size = 0;
  double ring_seconds = 0;        // estimates for `bytes`; 0 when not computed
  double hierarchical_seconds = 0;
};

// `members` in rank order (a member's node: name, zone; several members
// may share a node); `bytes` per allreduce (the gradients).
AllreduceChoice ChooseAllreduce(const std::vector<NodeState>& members, const LinkView& links, double bytes);

}  // namespace tenax::sched
