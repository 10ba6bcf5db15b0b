// Where a run's tensors live, and the little a GPU run does differently:
// streams, events and pinned host memory. This is the one seam between the
// CPU build (Debian's libtorch, CI) and a CUDA build (a PyTorch wheel's
// libtorch on the GPU machine): it is written against libtorch's
// device-generic API (c10::Stream, c10::Event, the device guard), whose
// CUDA implementation exists only when the libtorch has CUDA, so the same
// source compiles on both and nothing here needs a CUDA header. On the CPU
// every call below is a plain synchronous copy or nothing.
//
// Threading: a DeviceMarker is used by one thread at a time; hand it to
// another thread through a release/acquire flag (the staging path does).
// Failures: ResolveDevice returns InvalidArgument with one line saying
// what was asked, what exists and the fix; the rest may throw c10::Error
// (a CUDA error), which the training loop turns into a Status.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "tenax/core/status.h"

namespace tenax {

// train.device ("cpu", "cuda", "cuda:N", "auto") on this process: "auto"
// is CUDA device 0 when this libtorch has CUDA and a GPU is visible, else
// the CPU. "cuda" on a CPU-only libtorch or a machine without a GPU, and
// "cuda:N" beyond the visible GPUs, are refused.
Result<torch::Device> ResolveDevice(const std::string& spec);

// "cpu" or "cuda:N (of M visible)", for logs and summary.json.
std::string DescribeDevice(torch::Device device);

// A point in a stream's work: recorded now, done once the device got
// there. On the CPU it is done when recorded.
class DeviceMarker {
 public:
  // Records the work enqueued on `device`'s current stream so far.
  void Record(torch::Device device);
  // Records the work enqueued on `stream` so far.
  void Record(const c10::Stream& stream);
  // True once the device has finished that work (never blocks).
  bool Done() const;
  // Makes `device`'s current stream wait for it (the host does not wait).
  void MakeCurrentStreamWait(torch::Device device) const;
  // Makes `stream` wait for it (the host does not wait).
  void MakeStreamWait(const c10::Stream& stream) const;
  // Blocks the host until the device has finished that work.
  void Wait() const;

 private:
  std::optional<c10::Event> event_;
};

// The stream the current thread enqueues work on, and a second stream of
// libtorch's pool for copies that overlap it (CUDA only; CPU: nullopt).
std::optional<c10::Stream> CopyStream(torch::Device device);

// Copies `src` into `dst` (same shape; one of them may live on another
// device) on `stream`, without waiting: the caller keeps both alive until
// a marker recorded after it is done. With no stream (CPU), a plain copy.
void CopyOnStream(const std::optional<c10::Stream>& stream, const torch::Tensor& src, torch::Tensor& dst);

// `count` floats of host memory the GPU copies from and to without a
// bounce buffer (page-locked) when `device` is CUDA; plain host memory on
// the CPU.
torch::Tensor HostStaging(torch::Device device, int64_t count);

// Host memory that something else allocated (the allreduce's buffer,
// which the transport allocates) made page-locked for `device`'s copies,
// so that a copy between it and the GPU runs asynchronously instead of
// going through the driver's bounce buffer with the stream synchronised
// first. The CUDA runtime's cudaHostRegister, looked up at run time in
// the libtorch's own CUDA runtime (no CUDA header here): the CPU build
// and a CPU device get an inactive pin. Unpins when destroyed; the caller
// makes sure no copy from or to the range is still pending by then.
// Failure: a refusal by the runtime leaves the pin inactive and says why
// in error() (the copies stay correct, only slower).
class HostPin {
 public:
  HostPin() = default;
  HostPin(torch::Device device, void* data, size_t bytes);
  HostPin(HostPin&& other) noexcept;
  HostPin& operator=(HostPin&& other) noexcept;
  HostPin(const HostPin&) = delete;
  HostPin& operator=(const HostPin&) = delete;
  ~HostPin();

  bool active() const { return data_ != nullptr; }
  const std::string& error() const { return error_; }

 private:
  void Release();
  void* data_ = nullptr;
  std::string error_;
};

// A batch's tensors on `device`: pinned, then copied on the copy stream,
// which the current stream waits for (the host does not wait), so the copy
// of step s+1 overlaps the kernels of step s still running. The CPU, or a
// tensor already on `device`: as is.
torch::Tensor ToDeviceAhead(const torch::Tensor& host, torch::Device device,
                            const std::optional<c10::Stream>& copy_stream);

}  // namespace tenax
