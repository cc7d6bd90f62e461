// Where a CPU decode step's time goes: N sequences at a given context decode one row each, and the
// time between the forward's named tensors (summed over layers) is reported per step, next to the
// step's time without the observer; with --drafter, the same for one assistant (MTP drafter) step
// per sequence over that cache. Options: kUsage below, or `step_profile_bench --help`.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "bench_common.h"
#include "kv/kv_cache.h"
#include "model/assistant.h"
#include "model/model.h"

namespace lockstep {
namespace {

struct Args {
  std::string model = "models/lockstep-code-target.gguf";
  std::string drafter;  // empty: the target's step only
  int threads = 1, context = 128, steps = 16;
  std::vector<int> rows{1, 4, 16};
};

constexpr bench::Usage kUsage{
    "step_profile_bench",
    "usage: step_profile_bench [options]\n"
    "Time of a decode step between the forward's named tensors, summed over layers.\n"
    "  --model FILE      the model (default models/lockstep-code-target.gguf)\n"
    "  --drafter FILE    also profile a step of this assistant (MTP drafter) paired with the\n"
    "                    model, one draft row per sequence over the same cache\n"
    "  --threads N       CPU threads (default 1: with more, the observer's pauses between ops\n"
    "                    let the workers sleep, so the segments read high)\n"
    "  --rows N,N,...    sequences decoding together, one row each (default 1,4,16)\n"
    "  --context P       keys each sequence holds before the timed steps (default 128)\n"
    "  --steps S         timed steps with and without the observer, alternating (default 16)\n"
    "  -h, --help        print this and exit\n"};

[[noreturn]] void Die(const Status& s) {
  std::fprintf(stderr, "step_profile_bench: %s\n", s.message().c_str());
  std::exit(1);
}

Args ParseArgs(int argc, char** argv) {
  kUsage.HelpIfAsked(argc, argv);
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&] { return kUsage.Value(argc, argv, &i); };
    if (k == "--model") {
      a.model = value();
    } else if (k == "--drafter") {
      a.drafter = value();
    } else if (k == "--threads") {
      a.threads = kUsage.PositiveInt(k, value());
    } else if (k == "--rows") {
      a.rows = kUsage.PositiveInts(k, value());
    } else if (k == "--context") {
      a.context = kUsage.PositiveInt(k, value());
    } else if (k == "--steps") {
      a.steps = kUsage.PositiveInt(k, value());
    } else {
      kUsage.Unknown(k);
    }
  }
  return a;
}

// "blk.7.attn" -> "attn": one segment summed over the layers.
std::string Segment(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::string(name);
  const size_t dot = name.find('.', 4);
  return std::string(dot == std::string_view::npos ? name : name.substr(dot + 1));
}

// Accumulates the time since the previous named tensor under this one's segment.
struct SegmentClock {
  std::map<std::string, double> seconds;  // summed over the timed steps
  std::vector<std::string> order;         // first-seen order, for the table
  bench::Clock::time_point last;

  void Start() { last = bench::Clock::now(); }
  void Mark(std::string_view name) {
    const auto now = bench::Clock::now();
    const std::string seg = Segment(name);
    auto [it, fresh] = seconds.try_emplace(seg, 0.0);
    if (fresh) order.push_back(seg);
    it->second += std::chrono::duration<double>(now - last).count();
    last = now;
  }
};

// Fills `n` sequences with `context` pseudo-random tokens each, in chunks the cache accepts.
void Prefill(const model::Model& m, kv::KvCache& kv, int n, int context, int chunk) {
  model::Workspace ws(m.backend(), m.config(), chunk, 1);
  model::StepOutputs out;
  model::Batch b;
  for (int s = 0; s < n; ++s)
    for (int p0 = 0; p0 < context; p0 += chunk) {
      b.Clear();
      for (int p = p0; p < std::min(context, p0 + chunk); ++p)
        b.Add((1 + s * 977 + p * 131 + p * p * 7) % m.config().n_vocab, p, s, p + 1 == context);
      if (const Status st = m.Forward(b, kv, ws, &out); !st.ok()) Die(st);
    }
}

struct Profile {
  std::string what;
  int rows = 0;
  double step_ms = 0, observed_ms = 0;  // medians without / with the observer
  SegmentClock clock;
};

