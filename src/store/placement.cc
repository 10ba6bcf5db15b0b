#include "tenax/store/placement.h"

#include <limits>
#include <map>
#include <tuple>

namespace tenax::store {
namespace {

// How many of `chosen` sit in each zone.
std::map<std::string, int> ZoneUse(const std::vector<int>& chosen, const std::vector<DataNodeInfo>& nodes) {
  std::map<std::string, int> use;
  for (int n : chosen) {
    if (n >= 0) ++use[nodes[static_cast<size_t>(n)].zone];
  }
  return use;
}

}  // namespace

Result<std::vector<std::vector<int>>> PlaceStripes(uint64_t stripes, int chunks_per_stripe, int data_per_stripe,
                                                   const std::vector<DataNodeInfo>& nodes) {
  const int n = static_cast<int>(nodes.size());
  if (chunks_per_stripe < 1) return InvalidArgument("a stripe needs at least one chunk");
  if (n < chunks_per_stripe) {
    return FailedPrecondition("a stripe's " + std::to_string(chunks_per_stripe) +
                              " chunks go to different data nodes, and only " + std::to_string(n) +
                              " are available: start at least " + std::to_string(chunks_per_stripe) +
                              " data nodes or lower k + m");
  }
  // Chunks held, and of those the parity ones: both kinds spread evenly.
  std::vector<uint64_t> load(static_cast<size_t>(n), 0), parity_load(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> out;
  out.reserve(static_cast<size_t>(stripes));
  for (uint64_t s = 0; s < stripes; ++s) {
    std::vector<int> chosen;
    std::vector<bool> used(static_cast<size_t>(n), false);
    for (int c = 0; c < chunks_per_stripe; ++c) {
      const std::map<std::string, int> zones = ZoneUse(chosen, nodes);
      const bool parity = c >= data_per_stripe;
      int best = -1;
      std::tuple<int, uint64_t, uint64_t, int> best_key{std::numeric_limits<int>::max(), 0, 0, 0};
      for (int i = 0; i < n; ++i) {
        if (used[static_cast<size_t>(i)]) continue;
        auto z = zones.find(nodes[static_cast<size_t>(i)].zone);
        const int rotation = static_cast<int>((static_cast<uint64_t>(i) + static_cast<uint64_t>(n) -
                                               (s + static_cast<uint64_t>(c)) % static_cast<uint64_t>(n)) %
                                              static_cast<uint64_t>(n));
        const uint64_t kind_load =
            parity ? parity_load[static_cast<size_t>(i)] : load[static_cast<size_t>(i)] - parity_load[static_cast<size_t>(i)];
        const std::tuple<int, uint64_t, uint64_t, int> key{z == zones.end() ? 0 : z->second, kind_load,
                                                           load[static_cast<size_t>(i)], rotation};
        if (best < 0 || key < best_key) best = i, best_key = key;
      }
      used[static_cast<size_t>(best)] = true;
      ++load[static_cast<size_t>(best)];
      if (parity) ++parity_load[static_cast<size_t>(best)];
      chosen.push_back(best);
    }
    out.push_back(std::move(chosen));
  }
  return out;
}

Result<Replacement> PlaceReplacement(const std::vector<int>& stripe_nodes, const std::vector<DataNodeInfo>& nodes,
                                     const std::vector<bool>& alive, const std::vector<uint64_t>& load) {
  const std::map<std::string, int> zones = ZoneUse(stripe_nodes, nodes);
  Replacement best;
  std::tuple<int, int, uint64_t, size_t> best_key{};
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i >= alive.size() || !alive[i]) continue;
    int held = 0;
    for (int n : stripe_nodes) held += n == static_cast<int>(i) ? 1 : 0;
    auto z = zones.find(nodes[i].zone);
    const std::tuple<int, int, uint64_t, size_t> key{held, z == zones.end() ? 0 : z->second,
                                                     i < load.size() ? load[i] : 0, i};
    if (best.node < 0 || key < best_key) {
      best.node = static_cast<int>(i);
      best.shares_a_node = held > 0;
      best_key = key;
    }
  }
  if (best.node < 0) return FailedPrecondition("no data node is alive to hold a rebuilt chunk");
  return best;
}

}  // namespace tenax::store
