// The Kubernetes objects of a job: what each role's pods run, how many, and
// the scheduler's registration of the extender. (The objects' schema is
// checked against the Kubernetes API by tests/k8s_manifests_test.cc.)
#include "tenax/sched/k8s/k8s_manifests.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tenax::sched {
namespace {

using json = nlohmann::json;

constexpr const char* kSecret = "0123456789abcdef0123456789abcdef";

K8sJob SyncJob() {
  K8sJob j;
  j.name = "quickstart";
  j.mode = "sync";
  j.workers = 2;
  j.job_toml = "mode = \"sync\"\n[cluster]\nworkers = 2\n";
  return j;
}

K8sOptions Options() {
  K8sOptions o;
  o.secret = kSecret;
  o.image = "registry.example/tenax:0.1.0";
  return o;
}

std::vector<json> Make(const K8sJob& job, const K8sOptions& o = Options()) {
  auto r = K8sManifests(job, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<json>{};
}

const json* Find(const std::vector<json>& objects, const std::string& kind, const std::string& name) {
  for (const auto& o : objects) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return &o;
  }
  return nullptr;
}

std::vector<std::string> Args(const json& container) { return container["args"].get<std::vector<std::string>>(); }

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The value following `flag` in args ("" when absent).
std::string Flag(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it == args.end() || it + 1 == args.end() ? "" : *(it + 1);
}

std::vector<std::string> Names(const std::vector<json>& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects)
    out.push_back(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  return out;
}

TEST(K8sManifestsTest, SyncJobObjectsInApplyOrder) {
  const auto objects = Make(SyncJob());
  EXPECT_EQ(
      Names(objects),
      (std::vector<std::string>{
          "ServiceAccount/tenax-scheduler", "ClusterRoleBinding/tenax-scheduler-as-kube-scheduler",
          "ClusterRoleBinding/tenax-scheduler-as-volume-scheduler",
          "RoleBinding/tenax-scheduler-extension-apiserver-authentication-reader", "ConfigMap/tenax-scheduler-config",
          "ConfigMap/tenax-scheduler-state", "Deployment/tenax-scheduler", "Secret/quickstart-secret",
          "ConfigMap/quickstart-job", "PersistentVolumeClaim/quickstart-coordinator-state",
          "Service/quickstart-coordinator", "Job/quickstart-coordinator", "Job/quickstart-workers"}));
  for (const auto& o : objects) {
    const json& labels = o["metadata"]["labels"];
    EXPECT_EQ(labels["app.kubernetes.io/name"], "tenax") << o["metadata"]["name"];
    EXPECT_TRUE(labels.contains("tenax.dev/role")) << o["metadata"]["name"];
    const bool scheduler = labels["tenax.dev/role"] == "scheduler";
    // The scheduler is shared by jobs: deleting a job by label must keep it.
    EXPECT_EQ(labels.contains("tenax.dev/job"), !scheduler) << o["metadata"]["name"];
    if (!scheduler) {
      EXPECT_EQ(labels["tenax.dev/job"], "quickstart");
    }
  }
}

TEST(K8sManifestsTest, SecretAndJobFile) {
  K8sJob job = SyncJob();
  const auto objects = Make(job);
  const json* secret = Find(objects, "Secret", "quickstart-secret");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ((*secret)["stringData"]["TENAX_SECRET"], kSecret);
  const json* cm = Find(objects, "ConfigMap", "quickstart-job");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ((*cm)["data"]["job.toml"], job.job_toml);
}

TEST(K8sManifestsTest, WorkersAreAnIndexedJobWithRankFromTheIndex) {
  const auto objects = Make(SyncJob());
  const json* workers = Find(objects, "Job", "quickstart-workers");
  ASSERT_NE(workers, nullptr);
  const json& spec = (*workers)["spec"];
  EXPECT_EQ(spec["completionMode"], "Indexed");
  EXPECT_EQ(spec["completions"], 2);
  EXPECT_EQ(spec["parallelism"], 2);
  EXPECT_EQ(spec["backoffLimit"], 0);  // a lost rank fails a fixed-membership job
  const json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["schedulerName"], "tenax-scheduler");
  EXPECT_EQ(pod["restartPolicy"], "Never");
  EXPECT_EQ(spec["template"]["metadata"]["annotations"]["tenax.dev/zone-constraint"], "soft");
  EXPECT_FALSE(spec["template"]["metadata"]["annotations"].contains("tenax.dev/storage-nodes"));
  ASSERT_EQ(pod["containers"].size(), 1u);
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["command"], json({"tenax"}));
  EXPECT_EQ(Args(c), (std::vector<std::string>{"worker", "--job", "/etc/tenax/job.toml", "--coordinator",
                                               "quickstart-coordinator.default.svc:7070", "--out", "/var/lib/tenax/out",
                                               "--set", "cluster.host=$(POD_IP)", "--rank", "$(TENAX_RANK)"}));
  bool rank_env = false, secret_env = false;
  for (const auto& e : c["env"]) {
    if (e["name"] == "TENAX_RANK") {
      rank_env = true;
      EXPECT_EQ(e["valueFrom"]["fieldRef"]["fieldPath"],
                "metadata.annotations['batch.kubernetes.io/job-completion-index']");
    }
    if (e["name"] == "TENAX_SECRET") {
      secret_env = true;
      EXPECT_EQ(e["valueFrom"]["secretKeyRef"]["name"], "quickstart-secret");
    }
  }
  EXPECT_TRUE(rank_env);
  EXPECT_TRUE(secret_env);
  EXPECT_EQ(c["resources"]["requests"]["cpu"], "1");
}

