#include "tenax/train/device.h"

#include <ATen/Context.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <dlfcn.h>
#include <thread>
#include <spdlog/spdlog.h>

namespace tenax {
namespace {

bool CudaUsable() { return torch::cuda::is_available() && torch::cuda::device_count() > 0; }

// The device's guard implementation: CUDA's is registered only by a
// libtorch with CUDA, which is why callers check the device type first.
c10::impl::VirtualGuardImpl Guard(torch::Device device) { return c10::impl::VirtualGuardImpl(device.type()); }

// cudaHostRegister and cudaHostUnregister of the CUDA runtime the libtorch
// loaded (absent from a CPU libtorch). Looked up once.
struct CudaHostRegistry {
  using Register = int (*)(void*, size_t, unsigned int);
  using Unregister = int (*)(void*);
  using ErrorString = const char* (*)(int);
  Register reg = nullptr;
  Unregister unreg = nullptr;
  ErrorString error_string = nullptr;
  bool usable() const { return reg != nullptr && unreg != nullptr; }
};

const CudaHostRegistry& HostRegistry() {
  static const CudaHostRegistry registry = [] {
    CudaHostRegistry r;
    void* scope = RTLD_DEFAULT;
    if (dlsym(scope, "cudaHostRegister") == nullptr) {
      // The runtime may be loaded under its versioned name only.
      for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
        if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
          scope = h;
          break;
        }
      }
    }
    r.reg = reinterpret_cast<CudaHostRegistry::Register>(dlsym(scope, "cudaHostRegister"));
    r.unreg = reinterpret_cast<CudaHostRegistry::Unregister>(dlsym(scope, "cudaHostUnregister"));
    r.error_string = reinterpret_cast<CudaHostRegistry::ErrorString>(dlsym(scope, "cudaGetErrorString"));
    return r;
  }();
  return registry;
}

}  // namespace

