#include "tenax/sched/emulate/topology.h"

#include <set>
#include <toml++/toml.h>

namespace tenax::sched {
namespace {

net::LinkShape ToShape(const LinkSpec& s, bool with_bandwidth) {
  net::LinkShape shape;
  shape.delay = std::chrono::microseconds(static_cast<int64_t>(s.delay_ms * 1000.0));
  shape.loss = s.loss;
  if (with_bandwidth) shape.bandwidth_bytes_per_second = s.bandwidth_gbps * 1e9 / 8.0;
  return shape;
}

void ParseLink(ConfigReader& r, const std::string& table, LinkSpec& link) {
  link.delay_ms = r.Real(table + ".delay_ms", link.delay_ms, 0, 10000);
  link.loss = r.Real(table + ".loss", link.loss, 0, 0.5);
  link.bandwidth_gbps = r.Real(table + ".bandwidth_gbps", link.bandwidth_gbps, 0, 400);
}

bool GoodName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
  }
  return true;
}

}  // namespace

int TopologySpec::total_slots() const {
  int n = 0;
  for (const HostSpec& h : hosts) n += h.slots;
  return n;
}

const LinkSpec& TopologySpec::Between(const HostSpec& a, const HostSpec& b) const {
  return a.zone == b.zone ? same_zone : cross_zone;
}

net::EmulatedLinks TopologySpec::ToEmulatedLinks(bool with_bandwidth) const {
  net::EmulatedLinks e;
  for (const HostSpec& h : hosts) e.zone_of[h.name] = h.zone;
  e.same_zone = ToShape(same_zone, with_bandwidth);
  e.cross_zone = ToShape(cross_zone, with_bandwidth);
  e.same_zone_rate = same_zone.bandwidth_gbps * 1e9 / 8.0;
  e.cross_zone_rate = cross_zone.bandwidth_gbps * 1e9 / 8.0;
  return e;
}

void ParseTopology(const ConfigDoc& doc, ConfigReader& r, int64_t processes, TopologySpec& t, PlacementConfig& p) {
  (void)doc;
  const bool has_topology = r.has("topology.hosts");
  for (const char* key : {"topology.mode", "topology.same_zone", "topology.cross_zone", "placement.policy",
                          "placement.zone", "placement.weights", "placement.probe_seconds",
                          "placement.link_half_life_seconds", "placement.migrate", "placement.migrate_max_rtt_ms",
                          "placement.migrate_min_gbps", "placement.migrate_max_loss"}) {
    if (!has_topology && r.has(key)) r.Fail(key, "needs topology.hosts (the emulated hosts and their zones)");
  }
  if (!has_topology) return;
  t.mode = r.Choice("topology.mode", t.mode, {"auto", "namespaces", "loopback"});
  ParseLink(r, "topology.same_zone", t.same_zone);
  ParseLink(r, "topology.cross_zone", t.cross_zone);
  const toml::node* hosts = r.Node("topology.hosts");
  const toml::array* a = hosts ? hosts->as_array() : nullptr;
  const std::string example = "e.g. hosts = [ { name = \"h1\", zone = \"a\", slots = 2 } ]";
  if (!a || a->empty() || a->size() > 64) {
    r.Fail("topology.hosts", "must be an array of 1..64 host tables, " + example);
    return;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < a->size(); ++i) {
    const std::string where = "host " + std::to_string(i);
    const toml::table* h = (*a)[i].as_table();
    if (!h) {
      r.Fail("topology.hosts", where + " must be a table, " + example);
      return;
    }
    HostSpec spec;
    for (const auto& [k, v] : *h) {
      const std::string key(k.str());
      if (key == "name" && v.is_string()) {
        spec.name = *v.value<std::string>();
      } else if (key == "zone" && v.is_string()) {
        spec.zone = *v.value<std::string>();
      } else if (key == "slots" && v.is_integer()) {
        const int64_t s = *v.value<int64_t>();
        if (s < 1 || s > 64) {
          r.Fail("topology.hosts", where + ": slots must be 1..64");
          return;
        }
        spec.slots = static_cast<int>(s);
      } else {
        r.Fail("topology.hosts", where + ": unknown or mistyped key '" + key +
                                     "' (a host has name and zone (strings) and slots (an integer))");
        return;
      }
    }
    if (!GoodName(spec.name) || !GoodName(spec.zone)) {
      r.Fail("topology.hosts", where + ": name and zone must be 1..32 letters, digits, '-' or '_'");
      return;
    }
    if (!names.insert(spec.name).second) {
      r.Fail("topology.hosts", "host '" + spec.name + "' is listed twice");
      return;
    }
    t.hosts.push_back(spec);
  }
  if (t.total_slots() < processes) {
    r.Fail("topology.hosts", "the hosts have " + std::to_string(t.total_slots()) + " slots but the job starts " +
                                 std::to_string(processes) +
                                 " processes that need one each (its workers, cluster.spares, async servers and "
                                 "a coded job's decoder): add hosts or slots");
  }
  p.policy = r.Choice("placement.policy", p.policy, {"network_aware", "spread", "pack"});
  const std::string zone = r.Choice("placement.zone", "soft", {"soft", "hard"});
  p.zone = zone == "hard" ? ZoneConstraint::kHard : ZoneConstraint::kSoft;
  p.weights.throughput = r.Real("placement.weights.throughput", p.weights.throughput, 0, 1000);
  p.weights.delay = r.Real("placement.weights.delay", p.weights.delay, 0, 1000);
  p.weights.loss = r.Real("placement.weights.loss", p.weights.loss, 0, 1000);
  if (Status st = ValidateWeights(p.weights); !st.ok()) r.Fail("placement.weights", st.message());
  p.probe_seconds = r.Real("placement.probe_seconds", p.probe_seconds, 0.2, 600);
  p.migrate = r.Bool("placement.migrate", p.migrate);
  // A move must see a degraded link within seconds, not minutes.
  p.link_half_life_seconds = r.Real("placement.link_half_life_seconds", p.migrate ? 10.0 : 60.0, 1, 3600);
  DegradationThresholds& m = p.migrate_thresholds;
  m.max_rtt_ms = r.Real("placement.migrate_max_rtt_ms", m.max_rtt_ms, 0.01, 100000);
  m.min_throughput_gbps = r.Real("placement.migrate_min_gbps", m.min_throughput_gbps, 0, 100000);
  m.max_loss = r.Real("placement.migrate_max_loss", m.max_loss, 0, 1);
  for (const char* key : {"placement.migrate_max_rtt_ms", "placement.migrate_min_gbps", "placement.migrate_max_loss"}) {
    if (!p.migrate && r.has(key)) r.Fail(key, "only applies with placement.migrate = true");
  }
}

}  // namespace tenax::sched
