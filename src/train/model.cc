#include "tenax/train/model.h"

#include <unistd.h>

#include <filesystem>

#include "tenax/core/files.h"

namespace tenax {
namespace {

constexpr const char* kModelNameKey = "tenax.model";
constexpr const char* kInputShapeKey = "tenax.input_shape";
constexpr const char* kClassesKey = "tenax.classes";

int64_t Features(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

class MlpImpl : public ClassifierImpl {
 public:
  MlpImpl(int64_t in_features, int64_t classes)
      : fc1_(register_module("fc1", torch::nn::Linear(in_features, 256))),
        fc2_(register_module("fc2", torch::nn::Linear(256, 128))),
        fc3_(register_module("fc3", torch::nn::Linear(128, classes))) {}

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
// For 28x28: 16x14x14 after the first stage, 32x5x5 after the second.
class CnnImpl : public ClassifierImpl {
 public:
  CnnImpl(int64_t channels, int64_t h2, int64_t w2, int64_t classes)
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 16, 5).padding(2)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(32 * h2 * w2, 128))),
        fc2_(register_module("fc2", torch::nn::Linear(128, classes))) {}

  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(torch::relu(conv1_->forward(x)), 2);
    x = torch::max_pool2d(torch::relu(conv2_->forward(x)), 2);
    x = torch::relu(fc1_->forward(x.flatten(1)));
    return fc2_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : " x ") + std::to_string(d);
  return s;
}

}  // namespace

const std::vector<std::string>& ModelNames() {
  static const std::vector<std::string> kNames = {"mlp", "cnn"};
  return kNames;
}

Result<Classifier> MakeModel(const std::string& name, const std::vector<int64_t>& shape, int64_t classes) {
  if (shape.size() != 3 || shape[0] < 1 || shape[1] < 1 || shape[2] < 1) {
    return InvalidArgument("model '" + name + "' needs samples of shape C x H x W, got " + ShapeText(shape));
  }
  if (classes < 2) return InvalidArgument("model '" + name + "' needs at least 2 classes, got " + std::to_string(classes));
  if (name == "mlp") return Classifier(std::make_shared<MlpImpl>(Features(shape), classes));
  if (name == "cnn") {
    const int64_t h2 = (shape[1] / 2 - 4) / 2, w2 = (shape[2] / 2 - 4) / 2;
    if (h2 < 1 || w2 < 1) {
      return InvalidArgument("model 'cnn' needs images of at least 12 x 12 pixels, got " + ShapeText(shape) +
                             " (use model.name = \"mlp\" or your own model.path)");
    }
    return Classifier(std::make_shared<CnnImpl>(shape[0], h2, w2, classes));
  }
  return InvalidArgument("unknown model '" + name + "' (known: mlp, cnn)");
}

Status SaveModel(const Classifier& model, const std::string& name, const std::vector<int64_t>& sample_shape,
                 int64_t classes, const std::string& path) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    torch::serialize::OutputArchive archive;
    model->save(archive);
    archive.write(kModelNameKey, c10::IValue(name));
    archive.write(kInputShapeKey, c10::IValue(sample_shape));
    archive.write(kClassesKey, c10::IValue(classes));
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
    out.sample_shape = kFashionMnistShape;
    out.classes = kFashionMnistClassCount;
    c10::IValue shape_value, classes_value;
    if (archive.try_read(kInputShapeKey, shape_value)) {
      if (!shape_value.isIntList()) return DataLoss(path + ": '" + kInputShapeKey + "' is not a list of integers");
      out.sample_shape = shape_value.toIntVector();
    }
    if (archive.try_read(kClassesKey, classes_value)) {
      if (!classes_value.isInt()) return DataLoss(path + ": '" + kClassesKey + "' is not an integer");
      out.classes = classes_value.toInt();
    }
    auto made = MakeModel(out.name, out.sample_shape, out.classes);
    if (!made.ok()) return DataLoss(path + ": " + made.status().message());
    out.model = *made;
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
