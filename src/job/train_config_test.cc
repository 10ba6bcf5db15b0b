#include "tenax/job/train_config.h"

#include <gtest/gtest.h>

#include <fstream>

namespace tenax {
namespace {

Result<TrainConfig> Parse(std::string_view text) {
  auto doc = ConfigDoc::Parse(text, "job.toml");
  if (!doc.ok()) return doc.status();
  return ParseTrainConfig(*doc);
}

TEST(TrainConfigTest, DefaultsAreTheDocumentedOnes) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mode, "single");
  EXPECT_EQ(c->model, "cnn");
  EXPECT_EQ(c->data_dir, "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(c->optimizer, "sgd");
  EXPECT_GT(c->lr, 0);
  EXPECT_EQ(c->threads, 0);
}

TEST(TrainConfigTest, TheShippedExampleIsValid) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/single.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model, "cnn");
  EXPECT_EQ(c->epochs, 2);
}

TEST(TrainConfigTest, AdamGetsItsOwnDefaultLrAndRejectsMomentum) {
  auto c = Parse("[train]\noptimizer = \"adam\"\n");
  ASSERT_TRUE(c.ok());
  EXPECT_DOUBLE_EQ(c->lr, 1e-3);
  auto bad = Parse("[train]\noptimizer = \"adam\"\nmomentum = 0.9\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job.toml:3: 'train.momentum' only applies"), std::string::npos)
      << bad.status().message();
}

TEST(TrainConfigTest, RejectsImpossibleValues) {
  EXPECT_EQ(Parse("[model]\nname = \"resnet\"\n").status().message(),
            "job.toml:2: 'model.name' must be one of mlp, cnn, got 'resnet'");
  EXPECT_FALSE(Parse("[train]\nbatch_size = 0\n").ok());
  EXPECT_FALSE(Parse("[train]\nlr = 0.0\n").ok());
  EXPECT_FALSE(Parse("[train]\nepochs = 2.5\n").ok());
  EXPECT_FALSE(Parse("mode = \"hogwild\"\n").ok());
  auto big_batch = Parse("[data]\ntrain_limit = 100\n[train]\nbatch_size = 200\n");
  ASSERT_FALSE(big_batch.ok());
  EXPECT_NE(big_batch.status().message().find("more than the 100 training samples"), std::string::npos);
}

TEST(TrainConfigTest, TheDeviceIsCheckedForItsSpellingAndItsMode) {
  auto c = Parse("");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ("auto", c->device);
  EXPECT_EQ("auto", c->staging);
  for (const char* ok : {"cpu", "cuda", "cuda:0", "cuda:12", "auto"}) {
    auto d = Parse(std::string("[train]\ndevice = \"") + ok + "\"\n");
    ASSERT_TRUE(d.ok()) << ok << ": " << d.status().ToString();
    EXPECT_EQ(ok, d->device);
  }
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "CUDA", "cuda:-1", ""}) {
    auto d = Parse(std::string("[train]\ndevice = \"") + bad + "\"\n");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.status().message().find("job.toml:2: 'train.device' is \"" + std::string(bad) + "\"; use \"cpu\""),
              std::string::npos)
        << d.status().message();
  }
  auto async_gpu = Parse("mode = \"async\"\n[train]\ndevice = \"cuda\"\n");
  ASSERT_FALSE(async_gpu.ok());
  EXPECT_NE(async_gpu.status().message().find("mode \"async\" trains on the CPU only"), std::string::npos)
      << async_gpu.status().message();
  auto async_auto = Parse("mode = \"async\"\n");
  ASSERT_TRUE(async_auto.ok()) << async_auto.status().ToString();
  EXPECT_EQ("cpu", async_auto->device) << "auto means the CPU where GPUs are not supported";
  auto staging_single = Parse("[train]\nstaging = \"always\"\n");
  ASSERT_FALSE(staging_single.ok());
  EXPECT_NE(staging_single.status().message().find("'train.staging' only applies to mode = \"sync\""),
            std::string::npos)
      << staging_single.status().message();
  auto staged = Parse("mode = \"sync\"\n[train]\nstaging = \"always\"\n");
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ("always", staged->staging);
}

