// A recovery's report as JSON (layer `store`): what `tenax store recover
// --json` prints and what the resident recovery service (recovery_service.h)
// sends back, one shape for both. Also the approx policy's tiering by
// important classes, shared by the command and the service.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "tenax/store/recovery.h"

namespace tenax::store {

// At most `max_lost` lost chunks are listed (then "lost_not_listed" counts
// the rest): a network reply stays bounded for a dataset of many chunks.
nlohmann::json LostChunksJson(const std::vector<FoundLoss>& lost,
                              size_t max_lost = std::numeric_limits<size_t>::max());
nlohmann::json RecoveryReportJson(const RecoveryReport& r, size_t max_lost = std::numeric_limits<size_t>::max());

// approx: a data chunk holding any sample of an important class is tier 0,
// the others tier 1 (none important: every chunk is tier 0).
std::function<int(const StoredChunk&)> TierByImportantClasses(std::vector<int> important);

}  // namespace tenax::store
