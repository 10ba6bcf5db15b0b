// tenax storage --dir DIR [--listen HOST:PORT] [--name NAME] [--link-gbps G]
// One data node of the erasure-coded store; the role is store/storage_node.h.
#include <cstdio>

#include "command.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/auth.h"
#include "tenax/net/host_port.h"
#include "tenax/store/storage_node.h"

namespace tenax::cli {
namespace {

struct StorageArgs {
  std::string dir, listen = "127.0.0.1:0", name = "storage";
  double link_gbps = 0;
  int64_t max_chunk_mib = 16;
  std::string log_level = "info";
};

Status RunStorage(const StorageArgs& a) {
  TENAX_ASSIGN_OR_RETURN(net::HostPort hp, net::ParseHostPort(a.listen));
  TENAX_ASSIGN_OR_RETURN(std::string secret, net::ResolveSecret(""));
  InitLogging(a.name, a.log_level);
  InstallStopHandlers();
  store::StorageNodeOptions o;
  o.name = a.name;
  o.dir = a.dir;
  o.listen_host = hp.host;
  o.port = hp.port;
  o.secret = secret;
  o.max_chunk_bytes = static_cast<size_t>(a.max_chunk_mib) << 20;
  o.link.bandwidth_bytes_per_second = a.link_gbps * 1e9 / 8;
  o.stop = [] { return StopRequested(); };
  o.on_ready = [&a](uint16_t port, uint64_t chunks, uint64_t quarantined) {
    // One line on stdout for whoever started us (tests, scripts).
    std::printf("data node %s listening on port %u with %llu chunks (%llu quarantined)\n", a.name.c_str(), port,
                static_cast<unsigned long long>(chunks), static_cast<unsigned long long>(quarantined));
    std::fflush(stdout);
  };
  TENAX_ASSIGN_OR_RETURN(store::StorageNodeReport r, store::RunStorageNode(o));
  std::printf("data node %s stopped: %llu chunks held, %llu reads, %llu writes, %llu bad chunks quarantined\n",
              a.name.c_str(), static_cast<unsigned long long>(r.chunks), static_cast<unsigned long long>(r.gets),
              static_cast<unsigned long long>(r.puts), static_cast<unsigned long long>(r.bad_chunks));
  return Status::Ok();
}

}  // namespace

void AddStorageCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<StorageArgs>();
  CLI::App* cmd = root.add_subcommand("storage", "One data node of the erasure-coded store: serve a directory's chunks over the transport");
  cmd->add_option("--dir", a->dir, "The node's disk: a directory of chunk files (created if absent)")->required();
  cmd->add_option("--listen", a->listen, "Address to serve on (port 0 = any free port)")->capture_default_str();
  cmd->add_option("--name", a->name, "Name in logs and in clients' errors")->capture_default_str();
  cmd->add_option("--link-gbps", a->link_gbps, "Emulated link rate of this node's replies in Gbit/s (0 = unshaped)")
      ->check(CLI::Range(0.0, 400.0))
      ->capture_default_str();
  cmd->add_option("--max-chunk-mib", a->max_chunk_mib, "Largest chunk a client may write (staging region size)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  cmd->add_option("--log-level", a->log_level, "trace, debug, info, warn or error")->capture_default_str();
  cmd->footer("The cluster secret comes from $TENAX_SECRET (at least 16 bytes).");
  cmd->callback([a, &exit_code] {
    Status st = RunStorage(*a);
    exit_code = st.ok() ? 0 : ReportError("storage", st);
  });
}

}  // namespace tenax::cli
