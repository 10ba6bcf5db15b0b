#include "tenax/sched/k8s/k8s_manifests.h"

#include <set>

#include "tenax/sched/place/placer.h"

namespace tenax::sched {
namespace {

using json = nlohmann::json;

// Paths inside the pods (docs/k8s.md lists them).
constexpr const char* kJobDir = "/etc/tenax";
constexpr const char* kStateDir = "/var/lib/tenax/state";
constexpr const char* kOutDir = "/var/lib/tenax/out";
constexpr const char* kCheckpointDir = "/var/lib/tenax/checkpoints";
constexpr const char* kChunkDir = "/var/lib/tenax/chunks";
constexpr const char* kCatalogDir = "/var/lib/tenax/catalog";
constexpr const char* kSchedulerConfigDir = "/etc/tenax-scheduler";
constexpr const char* kSchedulerStateDir = "/var/lib/tenax-scheduler";
constexpr const char* kSecretKey = "TENAX_SECRET";
constexpr int kMaxNameLength = 40;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// A DNS-1123 label (namespaces): lowercase alphanumerics and '-', alphanumeric at both ends.
bool IsDnsLabel(const std::string& s, size_t max_length) {
  if (s.empty() || s.size() > max_length || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool HasSpace(const std::string& s) {
  for (unsigned char c : s) {
    if (c <= ' ' || c == 0x7f) return true;
  }
  return false;
}

json Labels(const std::string& job, const std::string& role) {
  json l = {{"app.kubernetes.io/name", "tenax"}, {"tenax.dev/role", role}};
  if (!job.empty()) l["tenax.dev/job"] = job;
  return l;
}

json Requests(const std::string& cpu, const std::string& memory) {
  return {{"requests", {{"cpu", cpu}, {"memory", memory}}}};
}

json EnvValue(const std::string& name, const std::string& value) { return {{"name", name}, {"value", value}}; }
json EnvField(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

json Mount(const std::string& volume, const std::string& path, bool read_only = false) {
  json m = {{"name", volume}, {"mountPath", path}};
  if (read_only) m["readOnly"] = true;
  return m;
}

// Everything the objects of one job share.
class Builder {
 public:
  Builder(const K8sJob& job, const K8sOptions& o) : job_(job), o_(o) {}

  std::vector<json> Build() {
    std::vector<json> out;
    if (o_.namespace_name != "default" && o_.namespace_name.rfind("kube-", 0) != 0) {
      // No job label: deleting a job's objects by label must not delete the namespace.
      out.push_back({{"apiVersion", "v1"},
                     {"kind", "Namespace"},
                     {"metadata", {{"name", o_.namespace_name}, {"labels", Labels("", "namespace")}}}});
    }
    if (o_.include_scheduler) Scheduler(out);
    out.push_back(Object("v1", "Secret", Name("secret"), "job"));
    out.back()["type"] = "Opaque";
    out.back()["stringData"] = {{kSecretKey, o_.secret}};
    out.push_back(Object("v1", "ConfigMap", Name("job"), "job"));
    out.back()["data"] = {{"job.toml", job_.job_toml}};
    if (job_.reads_store) Storage(out);
    Coordinator(out);
    for (int s = 0; s < job_.servers; ++s) Server(out, s);
    Workers(out);
    return out;
  }

 private:
  std::string Name(const std::string& suffix) const { return job_.name + "-" + suffix; }
  std::string CoordinatorAddress() const {
    // The headless Service's name resolves to the coordinator pod's own IP.
    return Name("coordinator") + "." + o_.namespace_name + ".svc:" + std::to_string(kK8sCoordinatorPort);
  }

  json LabelledObject(const std::string& api, const std::string& kind, const std::string& name,
                      const json& labels) const {
    return {{"apiVersion", api},
            {"kind", kind},
            {"metadata", {{"name", name}, {"namespace", o_.namespace_name}, {"labels", labels}}}};
  }
  // An object of the job (labelled with it).
  json Object(const std::string& api, const std::string& kind, const std::string& name, const std::string& role) const {
    return LabelledObject(api, kind, name, Labels(job_.name, role));
  }

  json Claim(const std::string& name, const std::string& role, const std::string& mode, const std::string& size,
             const std::string& storage_class) const {
    json c = Object("v1", "PersistentVolumeClaim", name, role);
    c["spec"] = ClaimSpec(mode, size, storage_class);
    return c;
  }
  static json ClaimSpec(const std::string& mode, const std::string& size, const std::string& storage_class) {
    json spec = {{"accessModes", {mode}}, {"resources", {{"requests", {{"storage", size}}}}}};
    if (!storage_class.empty()) spec["storageClassName"] = storage_class;
    return spec;
  }

  // A headless Service: its DNS name resolves to the pods' own IPs, so the
  // transport connects to the pod directly (no virtual IP between UCX's
  // connection manager and the peer), also before the pods are ready.
  json HeadlessService(const std::string& name, const std::string& role, int port) const {
    json s = Object("v1", "Service", name, role);
    s["spec"] = {{"clusterIP", "None"},
                 {"publishNotReadyAddresses", true},
                 {"selector", {{"tenax.dev/job", job_.name}, {"tenax.dev/role", role}}},
                 {"ports", {{{"name", role}, {"port", port}, {"targetPort", port}, {"protocol", "TCP"}}}}};
    return s;
  }

  // The environment of every tenax process of the job.
  json Env() const {
    return {EnvField("POD_IP", "status.podIP"),
            EnvField("POD_NAME", "metadata.name"),
            {{"name", kSecretKey}, {"valueFrom", {{"secretKeyRef", {{"name", Name("secret")}, {"key", kSecretKey}}}}}},
            // Pods on one node share the boot id, by which UCX judges shared
            // memory reachable, but not /dev/shm: keep UCX on TCP unless the
            // job's cluster.transports says otherwise (it wins for tensors).
            EnvValue("UCX_TLS", "tcp")};
  }

  json Container(const std::string& name, const json& args, const json& resources) const {
    return {{"name", name},
            {"image", o_.image},
            {"command", {"tenax"}},
            {"args", args},
            {"env", Env()},
            {"resources", resources},
            {"volumeMounts", {Mount("job", kJobDir, true)}}};
  }

  json JobVolume() const { return {{"name", "job"}, {"configMap", {{"name", Name("job")}}}}; }
  json ClaimVolume(const std::string& volume, const std::string& claim) const {
    return {{"name", volume}, {"persistentVolumeClaim", {{"claimName", claim}}}};
  }

  json PodMetadata(const std::string& role, bool reads_data) const {
    json annotations = {{"tenax.dev/zone-constraint", job_.zone_constraint}};
    if (reads_data && job_.reads_store && !o_.storage_hosts.empty()) {
      std::string hosts;
      for (const auto& h : o_.storage_hosts) hosts += (hosts.empty() ? "" : ",") + h;
      annotations["tenax.dev/storage-nodes"] = hosts;
    }
    return {{"labels", Labels(job_.name, role)}, {"annotations", annotations}};
  }

  // A pod of the job that reads the store waits until both datasets are
  // in the catalog (the store-put Job, or the user, puts them there);
  // without it a worker would fail at once on an empty catalog.
  void AddStoreAccess(json& pod_spec, json& container) const {
    if (!job_.reads_store) return;
    container["volumeMounts"].push_back(Mount("catalog", kCatalogDir));
    pod_spec["volumes"].push_back(ClaimVolume("catalog", Name("catalog")));
    const std::string script =
        "while :; do s=$(tenax store status --catalog \"$1\" --json 2>/dev/null); "
        "case \"$s\" in *\"\\\"dataset\\\":\\\"$2\\\"\"*) case \"$s\" in *\"\\\"dataset\\\":\\\"$3\\\"\"*) exit 0;; "
        "esac;; "
        "esac; echo \"waiting for the datasets $2 and $3 in $1\"; sleep 5; done";
    json wait =
        Container("wait-for-data",
                  {"-c", script, "wait-for-data", kK8sCatalogFile, job_.store_train_dataset, job_.store_test_dataset},
                  Requests("10m", "32Mi"));
    wait["command"] = {"sh"};
    wait["volumeMounts"].push_back(Mount("catalog", kCatalogDir));
    pod_spec["initContainers"].push_back(wait);
  }

  // A pod spec run to completion by a batch Job.
  json BatchPodSpec(const json& container) const {
    return {{"schedulerName", o_.scheduler_name},
            {"restartPolicy", "Never"},
            {"containers", {container}},
            {"volumes", {JobVolume()}},
            {"initContainers", json::array()}};
  }

  static void DropEmptyInit(json& pod_spec) {
    if (pod_spec["initContainers"].empty()) pod_spec.erase("initContainers");
  }

  // Pod failures that are not the job's: a preempted or evicted pod
  // (condition DisruptionTarget) does not count against backoffLimit, so a
  // new pod takes over; exit 2 (bad input) fails the Job at once.
  static json TolerateDisruptions(const std::string& container, std::vector<int> fail_codes) {
    return {{"rules",
             {{{"action", "Ignore"}, {"onPodConditions", {{{"type", "DisruptionTarget"}, {"status", "True"}}}}},
              {{"action", "FailJob"},
               {"onExitCodes", {{"containerName", container}, {"operator", "In"}, {"values", fail_codes}}}}}}};
  }

  void Coordinator(std::vector<json>& out) const {
    out.push_back(Claim(Name("coordinator-state"), "coordinator", "ReadWriteOnce", "1Gi", o_.storage_class));
    out.push_back(HeadlessService(Name("coordinator"), "coordinator", kK8sCoordinatorPort));
    json c = Container("coordinator",
                       {"coordinator", "--job", kK8sJobFile, "--state", std::string(kStateDir) + "/coordinator.db",
                        "--set", "cluster.coordinator=0.0.0.0:" + std::to_string(kK8sCoordinatorPort)},
                       Requests("100m", "256Mi"));
    c["ports"] = {{{"name", "coordinator"}, {"containerPort", kK8sCoordinatorPort}, {"protocol", "TCP"}}};
    c["volumeMounts"].push_back(Mount("state", kStateDir));
    json spec = BatchPodSpec(c);
    spec["volumes"].push_back(ClaimVolume("state", Name("coordinator-state")));
    // An async coordinator counts the training set's samples in the catalog.
    if (job_.mode == "async") AddStoreAccess(spec, spec["containers"][0]);
    DropEmptyInit(spec);
    json j = Object("batch/v1", "Job", Name("coordinator"), "coordinator");
    // Exit 2: bad input or a job that already failed (its state says so);
    // 3: a worker failed or a deadline passed, which a restart cannot undo.
    j["spec"] = {{"completions", 1},
                 {"parallelism", 1},
                 {"backoffLimit", 6},
                 {"podFailurePolicy", TolerateDisruptions("coordinator", {2, 3})},
                 {"template", {{"metadata", PodMetadata("coordinator", false)}, {"spec", spec}}}};
    out.push_back(j);
  }

  void Server(std::vector<json>& out, int shard) const {
    const std::string name = Name("server-" + std::to_string(shard));
    out.push_back(Claim(name + "-checkpoints", "server", "ReadWriteOnce", "1Gi", o_.storage_class));
    json c = Container("server",
                       {"server", "--job", kK8sJobFile, "--shard", std::to_string(shard), "--checkpoints",
                        kCheckpointDir, "--coordinator", CoordinatorAddress(), "--set", "cluster.host=$(POD_IP)"},
                       Requests("500m", "1Gi"));
    c["volumeMounts"].push_back(Mount("checkpoints", kCheckpointDir));
    json spec = BatchPodSpec(c);
    spec["volumes"].push_back(ClaimVolume("checkpoints", name + "-checkpoints"));
    AddStoreAccess(spec, spec["containers"][0]);
    DropEmptyInit(spec);
    json meta = PodMetadata("server", true);
    meta["labels"]["tenax.dev/shard"] = std::to_string(shard);
    json j = Object("batch/v1", "Job", name, "server");
    // A shard's new pod continues from its newest checkpoint on the claim.
    j["spec"] = {{"completions", 1},
                 {"parallelism", 1},
                 {"backoffLimit", 6},
                 {"podFailurePolicy", TolerateDisruptions("server", {2})},
                 {"template", {{"metadata", meta}, {"spec", spec}}}};
    out.push_back(j);
  }

  void Workers(std::vector<json>& out) const {
    const int ranks = job_.workers + (job_.mode == "coded" ? 1 : 0);  // a coded job's decoder is the last rank
    // Elastic and async workers come and go: a lost one is replaced by a
    // joiner, which the coordinator gives an id (no --rank).
    const bool replaceable = job_.elastic || job_.mode == "async";
    json args = {"worker", "--job", kK8sJobFile, "--coordinator",         CoordinatorAddress(),
                 "--out",  kOutDir, "--set",     "cluster.host=$(POD_IP)"};
    if (!replaceable) {
      args.push_back("--rank");
      args.push_back("$(TENAX_RANK)");
    }
    const std::string cpu = job_.threads > 0 ? std::to_string(job_.threads) : "1";
    json c = Container("worker", args, Requests(cpu, "2Gi"));
    // Rank = the pod's completion index (an Indexed Job sets the annotation).
    if (!replaceable) {
      c["env"].push_back(EnvField("TENAX_RANK", "metadata.annotations['batch.kubernetes.io/job-completion-index']"));
    }
    c["volumeMounts"].push_back(Mount("out", kOutDir));
    json spec = BatchPodSpec(c);
    spec["volumes"].push_back({{"name", "out"}, {"emptyDir", json::object()}});
    AddStoreAccess(spec, spec["containers"][0]);
    DropEmptyInit(spec);
    json j = Object("batch/v1", "Job", Name("workers"), "worker");
    j["spec"] = {{"completionMode", "Indexed"},
                 {"completions", ranks},
                 {"parallelism", ranks},
                 {"template", {{"metadata", PodMetadata("worker", true)}, {"spec", spec}}}};
    if (replaceable) {
      j["spec"]["backoffLimit"] = 3 * ranks;
      j["spec"]["podFailurePolicy"] = TolerateDisruptions("worker", {2});
    } else {
      // A rank lost fails a fixed-membership job (the others exit 3): no retries.
      j["spec"]["backoffLimit"] = 0;
    }
    out.push_back(j);
  }

  std::string StorageAddress(int i) const {
    return Name("storage") + "-" + std::to_string(i) + "." + Name("storage") + "." + o_.namespace_name +
           ".svc:" + std::to_string(kK8sStoragePort);
  }

  void Storage(std::vector<json>& out) const {
    out.push_back(Claim(Name("catalog"), "catalog", "ReadWriteMany", "1Gi", o_.catalog_storage_class));
    out.push_back(HeadlessService(Name("storage"), "storage", kK8sStoragePort));
    json c = Container("storage",
                       {"storage", "--dir", kChunkDir, "--listen", "0.0.0.0:" + std::to_string(kK8sStoragePort),
                        "--name", "$(POD_NAME)"},
                       Requests("250m", "512Mi"));
    c["ports"] = {{{"name", "storage"}, {"containerPort", kK8sStoragePort}, {"protocol", "TCP"}}};
    c["volumeMounts"].push_back(Mount("chunks", kChunkDir));
    const json selector = {{"tenax.dev/job", job_.name}, {"tenax.dev/role", "storage"}};
    // Spread data nodes over hosts and zones (one lost host then costs a
    // stripe at most one chunk); ScheduleAnyway, because nodes without a
    // zone label would otherwise be unusable.
    json spread = json::array();
    for (const char* key : {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}) {
      spread.push_back({{"maxSkew", 1},
                        {"topologyKey", key},
                        {"whenUnsatisfiable", "ScheduleAnyway"},
                        {"labelSelector", {{"matchLabels", selector}}}});
    }
    json sts = Object("apps/v1", "StatefulSet", Name("storage"), "storage");
    sts["spec"] = {{"serviceName", Name("storage")},
                   {"replicas", o_.storage_nodes},
                   {"podManagementPolicy", "Parallel"},
                   {"selector", {{"matchLabels", selector}}},
                   {"template",
                    {{"metadata", PodMetadata("storage", false)},
                     {"spec",
                      {{"schedulerName", o_.scheduler_name},
                       {"containers", {c}},
                       {"volumes", {JobVolume()}},
                       {"topologySpreadConstraints", spread}}}}},
                   {"volumeClaimTemplates",
                    {{{"metadata", {{"name", "chunks"}, {"labels", Labels(job_.name, "storage")}}},
                      {"spec", ClaimSpec("ReadWriteOnce", "10Gi", o_.storage_class)}}}}};
    out.push_back(sts);
    if (job_.store_train_dataset == "fashion-mnist-train" && job_.store_test_dataset == "fashion-mnist-test") {
      out.push_back(StorePut());
    }
  }

  // Puts Fashion-MNIST (installed in the image) into the store once every
  // data node accepts connections: a `tenax store` command marks a node it
  // cannot reach as failed, for good.
  json StorePut() const {
    json wait_args = {"-c",
                      "for a in \"$@\"; do until (exec 3<>\"/dev/tcp/${a%:*}/${a##*:}\") 2>/dev/null; do "
                      "echo \"waiting for data node $a\"; sleep 2; done; done",
                      "wait-for-storage"};
    json put_train = {"store", "put", "--catalog", kK8sCatalogFile};
    for (int i = 0; i < o_.storage_nodes; ++i) {
      wait_args.push_back(StorageAddress(i));
      put_train.push_back("--node");
      put_train.push_back(StorageAddress(i));
    }
    for (const char* a : {"--split", "train", "--dataset"}) put_train.push_back(a);
    put_train.push_back(job_.store_train_dataset);
    json wait = Container("wait-for-storage", wait_args, Requests("10m", "32Mi"));
    wait["command"] = {"bash"};
    json train = Container("put-train", put_train, Requests("500m", "1Gi"));
    train["volumeMounts"].push_back(Mount("catalog", kCatalogDir));
    json test = Container(
        "put-test",
        {"store", "put", "--catalog", kK8sCatalogFile, "--split", "test", "--dataset", job_.store_test_dataset},
        Requests("500m", "1Gi"));
    test["volumeMounts"].push_back(Mount("catalog", kCatalogDir));
    json spec = BatchPodSpec(test);
    spec["initContainers"] = {wait, train};
    spec["volumes"].push_back(ClaimVolume("catalog", Name("catalog")));
    json j = Object("batch/v1", "Job", Name("store-put"), "store-put");
    // A second put of a dataset already in the catalog fails: no retries.
    j["spec"] = {{"completions", 1},
                 {"parallelism", 1},
                 {"backoffLimit", 0},
                 {"template", {{"metadata", PodMetadata("store-put", false)}, {"spec", spec}}}};
    return j;
  }

  // One kube-scheduler with the tenax extender beside it, per cluster.
  void Scheduler(std::vector<json>& out) const {
    const std::string& s = o_.scheduler_name;
    // Shared by the jobs: no tenax.dev/job label, so deleting a job's
    // objects by label leaves the scheduler running.
    json labels = Labels("", "scheduler");
    labels["tenax.dev/scheduler"] = s;
    auto object = [&](const std::string& api, const std::string& kind, const std::string& name) {
      return LabelledObject(api, kind, name, labels);
    };
    const json subject = {{"kind", "ServiceAccount"}, {"name", s}, {"namespace", o_.namespace_name}};
    out.push_back(object("v1", "ServiceAccount", s));
    for (const char* role : {"kube-scheduler", "volume-scheduler"}) {
      json b = object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", s + "-as-" + role);
      b["metadata"].erase("namespace");
      b["roleRef"] = {
          {"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", std::string("system:") + role}};
      b["subjects"] = {subject};
      out.push_back(b);
    }
    // Lets kube-scheduler read the client-CA ConfigMap for its secure port.
    json rb = object("rbac.authorization.k8s.io/v1", "RoleBinding", s + "-extension-apiserver-authentication-reader");
    rb["metadata"]["namespace"] = "kube-system";
    rb["roleRef"] = {{"apiGroup", "rbac.authorization.k8s.io"},
                     {"kind", "Role"},
                     {"name", "extension-apiserver-authentication-reader"}};
    rb["subjects"] = {subject};
    out.push_back(rb);

    const json config = {{"apiVersion", "kubescheduler.config.k8s.io/v1"},
                         {"kind", "KubeSchedulerConfiguration"},
                         // One replica: no leader election (and no lease shared with the
                         // cluster's own kube-scheduler).
                         {"leaderElection", {{"leaderElect", false}}},
                         {"profiles", {{{"schedulerName", s}}}},
                         {"extenders",
                          {{{"urlPrefix", "http://127.0.0.1:" + std::to_string(kK8sExtenderPort) + "/tenax"},
                            {"filterVerb", "filter"},
                            {"prioritizeVerb", "prioritize"},
                            {"weight", 5},
                            {"nodeCacheCapable", false},
                            {"enableHTTPS", false},
                            {"httpTimeout", "5s"},
                            // A failed call fails the attempt (the pod retries): a hard zone
                            // rule must never be skipped because the extender was down.
                            {"ignorable", false}}}}};
    json cm = object("v1", "ConfigMap", s + "-config");
    cm["data"] = {{"config.yaml", config.dump(2) + "\n"}};
    out.push_back(cm);
    // The extender's cluster state (links, placed jobs, zones), re-read
    // when it changes: replace the ConfigMap's state.json to update it.
    json state = object("v1", "ConfigMap", s + "-state");
    state["data"] = {{"state.json", "{}\n"}};
    out.push_back(state);

    const json probe = {{"httpGet", {{"path", "/healthz"}, {"port", 10259}, {"scheme", "HTTPS"}}}};
    json liveness = probe;
    liveness["initialDelaySeconds"] = 15;
    const json kube_scheduler = {
        {"name", "kube-scheduler"},
        {"image", o_.kube_scheduler_image},
        {"command", {"kube-scheduler", std::string("--config=") + kSchedulerConfigDir + "/config.yaml"}},
        {"livenessProbe", liveness},
        {"readinessProbe", probe},
        {"resources", Requests("100m", "128Mi")},
        {"volumeMounts", {Mount("config", kSchedulerConfigDir, true)}}};
    const json extender = {{"name", "extender"},
                           {"image", o_.image},
                           {"command", {"tenax"}},
                           {"args",
                            {"sched", "extender", "--listen", "127.0.0.1:" + std::to_string(kK8sExtenderPort),
                             "--state", std::string(kSchedulerStateDir) + "/state.json"}},
                           {"resources", Requests("100m", "128Mi")},
                           {"volumeMounts", {Mount("state", kSchedulerStateDir, true)}}};
    json d = object("apps/v1", "Deployment", s);
    // Recreate: two schedulers without leader election must never run at once.
    d["spec"] = {{"replicas", 1},
                 {"strategy", {{"type", "Recreate"}}},
                 {"selector", {{"matchLabels", labels}}},
                 {"template",
                  {{"metadata", {{"labels", labels}}},
                   {"spec",
                    {{"serviceAccountName", s},
                     {"containers", {kube_scheduler, extender}},
                     {"volumes",
                      {{{"name", "config"}, {"configMap", {{"name", s + "-config"}}}},
                       {{"name", "state"}, {"configMap", {{"name", s + "-state"}}}}}}}}}}};
    out.push_back(d);
  }

  const K8sJob& job_;
  const K8sOptions& o_;
};

Status CheckJob(const K8sJob& job) {
  TENAX_RETURN_IF_ERROR(CheckK8sName(job.name));
  if (job.mode != "sync" && job.mode != "async" && job.mode != "coded") {
    return InvalidArgument("mode \"" + job.mode +
                           "\" does not run on Kubernetes: use \"sync\", \"async\" or \"coded\"");
  }
  if (job.workers < 1 || job.workers > 1024) return InvalidArgument("workers must be 1..1024");
  if (job.mode == "async" ? job.servers < 1 || job.servers > 64 : job.servers != 0) {
    return InvalidArgument("servers must be 1..64 in mode \"async\" and 0 otherwise");
  }
  if (job.threads < 0 || job.threads > 1024) return InvalidArgument("threads must be 0..1024");
  if (job.job_toml.empty()) return InvalidArgument("the job's TOML is empty");
  if (auto z = ParseZoneConstraint(job.zone_constraint); !z.ok()) return z.status();
  if (job.reads_store && (job.store_train_dataset.empty() || job.store_test_dataset.empty())) {
    return InvalidArgument("a store job needs its train and test dataset names");
  }
  return Status::Ok();
}

Status CheckOptions(const K8sOptions& o) {
  if (o.image.empty() || HasSpace(o.image))
    return InvalidArgument(
        "--image must name a container image your nodes can pull, e.g. REGISTRY/tenax:VERSION "
        "(deploy/Dockerfile builds it)");
  if (o.kube_scheduler_image.empty() || HasSpace(o.kube_scheduler_image)) {
    return InvalidArgument("--kube-scheduler-image must name a container image");
  }
  if (!IsDnsLabel(o.namespace_name, 63)) {
    return InvalidArgument("namespace '" + o.namespace_name +
                           "' is not a DNS label: use lowercase letters, digits and '-' (at most 63)");
  }
  if (Status st = CheckK8sName(o.scheduler_name); !st.ok()) {
    return InvalidArgument("scheduler name: " + st.message());
  }
  if (o.secret.size() < 16) return InvalidArgument("the cluster secret must be at least 16 bytes");
  if (o.storage_nodes < 1 || o.storage_nodes > 255) return InvalidArgument("--storage-nodes must be 1..255");
  for (const std::string* c : {&o.storage_class, &o.catalog_storage_class}) {
    if (HasSpace(*c)) return InvalidArgument("storage class '" + *c + "' must not contain spaces");
  }
  std::set<std::string> seen;
  for (const auto& h : o.storage_hosts) {
    if (h.empty() || HasSpace(h) || h.find(',') != std::string::npos) {
      return InvalidArgument("storage host '" + h + "' must be a Kubernetes node name (no spaces or commas)");
    }
    if (!seen.insert(h).second) return InvalidArgument("storage host '" + h + "' is named twice");
  }
  return Status::Ok();
}

}  // namespace

Status CheckK8sName(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= kMaxNameLength && name.front() >= 'a' && name.front() <= 'z' &&
                  IsDnsLabel(name, kMaxNameLength);
  if (ok) return Status::Ok();
  return InvalidArgument("\"" + name +
                         "\" cannot name Kubernetes objects: use lowercase letters, digits and '-', starting with a "
                         "letter and ending with a letter or digit, at most " +
                         std::to_string(kMaxNameLength) + " characters (e.g. \"fashion-sync\")");
}

Result<std::vector<nlohmann::json>> K8sManifests(const K8sJob& job, const K8sOptions& options) {
  TENAX_RETURN_IF_ERROR(CheckJob(job));
  TENAX_RETURN_IF_ERROR(CheckOptions(options));
  return Builder(job, options).Build();
}

std::string ToYamlStream(const std::vector<nlohmann::json>& objects) {
  std::string out;
  for (const auto& o : objects) {
    out += "---\n";
    out += o.dump(2);
    out += "\n";
  }
  return out;
}

}  // namespace tenax::sched