TEST(K8sManifestsTest, CoordinatorRunsToCompletionOnItsStateClaim) {
  const auto objects = Make(SyncJob());
  const json* job = Find(objects, "Job", "quickstart-coordinator");
  ASSERT_NE(job, nullptr);
  const json& pod = (*job)["spec"]["template"]["spec"];
  const json& c = pod["containers"][0];
  EXPECT_EQ(Args(c), (std::vector<std::string>{"coordinator", "--job", "/etc/tenax/job.toml", "--state",
                                               "/var/lib/tenax/state/coordinator.db", "--set",
                                               "cluster.coordinator=0.0.0.0:7070"}));
  bool state_claim = false;
  for (const auto& v : pod["volumes"]) {
    if (v["name"] == "state") state_claim = v["persistentVolumeClaim"]["claimName"] == "quickstart-coordinator-state";
  }
  EXPECT_TRUE(state_claim);
  // Exit 2 and 3 end the job; a disruption does not count.
  const json& rules = (*job)["spec"]["podFailurePolicy"]["rules"];
  EXPECT_EQ(rules[0]["action"], "Ignore");
  EXPECT_EQ(rules[0]["onPodConditions"][0]["type"], "DisruptionTarget");
  EXPECT_EQ(rules[1]["onExitCodes"]["values"], json({2, 3}));
  const json* svc = Find(objects, "Service", "quickstart-coordinator");
  ASSERT_NE(svc, nullptr);
  EXPECT_EQ((*svc)["spec"]["clusterIP"], "None");
  EXPECT_EQ((*svc)["spec"]["ports"][0]["port"], kK8sCoordinatorPort);
  EXPECT_EQ((*svc)["spec"]["selector"]["tenax.dev/role"], "coordinator");
  EXPECT_EQ((*job)["spec"]["template"]["metadata"]["labels"]["tenax.dev/role"], "coordinator");
}

TEST(K8sManifestsTest, CodedJobRunsTheDecoderAsTheLastIndex) {
  K8sJob job = SyncJob();
  job.mode = "coded";
  job.workers = 4;
  const json* w = nullptr;
  const auto objects = Make(job);
  w = Find(objects, "Job", "quickstart-workers");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ((*w)["spec"]["completions"], 5);
  EXPECT_EQ((*w)["spec"]["parallelism"], 5);
}

