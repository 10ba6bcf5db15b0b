#include "tenax/job/price_table.h"

#include <gtest/gtest.h>

#include <fstream>

#include "testing.h"

namespace tenax {
namespace {

constexpr const char* kTable = R"(provider = "aws"
instance_type = "c5.2xlarge"
region = "us-east-1"
published = "2026-11-23"
source = "https://example.org/prices"
[price_per_hour]
on_demand = 0.36
preemptible = 0.09
[roles]
coordinator = "on_demand"
worker = "preemptible"
)";

TEST(PriceTableTest, ParsesPricesAndMarkets) {
  auto t = ParsePriceTable(kTable, "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ("aws", t->provider);
  EXPECT_EQ("USD", t->currency);
  EXPECT_DOUBLE_EQ(0.36, t->PricePerHour("coordinator"));
  EXPECT_DOUBLE_EQ(0.09, t->PricePerHour("worker"));
  EXPECT_DOUBLE_EQ(0.0, t->PricePerHour("server"));
}

TEST(PriceTableTest, CostIsProcessHoursTimesTheRolesPrice) {
  auto t = ParsePriceTable(kTable, "t.toml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto c = ComputeCost(*t, {{"coordinator", 3600}, {"worker", 4 * 1800}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(0.36, c->by_role.at("coordinator"));
  EXPECT_DOUBLE_EQ(0.18, c->by_role.at("worker"));  // 2 worker-hours at 0.09
  EXPECT_DOUBLE_EQ(0.54, c->total);
  const auto j = CostToJson(*t, *c);
  EXPECT_DOUBLE_EQ(0.54, j["total"].get<double>());
  EXPECT_EQ("2026-11-23", j["prices"]["published"].get<std::string>());
  auto unknown = ComputeCost(*t, {{"server", 10}});
  EXPECT_EQ(StatusCode::kInvalidArgument, unknown.status().code());
  EXPECT_NE(std::string::npos, unknown.status().message().find("server"));
  EXPECT_FALSE(ComputeCost(*t, {{"worker", -1}}).ok());
}

TEST(PriceTableTest, ATableLackingARoleIsNamed) {
  auto t = ParsePriceTable(kTable, "t.toml");
  ASSERT_TRUE(t.ok());
  Status st = CheckPriceTableCovers(*t, {"coordinator", "server", "worker"});
  EXPECT_EQ(StatusCode::kInvalidArgument, st.code());
  EXPECT_NE(std::string::npos, st.message().find("\"server\"")) << st.message();
  EXPECT_TRUE(CheckPriceTableCovers(*t, {"coordinator", "worker"}).ok());
}

TEST(PriceTableTest, BadTablesGetOneLineNamingTheKey) {
  struct Case {
    std::string from, to, key;
  };
  for (const Case& c : {Case{"preemptible = 0.09", "preemptible = 0.5", "price_per_hour.preemptible"},
                        Case{"on_demand = 0.36", "on_demand = -1", "price_per_hour.on_demand"},
                        Case{"published = \"2026-11-23\"", "published = \"last week\"", "published"},
                        Case{"worker = \"preemptible\"", "worker = \"spot\"", "roles.worker"},
                        Case{"provider = \"aws\"\n", "", "provider"},
                        Case{"[roles]", "gpu = 1\n[roles]", "gpu"}}) {
    std::string text = kTable;
    text.replace(text.find(c.from), c.from.size(), c.to);
    auto t = ParsePriceTable(text, "bad.toml");
    ASSERT_FALSE(t.ok()) << c.to;
    EXPECT_EQ(StatusCode::kInvalidArgument, t.status().code());
    EXPECT_NE(std::string::npos, t.status().message().find(c.key)) << t.status().message();
    EXPECT_NE(std::string::npos, t.status().message().find("bad.toml")) << t.status().message();
  }
  EXPECT_FALSE(ParsePriceTable("provider = ", "broken.toml").ok());
}

TEST(PriceTableTest, TheShippedTablesLoad) {
  for (const char* name : {"aws-c5.2xlarge-us-east-1.toml", "aws-c5.2xlarge-us-east-1-on-demand.toml",
                           "gcp-c2-standard-8-us-central1.toml", "gcp-c2-standard-8-us-central1-spot-workers.toml",
                           "gcp-c2-standard-8-us-central1-on-demand.toml"}) {
    auto t = LoadPriceTable(std::string(TENAX_SOURCE_DIR) + "/examples/prices/" + name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_TRUE(CheckPriceTableCovers(*t, {"coordinator", "server", "worker"}).ok());
    EXPECT_LT(t->preemptible_per_hour, t->on_demand_per_hour);
  }
  EXPECT_EQ(StatusCode::kNotFound, LoadPriceTable("/nonexistent/prices.toml").status().code());
}

}  // namespace
}  // namespace tenax
