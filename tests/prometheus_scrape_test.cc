// A real coordinator's Prometheus metrics, scraped by Debian's real
// Prometheus server: `tenax coordinator --metrics-listen 127.0.0.1:0` with
// two `tenax worker` processes training, GET /metrics read directly, then
// /usr/bin/prometheus scraping it every second on loopback and the tenax
// metrics read back through Prometheus's own HTTP query API. Every child
// (coordinator, workers, prometheus) is killed and reaped by its Child
// handle, also when an assertion fails.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <httplib.h>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "testing.h"

namespace tenax::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr int64_t kTotalSteps = 100000;  // trains far longer than the test: it is stopped at the end

// A 2-worker sync job of the mlp that runs until stopped; logs only at
// epoch ends (the children's stderr is read only when waited on).
std::string WriteJob(const ScratchDir& dir, const std::string& job_id) {
  const std::string path = dir / (job_id + ".toml");
  std::ofstream out(path);
  out << "mode = \"sync\"\n"
      << "[cluster]\nworkers = 2\njob_id = \"" << job_id << "\"\npeer_timeout_seconds = 5\n"
      << "join_timeout_seconds = 120\nstep_timeout_seconds = 60\n"
      << "[data]\ntrain_limit = 8192\ntest_limit = 500\n"
      << "[model]\nname = \"mlp\"\n"
      << "[train]\nepochs = 1000\nmax_steps = " << kTotalSteps << "\nbatch_size = 32\nthreads = 1\nlr = 0.05\n"
      << "[log]\nevery_steps = 100000\n";
  return path;
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// The value of the sample `series` (name{labels} exactly as exposed).
std::optional<double> SampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

struct Scrape {
  int status = 0;
  std::string content_type;
  std::string body;
};

std::optional<Scrape> GetMetrics(uint16_t port, const std::string& path = "/metrics") {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto r = client.Get(path.c_str());
  if (!r) return std::nullopt;
  return Scrape{r->status, r->get_header_value("Content-Type"), r->body};
}

// A port that was free a moment ago (the kernel does not hand it out again
// at once; a clash shows as Prometheus exiting, and the test retries).
uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// One instant vector of Prometheus's query API: (labels, value) per series.
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::optional<std::vector<PromSample>> PromQuery(uint16_t port, const std::string& query, std::string* error) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto r = client.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});
  if (!r) {
    *error = "no answer: " + httplib::to_string(r.error());
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (r->status != 200 || j.is_discarded() || j.value("status", "") != "success") {
    *error = "HTTP " + std::to_string(r->status) + ": " + r->body;
    return std::nullopt;
  }
  std::vector<PromSample> out;
  for (const auto& e : j["data"]["result"]) {
    PromSample s;
    for (const auto& [k, v] : e["metric"].items()) s.labels[k] = v.get<std::string>();
    s.value = std::stod(e["value"][1].get<std::string>());  // [unix time, "value"]
    out.push_back(std::move(s));
  }
  return out;
}

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TENAX_SECRET", "prometheus-test-secret-0123456789", 1); }
};

