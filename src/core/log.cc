#include "tenax/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tenax {

void InitLogging(const std::string& process_name, const std::string& level) {
  auto logger = spdlog::stderr_color_mt(process_name);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
  auto lvl = spdlog::level::from_str(level);
  logger->set_level(lvl == spdlog::level::off && level != "off" ? spdlog::level::info : lvl);
  spdlog::set_default_logger(logger);
}

}  // namespace tenax
