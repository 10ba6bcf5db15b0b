// The float32 sum behind TenaxEngine::FastSum for large tensors when every
// rank of the group runs on this host: each rank reads its peers' tensors
// straight out of their address space (Linux cross-memory attach,
// process_vm_readv), so nothing is copied into or out of a registered
// buffer.
//
// Algorithm, for p ranks and a tensor cut into p chunks (chunk s is owned
// by rank s):
//   round A  every rank's tensor is ready: (address, count) all-gathered;
//   reduce   rank r reads chunk r of every peer, piece by piece into a
//            cache-sized scratch, sums the p pieces in rank order (times
//            `scale`) and writes the result into its own chunk r;
//   round B  every chunk is final and nobody reads the inputs any more;
//   gather   rank r reads chunk s from rank s's tensor into its own chunk s;
//   round C  nobody reads this rank's tensor any more: the caller may
//            touch it again.
// Each element is summed once, by its owner, in rank order, so every rank
// ends with the same bits. Per rank this moves about 2x the tensor through
// memory where the ring over a registered buffer moves about 7x (p = 4).
//
// The rounds are small messages through the engine (AllGather); a rank
// whose read fails says so in the next round, so every rank fails the same
// call instead of waiting for a deadline.
//
// Threading: engine thread only. Failures: a peer that died (its memory is
// gone) is PeerLost naming it; other read failures are ProtocolError. After
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
  // id and can read a token out of every peer's memory. nullptr, with
  // `why_not` set, when any rank cannot (another host, a container that
  // forbids it, TENAX_CROSS_MEMORY=0 on any rank); an error only when the
  // rounds themselves fail.
  static Result<std::unique_ptr<CrossMemorySum>> Probe(TenaxEngine& e, std::string& why_not);

  // Collective: the in-place sum of data[0, count) over every rank, times
  // `scale`. Every rank passes the same count.
  Status Run(TenaxEngine& e, float* data, size_t count, float scale);

 private:
  explicit CrossMemorySum(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  // Reads `bytes` at `remote` in rank `rank`'s memory into `local`; "" or why not.
  std::string Read(int rank, void* local, uintptr_t remote, size_t bytes, bool& peer_gone) const;
  std::string Reduce(TenaxEngine& e, float* data, const std::vector<uintptr_t>& addrs, size_t begin, size_t end,
                     float scale, bool& peer_gone);

  std::vector<pid_t> pids_;  // by rank
  std::vector<float> scratch_;
};

}  // namespace tenax::python