TEST_F(PrometheusScrapeTest, PrometheusScrapesTheCoordinatorAndAnswersWithItsNumbers) {
  ASSERT_EQ(0, ::access(kPrometheus, X_OK))
      << kPrometheus << " is missing: the Prometheus server is required (scripts/install-deps.sh installs it)";
  ScratchDir dir;  // first: removed after every child is gone
  const std::string job_id = "prom-scrape";
  const std::string job = WriteJob(dir, job_id);

  // The coordinator with its metrics on any free loopback port.
  Child coordinator({TenaxBinary(), "coordinator", "--job", job, "--state", dir / "state.db", "--port", "0",
                     "--port-file", dir / "port", "--metrics-listen", "127.0.0.1:0", "--metrics-port-file",
                     dir / "metrics-port"});
  ASSERT_TRUE(coordinator.WaitForStderrLine("Prometheus metrics at http://127.0.0.1:")) << coordinator.stderr_text();
  ASSERT_TRUE(coordinator.WaitForStderrLine("listening on")) << coordinator.stderr_text();
  const std::string coordinator_port = FirstLine(ReadText(dir / "port"));
  const int metrics_port = std::stoi(FirstLine(ReadText(dir / "metrics-port")));
  ASSERT_GT(metrics_port, 0);
  EXPECT_NE(std::string::npos,
            coordinator.stderr_text().find("http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics"))
      << coordinator.stderr_text();

  std::vector<std::unique_ptr<Child>> workers;
  for (int r = 0; r < 2; ++r) {
    workers.push_back(std::make_unique<Child>(std::vector<std::string>{
        TenaxBinary(), "worker", "--job", job, "--coordinator", "127.0.0.1:" + coordinator_port, "--rank",
        std::to_string(r), "--out", dir / "run"}));
  }

  // GET /metrics directly until rank 0 has reported steps (libtorch start-up
  // and the join take a while on a loaded machine).
  const std::string step0 = "tenax_worker_step{job=\"" + job_id + "\",rank=\"0\"}";
  std::optional<Scrape> direct;
  for (const auto deadline = Clock::now() + 150s;;) {
    direct = GetMetrics(static_cast<uint16_t>(metrics_port));
    auto v = direct ? SampleValue(direct->body, step0) : std::nullopt;
    if (v && *v > 0) break;
    ASSERT_LT(Clock::now(), deadline) << "no progress of rank 0 in /metrics:\n"
                                      << (direct ? direct->body : "(no answer)") << "\ncoordinator:\n"
                                      << coordinator.stderr_text();
    std::this_thread::sleep_for(200ms);  // poll pacing, bounded by the deadline
  }
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(200, direct->status);
  EXPECT_EQ("text/plain; version=0.0.4; charset=utf-8", direct->content_type);
  const std::string job_label = "{job=\"" + job_id + "\"}";
  const std::optional<double> served_step = SampleValue(direct->body, "tenax_job_step" + job_label);
  ASSERT_TRUE(served_step.has_value()) << direct->body;
  EXPECT_GE(*served_step, *SampleValue(direct->body, step0));  // the furthest step
  EXPECT_EQ(std::optional<double>(kTotalSteps), SampleValue(direct->body, "tenax_job_total_steps" + job_label));
  EXPECT_EQ(std::optional<double>(2), SampleValue(direct->body, "tenax_workers" + job_label));
  EXPECT_EQ(std::optional<double>(0), SampleValue(direct->body, "tenax_job_done" + job_label));
  EXPECT_EQ(std::optional<double>(0), SampleValue(direct->body, "tenax_job_failed" + job_label));
  const auto step_seconds =
      SampleValue(direct->body, "tenax_worker_step_seconds{job=\"" + job_id + "\",rank=\"0\"}");
  ASSERT_TRUE(step_seconds.has_value()) << direct->body;
  EXPECT_GT(*step_seconds, 0) << "workers measure their step times";
  EXPECT_LT(*step_seconds, 60) << "step_timeout_seconds bounds a step";
  const auto sps = SampleValue(direct->body, "tenax_samples_per_second" + job_label);
  ASSERT_TRUE(sps.has_value());
  EXPECT_GT(*sps, 0);
  auto other = GetMetrics(static_cast<uint16_t>(metrics_port), "/");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(404, other->status);

  // Prometheus, loopback only, scraping the coordinator every second.
  // honor_labels: the series keep tenax's job="<job id>" label.
  std::ofstream(dir / "prometheus.yml") << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                        << "scrape_configs:\n  - job_name: tenax\n    honor_labels: true\n"
                                        << "    scrape_interval: 1s\n    scrape_timeout: 1s\n"
                                        << "    static_configs:\n      - targets: ['127.0.0.1:" << metrics_port
                                        << "']\n";
  std::unique_ptr<Child> prometheus;
  uint16_t prom_port = 0;
  for (int attempt = 0; attempt < 3 && !prometheus; ++attempt) {
    prom_port = FreePort();
    ASSERT_GT(prom_port, 0);
    auto p = std::make_unique<Child>(std::vector<std::string>{
        kPrometheus, "--config.file=" + dir / "prometheus.yml", "--storage.tsdb.path=" + dir / "data",
        "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)});
    if (p->WaitForStderrLine("Server is ready to receive web requests.", 120s)) {
      prometheus = std::move(p);
    } else {
      std::cerr << "prometheus did not start (attempt " << attempt + 1 << "):\n" << p->stderr_text();
    }
  }
  ASSERT_TRUE(prometheus) << "prometheus never became ready";

  // Ask Prometheus until it has scraped a step.
  const std::string query = "tenax_job_step{job=\"" + job_id + "\"}";
  std::vector<PromSample> result;
  std::string error;
  for (const auto deadline = Clock::now() + 90s;;) {
    auto r = PromQuery(prom_port, query, &error);
    if (r && !r->empty() && r->front().value > 0) {
      result = *r;
      break;
    }
    ASSERT_LT(Clock::now(), deadline) << "Prometheus never answered " << query << " with a step > 0; last: " << error
                                      << "\ntargets: "
                                      << [&] {
                                           httplib::Client c("127.0.0.1", prom_port);
                                           auto t = c.Get("/api/v1/targets");
                                           return t ? t->body : std::string("(no answer)");
                                         }()
                                      << "\nprometheus:\n"
                                      << prometheus->stderr_text();
    std::this_thread::sleep_for(250ms);  // poll pacing, bounded by the deadline
  }
  // What the coordinator serves now: the step only grows, so Prometheus's
  // value lies between the coordinator's before Prometheus started and now.
  auto after = GetMetrics(static_cast<uint16_t>(metrics_port));
  ASSERT_TRUE(after.has_value());
  const auto served_after = SampleValue(after->body, "tenax_job_step" + job_label);
  ASSERT_TRUE(served_after.has_value()) << after->body;
  ASSERT_EQ(1u, result.size());
  EXPECT_EQ(job_id, result[0].labels["job"]);
  EXPECT_EQ("127.0.0.1:" + std::to_string(metrics_port), result[0].labels["instance"]);
  EXPECT_EQ("tenax_job_step", result[0].labels["__name__"]);
  EXPECT_GE(result[0].value, *served_step);
  EXPECT_LE(result[0].value, *served_after);
  EXPECT_EQ(result[0].value, std::floor(result[0].value)) << "a step is an integer";

  // Constant numbers come back exactly, and the per-worker series by rank.
  auto total = PromQuery(prom_port, "tenax_job_total_steps{job=\"" + job_id + "\"}", &error);
  ASSERT_TRUE(total.has_value()) << error;
  ASSERT_EQ(1u, total->size());
  EXPECT_EQ(kTotalSteps, total->front().value);
  auto members = PromQuery(prom_port, "tenax_workers{job=\"" + job_id + "\"}", &error);
  ASSERT_TRUE(members.has_value()) << error;
  ASSERT_EQ(1u, members->size());
  EXPECT_EQ(2, members->front().value);
  auto per_worker = PromQuery(prom_port, "tenax_worker_step{job=\"" + job_id + "\"}", &error);
  ASSERT_TRUE(per_worker.has_value()) << error;
  ASSERT_EQ(2u, per_worker->size());
  std::set<std::string> ranks;
  for (const PromSample& s : *per_worker) {
    ranks.insert(s.labels.at("rank"));
    EXPECT_GT(s.value, 0);
    EXPECT_LE(s.value, *served_after);
  }
  EXPECT_EQ((std::set<std::string>{"0", "1"}), ranks);

  // Stop everything, one process at a time so that each exit has one cause
  // and its documented status (docs/config.md, "Exit status"); the
  // destructors also kill whatever is still running.
  prometheus->Signal(SIGTERM);
  EXPECT_EQ(0, prometheus->Wait(60s)) << prometheus->stderr_text();
  // The coordinator first: the workers of a running sync job do not need it
  // (they try to rejoin it, and keep training meanwhile).
  coordinator.Signal(SIGTERM);
  EXPECT_EQ(130, coordinator.Wait(60s)) << coordinator.stderr_text();
  // Rank 0 stopped by its signal: 130. Rank 1 is not signalled: its peer is
  // gone, so its next collective fails and it ends on its own with 3
  // ("another process or the network failed"). Signalling both would let
  // rank 1 end either way, depending on which it noticed first.
  workers[0]->Signal(SIGTERM);
  EXPECT_EQ(130, workers[0]->Wait(60s)) << workers[0]->stderr_text();
  // Its step deadline (step_timeout_seconds = 60) bounds the wait for a
  // collective, were the reset connection not noticed.
  EXPECT_EQ(3, workers[1]->Wait(120s)) << workers[1]->stderr_text();
}

TEST_F(PrometheusScrapeTest, BadMetricsAddressesAreRefusedWithExitStatus2) {
  ScratchDir dir;
  const std::string job = WriteJob(dir, "prom-bad");
  auto r = RunProcess({TenaxBinary(), "coordinator", "--job", job, "--state", dir / "state.db", "--metrics-listen",
                       "localhost"});
  EXPECT_EQ(2, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("--metrics-listen")) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("port 0")) << r.err;
  auto orphan = RunProcess({TenaxBinary(), "coordinator", "--job", job, "--state", dir / "state.db",
                            "--metrics-port-file", dir / "mp"});
  EXPECT_EQ(2, orphan.exit_code) << orphan.err;
  EXPECT_NE(std::string::npos, orphan.err.find("--metrics-port-file needs --metrics-listen")) << orphan.err;
  // A port that is taken: refused before the coordinator serves anyone.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(0, ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a));
  ASSERT_EQ(0, ::listen(fd, 1));
  ASSERT_EQ(0, ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len));
  auto taken = RunProcess({TenaxBinary(), "coordinator", "--job", job, "--state", dir / "state2.db", "--port", "0",
                           "--metrics-listen", "127.0.0.1:" + std::to_string(ntohs(a.sin_port))});
  ::close(fd);
  EXPECT_EQ(2, taken.exit_code) << taken.err;
  EXPECT_NE(std::string::npos, taken.err.find("in use")) << taken.err;
  EXPECT_EQ(std::string::npos, taken.err.find("listening on")) << "refused before the coordinator serves";
  EXPECT_FALSE(std::ifstream(dir / "state2.db").good()) << "refused before any state is written";
  EXPECT_FALSE(std::ifstream(dir / "mp").good());
}

}  // namespace
}  // namespace tenax::testing