TEST(TrainConfigTest, BucketSizeIsForSyncJobsAndResidentDataIsAChoice) {
  auto def = Parse("mode = \"sync\"\n");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ(0, def->bucket_kib) << "0: chosen by where the gradients live";
  EXPECT_EQ("auto", def->resident_data);
  auto big = Parse("mode = \"sync\"\n[train]\nbucket_kib = 16384\nresident_data = \"off\"\n");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(16384, big->bucket_kib);
  EXPECT_EQ("off", big->resident_data);
  auto single = Parse("[train]\nbucket_kib = 1024\n");
  ASSERT_FALSE(single.ok());
  EXPECT_NE(single.status().message().find("'train.bucket_kib' only applies to mode = \"sync\""), std::string::npos)
      << single.status().message();
  auto tiny = Parse("mode = \"sync\"\n[train]\nbucket_kib = 2\n");
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("train.bucket_kib"), std::string::npos) << tiny.status().message();
  auto typo = Parse("[train]\nresident_data = \"gpu\"\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("train.resident_data"), std::string::npos) << typo.status().message();
}

TEST(TrainConfigTest, AllreduceChoiceIsForFixedSyncJobsOnly) {
  auto def = Parse("mode = \"sync\"\n");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_EQ("auto", def->allreduce);
  auto ring = Parse("mode = \"sync\"\n[train]\nallreduce = \"ring\"\n");
  ASSERT_TRUE(ring.ok()) << ring.status().ToString();
  EXPECT_EQ("ring", ring->allreduce);
  auto typo = Parse("mode = \"sync\"\n[train]\nallreduce = \"tree\"\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("train.allreduce"), std::string::npos) << typo.status().message();
  EXPECT_NE(typo.status().message().find("hierarchical"), std::string::npos) << typo.status().message();
  auto async = Parse("mode = \"async\"\n[train]\nallreduce = \"ring\"\n");
  ASSERT_FALSE(async.ok());
  EXPECT_NE(async.status().message().find("'train.allreduce' only applies to mode = \"sync\""), std::string::npos)
      << async.status().message();
  // Elastic jobs take it too: each generation re-chooses (docs/architecture.md).
  auto elastic = Parse("mode = \"sync\"\n[cluster]\nelastic = true\n[train]\nallreduce = \"hierarchical\"\n");
  ASSERT_TRUE(elastic.ok()) << elastic.status().message();
  EXPECT_EQ("hierarchical", elastic->allreduce);
}

TEST(TrainConfigTest, ElasticKeysHaveTheirDefaults) {
  auto plain = Parse("mode = \"sync\"\n[cluster]\nworkers = 3\n");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->cluster.elastic);
  EXPECT_EQ(1, plain->cluster.min_workers);
  EXPECT_EQ(3, plain->cluster.max_workers) << "max_workers defaults to workers";
  auto single = Parse("");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->cluster.workers, single->cluster.max_workers) << "max_workers >= 1 after every parse";

  auto elastic = Parse("mode = \"sync\"\n[cluster]\nworkers = 3\nelastic = true\n");
  ASSERT_TRUE(elastic.ok()) << elastic.status().ToString();
  EXPECT_TRUE(elastic->cluster.elastic);
  EXPECT_EQ(1, elastic->cluster.min_workers);
  EXPECT_EQ(3, elastic->cluster.max_workers);
  auto bounded = Parse("mode = \"sync\"\n[cluster]\nworkers = 3\nelastic = true\nmin_workers = 2\nmax_workers = 5\n");
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_EQ(2, bounded->cluster.min_workers);
  EXPECT_EQ(5, bounded->cluster.max_workers);
  EXPECT_EQ("measured", elastic->cluster.shares) << "elastic shares follow measured speed by default";
  auto even = Parse("mode = \"sync\"\n[cluster]\nworkers = 3\nelastic = true\nshares = \"even\"\n");
  ASSERT_TRUE(even.ok()) << even.status().ToString();
  EXPECT_EQ("even", even->cluster.shares);
}