Result<torch::Device> ResolveDevice(const std::string& spec) {
  if (spec == "cpu") return torch::Device(torch::kCPU);
  if (spec == "auto") return CudaUsable() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  int index = 0;
  if (spec.rfind("cuda:", 0) == 0) {
    try {
      index = std::stoi(spec.substr(5));
    } catch (const std::exception&) {
      return InvalidArgument("train.device = \"" + spec + "\" is not a device; use \"cpu\", \"cuda\", \"cuda:N\" or \"auto\"");
    }
  } else if (spec != "cuda") {
    return InvalidArgument("train.device = \"" + spec + "\" is not a device; use \"cpu\", \"cuda\", \"cuda:N\" or \"auto\"");
  }
  if (!torch::cuda::is_available()) {
    const bool built_with_cuda = at::hasCUDA();
    return InvalidArgument("train.device = \"" + spec + "\" asks for a GPU, but " +
                           (built_with_cuda ? std::string("no GPU is visible to this process")
                                            : std::string("this tenax's libtorch is built for the CPU only")) +
                           "; use device = \"auto\" (a GPU when there is one, else the CPU) or \"cpu\"");
  }
  const int64_t visible = static_cast<int64_t>(torch::cuda::device_count());
  if (index < 0 || index >= visible) {
    return InvalidArgument("train.device = \"" + spec + "\" but " + std::to_string(visible) +
                           " GPU(s) are visible (cuda:0" + (visible > 1 ? "..cuda:" + std::to_string(visible - 1) : "") +
                           "); use one of those or \"auto\"");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string DescribeDevice(torch::Device device) {
  if (!device.is_cuda()) return "cpu";
  return "cuda:" + std::to_string(device.index()) + " (of " + std::to_string(torch::cuda::device_count()) +
         " visible)";
}

void DeviceMarker::Record(torch::Device device) {
  if (!device.is_cuda()) return;
  Record(Guard(device).getStream(device));
}

void DeviceMarker::Record(const c10::Stream& stream) {
  if (stream.device_type() == c10::DeviceType::CPU) return;
  if (!event_) event_.emplace(stream.device_type());
  event_->record(stream);
}

bool DeviceMarker::Done() const { return !event_ || event_->query(); }

void DeviceMarker::MakeCurrentStreamWait(torch::Device device) const {
  if (!event_ || !device.is_cuda()) return;
  event_->block(Guard(device).getStream(device));
}

void DeviceMarker::MakeStreamWait(const c10::Stream& stream) const {
  if (!event_ || stream.device_type() == c10::DeviceType::CPU) return;
  event_->block(stream);
}

void DeviceMarker::Wait() const {
  // libtorch 1.13's c10::Event has no synchronize(): poll it (the work
  // waited for is copies already enqueued).
  while (event_ && !event_->query()) std::this_thread::yield();
}

HostPin::HostPin(torch::Device device, void* data, size_t bytes) {
  if (!device.is_cuda() || data == nullptr || bytes == 0) return;
  const CudaHostRegistry& r = HostRegistry();
  if (!r.usable()) {
    error_ = "the CUDA runtime's cudaHostRegister was not found in this process";
    return;
  }
  c10::impl::VirtualGuardImpl guard(device.type());
  const c10::Device before = guard.exchangeDevice(device);
  const int rc = r.reg(data, bytes, /*cudaHostRegisterPortable=*/1);
  guard.setDevice(before);
  if (rc != 0) {
    error_ = "cudaHostRegister of " + std::to_string(bytes) + " bytes failed: " +
             (r.error_string ? std::string(r.error_string(rc)) : "error " + std::to_string(rc));
    return;
  }
  data_ = data;
}

HostPin::HostPin(HostPin&& other) noexcept : data_(other.data_), error_(std::move(other.error_)) {
  other.data_ = nullptr;
}

HostPin& HostPin::operator=(HostPin&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = other.data_;
    error_ = std::move(other.error_);
    other.data_ = nullptr;
  }
  return *this;
}

HostPin::~HostPin() { Release(); }

void HostPin::Release() {
  if (data_ == nullptr) return;
  if (const int rc = HostRegistry().unreg(data_); rc != 0) spdlog::warn("cudaHostUnregister failed: error {}", rc);
  data_ = nullptr;
}

std::optional<c10::Stream> CopyStream(torch::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  return Guard(device).getStreamFromGlobalPool(device, /*isHighPriority=*/false);
}

void CopyOnStream(const std::optional<c10::Stream>& stream, const torch::Tensor& src, torch::Tensor& dst) {
  torch::NoGradGuard no_grad;
  if (!stream) {
    dst.copy_(src);
    return;
  }
  c10::StreamGuard on(*stream);
  dst.copy_(src, /*non_blocking=*/true);
}

torch::Tensor HostStaging(torch::Device device, int64_t count) {
  auto options = torch::TensorOptions().dtype(torch::kFloat32);
  if (device.is_cuda()) options = options.pinned_memory(true);
  return torch::zeros({count}, options);
}

torch::Tensor ToDeviceAhead(const torch::Tensor& host, torch::Device device,
                            const std::optional<c10::Stream>& copy_stream) {
  if (!device.is_cuda() || !copy_stream || host.device() == device) return host;
  torch::Tensor pinned = host.is_pinned() ? host : host.pin_memory();
  torch::Tensor out;
  DeviceMarker copied;
  {
    c10::StreamGuard on(*copy_stream);
    out = pinned.to(device, /*non_blocking=*/true);
    copied.Record(*copy_stream);
  }
  copied.MakeCurrentStreamWait(device);
  // `out` was allocated for the copy stream; the current stream uses it
  // now, so its memory must not be reused before that stream is done.
  Guard(device).recordDataPtrOnStream(out.storage().data_ptr(), Guard(device).getStream(device));
  // The pinned source outlives the copy: libtorch's pinned-memory
  // allocator records the copy on its stream and reuses the block after.
  return out;
}

}  // namespace tenax