TEST(K8sManifestsTest, AsyncJobHasAShardJobAndClaimPerServerAndJoinerWorkers) {
  K8sJob job = SyncJob();
  job.name = "async";
  job.mode = "async";
  job.workers = 4;
  job.servers = 2;
  const auto objects = Make(job);
  for (int s = 0; s < 2; ++s) {
    const std::string name = "async-server-" + std::to_string(s);
    const json* j = Find(objects, "Job", name);
    ASSERT_NE(j, nullptr) << name;
    ASSERT_NE(Find(objects, "PersistentVolumeClaim", name + "-checkpoints"), nullptr);
    const auto args = Args((*j)["spec"]["template"]["spec"]["containers"][0]);
    EXPECT_EQ(args[0], "server");
    EXPECT_EQ(Flag(args, "--shard"), std::to_string(s));
    EXPECT_EQ(Flag(args, "--checkpoints"), "/var/lib/tenax/checkpoints");
    EXPECT_EQ(Flag(args, "--coordinator"), "async-coordinator.default.svc:7070");
    EXPECT_EQ(Flag(args, "--set"), "cluster.host=$(POD_IP)");
    EXPECT_EQ((*j)["spec"]["template"]["metadata"]["labels"]["tenax.dev/shard"], std::to_string(s));
  }
  EXPECT_EQ(Find(objects, "Job", "async-server-2"), nullptr);
  const json* w = Find(objects, "Job", "async-workers");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ((*w)["spec"]["completions"], 4);
  EXPECT_EQ((*w)["spec"]["backoffLimit"], 12);  // lost workers are replaced
  EXPECT_FALSE(Has(Args((*w)["spec"]["template"]["spec"]["containers"][0]), "--rank"));
}

TEST(K8sManifestsTest, ElasticWorkersJoinWithoutARank) {
  K8sJob job = SyncJob();
  job.elastic = true;
  const auto objects = Make(job);
  const json* w = Find(objects, "Job", "quickstart-workers");
  ASSERT_NE(w, nullptr);
  const json& c = (*w)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_FALSE(Has(Args(c), "--rank"));
  for (const auto& e : c["env"]) EXPECT_NE(e["name"], "TENAX_RANK");
  EXPECT_EQ((*w)["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"], json({2}));
}

