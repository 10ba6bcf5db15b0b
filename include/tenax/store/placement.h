// Where the chunks of each stripe live (layer `store`, docs/store.md).
//
// - No stripe has two chunks on one data node while there are at least k+m
//   nodes, so one lost node loses at most one chunk of every stripe.
// - Where nodes name zones, a stripe's chunks are spread over as many
//   zones as possible (the least-used zone of the stripe first), so a lost
//   zone loses as few chunks of a stripe as the zones allow.
// - Among equal candidates the node holding the fewest chunks of the kind
//   being placed (data or parity) wins, then the fewest chunks, so nodes
//   fill evenly and every node holds data and parity alike; ties go
//   round-robin from the stripe number.
//
// Pure functions, deterministic; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::store {

struct DataNodeInfo {
  std::string name;  // for errors and logs
  std::string zone;  // "" = unknown (all unknown zones count as one)
};

// For every stripe, the node (index into `nodes`) of each of its
// `chunks_per_stripe` chunks, of which the first `data_per_stripe` are data
// (data and parity chunks are each spread evenly). FailedPrecondition,
// naming the counts, when there are fewer nodes than chunks per stripe.
Result<std::vector<std::vector<int>>> PlaceStripes(uint64_t stripes, int chunks_per_stripe, int data_per_stripe,
                                                   const std::vector<DataNodeInfo>& nodes);

struct Replacement {
  int node = -1;
  // True when every live node already holds a chunk of this stripe (fewer
  // live nodes than k+m): the stripe then survives fewer node losses.
  bool shares_a_node = false;
};

// A node for a rebuilt chunk of a stripe whose chunks sit on
// `stripe_nodes` (-1 for a lost one), among nodes with alive[i]: one
// holding no chunk of the stripe if any (least used zone of the stripe,
// then least loaded by `load`), else the live node holding the fewest.
// FailedPrecondition when no node is alive.
Result<Replacement> PlaceReplacement(const std::vector<int>& stripe_nodes, const std::vector<DataNodeInfo>& nodes,
                                     const std::vector<bool>& alive, const std::vector<uint64_t>& load);

}  // namespace tenax::store
