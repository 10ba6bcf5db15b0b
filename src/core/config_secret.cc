#include "tenax/core/config_secret.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tenax {

namespace {
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

toml::table WithoutSecret(const toml::table& table) {
  toml::table copy = table;
  if (toml::table* cluster = copy["cluster"].as_table()) cluster->erase("secret");
  return copy;
}

Status CheckSecretFileMode(const std::string& path, const toml::table& table) {
  if (!table.at_path(kSecretConfigKey)) return Status::Ok();
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return IoError(path + ": cannot check its mode: " + std::strerror(errno));
  if ((st.st_mode & (S_IRGRP | S_IROTH)) == 0) return Status::Ok();
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return InvalidArgument(path + " holds cluster.secret but other users may read it (mode " + mode + "): run 'chmod 600 " +
                         path + "', or take the secret out of the file and set $TENAX_SECRET");
}

Status CheckOverrideHoldsNoSecret(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (Trim(assignment.substr(0, eq)) != kSecretConfigKey) return Status::Ok();
  return InvalidArgument(
      "--set cluster.secret=...: a command line is visible to every user of this machine (ps); set $TENAX_SECRET, "
      "or put the secret in a job file only you can read (chmod 600)");
}

}  // namespace tenax