TEST(K8sManifestsTest, StoreJobRunsDataNodesAndPutsFashionMnist) {
  K8sJob job = SyncJob();
  job.name = "store-job";
  job.reads_store = true;
  K8sOptions o = Options();
  o.storage_nodes = 3;
  o.storage_hosts = {"node-a", "node-b"};
  const auto objects = Make(job, o);
  const json* sts = Find(objects, "StatefulSet", "store-job-storage");
  ASSERT_NE(sts, nullptr);
  EXPECT_EQ((*sts)["spec"]["replicas"], 3);
  EXPECT_EQ((*sts)["spec"]["serviceName"], "store-job-storage");
  EXPECT_EQ((*sts)["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "chunks");
  const json& pod = (*sts)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["schedulerName"], "tenax-scheduler");
  EXPECT_EQ(Args(pod["containers"][0]),
            (std::vector<std::string>{"storage", "--dir", "/var/lib/tenax/chunks", "--listen", "0.0.0.0:7300", "--name",
                                      "$(POD_NAME)"}));
  const json* catalog = Find(objects, "PersistentVolumeClaim", "store-job-catalog");
  ASSERT_NE(catalog, nullptr);
  EXPECT_EQ((*catalog)["spec"]["accessModes"], json({"ReadWriteMany"}));

  const json* put = Find(objects, "Job", "store-job-store-put");
  ASSERT_NE(put, nullptr);
  const json& put_pod = (*put)["spec"]["template"]["spec"];
  ASSERT_EQ(put_pod["initContainers"].size(), 2u);
  const auto train = Args(put_pod["initContainers"][1]);
  std::vector<std::string> nodes;
  for (size_t i = 0; i + 1 < train.size(); ++i) {
    if (train[i] == "--node") nodes.push_back(train[i + 1]);
  }
  EXPECT_EQ(nodes, (std::vector<std::string>{"store-job-storage-0.store-job-storage.default.svc:7300",
                                             "store-job-storage-1.store-job-storage.default.svc:7300",
                                             "store-job-storage-2.store-job-storage.default.svc:7300"}));
  EXPECT_EQ(Flag(train, "--catalog"), kK8sCatalogFile);
  EXPECT_EQ(Flag(train, "--split"), "train");
  EXPECT_EQ(Flag(Args(put_pod["containers"][0]), "--split"), "test");

  // Workers wait for the datasets, mount the catalog and name the data's hosts.
  const json* w = Find(objects, "Job", "store-job-workers");
  ASSERT_NE(w, nullptr);
  const json& wpod = (*w)["spec"]["template"]["spec"];
  ASSERT_EQ(wpod["initContainers"].size(), 1u);
  EXPECT_EQ(wpod["initContainers"][0]["name"], "wait-for-data");
  const auto wait = Args(wpod["initContainers"][0]);
  EXPECT_EQ(std::vector<std::string>(wait.end() - 3, wait.end()),
            (std::vector<std::string>{kK8sCatalogFile, "fashion-mnist-train", "fashion-mnist-test"}));
  EXPECT_EQ((*w)["spec"]["template"]["metadata"]["annotations"]["tenax.dev/storage-nodes"], "node-a,node-b");
  // The coordinator of a sync job does not read the data.
  const json* coord = Find(objects, "Job", "store-job-coordinator");
  ASSERT_NE(coord, nullptr);
  EXPECT_FALSE((*coord)["spec"]["template"]["spec"].contains("initContainers"));
}

TEST(K8sManifestsTest, OwnDatasetsAreNotPutForTheUser) {
  K8sJob job = SyncJob();
  job.reads_store = true;
  job.store_train_dataset = "mine-train";
  const auto objects = Make(job);
  EXPECT_NE(Find(objects, "StatefulSet", "quickstart-storage"), nullptr);
  EXPECT_EQ(Find(objects, "Job", "quickstart-store-put"), nullptr);
}

TEST(K8sManifestsTest, SchedulerRegistersTheExtender) {
  const auto objects = Make(SyncJob());
  const json* cm = Find(objects, "ConfigMap", "tenax-scheduler-config");
  ASSERT_NE(cm, nullptr);
  const json config = json::parse((*cm)["data"]["config.yaml"].get<std::string>());
  EXPECT_EQ(config["apiVersion"], "kubescheduler.config.k8s.io/v1");
  EXPECT_EQ(config["kind"], "KubeSchedulerConfiguration");
  EXPECT_EQ(config["leaderElection"]["leaderElect"], false);
  EXPECT_EQ(config["profiles"], json::parse(R"([{"schedulerName": "tenax-scheduler"}])"));
  EXPECT_EQ(config["extenders"], json::parse(R"([{"urlPrefix": "http://127.0.0.1:8888/tenax", "filterVerb": "filter",
      "prioritizeVerb": "prioritize", "weight": 5, "nodeCacheCapable": false, "enableHTTPS": false,
      "httpTimeout": "5s", "ignorable": false}])"));

  const json* d = Find(objects, "Deployment", "tenax-scheduler");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ((*d)["spec"]["strategy"]["type"], "Recreate");
  const json& pod = (*d)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "tenax-scheduler");
  EXPECT_FALSE(pod.contains("schedulerName"));  // scheduled by the default scheduler
  ASSERT_EQ(pod["containers"].size(), 2u);
  EXPECT_EQ(pod["containers"][0]["command"], json({"kube-scheduler", "--config=/etc/tenax-scheduler/config.yaml"}));
  EXPECT_EQ(Args(pod["containers"][1]), (std::vector<std::string>{"sched", "extender", "--listen", "127.0.0.1:8888",
                                                                  "--state", "/var/lib/tenax-scheduler/state.json"}));
  const json* crb = Find(objects, "ClusterRoleBinding", "tenax-scheduler-as-kube-scheduler");
  ASSERT_NE(crb, nullptr);
  EXPECT_EQ((*crb)["roleRef"]["name"], "system:kube-scheduler");
  EXPECT_FALSE((*crb)["metadata"].contains("namespace"));
  EXPECT_EQ((*crb)["subjects"][0]["namespace"], "default");
  const json* vol = Find(objects, "ClusterRoleBinding", "tenax-scheduler-as-volume-scheduler");
  ASSERT_NE(vol, nullptr);
  EXPECT_EQ((*vol)["roleRef"]["name"], "system:volume-scheduler");

  K8sOptions o = Options();
  o.include_scheduler = false;
  for (const auto& obj : Make(SyncJob(), o)) EXPECT_NE(obj["metadata"]["labels"]["tenax.dev/role"], "scheduler");
}

