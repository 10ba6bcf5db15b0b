// The coordinator's /metrics endpoint over real HTTP (httplib's client on
// loopback): what it serves, what it refuses, and addresses it cannot use.
#include "metrics_endpoint.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>

#include "testing.h"

namespace tenax::coord {
namespace {

httplib::Result Get(uint16_t port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(10);
  client.set_read_timeout(10);
  return client.Get(path.c_str());
}

TEST(MetricsEndpoint, ServesThePublishedSnapshotAsPrometheusText) {
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("127.0.0.1:0"));
  ASSERT_GT(endpoint->port(), 0);
  EXPECT_EQ("http://127.0.0.1:" + std::to_string(endpoint->port()) + "/metrics", endpoint->Url());

  auto before = Get(endpoint->port(), "/metrics");
  ASSERT_TRUE(before) << httplib::to_string(before.error());
  EXPECT_EQ(200, before->status);
  EXPECT_EQ(RenderJobMetrics(JobMetrics{}), before->body);

  JobMetrics m;
  m.job_id = "served";
  m.step = 42;
  m.total_steps = 100;
  m.workers = 2;
  endpoint->Publish(m);
  auto r = Get(endpoint->port(), "/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(200, r->status);
  EXPECT_EQ(kPrometheusContentType, r->get_header_value("Content-Type"));
  EXPECT_EQ(RenderJobMetrics(m), r->body);
  EXPECT_NE(std::string::npos, r->body.find("tenax_job_step{job=\"served\"} 42\n"));
}

TEST(MetricsEndpoint, AReportsAgeKeepsGrowingBetweenPublications) {
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("127.0.0.1:0"));
  JobMetrics m;
  m.job_id = "j";
  m.worker_reports = {{0, 7, 0.5, 3.0}};
  endpoint->Publish(m);
  auto r = Get(endpoint->port(), "/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  const std::string key = "tenax_worker_last_report_age_seconds{job=\"j\",rank=\"0\"} ";
  const size_t at = r->body.find(key);
  ASSERT_NE(std::string::npos, at) << r->body;
  const double age = std::stod(r->body.substr(at + key.size()));
  EXPECT_GE(age, 3.0);
  EXPECT_LT(age, 3.0 + 60.0);  // not an absolute time
}

TEST(MetricsEndpoint, OtherPathsAndMethodsAre404) {
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("127.0.0.1:0"));
  for (const char* path : {"/", "/metrics/", "/metricsx", "/healthz"}) {
    auto r = Get(endpoint->port(), path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_EQ(404, r->status) << path;
    EXPECT_NE(std::string::npos, r->body.find("GET /metrics")) << r->body;
  }
  httplib::Client client("127.0.0.1", endpoint->port());
  client.set_read_timeout(10);
  auto post = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(post) << httplib::to_string(post.error());
  EXPECT_EQ(404, post->status);
}

TEST(MetricsEndpoint, RefusesAddressesItCannotUseWithWhatWouldWork) {
  for (const char* bad : {"nonsense", "127.0.0.1:", "127.0.0.1:99999", ":9400"}) {
    auto e = MetricsEndpoint::Start(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(StatusCode::kInvalidArgument, e.status().code()) << bad;
    EXPECT_NE(std::string::npos, e.status().message().find("port 0")) << e.status().message();
  }
  ASSERT_OK_AND_ASSIGN(auto first, MetricsEndpoint::Start("127.0.0.1:0"));
  auto second = MetricsEndpoint::Start("127.0.0.1:" + std::to_string(first->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(StatusCode::kInvalidArgument, second.status().code());
  EXPECT_NE(std::string::npos, second.status().message().find("in use")) << second.status().message();
}

TEST(MetricsEndpoint, StopEndsServing) {
  ASSERT_OK_AND_ASSIGN(auto endpoint, MetricsEndpoint::Start("127.0.0.1:0"));
  const uint16_t port = endpoint->port();
  endpoint->Stop();
  endpoint->Stop();  // idempotent
  EXPECT_FALSE(Get(port, "/metrics"));
}

}  // namespace
}  // namespace tenax::coord
