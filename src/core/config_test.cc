#include "tenax/core/config.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>

#include "tenax/core/config_secret.h"
#include "testing.h"

namespace tenax {
namespace {

ConfigDoc MustParse(std::string_view text) {
  ASSIGN_OK_OR_RETURN(ConfigDoc doc, ConfigDoc::Parse(text, "job.toml"), ConfigDoc());
  return doc;
}

TEST(ConfigTest, ReadsTypedValuesAndDefaults) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\nlr = 1\nname = \"x\"\nflag = true\n");
  ConfigReader r(doc);
  EXPECT_EQ(r.Int("train.epochs", 1, 1, 10), 3);
  EXPECT_DOUBLE_EQ(r.Real("train.lr", 0.5, 0, 10), 1.0);  // integers are valid reals
  EXPECT_EQ(r.String("train.name", "y"), "x");
  EXPECT_TRUE(r.Bool("train.flag", false));
  EXPECT_EQ(r.Int("train.missing", 7, 0, 10), 7);
  EXPECT_OK(r.Finish());
}

TEST(ConfigTest, UnknownKeyIsNamedWithFileAndLine) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\n\nepochz = 4\n");
  ConfigReader r(doc);
  r.Int("train.epochs", 1, 1, 10);
  Status st = r.Finish();
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("job.toml:4"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("'train.epochz'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("did you mean 'train.epochs'"), std::string::npos) << st.message();
}

TEST(ConfigTest, UnknownTableIsReported) {
  ConfigDoc doc = MustParse("[trian]\nepochs = 3\n");
  ConfigReader r(doc);
  r.Int("train.epochs", 1, 1, 10);
  Status st = r.Finish();
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("job.toml:2: unknown key 'trian.epochs'"), std::string::npos) << st.message();
}

TEST(ConfigTest, WrongTypeNamesKeyLineAndTypes) {
  ConfigDoc doc = MustParse("[train]\nepochs = \"three\"\n");
  ConfigReader r(doc);
  EXPECT_EQ(r.Int("train.epochs", 1, 1, 10), 1);
  Status st = r.Finish();
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "job.toml:2: 'train.epochs' must be an integer, got string");
}

TEST(ConfigTest, OutOfRangeIsRejected) {
  ConfigDoc doc = MustParse("[train]\nepochs = 0\nlr = -1.0\n");
  ConfigReader r(doc);
  r.Int("train.epochs", 1, 1, 10);
  r.Real("train.lr", 0.1, 0, 1);
  Status st = r.Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("must be between 1 and 10, got 0"), std::string::npos) << st.message();
}

TEST(ConfigTest, ChoiceListsAllowedValues) {
  ConfigDoc doc = MustParse("[model]\nname = \"resnet\"\n");
  ConfigReader r(doc);
  r.Choice("model.name", "cnn", {"mlp", "cnn"});
  Status st = r.Finish();
  EXPECT_EQ(st.message(), "job.toml:2: 'model.name' must be one of mlp, cnn, got 'resnet'");
}

TEST(ConfigTest, SyntaxErrorHasLineAndColumn) {
  auto doc = ConfigDoc::Parse("[train]\nepochs = = 3\n", "job.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kInvalidArgument);
  const std::string& msg = doc.status().message();
  ASSERT_EQ(msg.rfind("job.toml:2:", 0), 0u) << msg;
  // "job.toml:2:<column>: ..."
  const size_t column_end = msg.find(':', 11);
  ASSERT_NE(column_end, std::string::npos) << msg;
  ASSERT_GT(column_end, 11u) << msg;
  for (size_t i = 11; i < column_end; ++i) EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(msg[i]))) << msg;
}

TEST(ConfigTest, OverridesParseLiteralsAndBareStrings) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\n");
  ASSERT_OK(doc.Override("train.epochs=5"));
  ASSERT_OK(doc.Override("train.lr=1e-3"));
  ASSERT_OK(doc.Override("model.name=mlp"));
  ASSERT_OK(doc.Override("data.dir=/tmp/some dir"));
  ConfigReader r(doc);
  EXPECT_EQ(r.Int("train.epochs", 1, 1, 10), 5);
  EXPECT_DOUBLE_EQ(r.Real("train.lr", 0, 0, 1), 1e-3);
  EXPECT_EQ(r.String("model.name", ""), "mlp");
  EXPECT_EQ(r.String("data.dir", ""), "/tmp/some dir");
  EXPECT_OK(r.Finish());
}

