// Emulated hosts and zones at the transport seam (docs/placement.md): when
// a job runs on an emulated topology, every tenax process knows which
// emulated host it is on, and the handshake tells each side the other's.
// A Node then shapes its one-sided traffic to a peer on another host with
// the delay, loss and (in loopback mode) bandwidth of the link between
// their zones. Kernel namespaces and tc carry the bandwidth where they
// exist; delay and loss always live here (tc netem is absent on our
// machines).
//
// The launcher hands this to its children through the environment:
// TENAX_EMULATED_HOST (this process's host) and TENAX_EMULATED_LINKS (a
// JSON file, EmulatedLinks::ToJson). Pure data; thread-compatible.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/net/link_shaper.h"

namespace tenax::net {

inline constexpr char kEmulatedHostEnvVar[] = "TENAX_EMULATED_HOST";
inline constexpr char kEmulatedLinksEnvVar[] = "TENAX_EMULATED_LINKS";

struct EmulatedLinks {
  std::map<std::string, std::string> zone_of;  // host -> zone
  LinkShape same_zone;                         // between two hosts of one zone
  LinkShape cross_zone;                        // between zones
  // Zone pairs with their own link (key: the two zone names, sorted).
  std::map<std::pair<std::string, std::string>, LinkShape> zone_pairs;

  // The links' nominal bandwidth in bytes/s (0 = unknown), also where the
  // kernel carries it and the shapes above have none: a slowed link (a
  // link fault, link_faults.h) runs at a fraction of it.
  double same_zone_rate = 0;
  double cross_zone_rate = 0;

  // The shape from host a to host b: ideal on one host or for an unknown host.
  LinkShape Between(const std::string& a, const std::string& b) const;
  // The nominal bandwidth between hosts a and b (0 on one host, for an
  // unknown host, or when not given).
  double NominalRate(const std::string& a, const std::string& b) const;

  std::string ToJson() const;
  // InvalidArgument naming the key for anything malformed.
  static Result<EmulatedLinks> FromJson(const std::string& text);
};

// This process's emulated host and the links, from the environment; nullopt
// when TENAX_EMULATED_HOST is unset. InvalidArgument when it is set but the
// links file is missing or malformed, or does not list the host.
Result<std::optional<std::pair<std::string, std::shared_ptr<const EmulatedLinks>>>> EmulatedLinksFromEnvironment();

}  // namespace tenax::net
