// Gloo peer of tenax's allreduce benchmark: in-place float32 sum allreduce
// through exactly the call PyTorch's ProcessGroupGloo makes for a dense CPU
// tensor (gloo::allreduce with AllreduceOptions, output-only buffer,
// gloo::sum<float>, algorithm left UNSPECIFIED, which Gloo runs as its
// segmented ring; a fresh tag per collective), over the TCP transport bound
// to --host (127.0.0.1 unless given: a namespaced host's address in
// `tenax bench allreduce --hosts`). Rendezvous is a FileStore in --store-dir.
//
// Launch one process per rank, e.g. with a fresh directory:
//   d=$(mktemp -d); for r in 0 1; do tenax_bench_gloo_allreduce --rank $r --procs 2 --store-dir $d & done; wait
// Rank 0 prints one JSON line per size; the time is the max over ranks of
// each rank's median per-call time.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "allreduce_peer_common.h"

namespace {

constexpr const char* kUsageHead =
    "usage: tenax_bench_gloo_allreduce --rank R --procs P --store-dir DIR\n"
    "                                  [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                                  [--min-iters N] [--warmup N] [--host ADDR] [--help]\n"
    "  --rank, --procs this process's rank in [0, P) and the number of processes\n"
    "  --store-dir     rendezvous directory shared by all ranks; use a fresh one\n"
    "                  (stale addresses from an aborted run break rendezvous)\n"
    "  --host          the address the TCP transport binds, default 127.0.0.1\n";

using allreduce_peer::Args;

// The element-wise function type Gloo's options take; naming it picks the
// (void*, const void*, const void*, size_t) overload, as PyTorch's toFunction does.
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

class Bench {
 public:
  explicit Bench(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}

  // PyTorch's ProcessGroupGloo::allreduce for one dense CPU tensor.
  template <typename T>
  void Allreduce(T* data, size_t count, ReduceFn fn) {
    gloo::AllreduceOptions opts(ctx_);
    opts.setReduceFunction(fn);
    opts.setTag(next_tag_++);
    opts.setOutput(data, count);
    gloo::allreduce(opts);
  }

  void Barrier() {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(next_tag_++);
    gloo::barrier(opts);
  }

 private:
  std::shared_ptr<gloo::Context> ctx_;
  uint32_t next_tag_ = 0;  // like ProcessGroupGloo's collectiveCounter_
};

int Run(const Args& a) {
  const int rank = static_cast<int>(a.rank), procs = static_cast<int>(a.procs);
  ::mkdir(a.store_dir.c_str(), 0700);  // EEXIST is fine; FileStore reports real errors
  gloo::rendezvous::FileStore store(a.store_dir);
  gloo::transport::tcp::attr attr;
  attr.hostname = a.host;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, procs);
  // A dead peer then fails the others within a minute instead of hanging.
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  Bench bench(ctx);
  // Everyone has read the addresses: drop ours so the directory can be reused.
  bench.Barrier();
  for (const std::string& path : store.getAllKeyFilePaths()) ::unlink(path.c_str());

  return allreduce_peer::MeasureSizes(
      a, rank, procs, "gloo", "tenax_bench_gloo_allreduce",
      [&](float* data, size_t count) { bench.Allreduce(data, count, &gloo::sum<float>); }, [&] { bench.Barrier(); },
      [&](double mine, bool wrong, double* slowest) {
        // One max-allreduce carries both the slowest median and whether any
        // rank saw wrong data, so all ranks agree on failing.
        double agg[2] = {mine, wrong ? 1.0 : 0.0};
        bench.Allreduce(agg, 2, &gloo::max<double>);
        *slowest = agg[0];
        return agg[1] == 0;
      });
}

}  // namespace

int main(int argc, char** argv) {
  return allreduce_peer::RankedPeerMain(argc, argv, "tenax_bench_gloo_allreduce", kUsageHead, Run);
}