TEST(ConfigTest, OverrideErrorsNameTheFlag) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\n");
  EXPECT_EQ(doc.Override("train.epochs").ToString(), "invalid_argument: --set train.epochs: expected key=value");
  EXPECT_EQ(doc.Override("bad key=1").ToString(),
            "invalid_argument: --set bad key=1: 'bad key' is not a dotted key like train.epochs");
  EXPECT_EQ(doc.Override("train=1").ToString(),  // would replace a table
            "invalid_argument: --set train=1: 'train' is a table, not a value");
  EXPECT_EQ(doc.Override("train.epochs.x=1").ToString(),
            "invalid_argument: --set train.epochs.x=1: 'epochs' is a value, not a table");
  ASSERT_OK(doc.Override("train.epochs=abc"));
  ConfigReader r(doc);
  r.Int("train.epochs", 1, 1, 10);
  EXPECT_EQ(r.Finish().message(), "--set train.epochs=abc: 'train.epochs' must be an integer, got string");
}

TEST(ConfigTest, LoadReportsMissingFile) {
  auto doc = ConfigDoc::Load("/nonexistent/job.toml");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().code(), StatusCode::kNotFound);
  EXPECT_NE(doc.status().message().find("/nonexistent/job.toml"), std::string::npos);
}

// A job file that holds the cluster secret must be its owner's alone; one
// without a secret may be read by anyone. The refusal names the file, its
// mode and the fix.
TEST(ConfigSecretTest, AJobFileWithTheSecretMustBeReadableByItsOwnerOnly) {
  testing::ScratchDir dir;
  const std::string with = dir / "with.toml", without = dir / "without.toml";
  std::ofstream(with) << "[cluster]\nsecret = \"0123456789abcdef-secret\"\n";
  std::ofstream(without) << "[cluster]\nworkers = 2\n";
  ASSERT_OK_AND_ASSIGN(ConfigDoc w, ConfigDoc::Load(with));
  ASSERT_OK_AND_ASSIGN(ConfigDoc wo, ConfigDoc::Load(without));
  for (mode_t mode : {0644, 0640, 0604}) {
    ASSERT_EQ(::chmod(with.c_str(), mode), 0);
    ASSERT_EQ(::chmod(without.c_str(), mode), 0);
    Status st = CheckSecretFileMode(with, w.table());
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << mode;
    EXPECT_NE(st.message().find(with), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("chmod 600"), std::string::npos) << st.message();
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", static_cast<unsigned>(mode));
    EXPECT_NE(st.message().find(octal), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find("0123456789abcdef-secret"), std::string::npos) << "the refusal shows the secret";
    EXPECT_OK(CheckSecretFileMode(without, wo.table()));
  }
  ASSERT_EQ(::chmod(with.c_str(), 0600), 0);
  EXPECT_OK(CheckSecretFileMode(with, w.table()));
}

TEST(ConfigSecretTest, AnOverrideOfTheSecretIsRefusedWithoutEchoingIt) {
  Status st = CheckOverrideHoldsNoSecret("cluster.secret=0123456789abcdef-on-the-command-line");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("TENAX_SECRET"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("on-the-command-line"), std::string::npos) << st.message();
  EXPECT_EQ(CheckOverrideHoldsNoSecret(" cluster.secret = x").code(), StatusCode::kInvalidArgument);
  EXPECT_OK(CheckOverrideHoldsNoSecret("cluster.workers=4"));
  EXPECT_OK(CheckOverrideHoldsNoSecret("cluster.secretive=1"));
}

TEST(ConfigSecretTest, CopiesOfTheConfigurationLeaveOnlyTheSecretOut) {
  ConfigDoc doc = MustParse("[cluster]\nsecret = \"0123456789abcdef-secret\"\nworkers = 3\n[train]\nlr = 0.5\n");
  const toml::table t = WithoutSecret(doc.table());
  EXPECT_FALSE(t.at_path("cluster.secret"));
  EXPECT_EQ(t.at_path("cluster.workers").value<int64_t>(), 3);
  EXPECT_EQ(t.at_path("train.lr").value<double>(), 0.5);
  EXPECT_TRUE(doc.table().at_path("cluster.secret")) << "the original keeps it";
}

}  // namespace
}  // namespace tenax
