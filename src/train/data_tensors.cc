#include "tenax/train/data_tensors.h"

namespace tenax {

DataTensors ToTensors(const LabeledImages& data) {
  DataTensors t;
  auto pixels =
      torch::from_blob(const_cast<uint8_t*>(data.pixels.data()), {data.count, 1, data.rows, data.cols}, torch::kUInt8);
  t.images = pixels.to(torch::kFloat32).div_(255.0).sub_(kFashionMnistMean).div_(kFashionMnistStd).contiguous();
  t.labels = torch::from_blob(const_cast<uint8_t*>(data.labels.data()), {data.count}, torch::kUInt8).to(torch::kInt64);
  return t;
}

double EvaluateAccuracy(ClassifierImpl& model, const DataTensors& data, int64_t batch_size) {
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  for (int64_t start = 0; start < data.size(); start += batch_size) {
    int64_t end = std::min(data.size(), start + batch_size);
    auto logits = model.forward(data.images.slice(0, start, end));
    correct += logits.argmax(1).eq(data.labels.slice(0, start, end)).sum().item<int64_t>();
  }
  model.train(was_training);
  return data.size() == 0 ? 0.0 : static_cast<double>(correct) / static_cast<double>(data.size());
}

}  // namespace tenax
