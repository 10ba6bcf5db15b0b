#include "tenax/store/recovery_json.h"

namespace tenax::store {

nlohmann::json LostChunksJson(const std::vector<FoundLoss>& lost, size_t max_lost) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < lost.size() && i < max_lost; ++i) {
    const FoundLoss& f = lost[i];
    out.push_back({{"stripe", f.chunk.stripe}, {"index", f.chunk.index}, {"parity", f.chunk.parity},
                   {"bytes", f.chunk.bytes}, {"reason", f.reason}});
  }
  return out;
}

nlohmann::json RecoveryReportJson(const RecoveryReport& r, size_t max_lost) {
  nlohmann::json j = {{"dataset", r.dataset},
                      {"policy", r.plan.policy},
                      {"lost_chunks", r.lost.size()},
                      {"first_chunks", r.plan.first.size()},
                      {"later_chunks", r.plan.later.size()},
                      {"first_bytes", r.plan.first_bytes},
                      {"later_bytes", r.plan.later_bytes},
                      {"chunks_rebuilt", r.chunks_rebuilt},
                      {"bytes_read", r.bytes_read},
                      {"bytes_written", r.bytes_written},
                      {"seconds", r.seconds},
                      {"available_share", r.plan.available_share},
                      {"max_class_deviation", r.plan.max_class_deviation},
                      {"max_class_deviation_before", r.plan.max_class_deviation_before},
                      {"shares_a_node", r.shares_a_node},
                      {"unrecoverable", r.unrecoverable},
                      {"unrecoverable_samples", r.unrecoverable_samples},
                      {"background", {{"ran", r.background.ran},
                                      {"chunks_rebuilt", r.background.chunks_rebuilt},
                                      {"bytes_read", r.background.bytes_read},
                                      {"bytes_written", r.background.bytes_written},
                                      {"seconds", r.background.seconds}}},
                      {"lost", LostChunksJson(r.lost, max_lost)}};
  if (r.lost.size() > max_lost) j["lost_not_listed"] = r.lost.size() - max_lost;
  return j;
}

std::function<int(const StoredChunk&)> TierByImportantClasses(std::vector<int> important) {
  return [important = std::move(important)](const StoredChunk& c) {
    if (important.empty()) return 0;
    for (int cls : important) {
      if (cls >= 0 && static_cast<size_t>(cls) < c.class_counts.size() && c.class_counts[static_cast<size_t>(cls)] > 0) {
        return 0;
      }
    }
    return 1;
  };
}

}  // namespace tenax::store
