#include "cross_memory_sum.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "cross_memory_wire.h"
#include "engine.h"

namespace tenax::python {
namespace {

// Floats per piece of the reduce: p - 1 pieces of scratch plus the
// caller's own stay in a core's L2 for p <= 8.
constexpr size_t kPiece = size_t{1} << 15;

// This kernel's boot and pid namespace: ranks that share both can name
// each other's processes by pid.
std::string HostKey() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  char ns[128] = {0};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  return (boot.empty() ? "?" : boot) + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "?");
}

// dst[i] = (src[0][i] + src[1][i] + ... + src[p-1][i]) * scale, summed in
// that order; dst may be one of the sources. Written with vector types so
// that -O2 builds sum 4 lanes at a time (each lane is an IEEE add, so the
// bits equal the scalar loop's).
void SumInOrder(float* dst, const float* const* src, size_t p, size_t n, float scale) {
  using V = float __attribute__((vector_size(16)));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V a, b;
    std::memcpy(&a, src[0] + i, 16);
    std::memcpy(&b, src[0] + i + 4, 16);
    for (size_t s = 1; s < p; ++s) {
      V x, y;
      std::memcpy(&x, src[s] + i, 16);
      std::memcpy(&y, src[s] + i + 4, 16);
      a += x;
      b += y;
    }
    if (scale != 1.0f) {
      a *= scale;
      b *= scale;
    }
    std::memcpy(dst + i, &a, 16);
    std::memcpy(dst + i + 4, &b, 16);
  }
  for (; i < n; ++i) {
    float v = src[0][i];
    for (size_t s = 1; s < p; ++s) v += src[s][i];
    dst[i] = scale != 1.0f ? v * scale : v;
  }
}

// "ok", or "gone <why>" / "fail <why>" for a rank whose reads failed.
std::string Verdict(const std::string& why, bool peer_gone) {
  if (why.empty()) return "ok";
  return (peer_gone ? "gone " : "fail ") + why;
}

// The first failure any rank reported in a round, as a Status (OK if none).
Status FirstFailure(const std::vector<std::string>& verdicts, const char* during) {
  for (size_t r = 0; r < verdicts.size(); ++r) {
    const std::string& v = verdicts[r];
    if (v == "ok") continue;
    const std::string what = "rank " + std::to_string(r) + " " + during + ": " + (v.size() > 5 ? v.substr(5) : v);
    return v.rfind("gone ", 0) == 0 ? PeerLost(what) : ProtocolError(what);
  }
  return Status();
}

}  // namespace

