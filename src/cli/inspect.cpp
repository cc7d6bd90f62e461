// `lockstep inspect`: prints a GGUF file's metadata, tensor directory and derived model config.
#include <cstdint>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/variant.h"
#include "gguf/gguf.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/model.h"

namespace lockstep::cli {
namespace {

using gguf::File;
using gguf::Value;
using gguf::ValueType;

struct InspectOptions {
  std::string path;
  bool json = false;
  bool tensors = false;
  bool no_metadata = false;
  bool no_config = false;
  size_t max_items = 8;
  std::string key;
};

std::string Shape(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
  return s + "]";
}

std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

// JSON for a metadata value; arrays keep their first `max_items` items plus the full count.
nlohmann::json ValueJson(const Value& v, size_t max_items) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v.v)) return *i;
  if (const auto* d = std::get_if<double>(&v.v)) return *d;
  if (const auto* b = std::get_if<bool>(&v.v)) return *b;
  if (const auto* s = std::get_if<std::string>(&v.v)) return *s;
  const gguf::Array& a = std::get<gguf::Array>(v.v);
  nlohmann::json items = nlohmann::json::array();
  for (size_t k = 0; k < a.items.size() && k < max_items; ++k)
    items.push_back(ValueJson(a.items[k], max_items));
  return {{"elem_type", gguf::ValueTypeName(a.elem_type)},
          {"count", a.items.size()},
          {"items", std::move(items)}};
}

uint64_t TotalTensorBytes(const File& f) {
  uint64_t n = 0;
  for (const auto& t : f.tensors()) n += t.nbytes;
  return n;
}

int PrintJson(const File& f, const InspectOptions& o) {
  nlohmann::json j;
  j["file"] = f.path();
  j["version"] = f.version();
  j["alignment"] = f.alignment();
  j["file_size"] = f.file_size();
  j["data_offset"] = f.data_offset();
  j["tensor_count"] = f.tensors().size();
  j["tensor_bytes"] = TotalTensorBytes(f);
  if (!o.no_metadata) {
    nlohmann::json md = nlohmann::json::array();
    for (const auto& [k, v] : f.metadata())
      md.push_back({{"key", k},
                    {"type", gguf::ValueTypeName(v.type)},
                    {"value", ValueJson(v, o.max_items)}});
    j["metadata"] = std::move(md);
  }
  if (o.tensors) {
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : f.tensors())
      ts.push_back({{"name", t.name},
                    {"type", Name(t.type)},
                    {"shape", t.ne},
                    {"offset", t.offset},
                    {"bytes", t.nbytes}});
    j["tensors"] = std::move(ts);
  }
  if (!o.no_config) {
    auto cfg = model::LoadConfig(f);
    j["config"] =
        cfg.ok() ? model::ConfigToJson(*cfg) : nlohmann::json{{"error", cfg.status().message()}};
    if (cfg.ok()) j["config"]["variant"] = VariantName(*cfg);
  }
  // Metadata strings come from the file and need not be UTF-8: replace, never throw.
  std::printf("%s\n", DumpJson(j, 2).c_str());
  return 0;
}

// KV cache bytes per sequence at the trained context and at 32768 positions, ours (default
// 256-row steps) next to llama.cpp's for the same layers and cache type (n_ubatch 512).
std::string KvMemoryTable(const model::ModelConfig& c) {
  std::string s = fmt::format(
      "\nKV cache per sequence (lockstep: sliding ring n_swa + 2 + 256; "
      "llama.cpp: n_ubatch 512):\n  {:<6} {:>9} {:>14} {:>14}\n",
      "type", "positions", "lockstep", "llama.cpp");
  for (int n_ctx : {c.n_ctx_train, 32768}) {
    if (n_ctx <= 0) continue;
    for (const char* type : {"f32", "f16", "bf16"}) {
      kv::CacheConfig kc = model::KvConfigFor(c, 1, n_ctx);
      kc.max_step_rows = 256;
      kc.type_k = kc.type_v = *kv::ParseCacheType(type);
      s += fmt::format("  {:<6} {:>9} {:>14} {:>14}\n", type, n_ctx,
                       HumanBytes(kv::KvCache::BytesPerSequence(kc, n_ctx)),
                       HumanBytes(kv::LlamaCppBytesPerSequence(kc, n_ctx, c.n_swa)));
    }
  }
  return s;
}

