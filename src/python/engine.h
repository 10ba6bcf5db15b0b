// The engine behind ProcessGroupTenax (include/tenax/python/
// process_group_tenax.h): the thread that owns the group's net::Node, the
// queue of collectives it runs in call order, and the primitives the
// collectives are built from (agreement, bulk messages under a key, the
// one-sided float32 sum). Private to src/python.
//
// Threading: Submit from any thread; every other method only from a job,
// on the engine's thread. Failures: jobs return Status; a transport
// failure (lost peer, deadline, protocol) is sticky (see Loop).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tenax/comm/allreduce.h"
#include "tenax/comm/group.h"
#include "tenax/core/status.h"
#include "tenax/net/node.h"
#include "cross_memory_sum.h"

namespace tenax::python {

// A collective's handle: its future carries the output tensors (what DDP's
// comm hooks read), or the error as a RuntimeError.
class TenaxWork final : public c10d::Work {
 public:
  TenaxWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // Waits for the op (bounded by the group's timeout) and throws its error.
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void Finish(const Status& st);
  // Valid once completed.
  const Status& status() const { return status_; }

 private:
  std::vector<at::Tensor> outputs_;
  Status status_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class TenaxEngine {
 public:
  // Rendezvous and connect (process_group_tenax.h); throws c10::Error when
  // that fails.
  TenaxEngine(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world, std::chrono::milliseconds timeout);
  // `connect` runs first on the engine's thread and must SetNode and
  // SetGroup (the elastic member's join); its error is thrown as above,
  // prefixed with `what`.
  using Job = std::function<Status(TenaxEngine&)>;
  TenaxEngine(Job connect, const std::string& what, std::chrono::milliseconds timeout);
  ~TenaxEngine();

  int rank() const { return rank_.load(); }
  int world() const { return world_.load(); }

  // Queues `job`; its Work completes with `outputs`, or fails with the
  // job's error prefixed with this rank and `what`. A `tolerant` job's Work
  // always completes (with whatever `outputs` hold): its error, if any, is
  // kept for TakeTolerated (an elastic step's allreduce, whose failure drops
  // the step instead of raising inside DDP's backward).
  c10::intrusive_ptr<c10d::Work> Submit(c10d::OpType type, std::string what, std::vector<at::Tensor> outputs, Job job,
                                        bool tolerant = false, bool runs_when_broken = false);
  // The first error of a tolerant job since the last call (OK if none).
  Status TakeTolerated();
  // Runs `job` on the engine's thread and waits for it (any thread but
  // the engine's). It runs even after a transport failure broke the group
  // (the elastic member's boundary replaces the group).
  Status RunAndWait(std::string what, Job job);

  // --- for jobs, on the engine's thread ---

  // Every rank passes a description of its part of the current collective
  // (or "... refused: why"); all fail alike, naming the rank that refused or
  // the first that disagrees with rank 0, before any tensor is read.
  Status Agree(const std::string& mine);
  // Every rank's `bytes` (ours included), by rank.
  Result<std::vector<std::string>> AllGather(uint64_t key, const std::string& bytes);
  Status Send(int to, uint64_t key, const std::string& bytes);
  // The next message from `from` under `key`; others are kept for their readers.
  Result<std::string> Receive(int from, uint64_t key);
  // In-place float32 sum of a contiguous tensor over every rank, times
  // `scale`: read straight out of the peers' memory when every rank is on
  // this host and the tensor is at least kCrossMemoryMinBytes
  // (cross_memory_sum.h), else on comm::Allreduce's registered buffers.
  Status FastSum(float* data, size_t count, float scale);
  static constexpr size_t kCrossMemoryMinBytes = size_t{1} << 18;

  // The Node and the group collectives run on (elastic members replace
  // the group at every generation; SetGroup drops what the old one kept).
  net::Node& node() { return *node_; }
  comm::Group& group() { return *group_; }
  void SetNode(std::unique_ptr<net::Node> node) { node_ = std::move(node); }
  void SetGroup(std::unique_ptr<comm::Group> group);
  std::unique_ptr<comm::Group> TakeGroup();
  Deadline OpDeadline() const { return Deadline::After(timeout_); }

  int64_t fast() const { return fast_; }
  int64_t bulk() const { return bulk_; }
  int64_t cross_memory() const { return cross_count_; }
  // "" until the current group's first large sum; then "on", or "off: why".
  std::string cross_memory_state() const;
  void CountBulk() { ++bulk_; }

  static constexpr uint64_t kCollectiveKey = 0;
  // send/recv travel under their tag, apart from collectives.
  static uint64_t P2pKey(int tag) { return (uint64_t{1} << 32) | static_cast<uint32_t>(tag); }
  // The cross-memory sum's rounds travel under the group's generation: an
  // elastic member's connections outlive a generation, and a round a peer
  // sent before the group broke must not be read as one of the next.
  static constexpr uint64_t kGenerationTag = uint64_t{2} << 32;
  uint64_t GenerationKey() const { return kGenerationTag | (group_->generation() & 0xffffffffu); }

 private:
  struct Pending {
    std::string what;
    c10::intrusive_ptr<TenaxWork> work;
    Job job;
    bool tolerant = false;
    bool runs_when_broken = false;
  };

  Status Named(const Status& st, int peer) const;
  void ForgetCrossMemory();  // "rank R (name): ..."
  void Start(Job connect, const std::string& what);
  void Run(const Job& connect, std::promise<Status>& ready);
  Status Connect(const c10::intrusive_ptr<c10d::Store>& store);
  void Loop();

  std::atomic<int> rank_, world_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<net::Node> node_;
  std::unique_ptr<comm::Group> group_;
  std::unique_ptr<comm::Allreduce> sum_;
  // The current group's cross-memory sum: probed at its first large sum
  // (every rank reaches it in the same call), nullptr when not possible.
  std::unique_ptr<CrossMemorySum> cross_;
  bool cross_probed_ = false;
  std::string cross_why_not_;  // under mu_
  std::atomic<int64_t> cross_count_{0};
  // Messages that arrived before their reader asked, by sender and key.
  // Keyed by PeerId, not rank: an elastic member's ranks renumber between
  // generations while its connections stay.
  std::map<std::pair<net::PeerId, uint64_t>, std::deque<std::string>> kept_;
  void DropKeptBefore(uint64_t generation);
  // Buffers of sends abandoned after a failure (the transport may still
  // read them); freed with the engine.
  std::vector<std::unique_ptr<std::string>> orphans_;
  uint64_t seq_ = 0;
  std::atomic<int64_t> fast_{0}, bulk_{0};
  Status broken_;
  Status tolerated_;  // under mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  // Jobs done, dropped by the next Submit or the destructor, never by the
  // engine's thread: a job's tensors may be the last references to Python
  // tensors, whose destruction takes the GIL, which the thread destroying
  // the group holds while it joins this one.
  std::deque<Pending> finished_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tenax::python
