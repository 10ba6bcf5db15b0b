// tenax store put|get|status|fail|scrub|recover: the erasure-coded dataset
// store, its data nodes local directories or `tenax storage` processes
// (store/store_client.h).
// Parsing and printing only; the work is in the store layer.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "tenax/core/files.h"
#include "tenax/core/log.h"
#include "tenax/core/signals.h"
#include "tenax/net/host_port.h"
#include "tenax/store/recovery_json.h"
#include "tenax/store/recovery_service.h"
#include "tenax/store/store_client.h"
#include "tenax/data/fashion_mnist.h"
#include "tenax/data/idx.h"
#include "tenax/data/npy.h"

namespace tenax::cli {
namespace {

using store::StoreClient;

struct StoreArgs {
  std::string catalog;
  bool json = false;
  // put
  std::vector<std::string> node_addresses;
  double link_gbps = 0;
  std::string root, dataset, images, labels, data_dir = kDefaultFashionMnistDir, split = "train";
  int nodes = 6, zones = 3, k = 4, m = 2, classes = 0;
  uint64_t chunk_bytes = 1 << 20;
  // get
  std::string out;
  uint64_t first = 0;
  int64_t count = -1;
  // fail
  std::string node;
  // scrub / recover
  bool dry_run = false, all = false;
  bool allow_reduced_durability = false;
  double background_gbps = 0;
  std::string policy = "prm", important_classes;
  double min_available = 0.9, class_tolerance = 0.01;
  std::string service;           // recover: ask the resident service at HOST:PORT
  int64_t service_timeout = 3600;
  // serve
  std::string listen = "127.0.0.1:0", name = "recovery-service", log_level = "info";
  int64_t max_waiting = 16;
};

void Print(const nlohmann::json& j) { std::printf("%s\n", j.dump().c_str()); }

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// A dataset as records (sample bytes then one label byte) from an idx pair.
struct Records {
  std::vector<uint8_t> bytes, labels;
  uint64_t count = 0, record_bytes = 0;
  std::vector<uint64_t> sample_shape;  // the images' dims after the count
  int classes = 0;
};

bool IsNpy(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0; }

// A .npy pair (the files data.format = "npy" trains on) as idx arrays: the
// store keeps samples as bytes and labels as one byte.
Status LoadNpyPair(const StoreArgs& a, IdxArray& images, IdxArray& labels) {
  TENAX_ASSIGN_OR_RETURN(NpyArray img, ReadNpyFile(a.images));
  TENAX_ASSIGN_OR_RETURN(NpyArray lab, ReadNpyFile(a.labels));
  if (img.dtype != NpyDtype::kUint8) {
    return InvalidArgument(a.images + ": " + NpyDtypeName(img.dtype) +
                           " samples; the store keeps uint8 samples (convert with numpy's astype(np.uint8) if the "
                           "values are pixels 0..255)");
  }
  if (img.shape.empty()) return InvalidArgument(a.images + ": a 0-d array holds no samples");
  for (int64_t d : img.shape) {
    if (d < 0 || d > int64_t{0xFFFFFFFF}) return InvalidArgument(a.images + ": a dimension of " + std::to_string(d));
    images.dims.push_back(static_cast<uint32_t>(d));
  }
  images.data = std::move(img.data);
  TENAX_ASSIGN_OR_RETURN(std::vector<int64_t> values, NpyLabels(lab, a.labels));
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > 255) {
      return InvalidArgument(a.labels + ": label " + std::to_string(values[i]) + " at index " + std::to_string(i) +
                             "; the store keeps labels 0..255");
    }
    labels.data.push_back(static_cast<uint8_t>(values[i]));
  }
  labels.dims = {static_cast<uint32_t>(labels.data.size())};
  return Status::Ok();
}

