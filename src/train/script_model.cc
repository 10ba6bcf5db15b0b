#include "script_model.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <torch/csrc/jit/runtime/graph_executor.h>

#include "tenax/core/files.h"

namespace tenax {
namespace {

// The attribute model.h's SaveModel writes into every built-in archive.
constexpr const char* kBuiltinNameKey = "tenax.model";

std::string ShapeText(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// One line for the user. A c10::Error carries a C++ backtrace after its
// message; an error raised inside the TorchScript interpreter opens with "The
// following operation failed in the TorchScript interpreter." and a
// TorchScript traceback, and names the actual failure on its last line.
std::string ErrorLine(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string what = c10_error ? c10_error->what_without_backtrace() : e.what();
  std::vector<std::string> lines;
  std::istringstream in(what);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  if (lines.empty()) return "unknown error";
  if (lines.front().find("failed in the TorchScript interpreter") != std::string::npos) return lines.back();
  return lines.front();
}

class ScriptModel final : public TrainableModel {
 public:
  ScriptModel(torch::jit::Module module, std::vector<torch::Tensor> params, std::string path)
      : module_(std::move(module)), params_(std::move(params)), path_(std::move(path)) {}

  // An error inside the module leaves as one line naming the model, so the
  // loop's and evaluation's error boundary reports what failed.
  torch::Tensor Forward(const torch::Tensor& images) override {
    try {
      // The graph executor's optimisations (profiling, symbolic autodiff into
      // differentiable graphs) made training steps 3-6% slower than the
      // built-in module on the CPU kernels; without them the interpreter runs
      // the same eager ops and autograd as the built-in (tenax bench
      // train-script: 0.94 with, 0.98-0.99 without). The setting is
      // thread-local, so the guard touches nothing outside this call.
      torch::jit::GraphOptimizerEnabledGuard plain_interpreter(false);
      return module_.forward({images}).toTensor();
    } catch (const std::exception& e) {
      throw std::runtime_error(Describe() + ": forward failed: " + ErrorLine(e));
    }
  }
  std::vector<torch::Tensor> Parameters() override { return params_; }
  void SetTraining(bool training) override { module_.train(training); }
  bool IsTraining() const override { return module_.is_training(); }
  std::string Describe() const override { return "torchscript:" + path_; }

  void To(torch::Device device) override {
    module_.to(device);
    device_ = device;
  }
  Status Save(const std::string& path) override {
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    try {
      if (device_.is_cpu()) {
        module_.save(tmp);
      } else {  // a CPU copy (a file any machine reads); the trained module stays where it is
        torch::jit::Module copy = module_.deepcopy();
        copy.to(torch::kCPU);
        copy.save(tmp);
      }
    } catch (const std::exception& e) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return IoError(path + ": cannot save the TorchScript model: " + ErrorLine(e));
    }
    return CommitFileAtomic(tmp, path);
  }

 private:
  torch::jit::Module module_;
  std::vector<torch::Tensor> params_;  // the trainable ones, in registration order
  std::string path_;
  torch::Device device_ = torch::kCPU;
};

// The parameters that train: requires_grad, float32. A module whose
// parameters are all frozen has nothing to train.
Result<std::vector<torch::Tensor>> TrainableParameters(const torch::jit::Module& module, const std::string& path) {
  std::vector<torch::Tensor> params;
  size_t frozen = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (!p.value.requires_grad()) {
      ++frozen;
      continue;
    }
    if (p.value.scalar_type() != torch::kFloat32) {
      return InvalidArgument(path + ": parameter '" + p.name + "' is " + c10::toString(p.value.scalar_type()) +
                             "; tenax trains float32 parameters (call model.float() before torch.jit.script)");
    }
    params.push_back(p.value);
  }
  if (params.empty()) {
    return InvalidArgument(path + ": the module has no parameters to train" +
                           (frozen > 0 ? " (its " + std::to_string(frozen) + " parameter(s) do not require grad)"
                                       : std::string()));
  }
  return params;
}

bool HasForward(const torch::jit::Module& module) { return module.find_method("forward").has_value(); }

// Runs forward once on zeros shaped like a batch of 2 of the data, in eval
// mode (no dropout draws, no batch-norm statistics updated), and checks the
// logits it returns.
Status CheckForward(torch::jit::Module& module, const DatasetInfo& info, const std::string& path) {
  std::vector<int64_t> batch_shape = {2};
  batch_shape.insert(batch_shape.end(), info.sample_shape.begin(), info.sample_shape.end());
  const bool was_training = module.is_training();
  module.train(false);
  torch::AutoGradMode grad_on(true);  // the logits must depend on the parameters
  c10::IValue out;
  std::string failure;
  try {
    out = module.forward({torch::zeros(batch_shape)});
  } catch (const std::exception& e) {
    failure = ErrorLine(e);
  }
  module.train(was_training);
  if (!failure.empty()) {
    return InvalidArgument(path + ": forward fails on a float32 batch of shape " + ShapeText(batch_shape) +
                           " (the data's samples are " + ShapeText(info.sample_shape) + "): " + failure);
  }
  const std::string expected = ShapeText({2, info.classes});
  if (!out.isTensor()) {
    return InvalidArgument(path + ": forward returned " + out.tagKind() + ", expected a tensor of logits " + expected +
                           " (batch of 2, " + std::to_string(info.classes) + " classes)");
  }
  const torch::Tensor logits = out.toTensor();
  if (logits.sizes() != c10::IntArrayRef{2, info.classes}) {
    return InvalidArgument(path + ": forward returned a tensor of shape " + ShapeText(logits.sizes()) +
                           " for a batch of shape " + ShapeText(batch_shape) + ", expected logits " + expected +
                           " (batch of 2, " + std::to_string(info.classes) + " classes)");
  }
  if (logits.scalar_type() != torch::kFloat32) {
    return InvalidArgument(path + ": forward returned " + c10::toString(logits.scalar_type()) +
                           " logits, expected float32");
  }
  if (!logits.requires_grad()) {
    return InvalidArgument(path + ": forward's logits do not depend on any trainable parameter (no gradient)");
  }
  return Status::Ok();
}

}  // namespace

