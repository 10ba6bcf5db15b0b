#include "tenax/sched/k8s/extender.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "extender_test_bodies.h"
#include "tenax/sched/probe/link_matrix.h"

namespace tenax::sched {
namespace {

using nlohmann::json;
using testing::ArgsWithNames;
using testing::ArgsWithNodes;
using testing::ClusterNodes;
using testing::PodJson;

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<ClusterSnapshot> s = ParseClusterState(testing::ClusterStateJson());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    state_ = std::move(s).value();
  }

  // The answer as JSON, with the HTTP status checked first.
  json Answer(const ExtenderReply& r, int status = 200) {
    EXPECT_EQ(r.http_status, status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  // What ScoreNodes says for `candidates` (zones as in the cluster) against
  // `peers`, scaled to 0..10 as the extender must.
  std::vector<int> Expected(const std::vector<std::string>& candidates, const std::vector<std::string>& peers) {
    std::vector<NodeState> nodes;
    std::vector<int> cand, peer;
    auto index = [&](const std::string& name) {
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i].name == name) return static_cast<int>(i);
      }
      NodeState n;
      n.name = name;
      n.zone = state_.zones.count(name) ? state_.zones.at(name) : "";
      nodes.push_back(n);
      return static_cast<int>(nodes.size() - 1);
    };
    for (const auto& c : candidates) cand.push_back(index(c));
    for (const auto& p : peers) peer.push_back(index(p));
    std::vector<int> out;
    for (const ScoredNode& s : ScoreNodes(nodes, cand, peer, *state_.links, ScoreWeights{})) {
      out.push_back(static_cast<int>(std::lround(s.score / 10.0)));
    }
    return out;
  }

  static std::vector<int> Scores(const json& list, std::vector<std::string>* hosts = nullptr) {
    std::vector<int> out;
    for (const json& h : list) {
      out.push_back(h.at("Score").get<int>());
      if (hosts) hosts->push_back(h.at("Host").get<std::string>());
    }
    return out;
  }

  ClusterSnapshot state_;
  ExtenderOptions options_;
};

TEST_F(ExtenderTest, ParsesAFullKubeSchedulerBody) {
  const std::string body = ArgsWithNodes(PodJson("resnet-worker-2", "resnet", "hard", "b-1, b-2,,"), ClusterNodes());
  Result<ExtenderArgs> a = ParseExtenderArgs(body);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->pod.Id(), "ml/resnet-worker-2");
  EXPECT_EQ(a->pod.job, "resnet");
  EXPECT_EQ(a->pod.role, "worker");
  EXPECT_EQ(a->pod.zone, ZoneConstraint::kHard);
  EXPECT_EQ(a->pod.storage_nodes, (std::vector<std::string>{"b-1", "b-2"}));
  EXPECT_TRUE(a->pod.problem.empty());
  EXPECT_FALSE(a->by_name);
  ASSERT_EQ(a->nodes.size(), 5u);
  EXPECT_EQ(a->nodes[3].name, "b-1");
  EXPECT_EQ(a->nodes[3].zone, "zone-b");
  EXPECT_TRUE(a->nodes[3].zone_labelled);
  // Keys as Go's encoding/json matches them: case-insensitively too.
  Result<ExtenderArgs> lower = ParseExtenderArgs(R"({"pod":)" + PodJson("p", "") + R"(,"nodenames":["x"]})");
  ASSERT_TRUE(lower.ok()) << lower.status().ToString();
  EXPECT_TRUE(lower->by_name);
  EXPECT_EQ(lower->nodes[0].name, "x");
  EXPECT_EQ(lower->pod.zone, ZoneConstraint::kSoft);  // the default
}

