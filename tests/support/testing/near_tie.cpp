// A near-tie fixture for negative controls (see near_tie.h).
#include "testing/near_tie.h"

#include <filesystem>
#include <vector>

#include "gguf/gguf.h"
#include "sample/sampler.h"
#include "testing/models.h"

namespace lockstep::testing {

namespace fs = std::filesystem;

// The dense fixture with near-tied token pairs (row 2k+1 = row 2k plus one-ulp-scale noise)
// and no softcap, so the greedy choice inside a pair rests on the last bits of the logits.
std::string NearTieTarget() {
  const auto path = fs::temp_directory_path() / "lockstep-tests" / "spec-near-tie.gguf";
  if (fs::exists(path)) return path.string();
  auto src = gguf::File::Open(SyntheticPath("dense", DenseSpec()));
  if (!src.ok()) return "";
  const gguf::File& f = **src;
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.Set(key, value);
  w.Set("gemma4.final_logit_softcapping", gguf::Value::F32(0.0f));
  std::vector<float> rows;
  for (const auto& t : f.tensors()) {
    if (t.name != "token_embd.weight") {
      w.AddTensorCopy(t.name, t.type, t.ne, f.TensorData(t));
      continue;
    }
    if (t.type != DType::F32) return "";
    const float* src_rows = reinterpret_cast<const float*>(f.TensorData(t));
    const int64_t d = t.ne[0], n = t.ne[1];
    rows.assign(src_rows, src_rows + d * n);
    for (int64_t r = 1; r < n; r += 2)
      for (int64_t i = 0; i < d; ++i)
        rows[r * d + i] = rows[(r - 1) * d + i] *
                          (1.0f + 2e-7f * static_cast<float>(sample::UniformAt(99, r, i) - 0.5));
    w.AddTensorCopy(t.name, t.type, t.ne, rows.data());
  }
  if (rows.empty() || !w.WriteFile(ScratchPath(path)).ok()) return "";  // f, rows still live
  fs::rename(ScratchPath(path), path);
  return path.string();
}

}  // namespace lockstep::testing
