// `tenax k8s manifests` end to end: the streams it writes for the example
// jobs pass the Kubernetes API schemas (tools/k8s-check/check.mjs with the
// kubernetes-models npm package, installed by scripts/install-deps.sh); a
// field corrupted in a stream fails that check naming the object; bad job
// files are refused naming the file and key; and the pods' commands, run
// here on loopback with the mounts and environment the manifests give
// them, train the job.
//
// node and the npm packages are installed by scripts/install-deps.sh: a
// machine without them fails these tests (with that hint), never skips.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "testing.h"

namespace tenax {
namespace {

using json = nlohmann::json;
using testing::Child;
using testing::ProcessResult;
using testing::RunProcess;
using testing::ScratchDir;
using testing::TenaxBinary;

const std::string kSource = TENAX_SOURCE_DIR;
const std::string kChecker = kSource + "/tools/k8s-check/check.mjs";

// node on PATH, and the checker's packages (npm ci): FAIL with the remedy.
bool CheckerReady() {
  bool node = false;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty() && ::access((dir + "/node").c_str(), X_OK) == 0) node = true;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  EXPECT_TRUE(node) << "node is not on PATH: run 'bash scripts/install-deps.sh' (it installs nodejs and npm)";
  const bool packages =
      std::filesystem::exists(kSource + "/tools/k8s-check/node_modules/kubernetes-models/package.json");
  EXPECT_TRUE(packages) << "tools/k8s-check/node_modules is missing: run 'bash scripts/install-deps.sh' (npm ci)";
  return node && packages;
}

ProcessResult Manifests(const std::string& job, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {TenaxBinary(), "k8s", "manifests", job, "--out", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (std::find(extra.begin(), extra.end(), "--image") == extra.end()) {
    argv.insert(argv.end(), {"--image", "registry.example/tenax:0.1.0"});
  }
  return RunProcess(argv);
}

ProcessResult Check(const std::string& file) { return RunProcess({"node", kChecker, file}); }

std::vector<json> ReadStream(const std::string& path) {
  const std::string text = testing::ReadText(path);
  std::vector<json> out;
  size_t pos = 0;
  while (pos < text.size()) {
    EXPECT_EQ(text.compare(pos, 4, "---\n"), 0) << "at byte " << pos;
    size_t next = text.find("\n---\n", pos);
    const size_t end = next == std::string::npos ? text.size() : next + 1;
    out.push_back(json::parse(text.substr(pos + 4, end - pos - 4)));
    pos = end;
  }
  return out;
}

void WriteStream(const std::string& path, const std::vector<json>& objects) {
  std::ofstream f(path, std::ios::trunc);
  for (const auto& o : objects) f << "---\n" << o.dump(2) << "\n";
}

json* Find(std::vector<json>& objects, const std::string& kind, const std::string& name) {
  for (auto& o : objects) {
    if (o["kind"] == kind && o["metadata"]["name"] == name) return &o;
  }
  return nullptr;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

// Writes the stream for `job` (+ flags), checks it with check.mjs and
// returns its objects.
std::vector<json> GenerateAndCheck(const ScratchDir& dir, const std::string& job, const std::string& name,
                                   std::vector<std::string> extra = {}) {
  const std::string out = dir / (name + ".yaml");
  ProcessResult r = Manifests(job, out, extra);
  EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
  if (r.exit_code != 0) return {};
  EXPECT_NE(r.out.find("kubectl apply -f " + out), std::string::npos) << r.out;
  const std::vector<json> objects = ReadStream(out);
  ProcessResult c = Check(out);
  EXPECT_EQ(c.exit_code, 0) << name << ":\n" << c.err << c.out;
  EXPECT_NE(c.out.find("k8s-check: " + std::to_string(objects.size()) + " objects match"), std::string::npos)
      << name << ": " << c.out;
  return objects;
}

std::vector<std::string> Kinds(const std::vector<json>& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects)
    out.push_back(o["kind"].get<std::string>() + "/" + o["metadata"]["name"].get<std::string>());
  return out;
}

bool HasObject(const std::vector<json>& objects, const std::string& kind_name) {
  for (const auto& k : Kinds(objects)) {
    if (k == kind_name) return true;
  }
  return false;
}

TEST(K8sCliTest, ExampleJobsPassTheKubernetesSchemas) {
  ASSERT_TRUE(CheckerReady());
  ScratchDir dir;
  // Every example job that runs on Kubernetes (the others are mode "single").
  auto sync = GenerateAndCheck(dir, kSource + "/examples/sync.toml", "quickstart");
  EXPECT_TRUE(HasObject(sync, "Job/quickstart-workers"));
  EXPECT_TRUE(HasObject(sync, "Deployment/tenax-scheduler"));
  auto async = GenerateAndCheck(dir, kSource + "/examples/async.toml", "async");
  EXPECT_TRUE(HasObject(async, "Job/async-server-1"));
  EXPECT_TRUE(HasObject(async, "PersistentVolumeClaim/async-server-1-checkpoints"));
  auto coded = GenerateAndCheck(dir, kSource + "/examples/coded.toml", "coded");
  EXPECT_TRUE(HasObject(coded, "Job/coded-workers"));
  // Elastic, another namespace and scheduler name, the hard zone rule.
  auto elastic = GenerateAndCheck(dir, kSource + "/examples/sync.toml", "elastic",
                                  {"--set", "cluster.elastic=true", "--namespace", "ml", "--scheduler-name",
                                   "net-aware", "--zone-constraint", "hard", "--image", "registry.example/tenax:1"});
  EXPECT_TRUE(HasObject(elastic, "Namespace/ml"));
  EXPECT_TRUE(HasObject(elastic, "Deployment/net-aware"));
  // A job reading the erasure-coded store, without the scheduler.
  const std::string store_job = dir / "store.toml";
  WriteText(store_job,
            "mode = \"sync\"\n[cluster]\nworkers = 3\njob_id = \"store-sync\"\n"
            "[data]\nformat = \"store\"\ncatalog = \"runs/catalog.db\"\nshuffle_window_chunks = 8\n");
  auto store = GenerateAndCheck(
      dir, store_job, "store",
      {"--no-scheduler", "--storage-nodes", "4", "--storage-hosts", "node-a,node-b", "--catalog-storage-class", "nfs"});
  EXPECT_TRUE(HasObject(store, "StatefulSet/store-sync-storage"));
  EXPECT_TRUE(HasObject(store, "Job/store-sync-store-put"));
  EXPECT_FALSE(HasObject(store, "Deployment/tenax-scheduler"));
}

TEST(K8sCliTest, CorruptedFieldsFailTheCheckNamingTheObject) {
  ASSERT_TRUE(CheckerReady());
  ScratchDir dir;
  const std::string good = dir / "good.yaml";
  ProcessResult r = Manifests(kSource + "/examples/sync.toml", good);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct Corruption {
    const char* what;
    std::function<void(std::vector<json>&)> apply;
    std::vector<std::string> expected;  // in the checker's error output
  };
  const std::vector<Corruption> corruptions = {
      {"misspelt field",
       [](std::vector<json>& o) {
         json& spec = (*Find(o, "Job", "quickstart-workers"))["spec"];
         spec["parallelizm"] = spec["parallelism"];
         spec.erase("parallelism");
       },
       {"Job/quickstart-workers", "unknown field spec.parallelizm"}},
      {"misspelt nested field",
       [](std::vector<json>& o) {
         json& c = (*Find(o, "Job", "quickstart-coordinator"))["spec"]["template"]["spec"]["containers"][0];
         c["imagez"] = c["image"];
       },
       {"Job/quickstart-coordinator", "unknown field spec.template.spec.containers.0.imagez"}},
      {"wrong type",
       [](std::vector<json>& o) { (*Find(o, "Deployment", "tenax-scheduler"))["spec"]["replicas"] = "1"; },
       {"Deployment/tenax-scheduler", "spec/replicas must be integer"}},
      {"missing required field",
       [](std::vector<json>& o) { (*Find(o, "Service", "quickstart-coordinator"))["spec"]["ports"][0].erase("port"); },
       {"Service/quickstart-coordinator", "spec/ports/0 must have required property port"}},
      {"unknown kind",
       [](std::vector<json>& o) { (*Find(o, "Secret", "quickstart-secret"))["kind"] = "Secrets"; },
       {"Secrets/quickstart-secret", "no Kubernetes schema"}},
      {"misspelt scheduler configuration field",
       [](std::vector<json>& o) {
         json& cm = *Find(o, "ConfigMap", "tenax-scheduler-config");
         json config = json::parse(cm["data"]["config.yaml"].get<std::string>());
         config["extenders"][0]["filterverb"] = "filter";
         config["extenders"][0].erase("filterVerb");
         cm["data"]["config.yaml"] = config.dump(2);
       },
       {"ConfigMap/tenax-scheduler-config", "unknown field extenders[0].filterverb"}},
      {"bad extender timeout",
       [](std::vector<json>& o) {
         json& cm = *Find(o, "ConfigMap", "tenax-scheduler-config");
         json config = json::parse(cm["data"]["config.yaml"].get<std::string>());
         config["extenders"][0]["httpTimeout"] = 5;
         cm["data"]["config.yaml"] = config.dump(2);
       },
       {"ConfigMap/tenax-scheduler-config", "extenders[0].httpTimeout must be a duration"}},
      {"scheduler name without a profile",
       [](std::vector<json>& o) {
         (*Find(o, "Job", "quickstart-workers"))["spec"]["template"]["spec"]["schedulerName"] = "tenax-schedular";
       },
       {"Job/quickstart-workers", "schedulerName tenax-schedular is no profile"}},
  };
  for (const Corruption& c : corruptions) {
    std::vector<json> objects = ReadStream(good);
    ASSERT_FALSE(objects.empty());
    c.apply(objects);
    const std::string bad = dir / "bad.yaml";
    WriteStream(bad, objects);
    ProcessResult check = Check(bad);
    EXPECT_EQ(check.exit_code, 1) << c.what << ": " << check.out << check.err;
    for (const auto& needle : c.expected) {
      EXPECT_NE(check.err.find(needle), std::string::npos) << c.what << ": want '" << needle << "' in\n" << check.err;
    }
  }
  // The unchanged stream passes (the corruptions, not the round trip, fail).
  std::vector<json> objects = ReadStream(good);
  WriteStream(dir / "same.yaml", objects);
  EXPECT_EQ(Check(dir / "same.yaml").exit_code, 0);
}

TEST(K8sCliTest, BadJobFilesAreRefusedNamingFileAndKey) {
  ScratchDir dir;
  auto refused = [&](const std::string& toml, const std::vector<std::string>& needles,
                     std::vector<std::string> extra = {}) {
    const std::string job = dir / "job.toml";
    WriteText(job, toml);
    ProcessResult r = Manifests(job, dir / "out.yaml", extra);
    EXPECT_EQ(r.exit_code, 2) << toml << r.err;
    EXPECT_EQ(r.err.rfind("tenax k8s manifests: error: ", 0), 0u) << r.err;
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "want '" << n << "' in " << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.yaml"));
  };
  refused("mode = \"sync\"\n[cluster]\njob_id = \"My_Job\"\n",
          {"job.toml:3: 'cluster.job_id'", "lowercase letters, digits and '-'"});
  refused("mode = \"sync\"\n[model]\npath = \"net.pt\"\n", {"job.toml:3: 'model.path'", "absolute path"});
  refused("mode = \"single\"\n", {"use 'tenax train' for a single process"});
  refused("mode = \"sync\"\n[cluster]\nworkerz = 2\n", {"job.toml", "cluster.workerz"});
  refused("mode = \"sync\"\n", {"namespace 'Ml'", "DNS label"}, {"--namespace", "Ml"});
  ProcessResult missing = Manifests(dir / "absent.toml", dir / "out.yaml");
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("absent.toml"), std::string::npos) << missing.err;
}

TEST(K8sCliTest, SecretLeavesTheJobFileAndTheStreamIsPrivate) {
  ScratchDir dir;
  const std::string job = dir / "job.toml";
  WriteText(job, "mode = \"sync\"\n[cluster]\njob_id = \"private\"\nsecret = \"a-secret-of-24-bytes-xx\"\n");
  const std::string out = dir / "private.yaml";
  // A job file that holds the secret and that others may read is refused.
  ASSERT_EQ(::chmod(job.c_str(), 0644), 0);
  ProcessResult loose = Manifests(job, out);
  EXPECT_EQ(loose.exit_code, 2) << loose.err;
  EXPECT_NE(loose.err.find("chmod 600"), std::string::npos) << loose.err;
  ASSERT_EQ(::chmod(job.c_str(), 0600), 0);
  ProcessResult r = Manifests(job, out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::vector<json> objects = ReadStream(out);
  json* secret = Find(objects, "Secret", "private-secret");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ((*secret)["stringData"]["TENAX_SECRET"], "a-secret-of-24-bytes-xx");
  json* cm = Find(objects, "ConfigMap", "private-job");
  ASSERT_NE(cm, nullptr);
  EXPECT_EQ(cm->dump().find("a-secret-of-24"), std::string::npos) << cm->dump();
  // Without a configured secret (and without $TENAX_SECRET) each run makes a new random one.
  ::unsetenv("TENAX_SECRET");
  auto secret_of = [&](const std::string& name) {
    ProcessResult g = Manifests(kSource + "/examples/sync.toml", dir / name);
    EXPECT_EQ(g.exit_code, 0) << g.err;
    std::vector<json> o = ReadStream(dir / name);
    json* s = Find(o, "Secret", "quickstart-secret");
    return s ? (*s)["stringData"]["TENAX_SECRET"].get<std::string>() : std::string();
  };
  const std::string a = secret_of("a.yaml"), b = secret_of("b.yaml");
  EXPECT_TRUE(std::regex_match(a, std::regex("[0-9a-f]{64}"))) << a;
  EXPECT_NE(a, b);
  // stdout when there is no --out.
  ProcessResult s =
      RunProcess({TenaxBinary(), "k8s", "manifests", kSource + "/examples/sync.toml", "--image", "r.example/tenax:1"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.out.rfind("---\n{", 0), 0u);
}

// No registry holds a tenax image: --image has no default, and its absence
// is a bad flag (exit 2, one line naming it), with nothing written.
TEST(K8sCliTest, WithoutAnImageNothingIsWritten) {
  ScratchDir dir;
  ProcessResult r =
      RunProcess({TenaxBinary(), "k8s", "manifests", kSource + "/examples/sync.toml", "--out", dir / "out.yaml"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--image is required"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.yaml"));
  EXPECT_EQ(r.out, "");
}

// The job's [placement] zone rule is every pod's tenax.dev/zone-constraint,
// unless --zone-constraint overrides it.
TEST(K8sCliTest, PlacementZoneRuleAnnotatesEveryPod) {
  ScratchDir dir;
  const std::string job = dir / "hard.toml";
  // (placement.zone needs an emulated topology: the job's other use of it, `tenax run`.)
  WriteText(job,
            "mode = \"async\"\n[cluster]\njob_id = \"hard\"\n[placement]\nzone = \"hard\"\n"
            "[topology]\nhosts = [{ name = \"h1\", zone = \"a\", slots = 8 }]\n");
  auto zones = [&](std::vector<std::string> extra) {
    std::set<std::string> seen;
    if (Manifests(job, dir / "z.yaml", extra).exit_code != 0) return seen;
    int pods = 0;
    for (const auto& o : ReadStream(dir / "z.yaml")) {
      if (!o.contains("spec") || !o["spec"].contains("template") ||
          !o["metadata"]["labels"].contains("tenax.dev/job")) {
        continue;
      }
      ++pods;
      seen.insert(o["spec"]["template"]["metadata"]["annotations"]["tenax.dev/zone-constraint"].get<std::string>());
    }
    EXPECT_EQ(pods, 3);  // coordinator, one server, workers
    return seen;
  };
  EXPECT_EQ(zones({}), std::set<std::string>{"hard"});
  EXPECT_EQ(zones({"--zone-constraint", "soft"}), std::set<std::string>{"soft"});
}

// The container's argv with the mounts mapped to local directories and the
// pod's variables expanded, as kubelet would run it.
std::vector<std::string> PodArgv(const json& container, const std::map<std::string, std::string>& mounts,
                                 const std::map<std::string, std::string>& vars) {
  std::vector<std::string> argv = {TenaxBinary()};
  for (const auto& a : container["args"]) {
    std::string arg = a.get<std::string>();
    for (const auto& [from, to] : mounts) {
      for (size_t p = arg.find(from); p != std::string::npos; p = arg.find(from, p + to.size())) {
        arg.replace(p, from.size(), to);
      }
    }
    for (const auto& [name, value] : vars) {
      const std::string ref = "$(" + name + ")";
      for (size_t p = arg.find(ref); p != std::string::npos; p = arg.find(ref)) arg.replace(p, ref.size(), value);
    }
    argv.push_back(arg);
  }
  return argv;
}

// The pods' own commands (from the generated Jobs) run the job: the
// coordinator on its state volume, two workers with ranks from their
// completion index, the secret from the Secret and the job from the
// ConfigMap. Only what kubelet and DNS would provide is substituted
// (mount paths, $(POD_IP), $(TENAX_RANK), the coordinator's address).
TEST(K8sCliTest, PodCommandsTrainTheJobOnLoopback) {
  ScratchDir dir;
  const std::string out = dir / "run.yaml";
  ProcessResult r = Manifests(kSource + "/examples/sync.toml", out,
                              {"--set", "train.max_steps=4", "--set", "data.test_limit=200", "--set",
                               "log.every_steps=2", "--set", "train.threads=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<json> objects = ReadStream(out);
  json* cm = Find(objects, "ConfigMap", "quickstart-job");
  json* secret = Find(objects, "Secret", "quickstart-secret");
  json* coordinator = Find(objects, "Job", "quickstart-coordinator");
  json* workers = Find(objects, "Job", "quickstart-workers");
  ASSERT_TRUE(cm && secret && coordinator && workers);
  std::filesystem::create_directories(dir / "etc");
  std::filesystem::create_directories(dir / "state");
  WriteText(dir / "etc/job.toml", (*cm)["data"]["job.toml"].get<std::string>());
  const json& cc = (*coordinator)["spec"]["template"]["spec"]["containers"][0];
  // The environment the containers get: plain values and the Secret.
  for (const auto& e : cc["env"]) {
    if (e.contains("value")) ::setenv(e["name"].get<std::string>().c_str(), e["value"].get<std::string>().c_str(), 1);
  }
  ::setenv("TENAX_SECRET", (*secret)["stringData"]["TENAX_SECRET"].get<std::string>().c_str(), 1);

  std::map<std::string, std::string> mounts = {{"/etc/tenax", dir / "etc"}, {"/var/lib/tenax/state", dir / "state"}};
  std::vector<std::string> coord_argv = PodArgv(cc, mounts, {});
  // Loopback and any free port instead of 0.0.0.0:7070 (a later --set wins).
  coord_argv.insert(coord_argv.end(), {"--set", "cluster.coordinator=127.0.0.1:0"});
  Child coord(coord_argv);
  ASSERT_TRUE(coord.WaitForStderrLine("listening on")) << coord.stderr_text();
  std::smatch m;
  const std::string log = coord.stderr_text();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("listening on 127\\.0\\.0\\.1:([0-9]+)"))) << log;
  const std::string port = m[1];

  const json& wc = (*workers)["spec"]["template"]["spec"]["containers"][0];
  const int ranks = (*workers)["spec"]["completions"];
  ASSERT_EQ(ranks, 2);
  std::vector<std::unique_ptr<Child>> children;
  for (int i = 0; i < ranks; ++i) {
    const std::string out_dir = dir / ("out-" + std::to_string(i));
    std::vector<std::string> argv = PodArgv(wc, {{"/etc/tenax", dir / "etc"}, {"/var/lib/tenax/out", out_dir}},
                                            {{"POD_IP", "127.0.0.1"}, {"TENAX_RANK", std::to_string(i)}});
    // DNS would resolve the headless Service to the coordinator pod.
    for (auto& a : argv) {
      if (a == "quickstart-coordinator.default.svc:7070") a = "127.0.0.1:" + port;
    }
    children.push_back(std::make_unique<Child>(argv));
  }
  for (int i = 0; i < ranks; ++i) {
    EXPECT_EQ(children[i]->Wait(), 0) << "worker " << i << ":\n" << children[i]->stderr_text();
  }
  EXPECT_EQ(coord.Wait(), 0) << coord.stderr_text();
  const json summary = json::parse(testing::ReadText(dir / "out-0/summary.json"));
  EXPECT_EQ(summary["steps"], 4);
  EXPECT_EQ(summary["workers"], 2);
  EXPECT_EQ(summary["mode"], "sync");
}

// The store job's init containers, run by the shells their command names:
// wait-for-data loops until `tenax store status --json` lists both
// datasets (a stand-in tenax lists the test set from its second call on),
// wait-for-storage until every data node accepts a TCP connection.
TEST(K8sCliTest, InitContainersWaitForTheirInputs) {
  ScratchDir dir;
  const std::string job = dir / "store.toml";
  WriteText(job, "mode = \"sync\"\n[cluster]\njob_id = \"st\"\n[data]\nformat = \"store\"\ncatalog = \"c.db\"\n");
  ASSERT_EQ(Manifests(job, dir / "st.yaml", {"--storage-nodes", "2"}).exit_code, 0);
  std::vector<json> objects = ReadStream(dir / "st.yaml");
  json* workers = Find(objects, "Job", "st-workers");
  json* put = Find(objects, "Job", "st-store-put");
  ASSERT_TRUE(workers && put);
  auto argv_of = [](const json& c) {
    std::vector<std::string> argv = c["command"].get<std::vector<std::string>>();
    for (const auto& a : c["args"]) argv.push_back(a.get<std::string>());
    return argv;
  };

  std::filesystem::create_directories(dir / "bin");
  WriteText(dir / "bin/tenax",
            "#!/bin/sh\n"
            "echo call >> \"" +
                dir / "calls" +
                "\"\n"
                "n=$(wc -l < \"" +
                dir / "calls" +
                "\")\n"
                "test=''; [ \"$n\" -ge 2 ] && test=',{\"dataset\":\"fashion-mnist-test\"}'\n"
                "echo \"{\\\"datasets\\\":[{\\\"bytes\\\":1,\\\"dataset\\\":\\\"fashion-mnist-train\\\"}$test]}\"\n");
  ::chmod((dir / "bin/tenax").c_str(), 0755);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", (dir / "bin:" + path).c_str(), 1);
  ProcessResult wait = RunProcess(argv_of((*workers)["spec"]["template"]["spec"]["initContainers"][0]));
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_NE(wait.out.find("waiting for the datasets fashion-mnist-train and fashion-mnist-test"), std::string::npos)
      << wait.out;
  EXPECT_EQ(testing::ReadText(dir / "calls"), "call\ncall\n");

  // Two listening sockets stand in for the data nodes.
  std::vector<std::string> argv = argv_of((*put)["spec"]["template"]["spec"]["initContainers"][0]);
  ASSERT_EQ(argv.size(), 6u);  // bash -c SCRIPT $0 node-0 node-1
  int fds[2];
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fds[i], reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(fds[i], 4), 0);
    socklen_t len = sizeof a;
    ASSERT_EQ(::getsockname(fds[i], reinterpret_cast<sockaddr*>(&a), &len), 0);
    argv[4 + i] = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ProcessResult storage = RunProcess(argv);
  EXPECT_EQ(storage.exit_code, 0) << storage.out << storage.err;
  for (int fd : fds) ::close(fd);
}

// The scheduler's extender starts with the flags and the state file the
// manifests give it.
TEST(K8sCliTest, ExtenderStartsOnTheGeneratedStateFile) {
  ScratchDir dir;
  const std::string out = dir / "s.yaml";
  ASSERT_EQ(Manifests(kSource + "/examples/sync.toml", out).exit_code, 0);
  std::vector<json> objects = ReadStream(out);
  json* state = Find(objects, "ConfigMap", "tenax-scheduler-state");
  json* deployment = Find(objects, "Deployment", "tenax-scheduler");
  ASSERT_TRUE(state && deployment);
  std::filesystem::create_directories(dir / "state");
  WriteText(dir / "state/state.json", (*state)["data"]["state.json"].get<std::string>());
  const json& ext = (*deployment)["spec"]["template"]["spec"]["containers"][1];
  ASSERT_EQ(ext["name"], "extender");
  std::vector<std::string> argv = PodArgv(ext, {{"/var/lib/tenax-scheduler", dir / "state"}}, {});
  for (auto& a : argv) {
    if (a == "127.0.0.1:8888") a = "127.0.0.1:0";  // any free port here
  }
  Child extender(argv);
  ASSERT_TRUE(extender.WaitForStderrLine("serving the kube-scheduler extender")) << extender.stderr_text();
  extender.Signal(SIGTERM);
  EXPECT_EQ(extender.Wait(), 0) << extender.stderr_text();
}

}  // namespace
}  // namespace tenax
