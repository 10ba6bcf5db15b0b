// The Kubernetes objects that run one tenax job on a cluster (layer `sched`,
// docs/k8s.md): `tenax k8s manifests JOB.toml` prints them.
//
// Input is a K8sJob, the few facts of a parsed job file the objects depend
// on (the cli fills it from job/train_config.h, so this layer does not
// depend on train), and K8sOptions. Output is one JSON object per
// Kubernetes object, in the order `kubectl apply -f` should create them:
//
//   Namespace            only for a namespace other than default/kube-*
//   scheduler            ServiceAccount, ClusterRoleBindings to the built-in
//                        system:kube-scheduler and system:volume-scheduler,
//                        a RoleBinding to extension-apiserver-authentication-
//                        reader, ConfigMaps with the KubeSchedulerConfiguration
//                        and the extender's state, and a Deployment of
//                        kube-scheduler + `tenax sched extender` (one per
//                        cluster, shared by jobs: no tenax.dev/job label)
//   Secret               TENAX_SECRET for every process of the job
//   ConfigMap            the job file, mounted at /etc/tenax/job.toml
//   coordinator          PVC for its SQLite state, headless Service, and a
//                        batch Job (it runs to completion; a new pod resumes
//                        from the state file)
//   storage (store jobs) headless Service, StatefulSet with a volume claim
//                        per data node, a ReadWriteMany PVC for the catalog
//                        and, for the Fashion-MNIST datasets, a Job that
//                        puts them into the store
//   servers (async)      per shard a PVC for checkpoints and a Job
//   workers              an Indexed Job of RankCount pods
//
// Every object carries app.kubernetes.io/name=tenax and tenax.dev/role; a
// job's objects also tenax.dev/job=<job name>. Every pod of the job uses
// the tenax scheduler and carries tenax.dev/zone-constraint (and
// tenax.dev/storage-nodes when the store's hosts are given), which the
// extender reads (sched/k8s/extender.h).
//
// Pure and deterministic (the secret is an input); thread-safe. Bad input
// is InvalidArgument saying what would work; nothing throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/status.h"

namespace tenax::sched {

// Fixed ports and paths inside the pods (docs/k8s.md).
inline constexpr int kK8sCoordinatorPort = 7070;
inline constexpr int kK8sStoragePort = 7300;
inline constexpr int kK8sExtenderPort = 8888;
inline constexpr const char* kK8sJobFile = "/etc/tenax/job.toml";
inline constexpr const char* kK8sCatalogFile = "/var/lib/tenax/catalog/catalog.db";

// What the objects need to know of a job.
struct K8sJob {
  std::string name;                      // cluster.job_id; names every object (CheckK8sName)
  std::string mode = "sync";             // "sync" | "async" | "coded"
  bool elastic = false;                  // cluster.elastic: lost workers are replaced by joiners
  int workers = 2;                       // cluster.workers
  int servers = 0;                       // async.servers (mode "async", 1..64)
  int threads = 0;                       // train.threads: a worker's CPU request (0 = 1 CPU)
  std::string job_toml;                  // the job file as the pods read it (without cluster.secret)
  std::string zone_constraint = "soft";  // "hard" | "soft" (placer.h)
  bool reads_store = false;              // data.format = "store"
  std::string store_train_dataset = "fashion-mnist-train";
  std::string store_test_dataset = "fashion-mnist-test";
};

struct K8sOptions {
  std::string image;  // required (`--image`): no registry has a default tenax image
  std::string namespace_name = "default";
  std::string scheduler_name = "tenax-scheduler";
  std::string kube_scheduler_image = "registry.k8s.io/kube-scheduler:v1.30.0";
  bool include_scheduler = true;      // false: the cluster already runs one (another job's)
  std::string secret;                 // TENAX_SECRET, >= 16 bytes
  int storage_nodes = 6;              // store jobs: `tenax storage` pods (1..255)
  std::string storage_class;          // "" = the cluster's default StorageClass
  std::string catalog_storage_class;  // for the ReadWriteMany catalog volume; "" = default
  // Kubernetes nodes that hold the store's data (e.g. where its local
  // volumes live): tenax.dev/storage-nodes on the pods that read it. Empty =
  // no annotation (the manifests cannot know where storage pods will land).
  std::vector<std::string> storage_hosts;
};

// OK if `name` can name a job's objects: a DNS-1035 label (lowercase
// letters, digits and '-', starting with a letter, ending with a letter or
// digit) of at most 40 characters, so that "<name>-coordinator-state" and
// the pods' host names stay within Kubernetes' 63.
Status CheckK8sName(const std::string& name);

// The job's objects, in apply order.
Result<std::vector<nlohmann::json>> K8sManifests(const K8sJob& job, const K8sOptions& options);

// A multi-document YAML stream: "---" then the object as indented JSON
// (JSON is YAML 1.2, which kubectl reads), per object.
std::string ToYamlStream(const std::vector<nlohmann::json>& objects);

}  // namespace tenax::sched