// Times 2 * a.steps calls of run(step, observer), every other one observed.
template <class Run>
Profile TimeSteps(std::string what, int n, const Args& a, Run run) {
  Profile prof;
  prof.what = std::move(what);
  prof.rows = n;
  model::TensorObserver obs = [&](std::string_view name, const backend::Tensor&) {
    prof.clock.Mark(name);
  };
  std::vector<double> plain, observed;
  for (int step = 0; step < 2 * a.steps; ++step) {
    const bool observe = step % 2 == 1;
    const auto t0 = bench::Clock::now();
    prof.clock.Start();
    if (const Status st = run(step, observe ? &obs : nullptr); !st.ok()) Die(st);
    (observe ? observed : plain).push_back(bench::Seconds(t0) * 1000.0);
  }
  prof.step_ms = bench::Median(plain);
  prof.observed_ms = bench::Median(observed);
  return prof;
}

// The target's decode steps of n sequences, then (with a drafter) draft steps over that cache.
std::vector<Profile> Measure(const model::Model& m, const model::Assistant* asst, const Args& a,
                             int n) {
  constexpr int kChunk = 256;
  const int n_ctx = a.context + 2 * a.steps + 1;
  auto kv = m.NewKv(n, n_ctx, kChunk);
  if (!kv.ok()) Die(kv.status());
  Prefill(m, **kv, n, a.context, kChunk);
  std::vector<Profile> out;
  model::Workspace ws(m.backend(), m.config(), n, n);
  model::StepOutputs step_out;
  model::Batch b;
  out.push_back(TimeSteps("step", n, a, [&](int step, const model::TensorObserver* obs) {
    b.Clear();
    for (int s = 0; s < n; ++s)
      b.Add((7 + s * 31 + step * 13) % m.config().n_vocab, a.context + step, s, true);
    return m.Forward(b, **kv, ws, &step_out, obs);
  }));
  if (!asst) return out;
  // Drafts of the token after the cache's last key; the hidden-state input stays as the
  // workspace holds it (its values do not change the step's work).
  model::Workspace dws = asst->NewWorkspace(n);
  model::DraftOutputs draft_out;
  out.push_back(TimeSteps("draft step", n, a, [&](int step, const model::TensorObserver* obs) {
    b.Clear();
    for (int s = 0; s < n; ++s)
      b.Add((11 + s * 17 + step * 5) % m.config().n_vocab, n_ctx - 1, s, true);
    return asst->Step(b, **kv, dws, &draft_out, obs);
  }));
  return out;
}

void Print(const Profile& p, const Args& a) {
  std::printf("\nrows %d, context %d, %d threads: %s %.3f ms (median of %d), observed %.3f ms\n",
              p.rows, a.context, a.threads, p.what.c_str(), p.step_ms, a.steps, p.observed_ms);
  std::printf("%-16s %9s %7s %12s\n", "segment", "ms/step", "%", "us/step/row");
  double total = 0;
  for (const auto& [name, s] : p.clock.seconds) total += s;
  for (const std::string& name : p.clock.order) {
    const double ms = p.clock.seconds.at(name) * 1000.0 / a.steps;
    std::printf("%-16s %9.3f %6.1f%% %12.1f\n", name.c_str(), ms,
                100.0 * p.clock.seconds.at(name) / total, ms * 1000.0 / p.rows);
  }
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) {
  using namespace lockstep;
  const Args a = ParseArgs(argc, argv);
  auto backend = backend::Create("cpu", a.threads);
  if (!backend) Die(Status::Error("the CPU backend is not available"));
  auto m = model::Model::Load(a.model, *backend);
  if (!m.ok()) Die(m.status());
  std::printf(
      "model %s. A segment is the time from the previous named tensor to this one, summed over "
      "the layers: q = Q/K/V products and Q's norm and RoPE; k, v = their norms and RoPE; attn = "
      "the cache write and attention; attn_out = the output product, norm and residual; ffn_mlp "
      "= norm, gate/up products, GELU and the down product; result_output = the output head.\n",
      a.model.c_str());
  std::unique_ptr<model::Model> drafter;
  std::unique_ptr<model::Assistant> asst;
  if (!a.drafter.empty()) {
    auto d = model::Model::Load(a.drafter, *backend);
    if (!d.ok()) Die(d.status());
    drafter = std::move(*d);
    auto pair = model::Assistant::Pair(**m, *drafter);
    if (!pair.ok()) Die(pair.status());
    asst = std::move(*pair);
  }
  for (int n : a.rows)
    for (const Profile& p : Measure(**m, asst.get(), a, n)) Print(p, a);
  return 0;
}
