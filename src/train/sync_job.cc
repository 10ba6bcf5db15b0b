#include "tenax/train/sync_job.h"

#include <sstream>

namespace tenax {

Result<ConfigDoc> LoadConfigWithOverrides(const std::string& path, const std::vector<std::string>& overrides) {
  TENAX_ASSIGN_OR_RETURN(ConfigDoc doc, ConfigDoc::Load(path));
  for (const auto& o : overrides) TENAX_RETURN_IF_ERROR(doc.Override(o));
  return doc;
}

namespace {
Result<SyncJob> FromDoc(ConfigDoc doc) {
  TENAX_ASSIGN_OR_RETURN(TrainConfig config, ParseTrainConfig(doc));
  if (config.mode != "sync") {
    return InvalidArgument(doc.source_name() + ": mode is \"" + config.mode +
                           "\"; cluster jobs need mode = \"sync\" (use 'tenax train' for a single process)");
  }
  std::ostringstream text;
  text << doc.table() << "\n";
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

}  // namespace tenax
