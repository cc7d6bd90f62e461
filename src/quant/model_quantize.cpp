// Whole-model quantization: per-tensor type choice (llama.cpp's mix rules, re-derived) and the
// streaming, thread-count-independent GGUF rewrite.
#include "quant/model_quantize.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "core/check.h"
#include "core/threadpool.h"
#include "quant/quant.h"

namespace lockstep::quant {
namespace {

struct MixInfo {
  Mix mix;
  std::string_view name;
  DType base;      // type of an ordinary matrix
  uint32_t ftype;  // llama.cpp LLAMA_FTYPE_MOSTLY_*
};

constexpr MixInfo kMixes[] = {
    {Mix::F16, "F16", DType::F16, 1},         {Mix::BF16, "BF16", DType::BF16, 32},
    {Mix::Q8_0, "Q8_0", DType::Q8_0, 7},      {Mix::Q6_K, "Q6_K", DType::Q6_K, 18},
    {Mix::Q5_K_M, "Q5_K_M", DType::Q5_K, 17}, {Mix::Q4_K_M, "Q4_K_M", DType::Q4_K, 15},
    {Mix::Q4_0, "Q4_0", DType::Q4_0, 2},      {Mix::Q2_K, "Q2_K", DType::Q2_K, 10},
};

const MixInfo& InfoOf(Mix mix) {
  for (const auto& m : kMixes)
    if (m.mix == mix) return m;
  CHECKF(false, "unknown mix {}", static_cast<int>(mix));
  return kMixes[0];
}

bool IsFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Tensors whose values feed elementwise ops, routing or indexing: quantizing them buys almost
// no space and costs accuracy (or, for orderings, correctness).
bool MustStayExact(const gguf::TensorInfo& t) {
  int64_t rows = 1;
  for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
  if (t.ne.size() < 2 || rows == 1) return true;
  const std::string_view n = t.name;
  if (!n.ends_with(".weight")) return true;  // e.g. *.scale, masked_embd_ordering
  return Contains(n, "norm") || Contains(n, "rope_freqs") || Contains(n, "layer_output_scale") ||
         Contains(n, "ffn_gate_inp") || Contains(n, "ordering") || Contains(n, "centroids");
}

// llama.cpp's "use more bits" layer subset: the first and last eighth and every third layer
// in between get the larger type.
bool UseMoreBits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

int64_t LayerOf(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int64_t v = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
    v = v * 10 + (name[i] - '0');
  return v;
}

// n_head / n_head_kv of every layer (head_count_kv may be a per-layer array); empty when
// unknown (then 1).
std::vector<int64_t> GqaOf(const gguf::File& f, const std::string& arch, int64_t n_layer) {
  const auto* h = f.Find(arch + ".attention.head_count");
  const auto* kv = f.Find(arch + ".attention.head_count_kv");
  if (!h || !kv || !h->AsInt()) return {};
  std::vector<int64_t> gqa;
  for (int64_t il = 0; il < n_layer; ++il) {
    std::optional<int64_t> nkv = kv->AsInt();
    if (const auto* arr = kv->AsArray(); arr && il < static_cast<int64_t>(arr->items.size()))
      nkv = arr->items[static_cast<size_t>(il)].AsInt();
    gqa.push_back(!nkv || *nkv <= 0 ? 1 : *h->AsInt() / *nkv);
  }
  return gqa;
}

// A smaller block that keeps roughly the same bits per weight (llama.cpp's fallbacks, with
// Q4_0 standing in for IQ4_NL), then F16 when even 32 does not divide the row.
DType FitBlock(DType t, int64_t ne0) {
  if (ne0 % static_cast<int64_t>(Info(t).block_size) == 0) return t;
  DType fb = DType::F16;
  switch (t) {
    case DType::Q2_K:
    case DType::Q3_K:
      fb = DType::Q4_0;
      break;
    case DType::Q4_K:
      fb = DType::Q5_0;
      break;
    case DType::Q5_K:
      fb = DType::Q5_1;
      break;
    case DType::Q6_K:
      fb = DType::Q8_0;
      break;
    default:
      break;
  }
  return ne0 % static_cast<int64_t>(Info(fb).block_size) == 0 ? fb : DType::F16;
}

}  // namespace

MixPlanner::MixPlanner(Mix mix, MixModel model, bool requantize)
    : mix_(mix), model_(std::move(model)), requantize_(requantize) {}

DType MixPlanner::Next(const gguf::TensorInfo& t) {
  MixModel& c = model_;
  if (MustStayExact(t) || (!requantize_ && !IsFloatType(t.type))) return t.type;
  const MixInfo& mi = InfoOf(mix_);
  const Mix mix = mix_;
  DType type = mi.base;
  const bool k_mix = mix == Mix::Q2_K || mix == Mix::Q4_K_M || mix == Mix::Q5_K_M;
  const std::string_view n = t.name;
  const bool is_v = Contains(n, "attn_v.weight");
  const int64_t il = LayerOf(n);
  if (mix == Mix::F16 || mix == Mix::BF16) return type;
  if (n == "output.weight" || (!c.has_output && n == "token_embd.weight")) {
    if (mix != Mix::Q8_0) type = DType::Q6_K;  // the output projection is the most sensitive
  } else if (is_v && k_mix) {
    const int64_t gqa =
        il >= 0 && il < static_cast<int64_t>(c.gqa.size()) ? c.gqa[static_cast<size_t>(il)] : 1;
    if (mix == Mix::Q2_K)
      type = gqa >= 4 ? DType::Q4_K : DType::Q3_K;
    else if (UseMoreBits(i_attn_v_, c.n_attn_v))
      type = DType::Q6_K;
  } else if (Contains(n, "ffn_down") && k_mix) {
    if (mix == Mix::Q2_K)
      type = DType::Q3_K;
    else if (il >= 0 && UseMoreBits(il, c.n_layer))
      type = DType::Q6_K;
  } else if (Contains(n, "attn_output.weight") && mix == Mix::Q2_K) {
    type = DType::Q3_K;
  }
  if (is_v) ++i_attn_v_;
  return FitBlock(type, t.ne[0]);
}

namespace {

struct Cancelled : std::runtime_error {
  Cancelled() : std::runtime_error("interrupted") {}
};

bool IsCancelled(const QuantizeOptions& o) {
  return o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed);
}

// Converts every row of `t` to `to`; rows are independent so the split never changes a byte.
void ConvertTensor(const gguf::File& f, const gguf::TensorInfo& t, DType to, ThreadPool& pool,
                   const QuantizeOptions& opts, uint8_t* dst) {
  const uint8_t* src = f.TensorData(t);
  if (to == t.type) {
    std::copy(src, src + t.nbytes, dst);
    return;
  }
  const int64_t ne0 = t.ne[0], rows = t.n_elements() / ne0;
  const size_t in_row = RowBytes(t.type, ne0), out_row = RowBytes(to, ne0);
  constexpr int64_t kSlab = 2048;  // rows between cancellation checks
  for (int64_t s = 0; s < rows; s += kSlab) {
    if (IsCancelled(opts)) throw Cancelled();
    const int64_t e = std::min(rows, s + kSlab);
    pool.ParallelFor(e - s, 16, [&](int64_t b, int64_t end) {
      std::vector<float> buf(static_cast<size_t>(ne0));
      for (int64_t r = s + b; r < s + end; ++r) {
        DequantizeRow(t.type, src + static_cast<size_t>(r) * in_row, buf.data(), ne0);
        QuantizeRow(to, buf.data(), dst + static_cast<size_t>(r) * out_row, ne0);
      }
    });
  }
}

Status CheckPaths(const std::string& in_path, const std::string& out_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool same = fs::exists(out_path, ec)
                        ? fs::equivalent(in_path, out_path, ec)
                        : fs::weakly_canonical(in_path, ec) == fs::weakly_canonical(out_path, ec);
  if (same) return Status::Errorf("{}: input and output are the same file", out_path);
  return Status::Ok();
}

}  // namespace