TEST(TrainConfigTest, ElasticBoundsAreRefusedWithTheKeyNamed) {
  const std::string job = "mode = \"sync\"\n[cluster]\nworkers = 2\nelastic = true\n";  // lines 1-4
  EXPECT_EQ("job.toml:5: 'cluster.min_workers' (3) exceeds cluster.max_workers (2)",
            Parse(job + "min_workers = 3\nmax_workers = 2\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.min_workers' (3) exceeds cluster.workers (2)",
            Parse(job + "min_workers = 3\nmax_workers = 4\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.max_workers' (1) is below cluster.workers (2)",
            Parse(job + "max_workers = 1\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.min_workers' must be between 1 and 1024, got 0",
            Parse(job + "min_workers = 0\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.max_workers' must be between 1 and 1024, got 2000",
            Parse(job + "max_workers = 2000\n").status().message());
  EXPECT_EQ(
      "job.toml:4: 'cluster.elastic' supports train.optimizer = \"sgd\" only (momentum buffers are "
      "transferred to joiners), not \"adam\"",
      Parse(job + "[train]\noptimizer = \"adam\"\n").status().message());
  const std::string plain = "mode = \"sync\"\n[cluster]\nworkers = 2\n";  // lines 1-3
  EXPECT_EQ("job.toml:4: 'cluster.min_workers' needs cluster.elastic = true",
            Parse(plain + "min_workers = 1\n").status().message());
  EXPECT_EQ("job.toml:4: 'cluster.max_workers' needs cluster.elastic = true",
            Parse(plain + "max_workers = 4\n").status().message());
  EXPECT_EQ("job.toml:4: 'cluster.shares' needs cluster.elastic = true",
            Parse(plain + "shares = \"even\"\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.shares' must be one of measured, even, got 'fast'",
            Parse(job + "shares = \"fast\"\n").status().message());
  EXPECT_EQ("job.toml:2: 'cluster.elastic' only applies to modes \"sync\", \"async\" and \"coded\"",
            Parse("[cluster]\nelastic = true\n").status().message());
  EXPECT_EQ("job.toml:3: 'cluster.elastic' must be true or false, got string",
            Parse("mode = \"sync\"\n[cluster]\nelastic = \"yes\"\n").status().message());
}

TEST(TrainConfigTest, SparesNeedAFullElasticJobOfTenaxWorkersAndASlotEach) {
  const std::string job = "mode = \"sync\"\n[cluster]\nworkers = 2\nelastic = true\n";  // lines 1-4
  auto two = Parse(job + "spares = 2\n");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(2, two->cluster.spares);
  auto none = Parse(job);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(0, none->cluster.spares) << "no spares unless asked for";
  EXPECT_EQ("job.toml:5: 'cluster.spares' needs cluster.max_workers = cluster.workers (2): a spare waits while the "
            "job is full, and with max_workers 3 it would be admitted at once",
            Parse(job + "spares = 1\nmax_workers = 3\n").status().message());
  EXPECT_EQ("job.toml:5: 'cluster.spares' must be between 0 and 64, got 65",
            Parse(job + "spares = 65\n").status().message());
  EXPECT_EQ("job.toml:4: 'cluster.spares' needs cluster.elastic = true",
            Parse("mode = \"sync\"\n[cluster]\nworkers = 2\nspares = 1\n").status().message());
  EXPECT_EQ("job.toml:4: 'cluster.spares' does not apply to mode = \"async\" (workers come and go by design)",
            Parse("mode = \"async\"\n[cluster]\nworkers = 2\nspares = 1\n").status().message());
  // Each spare takes a slot of the emulated hosts: 2 workers and 2 spares
  // do not fit 3 slots.
  const std::string hosts =
      "[topology]\nhosts = [ { name = \"a1\", zone = \"za\", slots = 2 }, { name = \"b1\", zone = \"zb\", slots = 1 } ]\n";
  EXPECT_TRUE(Parse(job + "spares = 1\n" + hosts).ok());
  const auto full = Parse(job + "spares = 2\n" + hosts);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(std::string::npos, full.status().message().find("the hosts have 3 slots but the job starts 4 processes"))
      << full.status().message();
}

TEST(TrainConfigTest, MigrationNeedsAnElasticSyncJobOnATopologyAndReadsItsThresholds) {
  const std::string hosts =
      "[topology]\nhosts = [ { name = \"a1\", zone = \"za\" }, { name = \"a2\", zone = \"za\" }, "
      "{ name = \"a3\", zone = \"za\" } ]\n";
  const std::string elastic = "mode = \"sync\"\n[cluster]\nworkers = 2\nelastic = true\n" + hosts;  // lines 1-5
  auto on = Parse(elastic + "[placement]\nmigrate = true\nmigrate_max_rtt_ms = 25\nmigrate_min_gbps = 0\n");
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->placement.migrate);
  EXPECT_DOUBLE_EQ(25, on->placement.migrate_thresholds.max_rtt_ms);
  EXPECT_DOUBLE_EQ(0, on->placement.migrate_thresholds.min_throughput_gbps);
  EXPECT_DOUBLE_EQ(1, on->placement.migrate_thresholds.max_loss) << "the probes' loss counts late answers: not judged";
  EXPECT_DOUBLE_EQ(10, on->placement.link_half_life_seconds) << "a move must see a bad link within seconds";
  auto off = Parse(elastic);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->placement.migrate) << "no moves unless asked for";
  EXPECT_DOUBLE_EQ(60, off->placement.link_half_life_seconds);
  EXPECT_EQ("job.toml:8: 'placement.migrate_max_rtt_ms' only applies with placement.migrate = true",
            Parse(elastic + "[placement]\nmigrate_max_rtt_ms = 5\n").status().message());
  EXPECT_EQ("job.toml:9: 'placement.migrate_max_loss' must be between 0 and 1, got 2",
            Parse(elastic + "[placement]\nmigrate = true\nmigrate_max_loss = 2\n").status().message());
  const auto fixed = Parse("mode = \"sync\"\n[cluster]\nworkers = 2\n" + hosts + "[placement]\nmigrate = true\n");
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(std::string::npos, fixed.status().message().find("'placement.migrate' needs an elastic sync job"))
      << fixed.status().message();
}

TEST(TrainConfigTest, UnknownKeysAreRejectedWithTheirLine) {
  auto c = Parse("[train]\nepochs = 1\nlearning_rate = 0.1\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("job.toml:3: unknown key 'train.learning_rate'"), std::string::npos)
      << c.status().message();
}

TEST(TrainConfigTest, AnAsyncJobReadsEveryAsyncKey) {
  auto c = Parse(
      "mode = \"async\"\n[cluster]\nworkers = 3\n[async]\nservers = 2\nunit_steps = 25\nlease_seconds = 12.5\n"
      "max_attempts = 3\nrule = \"asgd\"\nalpha = 0.25\nstaleness_power = 0.5\nserver_lr = 0.1\n"
      "checkpoint_every = 7\nnorm_factor = 20\naverage_tail = 0.2\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ("async", c->mode);
  EXPECT_EQ(3, c->cluster.workers);
  EXPECT_EQ(3, c->cluster.max_workers);
  EXPECT_EQ(2, c->async.servers);
  EXPECT_EQ(25, c->async.unit_steps);
  EXPECT_DOUBLE_EQ(12.5, c->async.lease_seconds);
  EXPECT_EQ(3, c->async.max_attempts);
  EXPECT_EQ("asgd", c->async.rule);
  EXPECT_DOUBLE_EQ(0.25, c->async.alpha);
  EXPECT_DOUBLE_EQ(0.5, c->async.staleness_power);
  EXPECT_DOUBLE_EQ(0.1, c->async.server_lr);
  EXPECT_EQ(7, c->async.checkpoint_every);
  EXPECT_DOUBLE_EQ(20, c->async.norm_factor);
  EXPECT_DOUBLE_EQ(0.2, c->async.average_tail);
  auto defaults = Parse("mode = \"async\"\n[train]\nlr = 0.07\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ("vc_asgd", defaults->async.rule);
  EXPECT_DOUBLE_EQ(0.07, defaults->async.server_lr);  // train.lr
  EXPECT_DOUBLE_EQ(0.5, defaults->async.staleness_power);  // vc_asgd's own exponent
  EXPECT_DOUBLE_EQ(0.1, defaults->async.average_tail);     // tail averaging over the last 10%
  auto delta = Parse("mode = \"async\"\n[async]\nrule = \"delta\"\n");
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  EXPECT_DOUBLE_EQ(1.0, delta->async.staleness_power);
}

TEST(TrainConfigTest, BadAsyncValuesNameTheirKey) {
  struct Case {
    const char* text;
    const char* key;
  };
  for (const Case& c : {Case{"mode = \"async\"\n[async]\nalpha = 1.0\n", "async.alpha"},
                        Case{"mode = \"async\"\n[async]\nalpha = 1.5\n", "async.alpha"},
                        Case{"mode = \"async\"\n[async]\nservers = 65\n", "async.servers"},
                        Case{"mode = \"async\"\n[async]\nrule = \"sum\"\n", "async.rule"},
                        Case{"mode = \"async\"\n[async]\nnorm_factor = 1\n", "async.norm_factor"},
                        Case{"mode = \"async\"\n[async]\naverage_tail = 1\n", "async.average_tail"},
                        Case{"mode = \"async\"\n[async]\naverage_tail = -0.1\n", "async.average_tail"},
                        Case{"mode = \"sync\"\n[async]\naverage_tail = 0.1\n", "async.average_tail"},
                        Case{"mode = \"async\"\n[async]\nserver_lr = 0.1\n", "async.server_lr"},
                        Case{"mode = \"async\"\n[cluster]\nelastic = true\n", "cluster.elastic"},
                        Case{"mode = \"sync\"\n[async]\nservers = 2\n", "async.servers"},
                        Case{"[cost]\nprices = \"/nonexistent/prices.toml\"\n", "cost.prices"}}) {
    auto r = Parse(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(StatusCode::kInvalidArgument, r.status().code()) << c.text;
    EXPECT_NE(std::string::npos, r.status().message().find(c.key)) << r.status().message();
    EXPECT_NE(std::string::npos, r.status().message().find("job.toml")) << r.status().message();
  }
}

TEST(TrainConfigTest, TheAsyncExampleIsValid) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/async.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ("async", c->mode);
  EXPECT_EQ(2, c->async.servers);
}

}  // namespace
}  // namespace tenax

namespace tenax {
namespace {

TEST(CodedConfigTest, TheCodedExampleIsValidAndReadsEveryKey) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/coded.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mode, "coded");
  EXPECT_EQ(RankCount(*c), 5);  // 4 workers and the decoder
  EXPECT_EQ(c->coded.scheme, "cyclic");
  EXPECT_EQ(c->coded.stragglers, 1);
  EXPECT_EQ(c->stragglers.model, "markov");
  EXPECT_EQ(c->stragglers.slow_workers, std::vector<int>{3});
  EXPECT_DOUBLE_EQ(c->stragglers.slowdown_max, 5.0);  // defaults to slowdown
}

std::string CodedJob(const std::string& coded, const std::string& stragglers = "") {
  return "mode = \"coded\"\n[cluster]\nworkers = 4\n" + (coded.empty() ? "" : "[coded]\n" + coded + "\n") +
         (stragglers.empty() ? "" : "[stragglers]\n" + stragglers + "\n");
}

TEST(CodedConfigTest, ImpossibleCodesAreRefusedSayingWhatWouldWork) {
  auto s_too_big = Parse(CodedJob("stragglers = 4"));
  ASSERT_FALSE(s_too_big.ok());
  EXPECT_NE(s_too_big.status().message().find("s must be below cluster.workers (0..3)"), std::string::npos)
      << s_too_big.status().message();
  auto frc = Parse(CodedJob("scheme = \"frc\"\nstragglers = 2"));
  ASSERT_FALSE(frc.ok());
  // (s+1) = 3 does not divide 4: the message names what would.
  EXPECT_NE(frc.status().message().find("job.toml:6: 'coded.stragglers'"), std::string::npos) << frc.status().message();
  EXPECT_NE(frc.status().message().find("cyclic"), std::string::npos) << frc.status().message();
  EXPECT_TRUE(Parse(CodedJob("scheme = \"frc\"\nstragglers = 1")).ok());
  EXPECT_TRUE(Parse(CodedJob("scheme = \"cyclic\"\nstragglers = 2")).ok());
  auto approx = Parse(CodedJob("scheme = \"ignore_stragglers\"\ndecoding = \"approx\""));
  ASSERT_FALSE(approx.ok());
  EXPECT_NE(approx.status().message().find("needs a code"), std::string::npos) << approx.status().message();
  auto adam = Parse(CodedJob("") + "[train]\noptimizer = \"adam\"\n");
  ASSERT_FALSE(adam.ok());
  EXPECT_NE(adam.status().message().find("supports \"sgd\" only"), std::string::npos) << adam.status().message();
  auto elsewhere = Parse("mode = \"sync\"\n[coded]\nscheme = \"frc\"\n");
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_NE(elsewhere.status().message().find("only applies to mode = \"coded\""), std::string::npos);
}

TEST(CodedConfigTest, ATraceNamingAnUnknownWorkerIsRefusedAtValidation) {
  const std::string path = ::testing::TempDir() + "/coded_trace.csv";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("# step,worker,slowdown\n0,3,5\n10,7,2\n", f);
    std::fclose(f);
  }
  auto bad = Parse(CodedJob("", "model = \"trace\"\ntrace = \"" + path + "\""));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":3:"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("worker 7"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("0..3"), std::string::npos) << bad.status().message();
  auto missing = Parse(CodedJob("", "model = \"trace\""));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("stragglers.trace"), std::string::npos);
  auto unknown_slow = Parse(CodedJob("", "model = \"markov\"\nslow_workers = [4]"));
  ASSERT_FALSE(unknown_slow.ok());
  EXPECT_NE(unknown_slow.status().message().find("ranks 0..3"), std::string::npos) << unknown_slow.status().message();
}

// [worker] command: the user's program as each worker of an elastic job.
constexpr const char* kElasticHead = "mode = \"sync\"\n[cluster]\nworkers = 2\nelastic = true\n[worker]\n";

TEST(WorkerCommandTest, TheShippedPythonExampleIsValidAndItsProgramIsResolved) {
  auto doc = ConfigDoc::Load(std::string(TENAX_SOURCE_DIR) + "/examples/python/elastic.toml");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto c = ParseTrainConfig(*doc);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_GE(c->worker.command.size(), 2u);
  EXPECT_EQ(c->worker.command[0], "/usr/bin/python3");
  EXPECT_EQ(c->worker.command[1], "examples/python/elastic.py");
  EXPECT_EQ(c->max_steps, 450);
  EXPECT_EQ(c->faults.faults.size(), 3u);
}

TEST(WorkerCommandTest, ANameIsLookedUpOnPath) {
  auto c = Parse(std::string(kElasticHead) + "command = [\"sh\", \"-c\", \"exit 0\"]\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->worker.command.size(), 3u);
  EXPECT_EQ(c->worker.command[0].back(), 'h');
  EXPECT_EQ(c->worker.command[0].front(), '/') << "the launcher runs the file that was checked";
  EXPECT_EQ(c->worker.command[2], "exit 0");
}

TEST(WorkerCommandTest, AProgramThatCannotRunIsRefusedWithItsName) {
  const std::string plain = ::testing::TempDir() + "/train_not_executable.py";
  { std::ofstream(plain) << "print('hi')\n"; }
  auto not_exec = Parse(std::string(kElasticHead) + "command = [\"" + plain + "\"]\n");
  ASSERT_FALSE(not_exec.ok());
  EXPECT_EQ(not_exec.status().message(), "job.toml:6: 'worker.command' '" + plain + "' is not an executable file");
  auto missing = Parse(std::string(kElasticHead) + "command = [\"no-such-python-anywhere\", \"train.py\"]\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "job.toml:6: 'worker.command' 'no-such-python-anywhere' is not found on PATH");
  auto dir = Parse(std::string(kElasticHead) + "command = [\"/tmp\"]\n");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("'/tmp' is not an executable file"), std::string::npos) << dir.status().message();
}

TEST(WorkerCommandTest, MalformedCommandsAndOtherModesAreRefused) {
  for (const char* bad : {"command = []\n", "command = \"python3 train.py\"\n", "command = [\"sh\", 3]\n",
                          "command = [\"sh\", \"\"]\n"}) {
    auto c = Parse(std::string(kElasticHead) + bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("'worker.command'"), std::string::npos) << c.status().message();
  }
  auto fixed = Parse("mode = \"sync\"\n[cluster]\nworkers = 2\n[worker]\ncommand = [\"sh\"]\n");
  ASSERT_FALSE(fixed.ok());
  EXPECT_NE(fixed.status().message().find("needs mode = \"sync\" and cluster.elastic = true"), std::string::npos)
      << fixed.status().message();
  auto single = Parse("[worker]\ncommand = [\"sh\"]\n");
  ASSERT_FALSE(single.ok());
  auto typo = Parse(std::string(kElasticHead) + "comand = [\"sh\"]\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("worker.comand"), std::string::npos) << typo.status().message();
}

TEST(WorkerCommandTest, FaultStepsAreCheckedAgainstTheStatedSteps) {
  const std::string head = std::string(kElasticHead) + "command = [\"sh\"]\n";
  auto within = Parse(head + "[train]\nmax_steps = 100\n[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 90\n");
  ASSERT_TRUE(within.ok()) << within.status().ToString();
  auto beyond = Parse(head + "[train]\nmax_steps = 100\n[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 500\n");
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("beyond the job's 100 steps"), std::string::npos) << beyond.status().message();
  // Without train.max_steps the program's steps are unknown: any step is taken.
  auto unknown = Parse(head + "[[faults]]\naction = \"kill\"\nworker = 1\nat_step = 5000\n");
  EXPECT_TRUE(unknown.ok()) << unknown.status().ToString();
}

}  // namespace
}  // namespace tenax

namespace tenax {
namespace {

// net.tcp_streams: "auto" (0, resolved to 1 away from a topology) or 1-16;
// anything else is refused naming the key and what it takes.
TEST(TrainConfigTcpStreams, AutoOrOneToSixteenAndNothingElse) {
  auto plain = Parse("mode = \"sync\"\n");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(0, plain->cluster.tcp_streams);
  EXPECT_EQ(1, plain->cluster.resolved_tcp_streams());
  auto four = Parse("mode = \"sync\"\n[net]\ntcp_streams = 4\n");
  ASSERT_TRUE(four.ok()) << four.status().message();
  EXPECT_EQ(4, four->cluster.resolved_tcp_streams());
  auto autos = Parse("mode = \"sync\"\n[net]\ntcp_streams = \"auto\"\n");
  ASSERT_TRUE(autos.ok()) << autos.status().message();
  EXPECT_EQ(0, autos->cluster.tcp_streams);
  for (const char* bad : {"0", "17", "-1", "\"many\"", "2.5", "true"}) {
    auto r = Parse(std::string("mode = \"sync\"\n[net]\ntcp_streams = ") + bad + "\n");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(std::string::npos, r.status().message().find("net.tcp_streams")) << r.status().message();
    EXPECT_NE(std::string::npos, r.status().message().find("from 1 to 16")) << r.status().message();
  }
}

}  // namespace
}  // namespace tenax