Result<torch::jit::Module> ReadTorchScriptFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument(path + ": is a directory, expected a file");
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    return DataLoss(path + ": not a TorchScript file: " + ErrorLine(e));
  }
}

bool IsBuiltinArchive(const torch::jit::Module& module) { return module.hasattr(kBuiltinNameKey); }

Result<std::unique_ptr<TrainableModel>> LoadScriptModel(const std::string& path, const DatasetInfo& info) {
  TENAX_ASSIGN_OR_RETURN(torch::jit::Module module, ReadTorchScriptFile(path));
  if (IsBuiltinArchive(module)) {
    return DataLoss(path + ": is a tenax built-in model (model.name = \"" +
                    module.attr(kBuiltinNameKey).toStringRef() +
                    "\"), not a TorchScript module; model.path takes a file saved by torch.jit.script(...).save()");
  }
  if (!HasForward(module)) return DataLoss(path + ": a TorchScript archive without a forward method");
  TENAX_ASSIGN_OR_RETURN(std::vector<torch::Tensor> params, TrainableParameters(module, path));
  TENAX_RETURN_IF_ERROR(CheckForward(module, info, path));
  return std::unique_ptr<TrainableModel>(std::make_unique<ScriptModel>(std::move(module), std::move(params), path));
}

Result<std::unique_ptr<TrainableModel>> WrapTrainedScriptModule(torch::jit::Module module, const std::string& path) {
  if (!HasForward(module)) return DataLoss(path + ": a TorchScript archive without a forward method");
  std::vector<torch::Tensor> params;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return std::unique_ptr<TrainableModel>(std::make_unique<ScriptModel>(std::move(module), std::move(params), path));
}

}  // namespace tenax
