#include "tenax/train/trainable_model.h"

#include "tenax/train/model.h"
#include "script_model.h"

namespace tenax {
namespace {

// A built-in module (model.h) behind the model seam.
class BuiltinModel final : public TrainableModel {
 public:
  BuiltinModel(std::string name, Classifier module, std::vector<int64_t> shape, int64_t classes)
      : name_(std::move(name)), module_(std::move(module)), shape_(std::move(shape)), classes_(classes) {}

  torch::Tensor Forward(const torch::Tensor& images) override { return module_->forward(images); }
  std::vector<torch::Tensor> Parameters() override { return module_->parameters(); }
  void SetTraining(bool training) override { module_->train(training); }
  bool IsTraining() const override { return module_->is_training(); }
  void To(torch::Device device) override {
    module_->to(device);
    device_ = device;
  }
  Status Save(const std::string& path) override {
    if (device_.is_cpu()) return SaveModel(module_, name_, shape_, classes_, path);
    // A CPU copy is saved (a file any machine reads). The trained module is
    // not moved: moving a parameter whose .grad lives on the GPU would
    // leave the two on different devices.
    TENAX_ASSIGN_OR_RETURN(Classifier copy, MakeModel(name_, shape_, classes_));
    torch::NoGradGuard no_grad;
    auto to = copy->parameters(), from = module_->parameters();
    for (size_t i = 0; i < to.size() && i < from.size(); ++i) to[i].copy_(from[i]);
    auto to_buffers = copy->buffers(), from_buffers = module_->buffers();
    for (size_t i = 0; i < to_buffers.size() && i < from_buffers.size(); ++i) to_buffers[i].copy_(from_buffers[i]);
    return SaveModel(copy, name_, shape_, classes_, path);
  }
  std::string Describe() const override { return name_; }

 private:
  std::string name_;
  Classifier module_;
  std::vector<int64_t> shape_;
  int64_t classes_;
  torch::Device device_ = torch::kCPU;
};

}  // namespace

Result<std::unique_ptr<TrainableModel>> MakeTrainableModel(const TrainConfig& config, const DatasetInfo& info) {
  if (!config.model_path.empty()) return LoadScriptModel(config.model_path, info);
  TENAX_ASSIGN_OR_RETURN(Classifier module, MakeModel(config.model, info.sample_shape, info.classes));
  return std::unique_ptr<TrainableModel>(
      std::make_unique<BuiltinModel>(config.model, std::move(module), info.sample_shape, info.classes));
}

Result<std::unique_ptr<TrainableModel>> LoadTrainedModel(const std::string& path) {
  // Both formats are TorchScript archives: a built-in's carries its name
  // ("tenax.model"); any other archive with a forward is the user's module.
  // Whatever is neither goes to LoadModel, which names what is wrong.
  if (auto script = ReadTorchScriptFile(path);
      script.ok() && !IsBuiltinArchive(*script) && script->find_method("forward")) {
    return WrapTrainedScriptModule(std::move(*script), path);
  }
  TENAX_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(path));
  return std::unique_ptr<TrainableModel>(std::make_unique<BuiltinModel>(
      loaded.name, std::move(loaded.model), std::move(loaded.sample_shape), loaded.classes));
}

Result<int64_t> CountCorrect(TrainableModel& model, DataSource& data, int64_t begin, int64_t end,
                             int64_t batch_size) {
  const bool was_training = model.IsTraining();
  model.SetTraining(false);
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  Status status;
  for (int64_t i = begin; i < end && status.ok(); i += batch_size) {
    auto batch = data.ReadRange(i, std::min(end, i + batch_size));
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    const torch::Device device = model.Parameters().front().device();
    auto logits = model.Forward(batch->images.to(device));
    correct += logits.argmax(1).eq(batch->labels.to(device)).sum().item<int64_t>();
  }
  model.SetTraining(was_training);
  if (!status.ok()) return status;
  return correct;
}

}  // namespace tenax