Result<Records> LoadRecords(const StoreArgs& a) {
  IdxArray images, labels;
  if (!a.images.empty() || !a.labels.empty()) {
    if (a.images.empty() || a.labels.empty()) return InvalidArgument("--images and --labels go together");
    if (IsNpy(a.images) != IsNpy(a.labels)) {
      return InvalidArgument("--images and --labels must both be idx files or both .npy files");
    }
    if (IsNpy(a.images)) {
      TENAX_RETURN_IF_ERROR(LoadNpyPair(a, images, labels));
    } else {
      TENAX_ASSIGN_OR_RETURN(images, ReadIdxFile(a.images));
      TENAX_ASSIGN_OR_RETURN(labels, ReadIdxFile(a.labels));
    }
  } else {
    const bool train = a.split == "train";
    TENAX_ASSIGN_OR_RETURN(LabeledImages fm, LoadFashionMnist(a.data_dir, train ? Split::kTrain : Split::kTest));
    images.dims = {static_cast<uint32_t>(fm.count), static_cast<uint32_t>(fm.rows), static_cast<uint32_t>(fm.cols)};
    images.data = std::move(fm.pixels);
    labels.dims = {static_cast<uint32_t>(fm.count)};
    labels.data = std::move(fm.labels);
  }
  if (images.dims.empty() || labels.dims.size() != 1 || labels.dims[0] != images.dims[0]) {
    return InvalidArgument("the labels must be one byte per sample and as many as the images (" +
                           std::to_string(images.dims.empty() ? 0 : images.dims[0]) + " images, " +
                           std::to_string(labels.data.size()) + " label bytes)");
  }
  Records r;
  r.count = images.dims[0];
  if (r.count == 0) return InvalidArgument("the dataset holds no samples");
  const uint64_t sample = images.data.size() / r.count;
  r.sample_shape.assign(images.dims.begin() + 1, images.dims.end());
  if (r.sample_shape.size() == 2) r.sample_shape.insert(r.sample_shape.begin(), 1);  // H x W images: one channel
  r.record_bytes = sample + 1;
  int max_label = 0;
  for (uint8_t l : labels.data) max_label = std::max(max_label, int{l});
  r.classes = a.classes > 0 ? a.classes : max_label + 1;
  r.bytes.reserve(r.count * r.record_bytes);
  for (uint64_t i = 0; i < r.count; ++i) {
    r.bytes.insert(r.bytes.end(), images.data.begin() + static_cast<std::ptrdiff_t>(i * sample),
                   images.data.begin() + static_cast<std::ptrdiff_t>((i + 1) * sample));
    r.bytes.push_back(labels.data[i]);
  }
  r.labels = std::move(labels.data);
  return r;
}

Result<std::unique_ptr<StoreClient>> OpenStore(const StoreArgs& a) {
  InitLogging("store", "warn");  // to stderr: stdout is for the report (--json)
  store::StoreClientOptions o;
  o.link_bytes_per_second = a.link_gbps * 1e9 / 8;
  // A command is a batch of work, not a loader feeding a step: it waits out
  // a data node stalled in a slow fsync (8 s seen on this machine under
  // CI's load) as the recovery service does. With the loaders' 3 s, two
  // `store put`s of CI's storage tests failed together when the disk
  // stalled. A node that is gone (its connection reset) is still known at
  // once.
  o.peer_timeout = std::chrono::seconds(15);
  o.connect_timeout = std::chrono::seconds(15);
  o.request_timeout = std::chrono::seconds(30);
  return StoreClient::Open(a.catalog, o);
}

nlohmann::json TransportJson(const StoreClient& s) {
  const store::TransportBytes t = s.transport_bytes();
  return {{"read", t.read}, {"written", t.written}};
}

