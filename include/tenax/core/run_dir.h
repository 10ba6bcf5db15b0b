// The names of a run directory's files, spelled once (as LevelDB's
// db/filename.h spells a database's): `tenax train`, `tenax run`, the roles
// it starts and `tenax report` all reach a run's files through RunDir.
//
//   DIR/config.toml        the effective configuration (the job's rank 0)
//   DIR/metrics.jsonl      one JSON record per event (launcher and rank 0)
//   DIR/summary.json       written last, atomically: the run finished
//   DIR/model.pt           the trained model
//   DIR/report.html        the self-contained report (tenax run, tenax report)
//   DIR/decoder.jsonl      a coded job's decoder events
//   DIR/coordinator.db     the coordinator's SQLite state (and its -wal, -shm)
//   DIR/coordinator.port, DIR/coordinator.metrics_port   ports it bound
//   DIR/server-N/          parameter-server shard N's checkpoints
//   DIR/reference/         the fault-free reference run (a run directory too)
//   DIR/reference.log      its output
//   DIR/logs/NAME.log      each child process's log
//
// A value type over the directory's path; header-only, no I/O.
#pragma once

#include <string>
#include <vector>

namespace tenax {

class RunDir {
 public:
  explicit RunDir(std::string dir) : dir_(std::move(dir)) {}

  const std::string& path() const { return dir_; }
  std::string config() const { return File("config.toml"); }
  std::string metrics() const { return File("metrics.jsonl"); }
  std::string summary() const { return File("summary.json"); }
  std::string model() const { return File("model.pt"); }
  std::string report() const { return File("report.html"); }
  std::string decoder_events() const { return File("decoder.jsonl"); }
  std::string coordinator_db() const { return File("coordinator.db"); }
  std::string coordinator_port() const { return File("coordinator.port"); }
  std::string coordinator_metrics_port() const { return File("coordinator.metrics_port"); }
  std::string server_checkpoints(const std::string& shard) const { return File("server-" + shard); }
  std::string reference() const { return File("reference"); }
  std::string reference_log() const { return File("reference.log"); }
  std::string logs() const { return File("logs"); }
  // DIR/logs/<name>.log
  std::string log(const std::string& name) const { return logs() + "/" + name + ".log"; }

  // The files a new run in the same directory removes first: what a
  // previous run left that would otherwise be taken for this run's.
  std::vector<std::string> PreviousRunFiles() const {
    std::vector<std::string> files;
    for (const char* name : {"summary.json", "coordinator.port", "coordinator.db", "coordinator.db-wal",
                             "coordinator.db-shm", "metrics.jsonl", "report.html", "coordinator.metrics_port"}) {
      files.push_back(File(name));
    }
    return files;
  }

 private:
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

}  // namespace tenax
