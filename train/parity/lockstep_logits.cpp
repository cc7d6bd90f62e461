// Dumps lockstep's logits for the parity prompts of train/results/parity_prompts.json, so that
// train/parity/compare.py can check them against transformers' reference logits.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "model/model.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: lockstep_logits MODEL.gguf parity_prompts.json OUT_PREFIX\n");
    return 2;
  }
  std::ifstream in(argv[2]);
  const auto prompts = nlohmann::json::parse(in);
  lockstep::backend::CpuBackend be(2);
  auto m = lockstep::model::Model::Load(argv[1], be);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().message().c_str());
    return 1;
  }
  const auto& model = **m;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const auto ids = prompts[k]["ids"].get<std::vector<int32_t>>();
    const int first = prompts[k]["first_row"].get<int>();
    auto kv =
        model.NewKv(1, static_cast<int>(ids.size()) + 8, static_cast<int>(ids.size())).value();
    lockstep::model::Batch batch;
    for (size_t i = 0; i < ids.size(); ++i)
      batch.Add(ids[i], static_cast<int32_t>(i), 0, static_cast<int>(i) >= first);
    lockstep::model::ForwardResult out;
    const auto s = model.Forward(batch, *kv, &out);
    if (!s.ok()) {
      std::fprintf(stderr, "prompt %zu: %s\n", k, s.message().c_str());
      return 1;
    }
    const std::string path = std::string(argv[3]) + "_" + std::to_string(k) + ".f32";
    std::ofstream o(path, std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.logits.data()),
            static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
    std::printf("prompt %zu: %zu tokens, %zu logit rows -> %s\n", k, ids.size(), out.rows.size(), path.c_str());
  }
  return 0;
}
