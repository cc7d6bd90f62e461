// The ceiling of speculative decoding on a model, on any backend: a plain greedy run, then the
// same prompt with an oracle proposer that drafts the plain run's own continuation (acceptance
// 1.0 by construction) at K = 1..kmax. Prints the verify pass's cost next to a plain step and
// the speedup a perfect drafter would give, so a real drafter's gain can be predicted from its
// acceptance. Every speculative run must emit the plain tokens (checked).
// Options: kUsage below, or `oracle_spec_bench --help`.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench_common.h"
#include "engine/generate.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "testing/models.h"
#include "testing/synthetic.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using bench::Clock;
using bench::Seconds;

struct Args {
  std::string model, device = "cpu";
  int threads = 2, n = 128, kmax = 8;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "oracle_spec_bench: %s\n", what.c_str());
  std::exit(1);
}

constexpr bench::Usage kUsage{
    "oracle_spec_bench",
    "usage: oracle_spec_bench [options]\n"
    "The ceiling of speculative decoding: a drafter that is always right, at K = 1..kmax.\n"
    "  --model FILE        the target (default: the synthetic BandwidthSpec target, F16, that\n"
    "                      engine_bench writes to the temp directory's\n"
    "                      lockstep-bench/bandwidth-F16.gguf; written here if missing)\n"
    "  --device cpu|cuda   backend (default cpu)\n"
    "  --threads N         CPU threads (default 2)\n"
    "  --n N               greedy tokens per run, at least 2 (default 128)\n"
    "  --kmax K            largest draft length (default 8)\n"
    "  -h, --help          print this and exit\n"};

Args ParseArgs(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (k == "--model")
      a.model = value();
    else if (k == "--device")
      a.device = value();
    else if (k == "--threads")
      a.threads = std::max(1, std::atoi(value()));
    else if (k == "--n")
      a.n = std::max(2, std::atoi(value()));
    else if (k == "--kmax")
      a.kmax = std::max(1, std::atoi(value()));
    else
      kUsage.Unknown(k);
  }
  return a;
}

// Drafts the known continuation of the one sequence it serves: every draft is the token the
// target will select, so every draft is accepted.
class ContinuationOracle : public speculative::Proposer {
 public:
  explicit ContinuationOracle(std::vector<int32_t> stream) : stream_(std::move(stream)) {}
  Status Draft(std::span<const speculative::DraftRequest> reqs, const backend::Tensor&,
               kv::KvCache&, std::span<std::vector<int32_t>* const> out) override {
    for (size_t i = 0; i < reqs.size(); ++i) {
      out[i]->clear();
      for (int j = 0; j < reqs[i].max; ++j) {
        const size_t at = reqs[i].history.size() + static_cast<size_t>(j);
        if (at >= stream_.size()) break;
        out[i]->push_back(stream_[at]);
      }
    }
    return Status::Ok();
  }

 private:
  std::vector<int32_t> stream_;  // prompt then the plain run's tokens
};

std::string ModelPath(const Args& a) {
  if (!a.model.empty()) return a.model;
  const fs::path dir = fs::temp_directory_path() / "lockstep-bench";
  fs::create_directories(dir);
  const fs::path p = dir / "bandwidth-F16.gguf";
  if (fs::exists(p)) return p.string();
  const std::string scratch = testing::ScratchPath(p);
  if (const Status s = model::WriteSyntheticModel(testing::BandwidthSpec(), scratch); !s.ok())
    Fail(s.message());
  fs::rename(scratch, p);
  return p.string();
}

int Run(const Args& a) {
  auto be = backend::Create(a.device, a.threads);
  if (!be) Fail("--device " + a.device + ": not available");
  const std::string path = ModelPath(a);
  auto m = model::Model::Load(path, *be);
  if (!m.ok()) Fail(m.status().message());
  std::vector<int32_t> prompt{2};
  for (int j = 0; j < 15; ++j)
    prompt.push_back((977 + j * 131 + j * j * 7) % (*m)->config().n_vocab);
  engine::GenerateOptions opt;
  opt.n_predict = a.n;
  opt.adaptive_draft = false;  // every round drafts K: the cost of a K-wide verify pass
  auto warm = engine::Generate(**m, nullptr, prompt, opt);  // first-touch costs out of the figures
  auto plain = engine::Generate(**m, nullptr, prompt, opt);
  if (!warm.ok() || !plain.ok()) Fail("plain decode failed");
  const double plain_step_ms = plain->generate_ms / static_cast<double>(plain->tokens.size());
  std::printf("model %s on %s%s, %d greedy tokens after a %zu-token prompt\n", path.c_str(),
              be->name().c_str(),
              be->device_name().empty() ? "" : (" (" + be->device_name() + ")").c_str(), a.n,
              prompt.size());
  std::printf("plain: %.3f ms/token, %.1f tok/s\n\n", plain_step_ms, 1000.0 / plain_step_ms);
  std::printf("%3s %10s %12s %12s %10s %8s %6s\n", "K", "passes", "ms/pass", "pass/plain", "tok/s",
              "speedup", "exact");
  std::vector<int32_t> stream = prompt;
  stream.insert(stream.end(), plain->tokens.begin(), plain->tokens.end());
  ContinuationOracle oracle(stream);
  for (int k = 1; k <= a.kmax; ++k) {
    opt.draft_max = k;
    auto spec = engine::Generate(**m, &oracle, prompt, opt);
    if (!spec.ok()) Fail(spec.status().message());
    // Passes: one per round; every round but the last emits k + 1 tokens.
    const double passes = static_cast<double>(spec->draft.rounds);
    const double ms_pass = spec->generate_ms / std::max(1.0, passes);
    const double tps = 1000.0 * spec->tokens.size() / spec->generate_ms;
    std::printf("%3d %10.0f %12.3f %12.2f %10.1f %7.2fx %6s\n", k, passes, ms_pass,
                ms_pass / plain_step_ms, tps, tps * plain_step_ms / 1000.0,
                spec->tokens == plain->tokens ? "yes" : "NO");
    if (spec->tokens != plain->tokens) return 1;
  }
  std::printf(
      "\npass/plain: a K-draft verify pass over one plain step; speedup: the ceiling a "
      "drafter that is always right reaches (a real one: about (1 + a + ... + a^K) / "
      "(pass/plain + drafting cost) for acceptance a)\n");
  return 0;
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return lockstep::Run(lockstep::ParseArgs(argc, argv));
}