TEST_F(ExtenderTest, HardFilterKeepsTheJobsZoneAndDropsUnreachableLinksInRequestOrder) {
  const std::string body = ArgsWithNodes(PodJson("resnet-worker-1", "resnet", "hard"), ClusterNodes());
  ExtenderReply r = HandleFilter(body, state_, options_);
  EXPECT_EQ(r.pod, "ml/resnet-worker-1");
  EXPECT_EQ(r.job, "resnet");
  json j = Answer(r);
  ASSERT_TRUE(j.at("Nodes").is_object()) << r.body;
  EXPECT_TRUE(j.at("NodeNames").is_null());
  EXPECT_EQ(j.at("Error"), "");
  EXPECT_EQ(j.at("FailedNodes"), json::object());
  // The passing nodes come back as sent, in order.
  json sent = json::parse(body);
  const json& items = j.at("Nodes").at("items");
  ASSERT_EQ(items.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(items[i], sent["Nodes"]["items"][i]) << i;
  const json& failed = j.at("FailedAndUnresolvableNodes");
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(
      failed.at("b-1"),
      "tenax: zone \"zone-b\" is not \"zone-a\", where job \"resnet\" already runs (tenax.dev/zone-constraint: hard)");
  EXPECT_NE(failed.at("b-2").get<std::string>().find("zone \"zone-b\" is not \"zone-a\""), std::string::npos);
  EXPECT_EQ(r.summary.substr(0, 17), "3 of 5 nodes pass");
}

TEST_F(ExtenderTest, SoftFilterSpansZonesButNotAnUnreachableLink) {
  ExtenderReply r = HandleFilter(ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()), state_, options_);
  json j = Answer(r);
  std::vector<std::string> passed;
  for (const json& n : j.at("Nodes").at("items")) passed.push_back(n.at("metadata").at("name"));
  EXPECT_EQ(passed, (std::vector<std::string>{"a-1", "a-2", "a-3", "b-1"}));
  EXPECT_EQ(j.at("FailedAndUnresolvableNodes"),
            (json{{"b-2",
                   "tenax: the link to \"a-1\", where job \"resnet\" runs, is unreachable (the last probes got "
                   "no answer)"}}));
}

TEST_F(ExtenderTest, NodeNamesFilterTakesZonesFromTheStateAndAnswersForUnknownNodes) {
  const std::vector<std::string> names{"b-2", "a-2", "x-9", "a-1", "b-1"};
  json hard = Answer(HandleFilter(ArgsWithNames(PodJson("w", "resnet", "hard"), names), state_, options_));
  EXPECT_TRUE(hard.at("Nodes").is_null());
  EXPECT_EQ(hard.at("NodeNames"), (json{"a-2", "a-1"}));
  const json& failed = hard.at("FailedAndUnresolvableNodes");
  ASSERT_EQ(failed.size(), 3u);
  EXPECT_TRUE(failed.contains("b-1") && failed.contains("b-2"));
  EXPECT_EQ(failed.at("x-9"),
            "tenax: node has no topology.kubernetes.io/zone label (nor a zone in the cluster state); job \"resnet\" "
            "runs in zone \"zone-a\" (tenax.dev/zone-constraint: hard)");
  // Every name is answered: passed or failed.
  EXPECT_EQ(hard.at("NodeNames").size() + failed.size(), names.size());

  // Soft: the unknown node is no error, its zone is unknown and it passes.
  json soft = Answer(HandleFilter(ArgsWithNames(PodJson("w", "resnet"), names), state_, options_));
  EXPECT_EQ(soft.at("NodeNames"), (json{"a-2", "x-9", "a-1", "b-1"}));
  EXPECT_EQ(soft.at("FailedAndUnresolvableNodes").size(), 1u);
  EXPECT_TRUE(soft.at("FailedAndUnresolvableNodes").contains("b-2"));
}

TEST_F(ExtenderTest, AHardJobWithNothingPlacedYetPassesEveryZone) {
  json j = Answer(HandleFilter(ArgsWithNodes(PodJson("w", "newjob", "hard"), ClusterNodes()), state_, options_));
  EXPECT_EQ(j.at("Nodes").at("items").size(), 5u);
  EXPECT_EQ(j.at("FailedAndUnresolvableNodes"), json::object());
}