int RunPut(const StoreArgs& a) {
  auto store = OpenStore(a);
  if (!store.ok()) return ReportError("store put", store.status());
  if (!a.root.empty() && !a.node_addresses.empty()) {
    return ReportError("store put", InvalidArgument("--root (node directories) and --node (storage processes) exclude each other"));
  }
  if (!a.root.empty()) {
    if (Status st = (*store)->CreateNodes(a.root, a.nodes, a.zones); !st.ok()) return ReportError("store put", st);
  }
  if (!a.node_addresses.empty()) {
    if (Status st = (*store)->CreateNetworkNodes(a.node_addresses, a.zones); !st.ok()) return ReportError("store put", st);
  }
  auto records = LoadRecords(a);
  if (!records.ok()) return ReportError("store put", records.status());
  const std::string name = !a.dataset.empty() ? a.dataset : "fashion-mnist-" + a.split;
  store::LayoutParams layout;
  layout.records = records->count;
  layout.record_bytes = records->record_bytes;
  layout.chunk_bytes = a.chunk_bytes;
  layout.k = a.k;
  layout.m = a.m;
  const auto& labels = records->labels;
  auto put = (*store)->Put(name, records->bytes, layout, records->classes,
                           [&labels](uint64_t r) { return int{labels[r]}; }, records->sample_shape,
                           a.allow_reduced_durability);
  if (!put.ok()) return ReportError("store put", put.status());
  const auto& m = put->manifest;
  std::vector<uint64_t> per_node((*store)->nodes().size(), 0);
  for (const auto& stripe : m.stripes) {
    for (const auto& c : stripe) ++per_node[static_cast<size_t>(c.node)];
  }
  if (a.json) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : (*store)->nodes()) {
      nodes.push_back({{"name", n.name}, {"zone", n.zone}, {"chunks", per_node[static_cast<size_t>(n.id)]}});
    }
    Print({{"dataset", name}, {"records", m.layout.records}, {"record_bytes", m.layout.record_bytes},
           {"classes", m.classes}, {"k", m.layout.k}, {"m", m.layout.m}, {"stripes", m.stripes.size()},
           {"chunks", m.stripes.size() * static_cast<size_t>(m.layout.k + m.layout.m)},
           {"bytes_written", put->bytes_written}, {"seconds", put->seconds}, {"nodes", nodes},
           {"transport_bytes", TransportJson(**store)}, {"nodes_failed", put->nodes_failed},
           {"stripes_sharing_a_node", put->stripes_sharing_a_node}});
  } else {
    for (const auto& f : put->nodes_failed) {
      std::printf("data node %s failed during the ingest: marked failed, its chunks were placed on other nodes\n",
                  f.c_str());
    }
    std::printf("stored %s: %llu records of %llu bytes, %d classes, RS %d+%d, %zu stripes, %s written in %.2f s\n",
                name.c_str(), static_cast<unsigned long long>(m.layout.records),
                static_cast<unsigned long long>(m.layout.record_bytes), m.classes, m.layout.k, m.layout.m,
                m.stripes.size(), Mib(put->bytes_written).c_str(), put->seconds);
    if (put->stripes_sharing_a_node > 0) {
      std::printf("reduced durability (--allow-reduced-durability): %llu of %zu stripes hold two or more chunks on one "
                  "node; losing that node costs such a stripe more than one of its %d parity chunks\n",
                  static_cast<unsigned long long>(put->stripes_sharing_a_node), m.stripes.size(), m.layout.m);
    }
    for (const auto& n : (*store)->nodes()) {
      std::printf("  %-8s %-8s %llu chunks\n", n.name.c_str(), n.zone.empty() ? "-" : n.zone.c_str(),
                  static_cast<unsigned long long>(per_node[static_cast<size_t>(n.id)]));
    }
  }
  return 0;
}

