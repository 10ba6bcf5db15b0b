// tenax server --job FILE --shard S --checkpoints DIR [--coordinator HOST:PORT] [--set k=v]
// One parameter-server shard of an asynchronous job; the role is
// roles/server_role.h.
#include <cstdio>

#include "command.h"
#include "tenax/roles/server_role.h"

namespace tenax::cli {
namespace {

Status RunServerCommand(const ServerRoleOptions& a) {
  TENAX_ASSIGN_OR_RETURN(ps::ServerOutcome out, RunServerRole(a));
  std::printf("shard %d: version %llu, %llu merges, %llu results rejected\n", a.shard,
              static_cast<unsigned long long>(out.version), static_cast<unsigned long long>(out.merges),
              static_cast<unsigned long long>(out.rejected));
  return Status::Ok();
}

}  // namespace

void AddServerCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<ServerRoleOptions>();
  CLI::App* cmd = root.add_subcommand("server", "One parameter-server shard of an asynchronous job (started by 'tenax run')");
  cmd->add_option("--job", a->job_path, "Job file (TOML, mode = \"async\")")->required()->type_name("FILE");
  cmd->add_option("--shard", a->shard, "Which shard of async.servers this process serves")->check(CLI::Range(0, 63));
  cmd->add_option("--checkpoints", a->checkpoint_dir,
                  "Checkpoint directory; a restart on it continues from its newest intact checkpoint "
                  "(default: runs/<job_id>/server-<shard>)")
      ->type_name("DIR");
  cmd->add_option("--coordinator", a->coordinator,
                  "Coordinator address (default: $TENAX_COORDINATOR, then cluster.coordinator)")
      ->type_name("HOST:PORT");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer("Exit status: 0 job done, 2 bad input or refused, 3 the job failed or a deadline passed, 130 stopped.");
  cmd->callback([a, &exit_code] {
    Status st = RunServerCommand(*a);
    exit_code = st.ok() ? 0 : ReportError("server", st);
  });
}

}  // namespace tenax::cli