TEST_F(ExtenderTest, PrioritizeScoresAgainstThePlacedPeersScaledToTen) {
  ExtenderReply r = HandlePrioritize(ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()), state_, options_);
  json j = Answer(r);
  ASSERT_TRUE(j.is_array()) << r.body;
  std::vector<std::string> hosts;
  const std::vector<int> scores = Scores(j, &hosts);
  EXPECT_EQ(hosts, (std::vector<std::string>{"a-1", "a-2", "a-3", "b-1", "b-2"}));
  EXPECT_EQ(scores, Expected({"a-1", "a-2", "a-3", "b-1", "b-2"}, {"a-1"}));
  // By hand (docs/placement.md's formula): a-1 holds the peer (perfect link,
  // 10); a-2 65.8 -> 7; a-3 22.5 -> 2; b-1 21.7 -> 2; b-2 unreachable -> 0.
  EXPECT_EQ(scores, (std::vector<int>{10, 7, 2, 2, 0}));
  EXPECT_EQ(j[0], (json{{"Host", "a-1"}, {"Score", 10}}));
  // The same through NodeNames (zones from the state).
  json by_name =
      Answer(HandlePrioritize(ArgsWithNames(PodJson("w", "resnet"), {"b-2", "a-2", "a-1"}), state_, options_));
  EXPECT_EQ(Scores(by_name), Expected({"b-2", "a-2", "a-1"}, {"a-1"}));
  // Among these three a-2 is the worst reachable in throughput and delay: only loss (all 0) counts, 20 -> 2.
  EXPECT_EQ(Scores(by_name), (std::vector<int>{0, 2, 10}));
}

TEST_F(ExtenderTest, PrioritizeUsesStorageNodesThenCentralityBeforeTheFirstPod) {
  json storage =
      Answer(HandlePrioritize(ArgsWithNodes(PodJson("w", "bert", "", "b-1"), ClusterNodes()), state_, options_));
  EXPECT_EQ(Scores(storage), Expected({"a-1", "a-2", "a-3", "b-1", "b-2"}, {"b-1"}));
  // b-1 holds the data: 10; b-2 next to it 6; zone-a behind the cross-zone link.
  EXPECT_EQ(Scores(storage), (std::vector<int>{2, 3, 3, 10, 6}));

  json central = Answer(HandlePrioritize(ArgsWithNodes(PodJson("w", "fresh"), ClusterNodes()), state_, options_));
  std::vector<std::string> all{"a-1", "a-2", "a-3", "b-1", "b-2"};
  EXPECT_EQ(Scores(central), Expected(all, all));
}

TEST_F(ExtenderTest, WeightsChangeTheScores) {
  options_.weights = ScoreWeights{0.0, 1.0, 0.0};  // delay alone
  json j = Answer(HandlePrioritize(ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes()), state_, options_));
  // Delays to a-1: 0, 0.1, 0.3, 1.2 (b-2 unreachable): 1 - d/1.2.
  EXPECT_EQ(Scores(j), (std::vector<int>{10, 9, 8, 0, 0}));
}

TEST_F(ExtenderTest, APodWithoutTheJobLabelIsNotOurs) {
  const std::string body = ArgsWithNodes(PodJson("nginx-7d9c", ""), ClusterNodes());
  ExtenderReply f = HandleFilter(body, state_, options_);
  json j = Answer(f);
  EXPECT_EQ(f.job, "");
  EXPECT_EQ(j.at("Nodes"), json::parse(body).at("Nodes"));
  EXPECT_EQ(j.at("FailedAndUnresolvableNodes"), json::object());
  EXPECT_NE(f.summary.find("not a tenax pod"), std::string::npos);
  json p = Answer(HandlePrioritize(body, state_, options_));
  EXPECT_EQ(Scores(p), (std::vector<int>{0, 0, 0, 0, 0}));
}

