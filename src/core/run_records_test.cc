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

Fault AKill() {
  Fault f;
  f.action = "kill";
  f.worker = 1;
  f.elapsed_seconds = 8.812;
  f.step = 140;
  f.source = "faults[0]";
  f.at_step = 140;
  f.signal = "SIGKILL";
  f.pid = 31337;
  return f;
}

TEST(RunRecords, EveryEventOfTheJobSurvivesTheTripThroughJsonText) {
  ExpectRoundTrip(AKill(), FaultFrom);
  Fault wipe;
  wipe.action = "kill";
  wipe.storage = "node-2";
  wipe.elapsed_seconds = 3.5;
  wipe.source = "faults[1]";
  wipe.at_seconds = 3.5;
  wipe.signal = "SIGKILL";
  wipe.pid = 99;
  wipe.wiped = false;
  wipe.wipe_error = "Permission denied";
  ExpectRoundTrip(wipe, FaultFrom);
  Fault not_fired;
  not_fired.fired = false;
  not_fired.action = "restart";
  not_fired.server = 0;
  not_fired.reason = "server 0 (pid 12) still runs; kill or preempt it first";
  not_fired.delay_seconds = 1.5;
  ExpectRoundTrip(not_fired, FaultFrom);

  Straggler slow{true, "zone-a-1/4242", 3, 1, std::nullopt, 4242, 210, 2.75, 41, 256};
  ExpectRoundTrip(slow, StragglerFrom);
  Straggler coded{false, "", std::nullopt, std::nullopt, 2, std::nullopt, 77, 1.25, std::nullopt, std::nullopt};
  ExpectRoundTrip(coded, StragglerFrom);
  ExpectRoundTrip(Generation{4, 311, {0, 2, 5}, "a member left", 812.5, 96.25, std::nullopt}, GenerationFrom);
  Recovery done{"done", "fmnist", "smart", 6, 2, 4, 6, {"stripe 3 (samples 300..399): only 3 of 6 chunks readable"}, 1 << 20, 3 << 20, 4 << 20, 0.5, 1.75, 2.5, ""};
  ExpectRoundTrip(done, RecoveryFrom);
  Recovery started;
  started.phase = "started";
  started.dataset = "fmnist";
  started.policy = "full";
  ExpectRoundTrip(started, RecoveryFrom);
  ExpectRoundTrip(Shuffle{40, json::array({json::array({0, 1}), json::array({2, 3})}), 3, 3 << 16}, ShuffleFrom);
}

TEST(RunRecords, AFaultThatDidNotFireReadsBackAsNotFiredWithItsReason) {
  Fault f = AKill();
  f.fired = false;
  f.reason = "worker 1 (pid 31337) had already exited with code 0";
  const json j = ToJson(f);
  EXPECT_EQ(j.at("event"), "fault_not_fired");
  EXPECT_EQ(j.at("worker"), 1);
  EXPECT_FALSE(j.contains("joiner"));  // absent targets stay absent
  auto back = FaultFrom(j);
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->fired);
  EXPECT_EQ(back->reason, f.reason);
  EXPECT_FALSE(FaultFrom(json{{"event", "fault"}, {"worker", 1}}).has_value());  // no action
  EXPECT_EQ(TargetName(f), "worker 1");
  Fault storage;
  storage.storage = "node-2";
  EXPECT_EQ(TargetName(storage), "storage node-2");
  EXPECT_EQ(TargetName(Fault{}), "");
}

TEST(RunRecords, TheCodedDecodersOlderStragglerRecordsAreRead) {
  auto slow = StragglerFrom(json{{"event", "straggler_detected"}, {"worker", 2}, {"ratio", 3.5}, {"step", 9}});
  ASSERT_TRUE(slow.has_value());
  EXPECT_TRUE(slow->slow);
  EXPECT_EQ(slow->worker, 2);
  EXPECT_EQ(slow->ratio, 3.5);
  auto back = StragglerFrom(json{{"event", "straggler_recovered"}, {"worker", 2}, {"step", 30}});
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(back->slow);
  EXPECT_EQ(back->step, 30);
  EXPECT_FALSE(StragglerFrom(json{{"event", "straggler"}, {"state", "sleepy"}}).has_value());
}

TEST(RunRecords, MistypedEventFieldsReadAsAbsentInsteadOfThrowing) {
  // A record from another process: nlohmann's value() would throw here.
  auto s = StragglerFrom(json{{"event", "straggler"}, {"state", "slow"}, {"ratio", "fast"}, {"pid", "x"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ratio, 0.0);
  EXPECT_FALSE(s->pid.has_value());
  auto g = GenerationFrom(json{{"event", "generation"}, {"number", 2}, {"members", json::array({1, "two", 3})}});
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->members, (std::vector<int64_t>{1, 3}));
  EXPECT_FALSE(GenerationFrom(json{{"event", "generation"}, {"number", "2"}}).has_value());
  auto r = RecoveryFrom(json{{"event", "recovery"}, {"phase", "done"}, {"chunks_rebuilt", "six"}, {"bytes", 12}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->chunks_rebuilt, 0);
  EXPECT_EQ(r->bytes, 12);
  EXPECT_FALSE(RecoveryFrom(json{{"event", "recovery"}}).has_value());
}

}  // namespace
}  // namespace tenax::records