std::optional<Mix> MixFromName(std::string_view name) {
  std::string up(name);
  for (char& ch : up) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (const auto& m : kMixes)
    if (m.name == up) return m.mix;
  return std::nullopt;
}

std::string_view MixName(Mix mix) {
  return InfoOf(mix).name;
}

std::string ValidMixNames() {
  std::string s;
  for (const auto& m : kMixes) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

uint32_t FileTypeOf(Mix mix) {
  return InfoOf(mix).ftype;
}

std::vector<DType> PlanTypes(const gguf::File& file, Mix mix, bool requantize) {
  MixModel c;
  std::string arch = "gemma4";
  if (const auto* a = file.Find("general.architecture"); a && a->AsString()) arch = *a->AsString();
  if (const auto* bc = file.Find(arch + ".block_count"); bc && bc->AsInt())
    c.n_layer = *bc->AsInt();
  for (const auto& t : file.tensors()) {
    if (Contains(t.name, "attn_v.weight")) ++c.n_attn_v;
    if (t.name == "output.weight") c.has_output = true;
    if (c.n_layer == 0 || LayerOf(t.name) >= c.n_layer) c.n_layer = LayerOf(t.name) + 1;
  }
  c.gqa = GqaOf(file, arch, c.n_layer);
  MixPlanner planner(mix, std::move(c), requantize);
  std::vector<DType> out;
  for (const auto& t : file.tensors()) out.push_back(planner.Next(t));
  return out;
}

Status QuantizeModel(const std::string& in_path, const std::string& out_path, Mix mix,
                     const QuantizeOptions& opts) {
  LS_RETURN_IF_ERROR(CheckPaths(in_path, out_path));
  LS_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(in_path));
  const std::vector<DType> plan = PlanTypes(*file, mix, opts.allow_requantize);
  const auto& tensors = file->tensors();
  // Requantizing compounds two roundings; like llama.cpp, refuse unless asked.
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (IsFloatType(t.type) || MustStayExact(t)) continue;
    if (!opts.allow_requantize)
      return Status::Errorf(
          "{}: tensor {} is already {}; quantize from an F32/F16/BF16 file (or pass "
          "--allow-requantize)",
          in_path, t.name, Name(t.type));
    if (plan[i] != t.type && !CanDequantize(t.type))
      return Status::Errorf("{}: tensor {} is {}, which cannot be requantized", in_path, t.name,
                            Name(t.type));
  }

  gguf::Writer w;
  w.SetAlignment(file->alignment());
  for (const auto& [k, v] : file->metadata()) w.Set(k, v);
  w.Set("general.file_type", gguf::Value::U32(FileTypeOf(mix)));
  w.Set("general.quantization_version", gguf::Value::U32(2));

  ThreadPool pool(std::max(1, opts.threads));
  QuantizeProgress prog;
  prog.n_tensors = tensors.size();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    if (t.ne.empty() || t.ne[0] <= 0)
      return Status::Errorf("{}: tensor {} has no rows", in_path, t.name);
    prog.total_out += RowBytes(plan[i], t.ne[0]) * static_cast<uint64_t>(t.n_elements() / t.ne[0]);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const gguf::TensorInfo* t = &tensors[i];
    const DType to = plan[i];
    w.AddTensor(t->name, to, t->ne, [&, t, to, i](uint8_t* dst) {
      if (IsCancelled(opts)) throw Cancelled();
      ConvertTensor(*file, *t, to, pool, opts, dst);
      prog.tensor = i + 1;
      prog.bytes_in += t->nbytes;
      prog.bytes_out += RowBytes(to, t->ne[0]) * static_cast<uint64_t>(t->n_elements() / t->ne[0]);
      if (opts.progress) opts.progress(prog);
    });
  }
  Status s = w.WriteFile(out_path, {}, opts.cancel);
  if (!s.ok() && IsCancelled(opts))
    return Status::Errorf("interrupted: {} not written (its temporary file removed)", out_path);
  return s;
}

}  // namespace lockstep::quant