TEST_F(ExtenderTest, AnInvalidZoneConstraintFailsEveryNodeWithTheReason) {
  ExtenderReply r = HandleFilter(ArgsWithNames(PodJson("w", "resnet", "strict"), {"a-1", "a-2"}), state_, options_);
  json j = Answer(r);
  EXPECT_EQ(j.at("NodeNames"), json::array());
  ASSERT_EQ(j.at("FailedAndUnresolvableNodes").size(), 2u);
  EXPECT_EQ(j.at("FailedAndUnresolvableNodes").at("a-1"),
            "tenax: annotation tenax.dev/zone-constraint: zone constraint 'strict' is unknown: use \"hard\" (all in "
            "one zone, or wait) or \"soft\" (fewest zones)");
  json p = Answer(HandlePrioritize(ArgsWithNames(PodJson("w", "resnet", "strict"), {"a-1", "a-2"}), state_, options_));
  EXPECT_EQ(Scores(p), (std::vector<int>{0, 0}));
}

TEST_F(ExtenderTest, MalformedBodiesGet400WithTheReason) {
  const std::string pod = PodJson("w", "resnet");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "request body is not valid JSON"},
      {R"({"Pod": )", "request body is not valid JSON"},
      {"[1,2]", "must be a JSON object ExtenderArgs"},
      {R"({"NodeNames": ["a-1"]})", "ExtenderArgs has no \"Pod\""},
      {R"({"Pod": null, "NodeNames": ["a-1"]})", "ExtenderArgs has no \"Pod\""},
      {R"({"Pod": 7, "NodeNames": []})", "\"Pod\" must be a v1.Pod object"},
      {R"({"Pod": {"spec": {}}, "NodeNames": []})", "\"Pod\" has no \"metadata\" object"},
      {R"({"Pod": {"metadata": {"name": 3}}, "NodeNames": []})", "\"Pod\".metadata.name must be a non-empty string"},
      {R"({"Pod": {"metadata": {"name": "w", "labels": {"tenax.dev/job": 3}}}, "NodeNames": []})",
       "pod w: metadata.labels[\"tenax.dev/job\"] must be a string"},
      {R"({"Pod": {"metadata": {"name": "w", "annotations": []}}, "NodeNames": []})",
       "pod w: metadata.annotations must be an object of strings"},
      {R"({"Pod": )" + pod + "}", "neither \"Nodes\" nor \"NodeNames\""},
      {R"({"Pod": )" + pod + R"(, "Nodes": null, "NodeNames": null})", "neither \"Nodes\" nor \"NodeNames\""},
      {R"({"Pod": )" + pod + R"(, "Nodes": {"items": []}, "NodeNames": ["a-1"]})", "both \"Nodes\" and \"NodeNames\""},
      {R"({"Pod": )" + pod + R"(, "NodeNames": "a-1"})", "\"NodeNames\" must be an array"},
      {R"({"Pod": )" + pod + R"(, "NodeNames": ["a-1", 2]})", "\"NodeNames\"[1] must be a non-empty string"},
      {R"({"Pod": )" + pod + R"(, "Nodes": [1]})", "\"Nodes\" must be a v1.NodeList object"},
      {R"({"Pod": )" + pod + R"(, "Nodes": {"items": {}}})", "\"Nodes\".items must be an array"},
      {R"({"Pod": )" + pod + R"(, "Nodes": {"items": [{"metadata": {}}]}})",
       "\"Nodes\".items[0].metadata.name must be a non-empty string"},
      {R"({"Pod": )" + pod +
           R"(, "Nodes": {"items": [{"metadata": {"name": "n", "labels": {"topology.kubernetes.io/zone": 1}}}]}})",
       "node n: metadata.labels[\"topology.kubernetes.io/zone\"] must be a string"},
      {R"({"Pod": )" + pod + R"(, "NodeNames": ["a-1", "a-2", "a-1"]})",
       "node \"a-1\" is a candidate twice (entries 0 and 2); node names are unique"},
      {std::string(100000, '['), "nests JSON deeper than 128 levels"},
  };
  for (const auto& [body, reason] : cases) {
    for (bool filter : {true, false}) {
      ExtenderReply r = filter ? HandleFilter(body, state_, options_) : HandlePrioritize(body, state_, options_);
      EXPECT_EQ(r.http_status, 400) << body.substr(0, 200);
      json j = json::parse(r.body, nullptr, false);
      ASSERT_TRUE(j.is_object() && j.contains("Error")) << r.body;
      EXPECT_NE(j["Error"].get<std::string>().find(reason), std::string::npos)
          << "body " << body.substr(0, 200) << "\nanswer " << r.body;
    }
  }
}

