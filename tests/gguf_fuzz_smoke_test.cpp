// Fuzz smoke test: deterministic byte mutations of valid GGUF files must parse or fail cleanly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/check.h"
#include "gguf/gguf.h"

namespace lockstep::gguf {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> ValidFile() {
  const fs::path dir = fs::temp_directory_path() / ("gguf_smoke_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Writer w;
  w.Set("general.architecture", Value::Str("gemma4"));
  w.Set("v", Value::Arr(ValueType::ARRAY, {Value::Arr(ValueType::STRING, {Value::Str("ab")})}));
  w.Set("f", Value::F32(1.0f));
  w.AddTensor("a", DType::Q4_0, {32, 2}, [](uint8_t* d) { std::memset(d, 3, 36); });
  w.AddTensor("b", DType::F16, {3}, [](uint8_t* d) { std::memset(d, 5, 6); });
  const std::string path = (dir / "s.gguf").string();
  CHECK(w.WriteFile(path).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(std::istreambuf_iterator<char>(in), {});
  fs::remove_all(dir);
  return bytes;
}

TEST(GgufFuzzSmoke, MutationsNeverCrash) {
  const auto base = ValidFile();
  ASSERT_TRUE(File::FromMemory(base.data(), base.size(), "base").ok());  // control
  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> b = base;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0:
          b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          b[at] = static_cast<uint8_t>(rng());
          break;
        default:
          b.resize(at);
          break;  // truncate
      }
      if (b.empty()) break;
    }
    // Exact-size heap copy so ASan (when enabled) flags any read past the end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[b.size() + 1]);
    std::memcpy(copy.get(), b.data(), b.size());
    auto r = File::FromMemory(copy.get(), b.size(), "m.gguf");
    if (!r.ok()) {
      ++rejected;
      EXPECT_EQ(r.status().message().rfind("m.gguf: ", 0), 0u) << r.status().message();
      continue;
    }
    ++parsed;
    for (const auto& t : (*r)->tensors()) {
      const uint8_t* p = (*r)->TensorData(t);
      ASSERT_LE(p + t.nbytes, copy.get() + b.size());
    }
  }
  // Both outcomes occur, so the loop exercises the accept and reject paths alike.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace lockstep::gguf
