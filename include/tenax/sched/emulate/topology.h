// A job's emulated topology and its placement policy (layer sched,
// docs/placement.md): the [topology] and [placement] tables of a job file.
//
//   [topology]
//   mode = "auto"            # "namespaces" | "loopback" | "auto" (namespaces when root can make them)
//   hosts = [ { name = "h1", zone = "a", slots = 2 }, { name = "h2", zone = "b" } ]
//   same_zone  = { delay_ms = 0.05, loss = 0.0, bandwidth_gbps = 10 }
//   cross_zone = { delay_ms = 1.0,  loss = 0.001, bandwidth_gbps = 1 }
//
//   [placement]
//   policy = "network_aware" # | "spread" (round-robin over zones) | "pack" (hosts in order)
//   zone = "soft"            # | "hard"
//   weights = { throughput = 0.5, delay = 0.3, loss = 0.2 }
//   probe_seconds = 3        # how long the probes measure before placement
//   link_half_life_seconds = 60  # how fast the coordinator's link matrix forgets (10 with migrate)
//   migrate = false          # elastic jobs: move a member off a host whose links degrade
//   migrate_max_rtt_ms = 10  # ... when a link to another member is beyond any of these
//   migrate_min_gbps = 1     #     (0 = throughput not judged)
//   migrate_max_loss = 1     #     (1 = loss not judged)
//
// Pure data and parsing; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "tenax/core/config.h"
#include "tenax/net/emulated_links.h"
#include "tenax/sched/place/placer.h"

namespace tenax::sched {

struct LinkSpec {
  double delay_ms = 0;        // one-way, added at the transport seam
  double loss = 0;            // per transmission, at the transport seam
  double bandwidth_gbps = 0;  // 0 = unlimited; tc htb in namespaces, else the transport
};

struct HostSpec {
  std::string name;
  std::string zone;
  int slots = 1;
};

struct TopologySpec {
  std::string mode = "auto";  // "namespaces" | "loopback" | "auto"
  std::vector<HostSpec> hosts;  // empty: no emulated topology
  LinkSpec same_zone{0.05, 0.0, 10.0};
  LinkSpec cross_zone{1.0, 0.0, 1.0};

  bool enabled() const { return !hosts.empty(); }
  int total_slots() const;
  const LinkSpec& Between(const HostSpec& a, const HostSpec& b) const;
  // The transport seam's part: delay and loss always; bandwidth too when
  // `with_bandwidth` (loopback mode: no tc to carry it).
  net::EmulatedLinks ToEmulatedLinks(bool with_bandwidth) const;
};

struct PlacementConfig {
  std::string policy = "network_aware";
  ZoneConstraint zone = ZoneConstraint::kSoft;
  ScoreWeights weights;
  double probe_seconds = 3.0;
  // Half-life of the coordinator's time-decayed link matrix (LinkMatrix):
  // shorter sees a degraded link sooner, and forgets it sooner.
  double link_half_life_seconds = 60.0;
  // Live migration (docs/placement.md, "Moving a live worker"): `tenax run`
  // follows the matrix while the job runs and moves a member whose links
  // to the other members break `migrate_thresholds` (sched::DegradedSlots)
  // to a host whose links meet them: a spare there first, then the member
  // leaves at a step boundary. Elastic sync jobs only.
  bool migrate = false;
  // Loss not judged by default (1, not DegradationThresholds' 0.01): the
  // probes count a late answer as lost, a loaded machine makes late
  // answers, and a decayed mean keeps one bad round above 0.2 for seconds.
  // `tenax bench migrate` saw a worker moved across zones on a loss of
  // 0.214 between two healthy hosts, and the job ran 3x slower after.
  DegradationThresholds migrate_thresholds{1.0, 10.0, 1.0};
};

// Reads [topology] and [placement] (errors go to the reader, located at
// their key). `processes` is how many slots the job needs (workers, plus a
// coded job's decoder); fewer host slots is an error saying how many.
void ParseTopology(const ConfigDoc& doc, ConfigReader& r, int64_t processes, TopologySpec& topology,
                   PlacementConfig& placement);

}  // namespace tenax::sched
