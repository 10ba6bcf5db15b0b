// The cluster secret in a job's configuration: what may leave the process.
// Processes of a job get the secret from $TENAX_SECRET or from their own job
// file, never from a copy of the configuration, so every copy that is written
// to a file, stored or sent leaves it out.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>

#include "tenax/core/status.h"

namespace tenax {

inline constexpr std::string_view kSecretConfigKey = "cluster.secret";

// `table` without cluster.secret.
toml::table WithoutSecret(const toml::table& table);

// A job file that holds cluster.secret must be readable by its owner only
// (like ssh's private keys): InvalidArgument naming the file, its mode and
// the fix when the group or others may read it; IoError when it cannot be
// inspected. Ok for a file without a secret.
Status CheckSecretFileMode(const std::string& path, const toml::table& table);

// `--set cluster.secret=...` puts the secret on a command line, which every
// user of the machine can read (ps): InvalidArgument for such an override,
// without echoing its value.
Status CheckOverrideHoldsNoSecret(std::string_view assignment);

}  // namespace tenax
