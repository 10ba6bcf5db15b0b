// `tenax sched extender` as a real process on loopback, spoken to over HTTP
// the way kube-scheduler does: filter and prioritize with full request
// bodies, malformed and oversized bodies, a state file rewritten under it,
// and SIGTERM.
#include <httplib.h>

#include <csignal>
#include <nlohmann/json.hpp>
#include <regex>

#include "extender_test_bodies.h"
#include "tenax/core/files.h"
#include "testing.h"

namespace tenax {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using sched::testing::ArgsWithNames;
using sched::testing::ArgsWithNodes;
using sched::testing::ClusterNodes;
using sched::testing::PodJson;
using testing::Child;

// The extender started through `sh -c 'exec ... 1>&2'`, so that its stdout
// line ("extender listening on HOST:PORT") reaches the stderr that Child
// reads; exec keeps the pid, so signals reach tenax itself.
std::unique_ptr<Child> StartExtender(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/bin/sh", "-c",      "exec \"$0\" \"$@\" 1>&2", testing::TenaxBinary(),
                                "sched",   "extender"};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Child>(argv);
}

// The port of the "extender listening on 127.0.0.1:PORT" line, 0 if absent.
int ListeningPort(const Child& c) {
  std::smatch m;
  const std::string& text = c.stderr_text();
  if (!std::regex_search(text, m, std::regex("extender listening on 127\\.0\\.0\\.1:([0-9]+)\n"))) return 0;
  return std::stoi(m[1]);
}

std::vector<int> Scores(const std::string& body) {
  std::vector<int> out;
  json j = json::parse(body, nullptr, false);
  if (!j.is_array()) return {-1};
  for (const json& h : j) out.push_back(h.value("Score", -1));
  return out;
}

class SchedExtenderCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteFileAtomic(state_, sched::testing::ClusterStateJson()).ok());
    child_ = StartExtender({"--listen", "127.0.0.1:0", "--state", state_, "--max-body-mib", "1"});
    ASSERT_TRUE(child_->WaitForStderrLine("extender listening on", 60s)) << child_->stderr_text();
    port_ = ListeningPort(*child_);
    ASSERT_GT(port_, 0) << child_->stderr_text();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_connection_timeout(10, 0);
    client_->set_read_timeout(30, 0);
    client_->set_write_timeout(30, 0);
  }

  httplib::Result Post(const std::string& path, const std::string& body) {
    return client_->Post(path.c_str(), body, "application/json");
  }

  testing::ScratchDir dir_;
  std::string state_ = dir_ / "state.json";
  std::unique_ptr<Child> child_;  // killed and reaped by its destructor if a test stops early
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(SchedExtenderCliTest, AnswersKubeSchedulerReadsStateChangesRefusesBadBodiesAndStopsOnSigterm) {
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health) << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");

  // Filter, hard, with full node objects.
  const std::string hard = ArgsWithNodes(PodJson("resnet-worker-1", "resnet", "hard"), ClusterNodes());
  auto f = Post("/tenax/filter", hard);
  ASSERT_TRUE(f) << httplib::to_string(f.error());
  ASSERT_EQ(f->status, 200) << f->body;
  EXPECT_EQ(f->get_header_value("Content-Type"), "application/json");
  json fj = json::parse(f->body);
  std::vector<std::string> passed;
  for (const json& n : fj.at("Nodes").at("items")) passed.push_back(n.at("metadata").at("name"));
  EXPECT_EQ(passed, (std::vector<std::string>{"a-1", "a-2", "a-3"}));
  EXPECT_EQ(fj.at("Nodes").at("items")[1], json::parse(hard).at("Nodes").at("items")[1]);
  EXPECT_EQ(fj.at("FailedAndUnresolvableNodes").size(), 2u);
  EXPECT_EQ(
      fj.at("FailedAndUnresolvableNodes").at("b-1"),
      "tenax: zone \"zone-b\" is not \"zone-a\", where job \"resnet\" already runs (tenax.dev/zone-constraint: hard)");

  // Filter, soft, by name (nodeCacheCapable).
  auto fn = Post("/tenax/filter", ArgsWithNames(PodJson("w", "resnet"), {"a-1", "b-2", "b-1"}));
  ASSERT_TRUE(fn) << httplib::to_string(fn.error());
  ASSERT_EQ(fn->status, 200) << fn->body;
  EXPECT_EQ(json::parse(fn->body).at("NodeNames"), (json{"a-1", "b-1"}));

  // Prioritize against the placed pod on a-1.
  auto p = Post("/tenax/prioritize", ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()));
  ASSERT_TRUE(p) << httplib::to_string(p.error());
  ASSERT_EQ(p->status, 200) << p->body;
  EXPECT_EQ(Scores(p->body), (std::vector<int>{10, 7, 2, 2, 0}));
  EXPECT_EQ(json::parse(p->body)[1], (json{{"Host", "a-2"}, {"Score", 7}}));

  // A malformed body: 400 with the reason, and the server goes on.
  auto bad = Post("/tenax/filter", R"({"Pod": {"metadata": {"name": "w"}}, "NodeNames": [1]})");
  ASSERT_TRUE(bad) << httplib::to_string(bad.error());
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body).at("Error"), "\"NodeNames\"[0] must be a non-empty string");
  auto garbage = Post("/tenax/prioritize", "{\"Pod\": [");
  ASSERT_TRUE(garbage) << httplib::to_string(garbage.error());
  EXPECT_EQ(garbage->status, 400);
  EXPECT_NE(json::parse(garbage->body).at("Error").get<std::string>().find("not valid JSON"), std::string::npos);

  // Over the 1 MiB limit (--max-body-mib 1): a cluster of 1,000 full nodes.
  std::vector<sched::testing::TestNode> many;
  for (int i = 0; i < 1000; ++i) many.push_back({"node-" + std::to_string(i), i % 2 ? "zone-a" : "zone-b"});
  const std::string huge = ArgsWithNodes(PodJson("w", "resnet"), many);
  ASSERT_GT(huge.size(), size_t{1} << 20);
  auto big = Post("/tenax/filter", huge);
  ASSERT_TRUE(big) << httplib::to_string(big.error());
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(json::parse(big->body).at("Error"),
            "request body is over the extender's limit of 1048576 bytes (raise --max-body-mib for larger clusters)");

  // A path that is not a verb.
  auto wrong = Post("/filter", hard);
  ASSERT_TRUE(wrong) << httplib::to_string(wrong.error());
  EXPECT_EQ(wrong->status, 404);
  EXPECT_EQ(json::parse(wrong->body).at("Error"),
            "no route POST /filter; the extender serves POST /tenax/filter, POST /tenax/prioritize and GET /healthz");

  // Still serving after all that.
  auto again = Post("/tenax/prioritize", ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()));
  ASSERT_TRUE(again) << httplib::to_string(again.error());
  EXPECT_EQ(Scores(again->body), (std::vector<int>{10, 7, 2, 2, 0}));

  // The job moves to b-1 (the file is replaced by rename). The extender
  // stats the file on every request, so the next answer must show it; the
  // deadline only bounds a broken build.
  std::string moved = sched::testing::ClusterStateJson();
  moved.replace(moved.find(R"("resnet": ["a-1"])"), 17, R"("resnet": ["b-1"])");
  ASSERT_TRUE(WriteFileAtomic(state_, moved).ok());
  const std::vector<int> after{2, 3, 3, 10, 6};  // b-1 holds the peer; b-2 next to it; zone-a across zones
  std::vector<int> seen;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    auto r = Post("/tenax/prioritize", ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()));
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    seen = Scores(r->body);
  } while (seen != after && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(seen, after) << child_->stderr_text();

  // A broken state file is logged and the last good state stays.
  ASSERT_TRUE(WriteFileAtomic(state_, R"({"jobs": {"resnet": )").ok());
  auto kept = Post("/tenax/prioritize", ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()));
  ASSERT_TRUE(kept) << httplib::to_string(kept.error());
  EXPECT_EQ(Scores(kept->body), after);
  EXPECT_TRUE(child_->WaitForStderrLine("keeping the last good state", 30s)) << child_->stderr_text();

  child_->Signal(SIGTERM);
  EXPECT_EQ(child_->Wait(60s), 0) << child_->stderr_text();
  EXPECT_NE(child_->stderr_text().find("stopped by signal 15"), std::string::npos) << child_->stderr_text();
  EXPECT_NE(child_->stderr_text().find("refused 4"), std::string::npos) << child_->stderr_text();
}

