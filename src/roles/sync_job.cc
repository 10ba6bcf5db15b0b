#include "tenax/roles/sync_job.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "tenax/core/config_secret.h"
#include "tenax/store/catalog.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/data/npy.h"

namespace tenax {

Result<ConfigDoc> LoadConfigWithOverrides(const std::string& path, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) TENAX_RETURN_IF_ERROR(CheckOverrideHoldsNoSecret(o));
  TENAX_ASSIGN_OR_RETURN(ConfigDoc doc, ConfigDoc::Load(path));
  TENAX_RETURN_IF_ERROR(CheckSecretFileMode(path, doc.table()));
  for (const auto& o : overrides) TENAX_RETURN_IF_ERROR(doc.Override(o));
  return doc;
}

namespace {
Result<SyncJob> FromDoc(ConfigDoc doc) {
  TENAX_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(doc));
  if (config.mode != "sync" && config.mode != "async" && config.mode != "coded") {
    return InvalidArgument(doc.source_name() + ": mode is \"" + config.mode +
                           "\"; cluster jobs need mode = \"sync\", \"async\" or \"coded\" (use 'tenax train' for a single process)");
  }
  // The copy handed to the coordinator (its state file, the workers) holds no secret.
  std::ostringstream text;
  text << WithoutSecret(doc.table()) << "\n";
  return SyncJob{std::move(doc), std::move(config), text.str()};
}
}  // namespace

Result<SyncJob> LoadSyncJob(const std::string& path, const std::vector<std::string>& overrides) {
  TENAX_ASSIGN_OR_RETURN(ConfigDoc doc, LoadConfigWithOverrides(path, overrides));
  return FromDoc(std::move(doc));
}

Result<SyncJob> ParseSyncJob(const std::string& toml_text, const std::string& source) {
  TENAX_ASSIGN_OR_RETURN(ConfigDoc doc, ConfigDoc::Parse(toml_text, source));
  return FromDoc(std::move(doc));
}

Result<int64_t> AsyncTotalSteps(const TrainConfig& c) {
  int64_t n = kFashionMnistTrainSamples;  // its loader refuses any other count
  if (c.data_format == kStoreFormat) {
    TENAX_ASSIGN_OR_RETURN(auto catalog, store::StoreCatalog::Open(c.store_catalog));
    TENAX_ASSIGN_OR_RETURN(auto manifest, catalog->Manifest(c.store_train_dataset));
    n = static_cast<int64_t>(manifest.layout.records);
  } else if (c.data_format == kNpyFormat) {
    TENAX_ASSIGN_OR_RETURN(auto header, ReadNpyFileHeader(c.train_labels));
    if (header.shape.empty()) return InvalidArgument(c.train_labels + ": labels without a first dimension");
    n = header.shape[0];
  }
  if (c.train_limit > 0) n = std::min(n, c.train_limit);
  const int64_t per_epoch = n / c.batch_size;
  if (per_epoch < 1) {
    return InvalidArgument("train.batch_size " + std::to_string(c.batch_size) + " exceeds the " + std::to_string(n) +
                           " training samples");
  }
  int64_t total = per_epoch * c.epochs;
  if (c.max_steps > 0) total = std::min(total, c.max_steps);
  return total;
}

Result<net::HostPort> ResolveCoordinator(const std::string& flag, const TrainConfig& config) {
  std::string coordinator = flag;
  if (coordinator.empty() && std::getenv("TENAX_COORDINATOR")) coordinator = std::getenv("TENAX_COORDINATOR");
  if (coordinator.empty()) coordinator = config.cluster.coordinator;
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(coordinator));
  if (hp.port == 0) {
    return InvalidArgument("coordinator address " + coordinator +
                           " has no port: set cluster.coordinator, --coordinator or $TENAX_COORDINATOR");
  }
  return hp;
}

}  // namespace tenax