int RunGet(const StoreArgs& a) {
  auto store = OpenStore(a);
  if (!store.ok()) return ReportError("store get", store.status());
  auto m = (*store)->Manifest(a.dataset);
  if (!m.ok()) return ReportError("store get", m.status());
  const uint64_t count = a.count >= 0 ? static_cast<uint64_t>(a.count)
                                      : (a.first < m->layout.records ? m->layout.records - a.first : 0);
  store::ReadStats stats;
  auto bytes = (*store)->Get(a.dataset, a.first, count, &stats);
  if (!bytes.ok()) return ReportError("store get", bytes.status());
  if (Status st = WriteFileAtomic(a.out, std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
      !st.ok()) {
    return ReportError("store get", st);
  }
  if (a.json) {
    Print({{"dataset", a.dataset}, {"first", a.first}, {"count", count}, {"bytes", bytes->size()}, {"out", a.out},
           {"chunks_read", stats.chunks_read}, {"degraded_chunks", stats.degraded_chunks},
           {"bytes_read", stats.bytes_read}, {"transport_bytes", TransportJson(**store)}});
  } else {
    std::printf("wrote %llu records of %s (%s) to %s; %llu chunks read, %llu rebuilt from their stripe (degraded)\n",
                static_cast<unsigned long long>(count), a.dataset.c_str(), Mib(bytes->size()).c_str(), a.out.c_str(),
                static_cast<unsigned long long>(stats.chunks_read),
                static_cast<unsigned long long>(stats.degraded_chunks));
  }
  return 0;
}

// status (verify = false) and a scrub's report (verify = true).
int RunHealth(const StoreArgs& a, bool verify, const char* cmd) {
  auto store = OpenStore(a);
  if (!store.ok()) return ReportError(cmd, store.status());
  auto health = (*store)->Health(verify);
  if (!health.ok()) return ReportError(cmd, health.status());
  bool unreadable = false;
  nlohmann::json nodes = nlohmann::json::array(), datasets = nlohmann::json::array();
  for (const auto& n : (*store)->nodes()) {
    nodes.push_back({{"id", n.id}, {"name", n.name}, {"zone", n.zone}, {"location", n.location},
                     {"state", store::ToString(n.state)}});
  }
  for (const auto& h : *health) {
    unreadable = unreadable || h.lost_stripes > 0;
    datasets.push_back({{"dataset", h.dataset}, {"records", h.records}, {"k", h.k}, {"m", h.m},
                        {"stripes", h.stripes}, {"chunks", h.chunks}, {"bytes", h.bytes},
                        {"lost_chunks", h.lost.size()}, {"degraded_stripes", h.degraded_stripes},
                        {"lost_stripes", h.lost_stripes}, {"unreadable_samples", h.unreadable_samples},
                        {"lost", store::LostChunksJson(h.lost)}});
  }
  if (a.json) {
    Print({{"catalog", a.catalog}, {"verified", verify}, {"nodes", nodes}, {"datasets", datasets}});
  } else {
    std::printf("data nodes (%zu):\n", (*store)->nodes().size());
    for (const auto& n : (*store)->nodes()) {
      std::printf("  %-8s %-8s %-6s %s\n", n.name.c_str(), n.zone.empty() ? "-" : n.zone.c_str(),
                  store::ToString(n.state), n.location.c_str());
    }
    for (const auto& h : *health) {
      std::printf("%s: %llu records, RS %d+%d, %llu stripes, %s; %zu chunks lost%s, %llu stripes degraded, %llu lost",
                  h.dataset.c_str(), static_cast<unsigned long long>(h.records), h.k, h.m,
                  static_cast<unsigned long long>(h.stripes), Mib(h.bytes).c_str(), h.lost.size(),
                  verify ? " (every chunk verified)" : "", static_cast<unsigned long long>(h.degraded_stripes),
                  static_cast<unsigned long long>(h.lost_stripes));
      if (h.unreadable_samples > 0) {
        std::printf(" (%llu samples unreadable)", static_cast<unsigned long long>(h.unreadable_samples));
      }
      std::printf("\n");
      for (const auto& f : h.lost) {
        std::printf("  stripe %llu chunk %u%s: %s\n", static_cast<unsigned long long>(f.chunk.stripe), f.chunk.index,
                    f.chunk.parity ? " (parity)" : "", f.reason.c_str());
      }
    }
  }
  return unreadable ? 2 : 0;
}

// A recovery's report as `tenax store recover` prints it without --json,
// from the JSON both the local path and the service produce
// (store::RecoveryReportJson); true if some stripe could not be rebuilt.
bool PrintRecoveryReport(const nlohmann::json& results, bool scrub, bool rebuild_later, double background_gbps) {
  bool unrecoverable = false;
  for (const nlohmann::json& r : results) {
    const std::string dataset = r.value("dataset", "?");
    const auto lost = r.value("lost_chunks", uint64_t{0}), later = r.value("later_chunks", uint64_t{0});
    const auto bad = r.value("unrecoverable", std::vector<std::string>{});
    unrecoverable = unrecoverable || !bad.empty();
    if (lost == 0) {
      std::printf("%s: nothing lost%s\n", dataset.c_str(), scrub ? " (every chunk verified)" : "");
      continue;
    }
    std::printf("%s: %llu chunks lost; %s plan: %llu first (%s), %llu later (%s)\n", dataset.c_str(),
                static_cast<unsigned long long>(lost), r.value("policy", "?").c_str(),
                static_cast<unsigned long long>(r.value("first_chunks", uint64_t{0})),
                Mib(r.value("first_bytes", uint64_t{0})).c_str(), static_cast<unsigned long long>(later),
                Mib(r.value("later_bytes", uint64_t{0})).c_str());
    std::printf("  rebuilt %llu chunks in %.2f s: read %s, wrote %s; available samples %.1f%%, largest class share "
                "deviation %.2f pt (%.2f pt before)%s\n",
                static_cast<unsigned long long>(r.value("chunks_rebuilt", uint64_t{0})), r.value("seconds", 0.0),
                Mib(r.value("bytes_read", uint64_t{0})).c_str(), Mib(r.value("bytes_written", uint64_t{0})).c_str(),
                100 * r.value("available_share", 0.0), 100 * r.value("max_class_deviation", 0.0),
                100 * r.value("max_class_deviation_before", 0.0),
                r.value("shares_a_node", false) ? "; some stripes now share a node (fewer live nodes than k+m)" : "");
    const nlohmann::json bg = r.value("background", nlohmann::json::object());
    if (bg.value("ran", false)) {
      std::printf("  background pass: rebuilt the other %llu chunks in %.2f s at %.3g Gbit/s: read %s, wrote %s\n",
                  static_cast<unsigned long long>(bg.value("chunks_rebuilt", uint64_t{0})), bg.value("seconds", 0.0),
                  background_gbps, Mib(bg.value("bytes_read", uint64_t{0})).c_str(),
                  Mib(bg.value("bytes_written", uint64_t{0})).c_str());
    } else if (!rebuild_later && later > 0) {
      std::printf("  %llu chunks left for later: reads of them decode; 'tenax store recover --all' rebuilds them\n",
                  static_cast<unsigned long long>(later));
    }
    for (const auto& u : bad) std::printf("  LOST: %s %s\n", dataset.c_str(), u.c_str());
  }
  return unrecoverable;
}

// Recover (policy) or scrub (verify everything, repair chunks on live nodes).
int RunRecover(const StoreArgs& a, bool scrub) {
  const char* cmd = scrub ? "store scrub" : "store recover";
  if (scrub && a.dry_run) return RunHealth(a, /*verify=*/true, cmd);
  store::RecoveryOptions options;
  options.policy = scrub ? "full" : a.policy;
  options.prm.min_available = a.min_available;
  options.prm.class_tolerance = a.class_tolerance;
  options.rebuild_later = scrub || a.all;
  options.background_bytes_per_second = scrub ? 0 : a.background_gbps * 1e9 / 8;
  std::vector<int> important;
  if (!a.important_classes.empty()) {
    std::istringstream in(a.important_classes);
    std::string part;
    while (std::getline(in, part, ',')) {
      try {
        important.push_back(std::stoi(part));
      } catch (const std::exception&) {
        return ReportError(cmd, InvalidArgument("--important-classes: '" + part + "' is not a class number"));
      }
      if (important.back() < 0 || important.back() > 255) {
        return ReportError(cmd, InvalidArgument("--important-classes: " + part + ": classes are 0..255"));
      }
    }
  }
  if (a.service.empty() && a.catalog.empty()) {
    return ReportError(cmd, InvalidArgument("--catalog FILE is required (or --service HOST:PORT of a 'tenax store serve')"));
  }
  nlohmann::json report;
  if (!a.service.empty()) {
    // The resident service does the work, with its catalog and connections
    // already open (store/recovery_service.h).
    InitLogging("store", "warn");
    auto client = store::RecoveryServiceClient::Connect(a.service, "", std::chrono::milliseconds(5000));
    if (!client.ok()) return ReportError(cmd, client.status());
    store::RecoveryRequest request{a.dataset, options, important};
    auto answer = (*client)->Recover(request, Deadline::After(std::chrono::seconds(a.service_timeout)));
    if (!answer.ok()) return ReportError(cmd, answer.status());
    report = answer->report;
    report["service"] = {{"address", a.service},
                         {"recovery_id", answer->recovery_id},
                         {"joined", answer->joined},
                         {"waited_seconds", answer->waited_seconds},
                         {"seconds", answer->seconds}};
    if (!a.json) {
      std::printf("recovery %llu of the service at %s%s\n", static_cast<unsigned long long>(answer->recovery_id),
                  a.service.c_str(),
                  answer->joined ? " (joined: another request had started it)" : "");
    }
  } else {
    auto store = OpenStore(a);
    if (!store.ok()) return ReportError(cmd, store.status());
    auto reports = (*store)->Recover(a.dataset, options, /*verify=*/scrub, /*only_live_nodes=*/scrub,
                                      store::TierByImportantClasses(important));
    if (!reports.ok()) return ReportError(cmd, reports.status());
    nlohmann::json out = nlohmann::json::array();
    for (const store::RecoveryReport& r : *reports) out.push_back(store::RecoveryReportJson(r));
    report = {{"catalog", a.catalog}, {"results", out}, {"transport_bytes", TransportJson(**store)}};
  }
  const bool unrecoverable =
      a.json ? std::any_of(report["results"].begin(), report["results"].end(),
                           [](const nlohmann::json& r) { return !r.value("unrecoverable", nlohmann::json::array()).empty(); })
             : PrintRecoveryReport(report["results"], scrub, options.rebuild_later, a.background_gbps);
  if (a.json) Print(report);
  if (unrecoverable) {
    std::fprintf(stderr, "tenax %s: error: some stripes have more than m chunks lost and cannot be rebuilt (listed above)\n",
                 cmd);
    return 2;
  }
  return 0;
}

// tenax store serve: the resident recovery service.
int RunServe(const StoreArgs& a) {
  auto hp = net::ParseHostPort(a.listen);
  if (!hp.ok()) return ReportError("store serve", InvalidArgument("--listen: " + hp.status().message()));
  InitLogging(a.name, a.log_level);
  InstallStopHandlers();
  store::RecoveryServiceOptions o;
  o.name = a.name;
  o.catalog = a.catalog;
  o.listen_host = hp->host;
  o.port = hp->port;
  o.link_bytes_per_second = a.link_gbps * 1e9 / 8;
  o.max_waiting = static_cast<size_t>(a.max_waiting);
  o.stop = [] { return StopRequested(); };
  o.on_ready = [&a](uint16_t port, size_t nodes) {
    // One line on stdout for whoever started us (tests, scripts, benches).
    std::printf("recovery service %s listening on port %u with %zu data nodes connected\n", a.name.c_str(), port, nodes);
    std::fflush(stdout);
  };
  auto r = store::RunRecoveryService(o);
  if (!r.ok()) return ReportError("store serve", r.status());
  std::printf("recovery service %s stopped: %llu requests, %llu recoveries run, %llu requests joined one, %llu refused\n",
              a.name.c_str(), static_cast<unsigned long long>(r->requests), static_cast<unsigned long long>(r->recoveries),
              static_cast<unsigned long long>(r->joined), static_cast<unsigned long long>(r->refused));
  return 0;
}

int RunFail(const StoreArgs& a) {
  auto store = OpenStore(a);
  if (!store.ok()) return ReportError("store fail", store.status());
  auto node = (*store)->Fail(a.node);
  if (!node.ok()) return ReportError("store fail", node.status());
  if (a.json) {
    Print({{"node", node->name}, {"id", node->id}, {"location", node->location}, {"state", store::ToString(node->state)}});
  } else {
    const bool remote = node->location.rfind(store::kStorageScheme, 0) == 0;
    std::printf("data node %s failed%s%s; reads of its chunks decode from their stripes until 'tenax store recover'\n",
                node->name.c_str(), remote ? "" : ": wiped ", remote ? "" : node->location.c_str());
  }
  return 0;
}

void AddCatalog(CLI::App* cmd, StoreArgs& a) {
  cmd->add_option("--catalog", a.catalog, "The store's SQLite catalog (may be the coordinator's --state file)")
      ->required()
      ->type_name("FILE");
  cmd->add_flag("--json", a.json, "Print one JSON object instead of sentences");
  cmd->add_option("--link-gbps", a.link_gbps, "Emulated rate of this client's writes to each storage node, Gbit/s (0 = unshaped)")
      ->check(CLI::Range(0.0, 400.0));
}

}  // namespace

