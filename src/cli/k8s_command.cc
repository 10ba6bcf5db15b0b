// tenax k8s manifests JOB.toml [--image IMG] [--namespace NS] [--out FILE] ...
// Reads and validates the job as every role would, turns it into the facts
// the manifests need (sched::K8sJob) and prints sched/k8s/k8s_manifests.h's
// objects as a YAML stream. Parsing and printing only.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "command.h"
#include "tenax/core/files.h"
#include "tenax/net/auth.h"
#include "tenax/roles/sync_job.h"
#include "tenax/sched/k8s/k8s_manifests.h"
#include "tenax/sched/place/placer.h"
#include "tenax/version.h"

namespace tenax::cli {
namespace {

struct K8sArgs {
  std::string job_path;
  std::string out;
  std::vector<std::string> overrides;
  std::string zone_constraint;
  std::string storage_hosts;
  sched::K8sOptions options;
  bool no_scheduler = false;
};

Status FailKey(const ConfigDoc& doc, const std::string& key, const std::string& message) {
  return InvalidArgument(doc.Where(key) + ": '" + key + "' " + message);
}

// Pods do not have this machine's working directory: a file the job names
// must be in the image (or a volume) under an absolute path.
Status CheckPathsForPods(const SyncJob& job) {
  const TrainConfig& c = job.config;
  struct PathKey {
    const char* key;
    const std::string* value;
  };
  const PathKey keys[] = {{"data.dir", &c.data_dir},
                          {"data.train_images", &c.train_images},
                          {"data.train_labels", &c.train_labels},
                          {"data.test_images", &c.test_images},
                          {"data.test_labels", &c.test_labels},
                          {"model.path", &c.model_path},
                          {"stragglers.trace", &c.stragglers.trace},
                          {"cost.prices", &c.cost.prices}};
  for (const PathKey& k : keys) {
    if (!k.value->empty() && k.value->front() != '/') {
      return FailKey(job.doc, k.key,
                     "\"" + *k.value +
                         "\" is relative to this machine's working directory, which the pods do not have: put the "
                         "file into the image (deploy/Dockerfile) or a volume and name it by its absolute path");
    }
  }
  return Status::Ok();
}

// The secret the job's processes share: the job's cluster.secret, else
// $TENAX_SECRET or $TENAX_SECRET_FILE's, else a new random one (as `tenax
// run` chooses).
Result<std::string> JobSecret(const SyncJob& job) {
  if (!job.config.cluster.secret.empty()) return job.config.cluster.secret;
  if (!net::SecretFromEnvironment().empty()) {
    return net::ResolveSecret("");  // checks its length
  }
  std::string secret;
  for (unsigned char c : net::RandomNonce()) {
    secret += "0123456789abcdef"[c >> 4];
    secret += "0123456789abcdef"[c & 15];
  }
  return secret;
}

// The job file as the pods read it: without the secret (it goes into the
// Secret) and with the store's catalog where the pods mount it.
std::string PodJobToml(const SyncJob& job) {
  toml::table t = job.doc.table();
  if (toml::table* cluster = t["cluster"].as_table()) cluster->erase("secret");
  if (job.config.data_format == kStoreFormat) {
    if (toml::table* data = t["data"].as_table()) data->insert_or_assign("catalog", sched::kK8sCatalogFile);
  }
  std::ostringstream text;
  text << t << "\n";
  return text.str();
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Status RunManifests(const K8sArgs& a) {
  TENAX_ASSIGN_OR_RETURN(SyncJob job, LoadSyncJob(a.job_path, a.overrides));
  const TrainConfig& c = job.config;
  if (Status st = sched::CheckK8sName(c.cluster.job_id); !st.ok()) {
    return FailKey(job.doc, "cluster.job_id", st.message() + "; the job's name names its objects");
  }
  TENAX_RETURN_IF_ERROR(CheckPathsForPods(job));

  sched::K8sJob k;
  k.name = c.cluster.job_id;
  k.mode = c.mode;
  k.elastic = c.cluster.elastic;
  k.workers = static_cast<int>(c.cluster.workers);
  k.servers = c.mode == "async" ? static_cast<int>(c.async.servers) : 0;
  k.threads = static_cast<int>(c.threads);
  k.job_toml = PodJobToml(job);
  // The job's [placement] zone rule (default soft), unless the flag overrides it.
  k.zone_constraint = a.zone_constraint.empty() ? sched::ZoneConstraintName(c.placement.zone) : a.zone_constraint;
  k.reads_store = c.data_format == kStoreFormat;
  k.store_train_dataset = c.store_train_dataset;
  k.store_test_dataset = c.store_test_dataset;

  sched::K8sOptions o = a.options;
  o.include_scheduler = !a.no_scheduler;
  o.storage_hosts = SplitCommas(a.storage_hosts);
  TENAX_ASSIGN_OR_RETURN(o.secret, JobSecret(job));
  TENAX_ASSIGN_OR_RETURN(std::vector<nlohmann::json> objects, sched::K8sManifests(k, o));
  const std::string yaml = sched::ToYamlStream(objects);
  if (a.out.empty() || a.out == "-") {
    if (std::fwrite(yaml.data(), 1, yaml.size(), stdout) != yaml.size() || std::fflush(stdout) != 0) {
      return IoError("writing the manifests to stdout failed");
    }
    return Status::Ok();
  }
  TENAX_RETURN_IF_ERROR(WriteFileAtomic(a.out, yaml));
  // The stream holds the job's secret.
  if (::chmod(a.out.c_str(), 0600) != 0) return IoError(a.out + ": chmod: " + ErrnoMessage(errno));
  std::printf("wrote %zu objects for job %s to %s (it holds the job's secret): kubectl apply -f %s\n", objects.size(),
              k.name.c_str(), a.out.c_str(), a.out.c_str());
  return Status::Ok();
}

}  // namespace

void AddK8sCommand(CLI::App& root, int& exit_code) {
  CLI::App* k8s = root.add_subcommand("k8s", "Run jobs on Kubernetes: generate their manifests");
  k8s->require_subcommand(1);
  auto a = std::make_shared<K8sArgs>();
  CLI::App* cmd = k8s->add_subcommand(
      "manifests", "Write the Kubernetes objects that run a job (coordinator, workers, servers, storage, scheduler)");
  cmd->add_option("job", a->job_path, "Job file (TOML, mode = \"sync\", \"async\" or \"coded\")")
      ->required()
      ->type_name("JOB.toml");
  cmd->add_option("--out", a->out, "Write the stream to FILE (mode 0600) instead of stdout")->type_name("FILE");
  cmd->add_option("--image", a->options.image,
                  std::string("Container image with the tenax binary, as your nodes pull it: deploy/Dockerfile "
                              "builds tenax:") +
                      kTenaxVersion + "; tag it REGISTRY/tenax:" + kTenaxVersion +
                      " and push it to your registry (docs/k8s.md). Required: no public registry has a tenax image")
      ->required()
      ->type_name("IMAGE");
  cmd->add_option("--namespace", a->options.namespace_name, "Namespace of the job's objects")->capture_default_str();
  cmd->add_option("--scheduler-name", a->options.scheduler_name,
                  "The pods' schedulerName, and the name of the scheduler's objects")
      ->capture_default_str();
  cmd->add_flag("--no-scheduler", a->no_scheduler,
                "Leave out the scheduler's objects (one per cluster: another job's manifests brought them)");
  cmd->add_option("--kube-scheduler-image", a->options.kube_scheduler_image, "kube-scheduler's image")
      ->capture_default_str();
  cmd->add_option("--zone-constraint", a->zone_constraint,
                  "hard: all the job's pods in one zone (or wait); soft: the fewest zones (default: the job's "
                  "placement.zone, else soft)")
      ->check(CLI::IsMember({"hard", "soft"}));
  cmd->add_option("--storage-nodes", a->options.storage_nodes, "Store jobs: `tenax storage` pods")
      ->check(CLI::Range(1, 255))
      ->capture_default_str();
  cmd->add_option("--storage-class", a->options.storage_class,
                  "StorageClass of the coordinator's, servers' and data nodes' volumes (default: the cluster's)");
  cmd->add_option("--catalog-storage-class", a->options.catalog_storage_class,
                  "Store jobs: a ReadWriteMany StorageClass for the store's catalog (default: the cluster's)");
  cmd->add_option("--storage-hosts", a->storage_hosts,
                  "Store jobs: Kubernetes nodes holding the data, for the annotation tenax.dev/storage-nodes")
      ->type_name("NODE,NODE,...");
  cmd->add_option("--set", a->overrides, "Override a job key (repeatable)")->type_name("KEY=VALUE");
  cmd->footer(
      "The output is a YAML stream: '---' then one object as indented JSON (JSON is YAML 1.2), per object;\n"
      "'kubectl apply -f FILE' reads it. The Secret holds the job's cluster.secret, else $TENAX_SECRET,\n"
      "else a new random one. docs/k8s.md explains every object and how to deploy.\n"
      "Exit status: 0 written, 2 bad job file, flag or output path.");
  cmd->callback([a, &exit_code] {
    Status st = RunManifests(*a);
    exit_code = st.ok() ? 0 : ReportError("k8s manifests", st);
  });
}

}  // namespace tenax::cli
