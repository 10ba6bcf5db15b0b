#include "cli_app.h"

#include <cstdio>
#include <exception>

namespace tenax::cli {

int ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "tenax %s: error: %s\n", command.c_str(), status.message().c_str());
  switch (status.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kCancelled:
      return 130;
    case StatusCode::kInternal:
      return 1;
    case StatusCode::kPeerLost:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnavailable:
      return 3;  // another process or the network failed
    default:
      return 2;
  }
}

int RunApp(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string where = app.get_name();
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    std::fprintf(stderr, "%s: error: %s (see '%s --help')\n", where.c_str(), e.what(), where.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", app.get_name().c_str(), e.what());
    return 1;
  }
  return exit_code;
}

}  // namespace tenax::cli
