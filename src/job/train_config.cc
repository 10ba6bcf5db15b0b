#include "tenax/job/train_config.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <algorithm>
#include <optional>

#include "tenax/coding/gradient_code.h"
#include "tenax/coding/straggler_model.h"
#include "tenax/core/files.h"
#include "tenax/net/host_port.h"
#include "tenax/net/node.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/data/npy.h"
#include "tenax/job/price_table.h"

namespace tenax {
namespace {

// The job's optimizer steps as the training loop counts them, or nullopt
// when the number of training samples is not known without reading data
// that cannot be read now. Fashion-MNIST's training split holds 60000
// samples (its loader refuses any other count); an npy job's count is the
// first dimension in its labels file's header (the data is not read).
std::optional<int64_t> TotalSteps(const TrainConfig& c) {
  // The user's program counts its own steps; train.max_steps states them.
  if (!c.worker.command.empty()) return c.max_steps > 0 ? std::optional<int64_t>(c.max_steps) : std::nullopt;
  if (c.data_format == kStoreFormat) return std::nullopt;  // the count is in the store's catalog
  int64_t n = 60000;
  if (c.data_format == kNpyFormat) {
    auto header = ReadNpyFileHeader(c.train_labels);
    if (!header.ok() || header->shape.empty()) return std::nullopt;
    n = header->shape[0];
  }
  if (c.train_limit > 0) n = std::min(n, c.train_limit);
  const int64_t world = c.mode == "sync" || c.mode == "coded" ? c.cluster.workers : 1;
  const int64_t b = c.batch_size;
  // One replica keeps the last partial batch; replicas drop a partial global
  // batch, and so do async units (AsyncTotalSteps).
  const int64_t steps_per_epoch = world == 1 && c.mode != "async" ? (n + b - 1) / b : n / (b * world);
  int64_t total = steps_per_epoch * c.epochs;
  if (c.max_steps > 0) total = std::min(total, c.max_steps);
  return total;
}

constexpr const char* kCodedKeys[] = {"coded.scheme",       "coded.stragglers",    "coded.decoding",
                                     "coded.deadline",     "coded.shuffle_every", "coded.partitioning",
                                     "coded.slow_factor", "coded.max_seconds"};
constexpr const char* kStragglerKeys[] = {
    "stragglers.model",           "stragglers.seed",      "stragglers.probability",     "stragglers.slowdown",
    "stragglers.slowdown_max",    "stragglers.p_slow",    "stragglers.p_recover",       "stragglers.active_slowdown",
    "stragglers.active_slowdown_max", "stragglers.slow_workers", "stragglers.trace"};

// [coded] and [stragglers] (mode "coded"): checked against cluster.workers
// here, so an impossible code or a trace naming unknown workers is refused
// before any process starts.
void ParseStragglers(ConfigReader& r, TrainConfig& c);

void ParseCoded(ConfigReader& r, TrainConfig& c) {
  ParseStragglers(r, c);
  if (c.mode != "coded") {
    for (const char* key : kCodedKeys) {
      if (r.has(key)) r.Fail(key, "only applies to mode = \"coded\"");
    }
    return;
  }
  if (c.optimizer != "sgd") {
    r.Fail("train.optimizer", "mode = \"coded\" supports \"sgd\" only (the decoder applies the update), not \"" +
                                  c.optimizer + "\"");
  }
  const int n = static_cast<int>(c.cluster.workers);
  coding::CodedConfig& x = c.coded;
  x.scheme = r.Choice("coded.scheme", x.scheme, {"cyclic", "frc", "wait_all", "ignore_stragglers"});
  x.stragglers = r.Int("coded.stragglers", x.stragglers, 0, 1023);
  if (x.scheme == "wait_all") x.stragglers = 0;  // it waits for every worker (so a job can switch schemes alone)
  if (x.stragglers >= n) {
    r.Fail("coded.stragglers", "is " + std::to_string(x.stragglers) + " but the job has " + std::to_string(n) +
                                   " workers: s must be below cluster.workers (0.." + std::to_string(n - 1) + ")");
  } else if (x.scheme == "frc") {
    if (auto code = coding::GradientCode::FractionalRepetition(n, static_cast<int>(x.stragglers)); !code.ok()) {
      r.Fail("coded.stragglers", code.status().message());
    }
  }
  x.decoding = r.Choice("coded.decoding", x.decoding, {"exact", "approx"});
  if (x.decoding == "approx" && x.scheme != "cyclic" && x.scheme != "frc") {
    r.Fail("coded.decoding", "\"approx\" needs a code (coded.scheme = \"cyclic\" or \"frc\"), not \"" + x.scheme + "\"");
  }
  x.deadline = r.Real("coded.deadline", x.deadline, 1, 1000);
  if (r.has("coded.deadline") && x.decoding != "approx") r.Fail("coded.deadline", "needs coded.decoding = \"approx\"");
  x.shuffle_every = r.Int("coded.shuffle_every", x.shuffle_every, 0, int64_t{1} << 40);
  x.partitioning = r.Choice("coded.partitioning", x.partitioning, {"random", "by_label"});
  x.slow_factor = r.Real("coded.slow_factor", x.slow_factor, 1, 1000);
  if (x.slow_factor <= 1) r.Fail("coded.slow_factor", "must be above 1");
  x.max_seconds = r.Real("coded.max_seconds", x.max_seconds, 0, 1e7);
}

// [stragglers]: emulated slow workers, in mode "coded" (what the code is
// for) and "sync" (where measured batch shares move work away from them).
void ParseStragglers(ConfigReader& r, TrainConfig& c) {
  if (c.mode != "coded" && c.mode != "sync") {
    for (const char* key : kStragglerKeys) {
      if (r.has(key)) r.Fail(key, "only applies to modes \"sync\" and \"coded\"");
    }
    return;
  }
  const int n = static_cast<int>(c.cluster.workers);
  coding::StragglerConfig& m = c.stragglers;
  m.model = r.Choice("stragglers.model", m.model, {"none", "iid", "markov", "trace"});
  m.seed = r.Int("stragglers.seed", 0, 0, int64_t{1} << 62);
  m.probability = r.Real("stragglers.probability", m.probability, 0, 1);
  m.slowdown = r.Real("stragglers.slowdown", m.slowdown, 1, 1000);
  m.slowdown_max = r.Real("stragglers.slowdown_max", m.slowdown, 1, 1000);
  if (m.slowdown_max < m.slowdown) r.Fail("stragglers.slowdown_max", "must be at least stragglers.slowdown");
  m.active_slowdown = r.Real("stragglers.active_slowdown", m.active_slowdown, 1, 1000);
  m.active_slowdown_max = r.Real("stragglers.active_slowdown_max", m.active_slowdown, 1, 1000);
  if (m.active_slowdown_max < m.active_slowdown) {
    r.Fail("stragglers.active_slowdown_max", "must be at least stragglers.active_slowdown");
  }
  m.p_slow = r.Real("stragglers.p_slow", m.p_slow, 0, 1);
  m.p_recover = r.Real("stragglers.p_recover", m.p_recover, 0, 1);
  if (const toml::node* list = r.Node("stragglers.slow_workers")) {
    const toml::array* a = list->as_array();
    if (!a) r.Fail("stragglers.slow_workers", "must be an array of worker ranks, e.g. [3]");
    for (size_t i = 0; a && i < a->size(); ++i) {
      auto v = (*a)[i].value<int64_t>();
      if (!v || *v < 0 || *v >= n) {
        r.Fail("stragglers.slow_workers", "names a worker outside this job's ranks 0.." + std::to_string(n - 1));
        break;
      }
      m.slow_workers.push_back(static_cast<int>(*v));
    }
  }
  m.trace = r.String("stragglers.trace", "");
  if (m.model == "trace") {
    if (m.trace.empty()) {
      r.Fail("stragglers.model", "is \"trace\" but stragglers.trace (a file of step,worker,slowdown lines) is not set");
    } else if (auto text = ReadFileText(m.trace, 64 << 20); !text.ok()) {
      r.Fail("stragglers.trace", text.status().message());
    } else if (auto t = coding::ParseStragglerTrace(*text, m.trace, n); !t.ok()) {
      r.Fail("stragglers.trace", t.status().message());
    }
  } else if (r.has("stragglers.trace")) {
    r.Fail("stragglers.trace", "needs stragglers.model = \"trace\"");
  }
}

constexpr const char* kStorageKeys[] = {"storage.nodes",       "storage.zones",     "storage.data_chunks",
                                        "storage.parity_chunks", "storage.chunk_kib", "storage.link_gbps",
                                        "storage.source_dir"};

// [storage]: a store `tenax run` builds and fills for the job.
void ParseStorage(ConfigReader& r, TrainConfig& c, bool cluster_mode) {
  StorageConfig& s = c.storage;
  if (!cluster_mode) {
    for (const char* key : kStorageKeys) {
      if (r.has(key)) r.Fail(key, "only applies to jobs run by `tenax run` (modes \"sync\", \"async\", \"coded\")");
    }
    return;
  }
  s.nodes = r.Int("storage.nodes", 0, 0, 64);
  if (s.nodes == 0) {
    for (const char* key : kStorageKeys) {
      if (r.has(key) && std::string(key) != "storage.nodes") r.Fail(key, "needs storage.nodes (the data nodes tenax run starts)");
    }
    return;
  }
  if (c.data_format != kStoreFormat) {
    r.Fail("storage.nodes", "needs data.format = \"store\" (the job reads the store tenax run builds)");
  }
  s.data_chunks = r.Int("storage.data_chunks", s.data_chunks, 1, 32);
  s.parity_chunks = r.Int("storage.parity_chunks", s.parity_chunks, 1, 16);
  if (s.data_chunks + s.parity_chunks > s.nodes) {
    r.Fail("storage.nodes", std::to_string(s.nodes) + " data nodes cannot hold a stripe of " +
                                std::to_string(s.data_chunks) + " + " + std::to_string(s.parity_chunks) +
                                " chunks (each chunk of a stripe on its own node): use at least " +
                                std::to_string(s.data_chunks + s.parity_chunks) + " nodes");
  }
  s.zones = r.Int("storage.zones", 0, 0, 64);
  if (s.zones > s.nodes) r.Fail("storage.zones", "exceeds storage.nodes (" + std::to_string(s.nodes) + ")");
  s.chunk_kib = r.Int("storage.chunk_kib", s.chunk_kib, 4, 64 * 1024);
  s.link_gbps = r.Real("storage.link_gbps", 0, 0, 400);
  s.source_dir = r.String("storage.source_dir", kDefaultFashionMnistDir);
  if (s.source_dir.empty()) r.Fail("storage.source_dir", "must name the directory of the Fashion-MNIST idx files");
}

// [data]: the format, its files or store datasets, and the sample limits.
void ParseData(ConfigReader& r, TrainConfig& c) {
  c.data_format = r.Choice("data.format", c.data_format, {kFashionMnistFormat, kNpyFormat, kStoreFormat});
  const bool npy = c.data_format == kNpyFormat;
  const bool store = c.data_format == kStoreFormat;
  for (const char* key :
       {"data.catalog", "data.train_dataset", "data.test_dataset", "data.cache_chunks", "data.shuffle_window_chunks",
        "data.recovery_policy", "data.recovery_min_available", "data.recovery_class_tolerance",
        "data.recovery_background_gbps", "data.recovery_service", "data.stand_in"}) {
    if (!store && r.has(key)) r.Fail(key, "only applies to data.format = \"store\"");
  }
  if (store) {
    c.store_catalog = r.String("data.catalog", "");
    // With [storage], tenax run builds the store and names its catalog.
    if (!r.has("data.catalog") && !(r.has("storage.nodes") && r.Int("storage.nodes", 0, 0, 64) > 0)) {
      r.Fail("data.format", "is \"store\" but 'data.catalog' (the store's catalog file) is not set");
    }
    if (r.has("data.catalog") && c.store_catalog.empty()) r.Fail("data.catalog", "must name the store's catalog file");
    c.store_train_dataset = r.String("data.train_dataset", c.store_train_dataset);
    c.store_test_dataset = r.String("data.test_dataset", c.store_test_dataset);
    for (const char* key : {"data.train_dataset", "data.test_dataset"}) {
      if (r.has(key) && r.String(key, "").empty()) r.Fail(key, "must name a dataset in the store");
    }
    c.store_cache_chunks = r.Int("data.cache_chunks", c.store_cache_chunks, 1, 1 << 20);
    c.store_shuffle_window = r.Int("data.shuffle_window_chunks", c.store_shuffle_window, 0, 1 << 20);
    if (c.store_shuffle_window > c.store_cache_chunks) {
      r.Fail("data.shuffle_window_chunks", "is " + std::to_string(c.store_shuffle_window) + ", more than data.cache_chunks (" +
                                               std::to_string(c.store_cache_chunks) +
                                               "): a window must fit the cache or it evicts its own chunks");
    }
    c.store_recovery_policy = r.Choice("data.recovery_policy", c.store_recovery_policy, {"none", "full", "approx", "prm"});
    c.store_recovery_min_available = r.Real("data.recovery_min_available", c.store_recovery_min_available, 0, 1);
    c.store_recovery_class_tolerance = r.Real("data.recovery_class_tolerance", c.store_recovery_class_tolerance, 0, 1);
    c.store_recovery_background_gbps = r.Real("data.recovery_background_gbps", c.store_recovery_background_gbps, 0, 400);
    if (r.has("data.recovery_service")) {
      c.store_recovery_service = r.String("data.recovery_service", "");
      if (c.store_recovery_policy == "none") {
        r.Fail("data.recovery_service", "is set but data.recovery_policy is \"none\": name the policy the service runs");
      } else if (auto hp = net::ParseHostPort(c.store_recovery_service); !hp.ok() || hp->port == 0) {
        r.Fail("data.recovery_service", "must be HOST:PORT of a 'tenax store serve' (" +
                                            (hp.ok() ? std::string("port 0") : hp.status().message()) + ")");
      }
    }
    c.store_stand_in = r.Choice("data.stand_in", c.store_stand_in, {"neighbour", "batch"});
    for (const char* key : {"data.dir", "data.train_images", "data.train_labels", "data.test_images", "data.test_labels"}) {
      if (r.has(key)) r.Fail(key, "does not apply to data.format = \"store\" (samples come from data.catalog)");
    }
  } else if (npy) {
    if (r.has("data.dir")) r.Fail("data.dir", "only applies to data.format = \"fashion-mnist\" (npy reads data.train_images etc.)");
    struct NpyKey {
      const char* key;
      std::string* value;
    };
    for (NpyKey k : {NpyKey{"data.train_images", &c.train_images}, NpyKey{"data.train_labels", &c.train_labels},
                     NpyKey{"data.test_images", &c.test_images}, NpyKey{"data.test_labels", &c.test_labels}}) {
      *k.value = r.String(k.key, "");
      // An absent key has no line: point at the data.format that needs it.
      if (!r.has(k.key)) r.Fail("data.format", std::string("is \"npy\" but '") + k.key + "' (a .npy file) is not set");
      if (k.value->empty()) r.Fail(k.key, "must name a .npy file when data.format = \"npy\"");
    }
  } else {
    c.data_dir = r.String("data.dir", kDefaultFashionMnistDir);
    if (c.data_dir.empty()) r.Fail("data.dir", "must not be empty");
    for (const char* key : {"data.train_images", "data.train_labels", "data.test_images", "data.test_labels"}) {
      if (r.has(key)) r.Fail(key, "only applies to data.format = \"npy\"");
    }
  }
  // Fashion-MNIST's sizes are known; an npy file's are checked when it loads.
  c.train_limit = r.Int("data.train_limit", 0, 0, npy || store ? int64_t{1} << 40 : 60000);
  c.test_limit = r.Int("data.test_limit", 0, 0, npy || store ? int64_t{1} << 40 : 10000);
}

// train.device's syntax; whether the device exists is known only to the
// libtorch that runs the job (train/device.h).
bool IsDeviceSpec(const std::string& d) {
  if (d == "cpu" || d == "cuda" || d == "auto") return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5 || d.size() > 8) return false;
  return std::all_of(d.begin() + 5, d.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// A GPU trains in modes "single" and "sync" (elastic too); async workers
// and the coded decoder keep their model on the CPU (docs/gpu.md says what
// they need). "auto" picks the CPU there.
void CheckDeviceForMode(ConfigReader& r, TrainConfig& c) {
  const bool gpu_mode = c.mode == "single" || c.mode == "sync";
  if (!gpu_mode && c.device != "cpu" && c.device != "auto") {
    r.Fail("train.device", "is \"" + c.device + "\" but mode \"" + c.mode +
                               "\" trains on the CPU only (GPUs: modes \"single\" and \"sync\"); use \"cpu\" or \"auto\"");
  }
  if (!gpu_mode) c.device = "cpu";
  if (c.mode != "sync" && r.has("train.allreduce")) {
    r.Fail("train.allreduce", "only applies to mode = \"sync\" (fixed or elastic): the other modes take no allreduce");
  }
  if (c.mode != "sync" && r.has("train.staging")) {
    r.Fail("train.staging", "only applies to mode = \"sync\" (gradients staged for the allreduce)");
  }
  if (c.mode != "sync" && r.has("train.bucket_kib")) {
    r.Fail("train.bucket_kib", "only applies to mode = \"sync\" (the allreduce's gradient buckets)");
  }
}

// [model], [train] and [log].
void ParseModelAndTraining(ConfigReader& r, TrainConfig& c) {
  c.model_path = r.String("model.path", "");
  if (r.has("model.path") && c.model_path.empty()) r.Fail("model.path", "must name a TorchScript file");
  if (!c.model_path.empty() && r.has("model.name")) {
    r.Fail("model.name", "and model.path exclude each other (model.path loads a TorchScript module)");
  }
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
  c.device = r.String("train.device", c.device);
  if (!IsDeviceSpec(c.device)) {
    r.Fail("train.device", "is \"" + c.device + "\"; use \"cpu\", \"cuda\", \"cuda:N\" (N a GPU index) or \"auto\"");
  }
  c.staging = r.Choice("train.staging", c.staging, {"auto", "always"});
  c.bucket_kib = r.Int("train.bucket_kib", c.bucket_kib, 4, int64_t{1} << 20);
  c.resident_data = r.Choice("train.resident_data", c.resident_data, {"auto", "off"});
  c.allreduce = r.Choice("train.allreduce", c.allreduce, {"auto", "ring", "hierarchical"});
  c.log_every_steps = r.Int("log.every_steps", c.log_every_steps, 1, int64_t{1} << 40);
  c.log_level = r.Choice("log.level", c.log_level, {"trace", "debug", "info", "warn", "error"});

}

// The training samples a batch must fit in: the limit, Fashion-MNIST's
// 60000, or no bound yet for npy and store data (checked when they load).
int64_t KnownTrainSamples(const TrainConfig& c) {
  if (c.train_limit > 0) return c.train_limit;
  return c.data_format == kNpyFormat || c.data_format == kStoreFormat ? int64_t{1} << 40 : 60000;
}

// [cluster]: only for the multi-process modes.
void ParseCluster(ConfigReader& r, TrainConfig& c, bool cluster_mode, int64_t train_samples) {
  if (cluster_mode) {
    coord::ClusterConfig& k = c.cluster;
    k.workers = r.Int("cluster.workers", k.workers, 1, 1024);
    k.job_id = r.String("cluster.job_id", k.job_id);
    if (k.job_id.empty() || k.job_id.size() > 128) r.Fail("cluster.job_id", "must be 1 to 128 characters");
    k.coordinator = r.String("cluster.coordinator", k.coordinator);
    if (auto hp = net::ParseHostPort(k.coordinator); !hp.ok()) r.Fail("cluster.coordinator", hp.status().message());
    k.host = r.String("cluster.host", k.host);
    if (k.host.empty()) r.Fail("cluster.host", "must not be empty");
    k.secret = r.String("cluster.secret", "");
    if (!k.secret.empty() && k.secret.size() < 16) r.Fail("cluster.secret", "must be at least 16 bytes");
    k.transports = r.String("cluster.transports", "");
    if (const toml::node* n = r.Node("net.tcp_streams")) {
      if (auto v = n->value_exact<int64_t>(); v && *v >= 1 && *v <= net::kMaxTcpStreams) {
        k.tcp_streams = static_cast<int>(*v);
      } else if (auto t = n->value_exact<std::string>(); !(t && *t == "auto")) {
        r.Fail("net.tcp_streams", "must be \"auto\" or an integer from 1 to " + std::to_string(net::kMaxTcpStreams) +
                                      " (data connections per peer over TCP)");
      }
    }
    k.metrics_listen = r.String("cluster.metrics_listen", "");
    if (r.has("cluster.metrics_listen")) {
      if (auto hp = net::ParseHostPort(k.metrics_listen); !hp.ok()) r.Fail("cluster.metrics_listen", hp.status().message());
    }
    k.join_timeout_seconds = r.Real("cluster.join_timeout_seconds", k.join_timeout_seconds, 0.1, 86400);
    k.step_timeout_seconds = r.Real("cluster.step_timeout_seconds", k.step_timeout_seconds, 0.1, 86400);
    k.peer_timeout_seconds = r.Real("cluster.peer_timeout_seconds", k.peer_timeout_seconds, 0.5, 3600);
    k.elastic = r.Bool("cluster.elastic", false);
    k.min_workers = r.Int("cluster.min_workers", 1, 1, 1024);
    k.max_workers = r.Int("cluster.max_workers", k.workers, 1, 1024);
    k.shares = r.Choice("cluster.shares", k.shares, {"measured", "even"});
    k.spares = r.Int("cluster.spares", 0, 0, 64);
    if (c.mode == "async") {
      // Async workers come and go by design: membership is not configured.
      for (const char* key :
           {"cluster.elastic", "cluster.min_workers", "cluster.max_workers", "cluster.shares", "cluster.spares"}) {
        if (r.has(key)) r.Fail(key, "does not apply to mode = \"async\" (workers come and go by design)");
      }
      k.elastic = false;
      k.max_workers = k.workers;
    } else if (c.mode == "coded" && k.elastic) {
      r.Fail("cluster.elastic", "does not apply to mode = \"coded\" (a code tolerates stragglers, not a changing membership)");
    } else if (!k.elastic) {
      for (const char* key : {"cluster.min_workers", "cluster.max_workers", "cluster.shares", "cluster.spares"}) {
        if (r.has(key)) r.Fail(key, "needs cluster.elastic = true");
      }
    } else if (k.min_workers > k.max_workers) {
      r.Fail("cluster.min_workers", "(" + std::to_string(k.min_workers) + ") exceeds cluster.max_workers (" +
                                        std::to_string(k.max_workers) + ")");
    } else if (k.min_workers > k.workers) {
      r.Fail("cluster.min_workers",
             "(" + std::to_string(k.min_workers) + ") exceeds cluster.workers (" + std::to_string(k.workers) + ")");
    } else if (k.max_workers < k.workers) {
      r.Fail("cluster.max_workers",
             "(" + std::to_string(k.max_workers) + ") is below cluster.workers (" + std::to_string(k.workers) + ")");
    } else if (k.spares > 0 && k.max_workers != k.workers) {
      r.Fail("cluster.spares", "needs cluster.max_workers = cluster.workers (" + std::to_string(k.workers) +
                                   "): a spare waits while the job is full, and with max_workers " +
                                   std::to_string(k.max_workers) + " it would be admitted at once");
    } else if (c.optimizer != "sgd") {
      r.Fail("cluster.elastic",
             "supports train.optimizer = \"sgd\" only (momentum buffers are transferred to joiners), not \"" +
                 c.optimizer + "\"");
    }
    // Every worker needs at least one sample of every global batch.
    if ((c.mode == "sync" || c.mode == "coded") && c.batch_size * k.workers > train_samples) {
      r.Fail("cluster.workers", std::to_string(k.workers) + " workers x batch " + std::to_string(c.batch_size) +
                                    " need " + std::to_string(c.batch_size * k.workers) +
                                    " samples per step, more than the " + std::to_string(train_samples) +
                                    " training samples");
    }
  } else {
    for (const char* key :
         {"cluster.workers", "cluster.job_id", "cluster.coordinator", "cluster.host", "cluster.secret",
          "cluster.transports", "cluster.metrics_listen", "cluster.join_timeout_seconds", "cluster.step_timeout_seconds",
          "cluster.peer_timeout_seconds", "cluster.elastic", "cluster.min_workers", "cluster.max_workers",
          "cluster.shares", "cluster.spares"}) {
      if (r.has(key)) r.Fail(key, "only applies to modes \"sync\", \"async\" and \"coded\"");
    }
    c.cluster.max_workers = c.cluster.workers;
  }
}

// [async]: only for mode "async".
void ParseAsync(ConfigReader& r, TrainConfig& c) {
  if (c.mode == "async") {
    AsyncConfig& a = c.async;
    a.servers = r.Int("async.servers", a.servers, 1, 64);
    a.unit_steps = r.Int("async.unit_steps", a.unit_steps, 1, int64_t{1} << 40);
    a.lease_seconds = r.Real("async.lease_seconds", a.lease_seconds, 0.1, 86400);
    a.max_attempts = r.Int("async.max_attempts", a.max_attempts, 1, 100);
    a.rule = r.Choice("async.rule", a.rule, {"vc_asgd", "delta", "asgd"});
    a.alpha = r.Real("async.alpha", a.alpha, 0, 1);
    if (a.alpha >= 1) r.Fail("async.alpha", "must be below 1 (1 would ignore every result)");
    // vc_asgd's own exponent (docs/async.md, "The merge rule we ship");
    // the comparison rules keep the plain 1/(1+s).
    a.staleness_power = r.Real("async.staleness_power", DefaultStalenessPower(a.rule), 0, 4);
    a.server_lr = r.Real("async.server_lr", 0, 0, 10);
    if (a.server_lr == 0) a.server_lr = c.lr;
    if (r.has("async.server_lr") && a.rule != "asgd") r.Fail("async.server_lr", "only applies to async.rule = \"asgd\"");
    a.checkpoint_every = r.Int("async.checkpoint_every", a.checkpoint_every, 1, int64_t{1} << 40);
    a.norm_factor = r.Real("async.norm_factor", a.norm_factor, 1, 1e12);
    if (a.norm_factor <= 1) r.Fail("async.norm_factor", "must be above 1");
    a.average_tail = r.Real("async.average_tail", a.average_tail, 0, 1);
    if (a.average_tail >= 1) r.Fail("async.average_tail", "must be below 1 (a fraction of the job's steps)");
  } else {
    for (const char* key : {"async.servers", "async.unit_steps", "async.lease_seconds", "async.max_attempts", "async.rule",
                            "async.alpha", "async.staleness_power", "async.server_lr", "async.checkpoint_every",
                            "async.norm_factor", "async.average_tail"}) {
      if (r.has(key)) r.Fail(key, "only applies to mode = \"async\"");
    }
  }
}

// [report]: only for jobs `tenax run` runs.
void ParseReport(ConfigReader& r, TrainConfig& c, bool cluster_mode) {
  c.report.html = r.Bool("report.html", c.report.html);
  c.report.reference = r.Bool("report.reference", c.report.reference);
  if (!cluster_mode) {
    for (const char* key : {"report.html", "report.reference"}) {
      if (r.has(key)) r.Fail(key, "only applies to jobs run by `tenax run` (modes \"sync\", \"async\", \"coded\")");
    }
  }
}

// [cost]: the price table, found beside the job file when relative.
void ParseCost(const ConfigDoc& doc, ConfigReader& r, TrainConfig& c) {
  c.cost.prices = r.String("cost.prices", "");
  // A relative path: from the working directory, else from the job file's
  // directory (examples/cloud.toml names prices/... next to it).
  std::error_code ec;  // exists() without exceptions: the path may be anything
  if (!c.cost.prices.empty() && c.cost.prices.front() != '/' && !std::filesystem::exists(c.cost.prices, ec) &&
      !doc.source_name().empty()) {
    const auto beside = std::filesystem::path(doc.source_name()).parent_path() / c.cost.prices;
    if (std::filesystem::exists(beside, ec)) c.cost.prices = beside.string();
  }
  if (r.has("cost.prices")) {
    if (c.cost.prices.empty()) {
      r.Fail("cost.prices", "must name a price table file (docs/cost.md)");
    } else if (auto t = LoadPriceTable(c.cost.prices); !t.ok()) {
      r.Fail("cost.prices", t.status().message());
    }
  }
}

// command[0] as the launcher will run it: a name without '/' is looked up
// on PATH; a path is taken from the working directory, else from the job
// file's directory (as cost.prices is). Returns the file to check.
std::string ResolveProgram(const ConfigDoc& doc, const std::string& program) {
  std::error_code ec;
  if (program.find('/') == std::string::npos) {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
      const auto candidate = std::filesystem::path(dir) / program;
      if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
        return candidate.string();
      }
      start = end + 1;
    }
    return "";
  }
  if (program.front() != '/' && !std::filesystem::exists(program, ec) && !doc.source_name().empty()) {
    const auto beside = std::filesystem::path(doc.source_name()).parent_path() / program;
    if (std::filesystem::exists(beside, ec)) return beside.string();
  }
  return program;
}

// [worker]: the user's own program as each worker (a Python script with
// tenax.torch.Manager), instead of `tenax worker`.
void ParseWorker(const ConfigDoc& doc, ConfigReader& r, TrainConfig& c) {
  const toml::node* node = r.Node("worker.command");
  if (!node) return;
  const toml::array* a = node->as_array();
  if (!a || a->empty()) {
    r.Fail("worker.command", "must be a non-empty array of strings, e.g. [\"/usr/bin/python3\", \"train.py\"]");
    return;
  }
  for (size_t i = 0; i < a->size(); ++i) {
    auto v = (*a)[i].value<std::string>();
    if (!v || v->empty() || v->find('\0') != std::string::npos) {
      r.Fail("worker.command", "element " + std::to_string(i) + " must be a non-empty string");
      return;
    }
    c.worker.command.push_back(*v);
  }
  if (c.mode != "sync" || !c.cluster.elastic) {
    r.Fail("worker.command", "needs mode = \"sync\" and cluster.elastic = true (a worker command runs the user's "
                             "program with tenax.torch.Manager, which joins an elastic job; docs/python.md)");
    return;
  }
  if (c.storage.nodes > 0) {
    r.Fail("worker.command", "cannot read the store tenax run builds ([storage]): a worker command reads its own data");
  }
  const std::string program = c.worker.command.front();
  const std::string file = ResolveProgram(doc, program);
  std::error_code ec;
  if (file.empty()) {
    r.Fail("worker.command", "'" + program + "' is not found on PATH");
  } else if (!std::filesystem::is_regular_file(file, ec) || ::access(file.c_str(), X_OK) != 0) {
    r.Fail("worker.command", "'" + program + "' is not an executable file" +
                                 (file != program ? " (looked at " + file + ")" : std::string()));
  } else {
    c.worker.command.front() = file;  // the launcher runs what was checked
  }
}

}  // namespace

