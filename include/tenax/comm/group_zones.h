// The zone of every member of a group, and whether the zone-hierarchical
// allreduce (hierarchical_allreduce.h) can run over them. An elastic job's
// ranks change with every membership generation, so its members cannot be
// handed a zone list once at start as a fixed job's are: each generation
// works the list out here, from what every member already knows alike.
//
// The source is the emulated topology (net/emulated_links.h): this Node's
// emulated host, each peer's from its handshake, and the links file's
// host -> zone map, which every process of the job was given. Every member
// of a group therefore computes the same list from the same roster.
//
// Pure functions of the Node's state; call from the Node's thread.
#pragma once

#include <string>
#include <vector>

#include "tenax/comm/group.h"

namespace tenax::comm {

struct GroupZones {
  std::vector<std::string> zone_of_rank;  // index = rank; empty when any member's zone is unknown
  std::string why_unknown;                // why it is empty ("" when known)
};

// The zones of `group`'s members from the emulated topology.
GroupZones ZonesOfGroup(const Group& group);

// "" when the zone-hierarchical allreduce can run over these zones (two or
// more zones, all of equal size), else why not, e.g. "zones of unequal
// size (zone-a: 2, zone-b: 1)".
std::string WhyNotHierarchical(const std::vector<std::string>& zone_of_rank);

// "zone-a: 2, zone-b: 2": members per zone, zones in order of their lowest rank.
std::string DescribeZones(const std::vector<std::string>& zone_of_rank);

}  // namespace tenax::comm
