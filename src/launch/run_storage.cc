#include "run_storage.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tenax/core/files.h"

namespace tenax {
namespace {

// The JSON object a `tenax store put --json` printed last.
Result<nlohmann::json> PutReport(const std::vector<std::string>& lines, const std::string& what) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    auto j = nlohmann::json::parse(*it, nullptr, false);
    if (!j.is_discarded() && j.is_object()) return j;
  }
  return Internal(what + " printed no JSON report");
}

}  // namespace

Result<RunStorage> RunStorage::Start(const TrainConfig& config, const std::string& self, const std::string& host,
                                     const std::string& out_dir, ProcessSupervisor& children, Deadline deadline) {
  const StorageConfig& s = config.storage;
  RunStorage st;
  st.root_ = out_dir + "/store";
  st.catalog_ = st.root_ + "/catalog.db";
  // A store belongs to the run that built it: a previous run's chunks and
  // catalog would be stale (its failed node, its recovered chunks).
  std::error_code ec;
  std::filesystem::remove_all(st.root_, ec);
  if (ec) return IoError(st.root_ + ": cannot remove the previous run's store: " + ec.message());
  TENAX_RETURN_IF_ERROR(EnsureWritableDir(st.root_));

  std::vector<std::string> node_flags;
  for (int64_t i = 0; i < s.nodes; ++i) {
    const std::string name = st.NodeName(i);
    std::vector<std::string> argv = {self,     "storage", "--dir",       st.NodeDir(i), "--name", name, "--listen",
                                     host + ":0", "--log-level", "error"};
    if (s.link_gbps > 0) argv.insert(argv.end(), {"--link-gbps", fmt::format("{}", s.link_gbps)});
    TENAX_ASSIGN_OR_RETURN(size_t index, children.StartCaptured("storage " + name, argv));
    children.ExpectExit(index);  // the fault plan may kill it; the job reads around a lost node
    st.processes_.push_back(index);
  }
  for (int64_t i = 0; i < s.nodes; ++i) {
    TENAX_ASSIGN_OR_RETURN(std::string line,
                           children.WaitForLine(st.processes_[static_cast<size_t>(i)], "listening on port ", deadline));
    int port = std::atoi(line.c_str() + line.find("listening on port ") + 18);
    if (port <= 0 || port > 65535) return Internal("storage " + st.NodeName(i) + " printed no port: " + line);
    node_flags.insert(node_flags.end(), {"--node", host + ":" + std::to_string(port)});
  }

  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string split : {"train", "test"}) {
    std::vector<std::string> argv = {self,   "store", "put",  "--catalog", st.catalog_, "--data", s.source_dir,
                                     "--split", split,   "--k",  std::to_string(s.data_chunks), "--m",
                                     std::to_string(s.parity_chunks), "--chunk-bytes",
                                     std::to_string(s.chunk_kib * 1024), "--json"};
    if (split == "train") {
      argv.insert(argv.end(), {"--zones", std::to_string(s.zones > 0 ? s.zones : s.nodes)});
      argv.insert(argv.end(), node_flags.begin(), node_flags.end());
    }
    const std::string what = "tenax store put (" + split + ")";
    TENAX_ASSIGN_OR_RETURN(size_t index, children.StartCaptured(what, argv));
    children.ExpectExit(index);  // its failure is reported here, with its output
    TENAX_ASSIGN_OR_RETURN(int code, children.WaitForExit(index, deadline));
    if (code != 0) {
      std::string said;
      for (const auto& l : children.Lines(index)) said += (said.empty() ? "" : " | ") + l;
      return Unavailable(what + " exited with " + std::to_string(code) + (said.empty() ? "" : ": " + said));
    }
    TENAX_ASSIGN_OR_RETURN(nlohmann::json put, PutReport(children.Lines(index), what));
    st.stored_bytes_ += put.value("bytes_written", int64_t{0});
  }
  st.put_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (config.store_recovery_policy != "none" && config.store_recovery_service.empty()) {
    std::vector<std::string> argv = {self, "store", "serve", "--catalog", st.catalog_, "--listen", host + ":0",
                                     "--log-level", "warn"};
    if (s.link_gbps > 0) argv.insert(argv.end(), {"--link-gbps", fmt::format("{}", s.link_gbps)});
    TENAX_ASSIGN_OR_RETURN(size_t index, children.StartCaptured("store recovery service", argv));
    children.ExpectExit(index);  // stopped with the nodes at the end
    st.service_process_ = index;
    TENAX_ASSIGN_OR_RETURN(std::string line, children.WaitForLine(index, "listening on port ", deadline));
    const int port = std::atoi(line.c_str() + line.find("listening on port ") + 18);
    if (port <= 0 || port > 65535) return Internal("the store's recovery service printed no port: " + line);
    st.service_ = host + ":" + std::to_string(port);
  }
  spdlog::info("store: {} data nodes under {}, {} bytes stored in {:.1f} s", s.nodes, st.root_, st.stored_bytes_,
               st.put_seconds_);
  return st;
}

}  // namespace tenax