Result<TrainConfig> ParseTrainConfig(const ConfigDoc& doc) {
  ConfigReader r(doc);
  TrainConfig c;
  c.mode = r.Choice("mode", c.mode, {"single", "sync", "async", "coded"});
  const bool cluster_mode = c.mode == "sync" || c.mode == "async" || c.mode == "coded";
  ParseData(r, c);
  ParseModelAndTraining(r, c);
  const int64_t train_samples = KnownTrainSamples(c);
  if (c.batch_size > train_samples) {
    r.Fail("train.batch_size", "is " + std::to_string(c.batch_size) + ", more than the " +
                                   std::to_string(train_samples) + " training samples");
  }
  ParseCluster(r, c, cluster_mode, train_samples);
  ParseAsync(r, c);
  ParseCoded(r, c);
  CheckDeviceForMode(r, c);
  if (cluster_mode) {
    // A spare takes a slot too (it runs beside the members from the start).
    const int64_t processes = c.cluster.workers + c.cluster.spares + (c.mode == "coded" ? 1 : 0) +
                              (c.mode == "async" ? c.async.servers : 0);
    sched::ParseTopology(doc, r, processes, c.topology, c.placement);
    if (c.placement.migrate && !(c.mode == "sync" && c.cluster.elastic)) {
      r.Fail("placement.migrate", "needs an elastic sync job (mode = \"sync\", cluster.elastic = true): a member moves by "
                                  "a joiner's admission and its own leave");
    }
  } else {
    for (const char* key : {"topology", "placement"}) {
      if (r.has(key)) r.Fail(key, "only applies to modes \"sync\", \"async\" and \"coded\" (run by `tenax run`)");
    }
  }
  ParseStorage(r, c, cluster_mode);
  ParseReport(r, c, cluster_mode);
  ParseCost(doc, r, c);
  ParseWorker(doc, r, c);
  FaultPlanContext fc;
  fc.sync = cluster_mode;
  fc.workers = c.cluster.workers;
  fc.elastic = c.cluster.elastic || c.mode == "async";  // async workers may be replaced
  fc.servers = c.mode == "async" ? c.async.servers : 0;
  fc.storage_nodes = c.storage.nodes;
  for (const auto& h : c.topology.hosts) fc.hosts.push_back(h.name);
  fc.stops_tolerated = c.mode == "coded";
  // A coded job has one more process than workers: the decoder (rank
  // cluster.workers), which the fault plan does not target.
  fc.total_steps = [&c] { return TotalSteps(c); };
  Result<FaultPlan> faults = ParseFaultPlan(doc, r, fc);
  TENAX_RETURN_IF_ERROR(r.Finish());
  if (!faults.ok()) return faults.status();
  c.faults = std::move(*faults);
  return c;
}

}  // namespace tenax