int PrintText(const File& f, const InspectOptions& o) {
  std::printf("%s: GGUF v%u, %s, alignment %llu, %zu metadata keys, %zu tensors (%s of data)\n",
              f.path().c_str(), f.version(), HumanBytes(f.file_size()).c_str(),
              static_cast<unsigned long long>(f.alignment()), f.metadata().size(),
              f.tensors().size(), HumanBytes(TotalTensorBytes(f)).c_str());
  if (!o.no_metadata) {
    std::printf("\nmetadata:\n");
    for (const auto& [k, v] : f.metadata()) {
      std::string type(gguf::ValueTypeName(v.type));
      if (const auto* a = v.AsArray())
        type = fmt::format("{}[{}]", gguf::ValueTypeName(a->elem_type), a->items.size());
      std::printf("  %-48s %-16s %s\n", k.c_str(), type.c_str(),
                  gguf::ToString(v, o.max_items).c_str());
    }
  }
  if (o.tensors) {
    std::printf("\ntensors:\n  %-48s %-8s %-28s %14s\n", "name", "type", "shape", "bytes");
    for (const auto& t : f.tensors())
      std::printf("  %-48s %-8s %-28s %14llu\n", t.name.c_str(), std::string(Name(t.type)).c_str(),
                  Shape(t.ne).c_str(), static_cast<unsigned long long>(t.nbytes));
  }
  if (!o.no_config) {
    auto cfg = model::LoadConfig(f);
    if (cfg.ok()) {
      std::printf("\nmodel config (variant: %s):\n%s", VariantName(*cfg).c_str(),
                  model::ConfigToTable(*cfg).c_str());
      if (!cfg->is_assistant()) std::printf("%s", KvMemoryTable(*cfg).c_str());
    } else {
      std::printf("\nmodel config: not available: %s\n", cfg.status().message().c_str());
    }
  }
  return 0;
}

}  // namespace

int Inspect(int argc, char** argv) {
  InspectOptions o;
  CLI::App app{"Print a GGUF file's metadata, tensors and derived model config.",
               "lockstep inspect"};
  app.add_option("file", o.path, "GGUF file")->required();
  app.add_flag("--json", o.json, "print one JSON object instead of text");
  app.add_flag("--tensors", o.tensors, "list every tensor (name, type, shape, bytes)");
  app.add_flag("--no-metadata", o.no_metadata, "omit the metadata section");
  app.add_flag("--no-config", o.no_config, "omit the derived model config");
  app.add_option("--max-items", o.max_items, "array items shown before abbreviating")
      ->capture_default_str();
  app.add_option("--key", o.key, "print only this metadata key's full value (arrays unabridged)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  auto file = File::Open(o.path);
  if (!file.ok()) {
    std::fprintf(stderr, "lockstep inspect: %s\n", file.status().message().c_str());
    return 1;
  }
  const File& f = **file;
  if (!o.key.empty()) {
    const Value* v = f.Find(o.key);
    if (!v) {
      std::fprintf(stderr, "lockstep inspect: %s: no metadata key \"%s\"\n", o.path.c_str(),
                   o.key.c_str());
      return 1;
    }
    if (o.json) {
      const auto j = ValueJson(*v, SIZE_MAX);
      std::printf("%s\n", DumpJson(j).c_str());
    } else if (const std::string* s = v->AsString()) {
      std::fwrite(s->data(), 1, s->size(), stdout);  // raw, e.g. a chat template
      std::printf("\n");
    } else {
      std::printf("%s\n", gguf::ToString(*v, SIZE_MAX).c_str());
    }
    return 0;
  }
  return o.json ? PrintJson(f, o) : PrintText(f, o);
}

}  // namespace lockstep::cli