TEST_F(ExtenderTest, AReasonQuotingAHugeTokenIsClippedToOneKiB) {
  const std::string body = R"({"Pod": ")" + std::string(1 << 20, 'x');  // an unterminated 1 MiB string
  ExtenderReply r = HandleFilter(body, state_, options_);
  EXPECT_EQ(r.http_status, 400);
  const std::string reason = json::parse(r.body).at("Error");
  EXPECT_EQ(reason.size(), 1024u + 3);
  EXPECT_EQ(reason.substr(0, 30), "request body is not valid JSON");
  EXPECT_EQ(reason.substr(1024), "...");
  EXPECT_EQ(r.summary, reason);
}

TEST_F(ExtenderTest, ABodyOverTheLimitIsRefusedBeforeParsing) {
  options_.max_body_bytes = 4096;
  const std::string body = ArgsWithNodes(PodJson("w", "resnet"), ClusterNodes());
  ASSERT_GT(body.size(), 4096u);
  ExtenderReply r = HandleFilter(body, state_, options_);
  EXPECT_EQ(r.http_status, 413);
  EXPECT_EQ(json::parse(r.body).at("Error"), "request body is " + std::to_string(body.size()) +
                                                 " bytes; the extender accepts at most 4096 (raise --max-body-mib for "
                                                 "larger clusters)");
  // Exactly at the limit is fine (here: a small, valid body).
  const std::string small = ArgsWithNames(R"({"metadata":{"name":"w"}})", {"a-1"});
  options_.max_body_bytes = small.size();
  EXPECT_EQ(HandlePrioritize(small, state_, options_).http_status, 200);
}

TEST(ClusterStateTest, ParsesTheFileFormatAndRefusesTyposWithTheKey) {
  Result<ClusterSnapshot> s = ParseClusterState(testing::ClusterStateJson());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->jobs.at("resnet"), (std::vector<std::string>{"a-1"}));
  EXPECT_EQ(s->zones.at("b-2"), "zone-b");
  NodeState a1{"a-1", "zone-a"}, a2{"a-2", "zone-a"}, b2{"b-2", "zone-b"};
  auto l = s->links->Link(a1, a2);
  ASSERT_TRUE(l.has_value());
  EXPECT_DOUBLE_EQ(l->throughput_gbps, 9.5);
  EXPECT_FALSE(s->links->Link(a1, b2)->reachable);

  Result<ClusterSnapshot> empty = ParseClusterState("{}");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->jobs.empty());
  EXPECT_FALSE(empty->links->Link(a1, a2).has_value());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{", "not valid JSON"},
      {R"({"job": {}})", "unknown key \"job\" (known: half_life_seconds, links, jobs, zones)"},
      {R"({"jobs": {"r": "a-1"}})", "jobs[\"r\"] must be an array of node names"},
      {R"({"jobs": {"r": [""]}})", "must hold non-empty node names"},
      {R"({"zones": {"a-1": 3}})", "zones[\"a-1\"] must be a zone name"},
      {R"({"links": [{"a": "x", "b": "x", "rtt_ms": 1, "loss": 0, "throughput_gbps": 1}]})",
       "a link joins two different nodes"},
  };
  for (const auto& [text, reason] : bad) {
    Result<ClusterSnapshot> r = ParseClusterState(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(reason), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace tenax::sched