// A second extender on a port one already serves is refused (exit 3,
// naming the address) instead of sharing the port and half of
// kube-scheduler's calls; the first goes on answering.
TEST_F(SchedExtenderCliTest, ASecondExtenderOnTheSamePortIsRefusedAndTheFirstKeepsServing) {
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  Child second({testing::TenaxBinary(), "sched", "extender", "--listen", address, "--state", state_});
  EXPECT_EQ(3, second.Wait(60s)) << second.stderr_text();
  EXPECT_NE(second.stderr_text().find("cannot listen on " + address), std::string::npos) << second.stderr_text();
  for (int i = 0; i < 4; ++i) {  // with a shared port some of these would reach the second one, or nobody
    auto res = client_->Get("/tenax/nothing-here");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(404, res->status);
    EXPECT_NE(res->body.find("/tenax/filter"), std::string::npos) << res->body;
  }
}

TEST(SchedExtenderCliFlagsTest, HelpNamesTheProtocolAndBadFlagsOrStateStopTheStart) {
  testing::ProcessResult help = testing::RunProcess({testing::TenaxBinary(), "sched", "extender", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* word : {"--listen", "--state", "--url-prefix", "--weights-throughput", "--weights-delay",
                           "--weights-loss", "--max-body-mib", "tenax.dev/job", "tenax.dev/zone-constraint",
                           "topology.kubernetes.io/zone", "prioritizeVerb prioritize"}) {
    EXPECT_NE(help.out.find(word), std::string::npos) << word << "\n" << help.out;
  }
  testing::ScratchDir dir;
  testing::ProcessResult missing = testing::RunProcess(
      {testing::TenaxBinary(), "sched", "extender", "--listen", "127.0.0.1:0", "--state", dir / "nope.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("tenax sched extender: error:"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find(dir / "nope.json"), std::string::npos) << missing.err;

  testing::ProcessResult weights =
      testing::RunProcess({testing::TenaxBinary(), "sched", "extender", "--listen", "127.0.0.1:0",
                           "--weights-throughput", "0", "--weights-delay", "0", "--weights-loss", "0"});
  EXPECT_EQ(weights.exit_code, 2);
  EXPECT_NE(weights.err.find("score weights must not all be 0"), std::string::npos) << weights.err;

  testing::ProcessResult listen =
      testing::RunProcess({testing::TenaxBinary(), "sched", "extender", "--listen", "nope"});
  EXPECT_EQ(listen.exit_code, 2);
  EXPECT_NE(listen.err.find("nope"), std::string::npos) << listen.err;
}

}  // namespace
}  // namespace tenax