void AddStoreCommand(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<StoreArgs>();
  CLI::App* store = root.add_subcommand("store", "The erasure-coded training-data store (data nodes: directories or 'tenax storage' processes)");
  store->require_subcommand(1);

  CLI::App* put = store->add_subcommand("put", "Split a dataset into records, chunks and RS k+m stripes onto the data nodes");
  AddCatalog(put, *a);
  put->add_option("--root", a->root, "Create the store's data nodes as directories under DIR (first put only)")
      ->type_name("DIR");
  put->add_option("--node", a->node_addresses, "A 'tenax storage' process at HOST:PORT (repeat; first put only)")
      ->type_name("HOST:PORT");
  put->add_option("--nodes", a->nodes, "Data nodes to create with --root")->check(CLI::Range(1, 255))->capture_default_str();
  put->add_option("--zones", a->zones, "Zones the created nodes are spread over (0 = none)")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  put->add_option("--dataset", a->dataset, "Name in the store (default: fashion-mnist-SPLIT)");
  auto* images = put->add_option("--images", a->images,
                                 "An idx file of samples (any shape; with --labels), or a .npy file of uint8 samples "
                                 "(N x C x H x W or N x H x W, as data.format = \"npy\" reads)")
                     ->type_name("FILE");
  put->add_option("--labels", a->labels, "An idx file of one label byte per sample, or a .npy file of integer labels")
      ->type_name("FILE")
      ->needs(images);
  put->add_option("--data", a->data_dir, "Directory of the Fashion-MNIST idx files")->capture_default_str();
  put->add_option("--split", a->split, "Fashion-MNIST split")->check(CLI::IsMember({"train", "test"}))->capture_default_str();
  put->add_option("--classes", a->classes, "Number of classes (default: the largest label + 1)")->check(CLI::Range(1, 256));
  put->add_option("--k", a->k, "Data chunks per stripe")->check(CLI::Range(1, 254))->capture_default_str();
  put->add_option("--m", a->m, "Parity chunks per stripe")->check(CLI::Range(0, 254))->capture_default_str();
  put->add_option("--chunk-bytes", a->chunk_bytes, "Target bytes per data chunk (whole records)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  put->add_flag("--allow-reduced-durability", a->allow_reduced_durability,
                "When nodes fail during the ingest and fewer than k+m are left, place two chunks of a stripe on one "
                "node instead of refusing (the stripes then survive fewer node losses; the report counts them)");
  put->callback([a, &exit_code] { exit_code = RunPut(*a); });

  CLI::App* get = store->add_subcommand("get", "Read records back (degraded reads decode lost chunks) into a file");
  AddCatalog(get, *a);
  get->add_option("--dataset", a->dataset, "Dataset name")->required();
  get->add_option("--out", a->out, "File for the records (each: sample bytes, then the label byte)")->required();
  get->add_option("--first", a->first, "First record")->capture_default_str();
  get->add_option("--count", a->count, "Records (default: to the end)")->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  get->callback([a, &exit_code] { exit_code = RunGet(*a); });

  CLI::App* status = store->add_subcommand("status", "Data nodes and what each dataset has lost (exit 2 if samples are unreadable)");
  AddCatalog(status, *a);
  status->callback([a, &exit_code] { exit_code = RunHealth(*a, false, "store status"); });

  CLI::App* fail = store->add_subcommand("fail", "Fail a data node: wipe its directory (a dead disk) and mark it failed");
  AddCatalog(fail, *a);
  fail->add_option("NODE", a->node, "Node name (node-3) or id (3)")->required();
  fail->callback([a, &exit_code] { exit_code = RunFail(*a); });

  CLI::App* scrub = store->add_subcommand("scrub", "Verify every chunk's checksums and repair bad ones in place");
  AddCatalog(scrub, *a);
  scrub->add_option("--dataset", a->dataset, "Only this dataset (default: all)");
  scrub->add_flag("--dry-run", a->dry_run, "Report only; repair nothing");
  scrub->callback([a, &exit_code] { exit_code = RunRecover(*a, true); });

  CLI::App* recover = store->add_subcommand("recover", "Rebuild the chunks of failed nodes onto live ones (full, approx or prm)");
  AddCatalog(recover, *a);
  recover->add_option("--dataset", a->dataset, "Only this dataset (default: all)");
  recover->add_option("--policy", a->policy, "full: everything; approx: important tier first; prm: what keeps the class mix and the availability floor")
      ->check(CLI::IsMember({"full", "approx", "prm"}))
      ->capture_default_str();
  CLI::Option* all = recover->add_flag("--all", a->all, "Also rebuild what the plan leaves for later, now");
  recover
      ->add_option("--background-gbps", a->background_gbps,
                   "Once the first set is in the catalog (training reads it), rebuild the rest in a second pass "
                   "paced to this rate, Gbit/s (a low-priority background pass)")
      ->check(CLI::Range(1e-6, 400.0))
      ->excludes(all);
  recover->add_option("--min-available", a->min_available, "prm: share of samples that must be available")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  recover->add_option("--class-tolerance", a->class_tolerance, "prm: largest allowed change of a class's share")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  recover->add_option("--important-classes", a->important_classes, "approx: classes whose chunks are rebuilt first (e.g. 0,6)");
  recover->get_option("--catalog")->required(false)->description(
      "The store's SQLite catalog (may be the coordinator's --state file); not needed with --service");
  recover->add_option("--service", a->service,
                      "Ask the resident recovery service at HOST:PORT ('tenax store serve') instead of rebuilding "
                      "here: its catalog and connections are already open")
      ->type_name("HOST:PORT");
  recover->add_option("--service-timeout", a->service_timeout, "With --service: seconds to wait for its answer")
      ->check(CLI::Range(int64_t{1}, int64_t{7 * 86400}))
      ->capture_default_str();
  recover->callback([a, &exit_code] { exit_code = RunRecover(*a, false); });

  CLI::App* serve = store->add_subcommand(
      "serve", "The resident recovery service: rebuild lost chunks on request ('recover --service', a job's "
               "data.recovery_service), with the catalog and every data node's connection kept open");
  serve->add_option("--catalog", a->catalog, "The store's SQLite catalog")->required()->type_name("FILE");
  serve->add_option("--listen", a->listen, "Address to serve on (port 0 = any free port)")->capture_default_str();
  serve->add_option("--name", a->name, "Name in logs and in clients' errors")->capture_default_str();
  serve->add_option("--link-gbps", a->link_gbps, "Emulated rate of the service's writes to each storage node, Gbit/s (0 = unshaped)")
      ->check(CLI::Range(0.0, 400.0));
  serve->add_option("--max-waiting", a->max_waiting, "Requests that may wait behind the running recovery; more are refused")
      ->check(CLI::Range(int64_t{0}, int64_t{4096}))
      ->capture_default_str();
  serve->add_option("--log-level", a->log_level, "trace, debug, info, warn or error")->capture_default_str();
  serve->footer("The cluster secret comes from $TENAX_SECRET (at least 16 bytes). Prints one line, 'recovery service "
                "NAME listening on port P with N data nodes connected', when it is ready; SIGTERM stops it after the "
                "recovery under way.");
  serve->callback([a, &exit_code] { exit_code = RunServe(*a); });
}

}  // namespace tenax::cli
