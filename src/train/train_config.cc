#include "tenax/train/train_config.h"

#include "tenax/train/fashion_mnist.h"

namespace tenax {

Result<TrainConfig> ParseTrainConfig(const ConfigDoc& doc) {
  ConfigReader r(doc);
  TrainConfig c;
  c.mode = r.Choice("mode", c.mode, {"single"});
  c.data_dir = r.String("data.dir", kDefaultFashionMnistDir);
  if (c.data_dir.empty()) r.Fail("data.dir", "must not be empty");
  c.train_limit = r.Int("data.train_limit", 0, 0, 60000);
  c.test_limit = r.Int("data.test_limit", 0, 0, 10000);
  c.model = r.Choice("model.name", c.model, {"mlp", "cnn"});
  c.epochs = r.Int("train.epochs", c.epochs, 1, 10000);
  c.max_steps = r.Int("train.max_steps", 0, 0, int64_t{1} << 40);
  c.batch_size = r.Int("train.batch_size", c.batch_size, 1, 60000);
  c.optimizer = r.Choice("train.optimizer", c.optimizer, {"sgd", "adam"});
  const bool adam = c.optimizer == "adam";
  c.lr = r.Real("train.lr", adam ? 1e-3 : 0.02, 1e-9, 10.0);
  if (adam && r.has("train.momentum")) {
    r.Fail("train.momentum", "only applies to optimizer \"sgd\" (adam has betas)");
  }
  c.momentum = r.Real("train.momentum", adam ? 0.0 : 0.9, 0.0, 0.999);
  c.weight_decay = r.Real("train.weight_decay", 0.0, 0.0, 1.0);
  c.seed = r.Int("train.seed", c.seed, 0, int64_t{1} << 62);
  c.threads = r.Int("train.threads", 0, 0, 1024);
  c.log_every_steps = r.Int("log.every_steps", c.log_every_steps, 1, int64_t{1} << 40);
  c.log_level = r.Choice("log.level", c.log_level, {"trace", "debug", "info", "warn", "error"});

  const int64_t train_samples = c.train_limit > 0 ? c.train_limit : 60000;
  if (c.batch_size > train_samples) {
    r.Fail("train.batch_size", "is " + std::to_string(c.batch_size) + ", more than the " +
                                   std::to_string(train_samples) + " training samples");
  }
  TENAX_RETURN_IF_ERROR(r.Finish());
  return c;
}

}  // namespace tenax