std::string CrossMemorySum::Copy(int rank, void* local, uintptr_t remote, size_t bytes, bool write,
                                 bool& peer_gone) const {
  auto* here = static_cast<char*>(local);
  const pid_t pid = pids_[static_cast<size_t>(rank)];
  while (bytes > 0) {
    iovec l{here, bytes};
    iovec r{reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = write ? ::process_vm_writev(pid, &l, 1, &r, 1, 0) : ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n <= 0) {
      const int err = n < 0 ? errno : EFAULT;
      if (err == EINTR) continue;
      if (err == ESRCH) peer_gone = true;
      return std::string("could not ") + (write ? "write into" : "read") + " rank " + std::to_string(rank) +
             "'s tensor (pid " + std::to_string(pid) + "): " + std::strerror(err);
    }
    here += n;
    remote += static_cast<uintptr_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return "";
}

Result<std::unique_ptr<CrossMemorySum>> CrossMemorySum::Probe(TenaxEngine& e, std::string& why_not) {
  const int p = e.world(), me = e.rank();
  // A token only this process holds, readable by peers until round 2 ends.
  std::random_device rd;
  const uint64_t token[2] = {(uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd()};
  CrossMemoryProbe mine{HostKey(), ::getpid(), reinterpret_cast<uintptr_t>(token), {token[0], token[1]}};
  TENAX_ASSIGN_OR_RETURN(std::vector<std::string> all, e.AllGather(e.GenerationKey(), EncodeProbe(mine)));
  std::vector<pid_t> pids(static_cast<size_t>(p));
  std::vector<CrossMemoryProbe> probes;
  std::string why;
  const char* off = std::getenv("TENAX_CROSS_MEMORY");
  if (off && std::string(off) == "0") why = "TENAX_CROSS_MEMORY=0 on rank " + std::to_string(me);
  for (int r = 0; r < p; ++r) {
    Result<CrossMemoryProbe> got = DecodeProbe(all[static_cast<size_t>(r)]);
    if (!got.ok()) return ProtocolError("rank " + std::to_string(r) + " sent " + got.status().message());
    pids[static_cast<size_t>(r)] = static_cast<pid_t>(got->pid);
    if (why.empty() && got->host != mine.host) why = "rank " + std::to_string(r) + " runs on another host or pid namespace";
    probes.push_back(std::move(*got));
  }
  auto sum = std::unique_ptr<CrossMemorySum>(new CrossMemorySum(std::move(pids)));
  for (int r = 0; r < p && why.empty(); ++r) {
    if (r == me) continue;
    uint64_t got[2] = {0, 0};
    bool gone = false;
    const CrossMemoryProbe& theirs = probes[static_cast<size_t>(r)];
    why = sum->Copy(r, got, theirs.token_address, sizeof(got), /*write=*/false, gone);
    if (why.empty() && (got[0] != theirs.token[0] || got[1] != theirs.token[1])) {
      why = "rank " + std::to_string(r) + "'s probe token read back different bytes";
    }
    if (!why.empty()) why = "rank " + std::to_string(me) + ": " + why;
  }
  TENAX_ASSIGN_OR_RETURN(std::vector<std::string> votes,
                         e.AllGather(e.GenerationKey(), why.empty() ? "ok" : "no " + why));
  for (const std::string& v : votes) {
    if (v != "ok") {
      why_not = v.size() > 3 ? v.substr(3) : v;
      return std::unique_ptr<CrossMemorySum>();
    }
  }
  why_not.clear();
  return sum;
}

std::string CrossMemorySum::Reduce(TenaxEngine& e, float* data, const std::vector<uintptr_t>& addrs, size_t begin,
                                   size_t end, float scale, bool& peer_gone) {
  const int p = e.world(), me = e.rank();
  scratch_.resize(kPiece * static_cast<size_t>(p));
  std::vector<const float*> src(static_cast<size_t>(p));
  for (size_t off = begin; off < end; off += kPiece) {
    const size_t n = std::min(kPiece, end - off);
    const uintptr_t at = off * sizeof(float);
    for (int s = 0; s < p; ++s) {
      if (s == me) {
        src[static_cast<size_t>(s)] = data + off;
        continue;
      }
      float* into = scratch_.data() + kPiece * static_cast<size_t>(s);
      std::string why = Copy(s, into, addrs[static_cast<size_t>(s)] + at, n * sizeof(float), false, peer_gone);
      if (!why.empty()) return why;
      src[static_cast<size_t>(s)] = into;
    }
    SumInOrder(data + off, src.data(), static_cast<size_t>(p), n, scale);
    // The piece is final and still in this core's cache: hand it to every
    // peer now rather than have each read it back from memory later. Only
    // this rank touches chunk `me` of any tensor, and it has read this
    // piece of theirs already.
    for (int s = 0; s < p; ++s) {
      if (s == me) continue;
      std::string why = Copy(s, data + off, addrs[static_cast<size_t>(s)] + at, n * sizeof(float), true, peer_gone);
      if (!why.empty()) return why;
    }
  }
  return "";
}

Status CrossMemorySum::Run(TenaxEngine& e, float* data, size_t count, float scale) {
  const int p = e.world(), me = e.rank();
  // Round A: every tensor is ready, and where it is.
  const std::string mine = EncodeTensor({reinterpret_cast<uintptr_t>(data), count});
  TENAX_ASSIGN_OR_RETURN(std::vector<std::string> all, e.AllGather(e.GenerationKey(), mine));
  std::vector<uintptr_t> addrs(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    Result<CrossMemoryTensor> t = DecodeTensor(all[static_cast<size_t>(r)]);
    if (!t.ok()) return ProtocolError("rank " + std::to_string(r) + " sent " + t.status().message());
    addrs[static_cast<size_t>(r)] = t->address;
    const uint64_t n = t->count;
    if (n != count) {
      // Every rank sees the same list, so every rank refuses alike.
      return InvalidArgument("the ranks disagree about the sum's size: rank " + std::to_string(me) + " has " +
                             std::to_string(count) + " floats, rank " + std::to_string(r) + " " + std::to_string(n));
    }
  }
  bool gone = false;
  const auto [begin, end] = ChunkOf(count, p, me);
  const std::string why = Reduce(e, data, addrs, begin, end, scale, gone);
  // Round B: every chunk is final in every tensor, and nobody touches a
  // peer's tensor any more: the caller may use its own again.
  TENAX_ASSIGN_OR_RETURN(std::vector<std::string> done, e.AllGather(e.GenerationKey(), Verdict(why, gone)));
  return FirstFailure(done, "could not sum its chunk");
}

}  // namespace tenax::python
