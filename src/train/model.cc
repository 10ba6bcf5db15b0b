#include "tenax/train/model.h"

#include <unistd.h>

#include <filesystem>

#include "tenax/core/files.h"

namespace tenax {
namespace {

constexpr const char* kModelNameKey = "tenax.model";

class MlpImpl : public ClassifierImpl {
 public:
  MlpImpl()
      : fc1_(register_module("fc1", torch::nn::Linear(28 * 28, 256))),
        fc2_(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3_(register_module("fc3", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = x.flatten(1);
    x = torch::relu(fc1_->forward(x));
    x = torch::relu(fc2_->forward(x));
    return fc3_->forward(x);
  }

 private:
  torch::nn::Linear fc1_, fc2_, fc3_;
};

// LeNet-style: two 5x5 conv + max-pool stages, two fully connected layers.
class CnnImpl : public ClassifierImpl {
 public:
  CnnImpl()
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5).padding(2)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(32 * 5 * 5, 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, 10))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);  // 16x14x14
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);  // 32x5x5
    x = torch::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

}  // namespace

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> kNames = {"mlp", "cnn"};
  return kNames;
}

Result<Classifier> MakeModel(const std::string& name) {
  if (name == "mlp") return Classifier(std::make_shared<MlpImpl>());
  if (name == "cnn") return Classifier(std::make_shared<CnnImpl>());
  return InvalidArgument("unknown model '" + name + "' (known: mlp, cnn)");
}

Status SaveModel(const Classifier& model, const std::string& name, const std::string& path) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    archive.write(kModelNameKey, c10::IValue(name));
    archive.save_to(tmp);
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    return IoError(path + ": cannot save model: " + e.what());
  }
  return CommitFileAtomic(tmp, path);
}

Result<LoadedModel> LoadModel(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument(path + ": is a directory, expected model.pt");
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    c10::IValue name_value;
    if (!archive.try_read(kModelNameKey, name_value) || !name_value.isString()) {
      return DataLoss(path + ": not a tenax model (no '" + kModelNameKey + "' entry)");
    }
    LoadedModel out;
    out.name = name_value.toStringRef();
    TENAX_ASSIGN_OR_RETURN(out.model, MakeModel(out.name));
    out.model->load(archive);
    return out;
  } catch (const std::exception& e) {
    // c10::Error messages carry a multi-line C++ backtrace; keep the first line.
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    return DataLoss(path + ": not a readable tenax model: " + what);
  }
}

}  // namespace tenax
