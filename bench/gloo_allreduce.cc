// Gloo peer of tenax's allreduce benchmark: in-place float32 sum allreduce
// through exactly the call PyTorch's ProcessGroupGloo makes for a dense CPU
// tensor (gloo::allreduce with AllreduceOptions, output-only buffer,
// gloo::sum<float>, algorithm left UNSPECIFIED, which Gloo runs as its
// segmented ring; a fresh tag per collective), over the TCP transport bound
// to 127.0.0.1. Rendezvous is a FileStore in --store-dir.
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

#include "allreduce_peer_common.h"

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

namespace {

constexpr const char* kUsageHead =
    "usage: tenax_bench_gloo_allreduce --rank R --procs P --store-dir DIR\n"
    "                                  [--sizes B1,B2,...] [--budget-bytes N]\n"
    "                                  [--min-iters N] [--warmup N] [--help]\n"
    "  --rank, --procs this process's rank in [0, P) and the number of processes\n"
    "  --store-dir     rendezvous directory shared by all ranks; use a fresh one\n"
    "                  (stale addresses from an aborted run break rendezvous)\n";

using allreduce_peer::Args;
using allreduce_peer::CountWrong;
using allreduce_peer::Fill;
using allreduce_peer::Median;

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
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, procs);
  // A dead peer then fails the others within a minute instead of hanging.
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  Bench bench(ctx);
  // Everyone has read the addresses: drop ours so the directory can be reused.
  bench.Barrier();
  for (const std::string& path : store.getAllKeyFilePaths()) ::unlink(path.c_str());

  for (const uint64_t bytes : a.sizes) {
    const size_t count = bytes / 4;
    const uint64_t iters = std::max(a.min_iters, std::min<uint64_t>(2000, a.budget_bytes / bytes));
    std::vector<float> buf(count);
    std::vector<double> seconds(iters);
    Fill(buf, rank);

    for (uint64_t w = 0; w < a.warmup; ++w) bench.Allreduce(buf.data(), count, &gloo::sum<float>);
    // One barrier so all ranks start together; none between iterations, as in
    // a real training loop where back-to-back allreduces pipeline freely.
    bench.Barrier();
    for (uint64_t it = 0; it < iters; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      bench.Allreduce(buf.data(), count, &gloo::sum<float>);
      seconds[it] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // The timed loop multiplies the data by P per call, so it saturates at
    // +inf (full-speed on x86 SSE/AVX; it never passes through the slow
    // subnormals). Check correctness on one fresh call instead.
    Fill(buf, rank);
    bench.Allreduce(buf.data(), count, &gloo::sum<float>);
    size_t first_bad = 0;
    const size_t wrong = CountWrong(buf, procs, &first_bad);
    if (wrong)
      std::fprintf(stderr, "tenax_bench_gloo_allreduce: rank %d: %zu of %zu floats wrong at %llu bytes (first at %zu: %g)\n",
                   rank, wrong, count, static_cast<unsigned long long>(bytes), first_bad, buf[first_bad]);
    // One max-allreduce carries both the slowest median and whether any rank
    // saw wrong data, so all ranks agree on failing.
    double agg[2] = {Median(seconds), wrong ? 1.0 : 0.0};
    bench.Allreduce(agg, 2, &gloo::max<double>);
    if (agg[1] != 0) return 1;
    if (rank == 0) {
      std::printf("{\"impl\":\"gloo\",\"procs\":%d,\"bytes\":%llu,\"seconds\":%.9g,\"iterations\":%llu}\n", procs,
                  static_cast<unsigned long long>(bytes), agg[0], static_cast<unsigned long long>(iters));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool help = false;
  const std::string err = allreduce_peer::ParseArgs(argc, argv, /*ranked=*/true, &a, &help);
  if (help) {
    std::printf("%s%s", kUsageHead, allreduce_peer::kCommonUsage);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "tenax_bench_gloo_allreduce: %s\n%s%s", err.c_str(), kUsageHead, allreduce_peer::kCommonUsage);
    return 2;
  }
  // Gloo reports transport failures and timeouts as exceptions.
  try {
    return Run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tenax_bench_gloo_allreduce: rank %llu: %s\n", static_cast<unsigned long long>(a.rank),
                 e.what());
    return 1;
  }
}
