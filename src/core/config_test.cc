#include "tenax/core/config.h"

#include <gtest/gtest.h>

namespace tenax {
namespace {

ConfigDoc MustParse(std::string_view text) {
  auto doc = ConfigDoc::Parse(text, "job.toml");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  return doc.ok() ? *doc : ConfigDoc();
}

TEST(ConfigTest, ReadsTypedValuesAndDefaults) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\nlr = 1\nname = \"x\"\nflag = true\n");
  ConfigReader r(doc);
  EXPECT_EQ(r.Int("train.epochs", 1, 1, 10), 3);
  EXPECT_DOUBLE_EQ(r.Real("train.lr", 0.5, 0, 10), 1.0);  // integers are valid reals
  EXPECT_EQ(r.String("train.name", "y"), "x");
  EXPECT_TRUE(r.Bool("train.flag", false));
  EXPECT_EQ(r.Int("train.missing", 7, 0, 10), 7);
  EXPECT_TRUE(r.Finish().ok());
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
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'trian.epochs'"), std::string::npos) << st.message();
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
  EXPECT_EQ(doc.status().message().rfind("job.toml:2:", 0), 0u) << doc.status().message();
}

TEST(ConfigTest, OverridesParseLiteralsAndBareStrings) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\n");
  ASSERT_TRUE(doc.Override("train.epochs=5").ok());
  ASSERT_TRUE(doc.Override("train.lr=1e-3").ok());
  ASSERT_TRUE(doc.Override("model.name=mlp").ok());
  ASSERT_TRUE(doc.Override("data.dir=/tmp/some dir").ok());
  ConfigReader r(doc);
  EXPECT_EQ(r.Int("train.epochs", 1, 1, 10), 5);
  EXPECT_DOUBLE_EQ(r.Real("train.lr", 0, 0, 1), 1e-3);
  EXPECT_EQ(r.String("model.name", ""), "mlp");
  EXPECT_EQ(r.String("data.dir", ""), "/tmp/some dir");
  EXPECT_TRUE(r.Finish().ok());
}

TEST(ConfigTest, OverrideErrorsNameTheFlag) {
  ConfigDoc doc = MustParse("[train]\nepochs = 3\n");
  EXPECT_EQ(doc.Override("train.epochs").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.Override("bad key=1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(doc.Override("train=1").code(), StatusCode::kInvalidArgument);  // would replace a table
  EXPECT_EQ(doc.Override("train.epochs.x=1").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(doc.Override("train.epochs=abc").ok());
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

}  // namespace
}  // namespace tenax
