#include "tenax/core/run_records.h"

#include <gtest/gtest.h>

namespace tenax::records {
namespace {

using nlohmann::json;

// Every typed record survives the trip through JSON text, as a writer
// writes it and the report reads it back.
template <typename T, typename From>
void ExpectRoundTrip(const T& record, From from) {
  const json parsed = json::parse(ToJson(record).dump());
  std::optional<T> back = from(parsed);
  ASSERT_TRUE(back.has_value()) << parsed.dump();
  EXPECT_EQ(*back, record) << parsed.dump();
}

TEST(RunRecords, EveryTypedRecordSurvivesTheTripThroughJsonText) {
  ExpectRoundTrip(Train{3, 1200, 0.4375, 9876.5, 61.25}, TrainFrom);
  ExpectRoundTrip(Epoch{4, 3752, 0.3125, 0.8873, 240.5}, EpochFrom);
  ExpectRoundTrip(Final{15000, 0.8512, 310.75}, FinalFrom);
  ExpectRoundTrip(Notice{"generation 2: 3 workers (ranks 0, 2, 3): rank 1 lost"}, NoticeFrom);
  ExpectRoundTrip(WorkerState{"joiner 1", "rejoining", "zone-b-2", "pid 4242"}, WorkerStateFrom);
}

TEST(RunRecords, TheFieldNamesAreTheOnesTheRunDirectoryDocuments) {
  const json train = ToJson(Train{1, 50, 1.5, 100.0, 2.0});
  EXPECT_EQ(train.at("event"), "train");
  EXPECT_EQ(train.at("loss"), 1.5);
  EXPECT_EQ(train.at("samples_per_second"), 100.0);
  const json state = ToJson(WorkerState{"worker 1", "killed", "", "SIGKILL"});
  EXPECT_EQ(state.at("event"), "worker_state");
  EXPECT_EQ(state.at("worker"), "worker 1");
  EXPECT_EQ(state.at("state"), "killed");
}

TEST(RunRecords, ARecordOfAnotherKindOrWithoutItsDefiningValueIsNotRead) {
  EXPECT_FALSE(TrainFrom(ToJson(Epoch{1, 10, 1.0, 0.5, 3.0})).has_value());
  EXPECT_FALSE(EpochFrom(ToJson(Final{10, 0.5, 3.0})).has_value());
  EXPECT_FALSE(TrainFrom(json{{"event", "train"}, {"step", 10}}).has_value());               // no loss
  EXPECT_FALSE(TrainFrom(json{{"event", "train"}, {"loss", "1.5"}}).has_value());           // loss as text
  EXPECT_FALSE(FinalFrom(json{{"event", "final"}, {"test_accuracy", nullptr}}).has_value());
  EXPECT_FALSE(NoticeFrom(json{{"event", "notice"}, {"text", ""}}).has_value());
  EXPECT_FALSE(WorkerStateFrom(json{{"event", "worker_state"}, {"state", "active"}}).has_value());  // nobody's
  EXPECT_FALSE(WorkerStateFrom(json{{"event", "worker_state"}, {"worker", true}}).has_value());
  EXPECT_FALSE(TrainFrom(json::array({1, 2})).has_value());
  EXPECT_FALSE(TrainFrom(json{{"event", 7}, {"loss", 1.0}}).has_value());
}

TEST(RunRecords, OtherFieldsMissingOrMistypedReadAsDefaults) {
  auto t = TrainFrom(json{{"event", "train"}, {"loss", 0.75}, {"step", "many"}, {"epoch", 2.0}});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->loss, 0.75);
  EXPECT_EQ(t->step, 0);   // mistyped
  EXPECT_EQ(t->epoch, 2);  // an integral float
  EXPECT_EQ(t->samples_per_second, 0.0);
  auto w = WorkerStateFrom(json{{"event", "worker_state"}, {"worker", "worker 0"}, {"host", 12}});
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->worker, "worker 0");
  EXPECT_EQ(w->state, "");
  EXPECT_EQ(w->host, "");
  auto numbered = WorkerStateFrom(json{{"event", "worker_state"}, {"worker", 3}, {"state", "active"}});
  ASSERT_TRUE(numbered.has_value());
  EXPECT_EQ(numbered->worker, "worker 3");  // as older writers named it
}

}  // namespace
}  // namespace tenax::records