TEST(K8sManifestsTest, OtherNamespaceComesFirstAndNamesTheAddresses) {
  K8sOptions o = Options();
  o.namespace_name = "ml";
  o.scheduler_name = "net-aware";
  o.image = "registry.example/tenax:1";
  const auto objects = Make(SyncJob(), o);
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(objects[0]["kind"], "Namespace");
  EXPECT_EQ(objects[0]["metadata"]["name"], "ml");
  for (size_t i = 1; i < objects.size(); ++i) {
    const json& o2 = objects[i];
    if (o2["kind"] == "ClusterRoleBinding") continue;
    const std::string want = o2["kind"] == "RoleBinding" ? "kube-system" : "ml";
    EXPECT_EQ(o2["metadata"]["namespace"], want) << o2["metadata"]["name"];
  }
  const json* w = Find(objects, "Job", "quickstart-workers");
  ASSERT_NE(w, nullptr);
  const json& pod = (*w)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["schedulerName"], "net-aware");
  EXPECT_EQ(pod["containers"][0]["image"], "registry.example/tenax:1");
  EXPECT_EQ(Flag(Args(pod["containers"][0]), "--coordinator"), "quickstart-coordinator.ml.svc:7070");
  EXPECT_NE(Find(objects, "Deployment", "net-aware"), nullptr);
}

TEST(K8sManifestsTest, EveryContainerRequestsCpuAndMemory) {
  K8sJob job = SyncJob();
  job.mode = "async";
  job.servers = 1;
  job.reads_store = true;
  job.zone_constraint = "hard";
  int containers = 0;
  for (const auto& o : Make(job)) {
    if (!o.contains("spec") || !o["spec"].contains("template")) continue;
    const json& pod = o["spec"]["template"]["spec"];
    if (o["metadata"]["labels"]["tenax.dev/role"] != "scheduler") {
      EXPECT_EQ(o["spec"]["template"]["metadata"]["annotations"]["tenax.dev/zone-constraint"], "hard");
    }
    for (const char* list : {"containers", "initContainers"}) {
      if (!pod.contains(list)) continue;
      for (const auto& c : pod[list]) {
        ++containers;
        EXPECT_TRUE(c["resources"]["requests"].contains("cpu")) << c["name"];
        EXPECT_TRUE(c["resources"]["requests"].contains("memory")) << c["name"];
      }
    }
  }
  // scheduler 2, coordinator 1 + wait, server 1 + wait, workers 1 + wait, storage 1, put 3
  EXPECT_EQ(containers, 12);
}

TEST(K8sManifestsTest, YamlStreamIsOneJsonDocumentPerObject) {
  const auto objects = Make(SyncJob());
  const std::string yaml = ToYamlStream(objects);
  std::vector<json> back;
  size_t pos = 0;
  ASSERT_EQ(yaml.rfind("---\n", 0), 0u);
  while (pos < yaml.size()) {
    ASSERT_EQ(yaml.compare(pos, 4, "---\n"), 0);
    size_t next = yaml.find("\n---\n", pos + 4);
    const size_t end = next == std::string::npos ? yaml.size() : next + 1;
    back.push_back(json::parse(yaml.substr(pos + 4, end - pos - 4)));
    pos = end;
  }
  EXPECT_EQ(back, objects);
}

TEST(K8sManifestsTest, BadInputSaysWhatWouldWork) {
  auto fails = [](const K8sJob& j, const K8sOptions& o, const std::string& needle) {
    auto r = K8sManifests(j, o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  for (const char* bad :
       {"Quickstart", "my_job", "9lives", "ends-", "", "a-name-that-is-far-too-long-for-kubernetes-xx"}) {
    K8sJob j = SyncJob();
    j.name = bad;
    fails(j, Options(), "lowercase letters, digits and '-'");
  }
  K8sJob single = SyncJob();
  single.mode = "single";
  fails(single, Options(), "use \"sync\", \"async\" or \"coded\"");
  K8sJob zone = SyncJob();
  zone.zone_constraint = "medium";
  fails(zone, Options(), "\"hard\"");
  K8sOptions o = Options();
  o.secret = "short";
  fails(SyncJob(), o, "at least 16 bytes");
  o = Options();
  o.namespace_name = "ML";
  fails(SyncJob(), o, "DNS label");
  o = Options();
  o.image = "tenax latest";
  fails(SyncJob(), o, "--image");
  o = Options();
  o.image.clear();  // no default: no public registry holds a tenax image
  fails(SyncJob(), o, "--image");
  o = Options();
  o.storage_hosts = {"a,b"};
  fails(SyncJob(), o, "no spaces or commas");
  EXPECT_TRUE(CheckK8sName("fashion-sync-2").ok());
  EXPECT_TRUE(CheckK8sName(std::string(40, 'a')).ok());
  EXPECT_FALSE(CheckK8sName(std::string(41, 'a')).ok());
}

}  // namespace
}  // namespace tenax::sched
