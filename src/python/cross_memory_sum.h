// The float32 sum behind TenaxEngine::FastSum for large tensors when every
// rank of the group runs on this host: each rank reads its peers' tensors
// straight out of their address space and writes its results straight into
// theirs (Linux cross-memory attach, process_vm_readv / process_vm_writev),
// so nothing is copied into or out of a registered buffer.
//
// Algorithm, for p ranks and a tensor cut into p chunks (chunk s is owned
// by rank s):
//   round A  every rank's tensor is ready: (address, count) all-gathered;
//   reduce   rank r, piece by piece (a cache-sized scratch): reads the
//            piece of chunk r from every peer, sums the p pieces in rank
//            order (times `scale`) into its own chunk r, and writes the
//            finished piece into chunk r of every peer while it is still
//            in cache. Only rank r touches chunk r of any tensor, and it
//            reads a peer's piece before it overwrites it;
//   round B  every chunk is final everywhere and nobody touches a peer's
//            tensor any more: the caller may use its own again.
// Each element is summed once, by its owner, in rank order, so every rank
// ends with the same bits. Per rank this moves about 2x the tensor through
// memory where the ring over a registered buffer moves about 7x (p = 4).
//
// The rounds are small messages through the engine (AllGather); a rank
// whose copy fails says so in round B, so every rank fails the same call
// instead of waiting for a deadline.
//
// Threading: engine thread only. Failures: a peer that died (its memory is
// gone) is PeerLost naming it; other copy failures are ProtocolError. After
// a failure the tensors' contents are unspecified, as for the ring.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::python {

class TenaxEngine;

class CrossMemorySum {
 public:
  // Collective (two rounds): checks that every rank shares this host's boot
  // id and can read a token out of every peer's memory (the kernel checks
  // the same permission for writes). nullptr, with
  // `why_not` set, when any rank cannot (another host, a container that
  // forbids it, TENAX_CROSS_MEMORY=0 on any rank); an error only when the
  // rounds themselves fail.
  static Result<std::unique_ptr<CrossMemorySum>> Probe(TenaxEngine& e, std::string& why_not);

  // Collective: the in-place sum of data[0, count) over every rank, times
  // `scale`. Every rank passes the same count.
  Status Run(TenaxEngine& e, float* data, size_t count, float scale);

 private:
  explicit CrossMemorySum(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  // Copies `bytes` between `local` and `remote` in rank `rank`'s memory
  // (write: local to remote, else remote to local); "" or why not.
  std::string Copy(int rank, void* local, uintptr_t remote, size_t bytes, bool write, bool& peer_gone) const;
  std::string Reduce(TenaxEngine& e, float* data, const std::vector<uintptr_t>& addrs, size_t begin, size_t end,
                     float scale, bool& peer_gone);

  std::vector<pid_t> pids_;  // by rank
  std::vector<float> scratch_;
};

}  // namespace tenax::python
