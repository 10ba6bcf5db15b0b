// tenax as a torch.distributed backend: `dist.init_process_group("tenax")`
// after `import tenax.torch` (src/python/tenax/torch). A c10d::ProcessGroup
// whose collectives run over tenax's transport: shared memory between
// processes on one host, TCP (or what UCX picks) between hosts, every
// connection authenticated with the cluster secret (net/auth.h).
//
// Rendezvous: through the c10d Store torch hands every backend. Each rank
// starts a net::Node listening on its advertised host (TENAX_HOST, else
// 127.0.0.1 when MASTER_ADDR is a loopback address or unset, else this
// host's first non-loopback IPv4 address), publishes "host:port" under
// "tenax/addr/<rank>", reads everyone's and forms a comm::Group. The secret
// is TENAX_SECRET when set; otherwise rank 0 draws a random one and shares
// it through the store (so the store's own protection is the job's).
//
// Collectives: float32 SUM and AVG allreduce (what DDP sends) run over
// comm::Allreduce's registered buffers (one-sided writes, ring or direct;
// bitwise identical on every rank). Everything else (every dtype, MIN,
// MAX, PRODUCT, the bitwise ops, broadcast, reduce, allgather, gather,
// scatter, reduce_scatter, alltoall, send/recv) moves bytes as tenax bulk
// messages and reduces in rank order with ATen, so every rank gets the
// same bits too. Before any tensor memory is touched, the ranks of a
// collective exchange what each passes (op, dtype, shape): a mismatch
// fails every rank's call with an error naming the rank and the tensor.
//
// Threading: one thread per process group owns the Node; calls from any
// thread queue work there in call order (every rank must call collectives
// in the same order, as for every torch backend). Work completes on that
// thread (future callbacks, e.g. DDP's, run there).
// Failures: a lost peer (SIGKILL, a closed connection: within the Node's
// peer_timeout), a missed deadline (the group's timeout) or a refused
// input fails the call with a RuntimeError naming the rank; a lost peer or
// missed deadline is sticky: every later call fails at once with the same
// message, never hangs. CUDA tensors are refused (CPU build).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace tenax::python {

class TenaxEngine;  // the Node's thread and what runs on it

class ProcessGroupTenax final : public c10d::ProcessGroup {
 public:
  // Rendezvous over `store` and connect every rank; throws (a
  // c10::Error, a RuntimeError in Python) when that fails within `timeout`.
  ProcessGroupTenax(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~ProcessGroupTenax() override;

  const std::string getBackendName() const override { return "tenax"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;

  // How many float32 SUM/AVG allreduces took the one-sided path, and how
  // many collectives the bulk path (tests and the bench read them).
  int64_t fast_allreduces() const;
  int64_t bulk_collectives() const;
  // Of the fast ones, how many read the peers' memory directly, and whether
  // that path is on for this group ("" before its first large sum; "on";
  // "off: why").
  int64_t cross_memory_sums() const;
  std::string cross_memory() const;

 private:
  std::unique_ptr<TenaxEngine> engine_;
};

// The creator torch's Backend.register_backend calls.
c10::intrusive_ptr<c10d::ProcessGroup> CreateProcessGroupTenax(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                               int size, std::chrono::duration<float> timeout);

}  // namespace tenax::python
