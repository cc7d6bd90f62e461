// `inspect` names the Gemma 4 variant from the config's shape, never from the file's name.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "cli/variant.h"
#include "testing/run_cli.h"

namespace lockstep {
namespace {

model::ModelConfig Shape(int layers, int width, int ple, int experts) {
  model::ModelConfig c;
  c.n_layer = layers;
  c.n_embd = width;
  c.n_embd_per_layer = ple;
  c.n_expert = experts;
  return c;
}

TEST(InspectVariant, NamesEveryReleasedShape) {
  EXPECT_EQ(cli::VariantName(Shape(35, 1536, 256, 0)), "E2B");
  EXPECT_EQ(cli::VariantName(Shape(42, 2560, 256, 0)), "E4B");
  EXPECT_EQ(cli::VariantName(Shape(48, 3840, 0, 0)), "12B");
  EXPECT_EQ(cli::VariantName(Shape(30, 2816, 0, 128)), "26B-A4B");
  EXPECT_EQ(cli::VariantName(Shape(60, 5376, 0, 0)), "31B");
  // Negative controls: one feature off is not that model.
  EXPECT_EQ(cli::VariantName(Shape(60, 5376, 0, 8)), "unknown MoE, 60 layers x 5376");
  EXPECT_EQ(cli::VariantName(Shape(35, 1536, 0, 0)), "unknown dense, 35 layers x 1536");
  EXPECT_EQ(cli::VariantName(Shape(42, 2048, 256, 0)),
            "unknown dense with per-layer embeddings, 42 layers x 2048");
}

TEST(InspectVariant, InspectPrintsIt) {
  const std::string model = std::string(LOCKSTEP_SOURCE_DIR) + "/models/lockstep-code-target.gguf";
  int rc = 0;
  const std::string out = testing::RunCli(LOCKSTEP_BINARY, "inspect --no-metadata " + model, &rc);
  if (rc != 0 && out.find("No such file") != std::string::npos) GTEST_SKIP() << "no models/";
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("model config (variant: unknown dense, 12 layers x 512)"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace lockstep
