// Safetensors parsing: mmap, an 8-byte LE header length, a JSON header, validated byte ranges.
#include "convert/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

namespace lockstep::convert {
namespace {

// Real headers are a few MB at most; the cap keeps a corrupt length from driving a huge parse.
constexpr uint64_t kMaxHeader = 100ull << 20;

struct DTypeRow {
  StDType t;
  const char* name;
  size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {StDType::F64, "F64", 8},   {StDType::F32, "F32", 4}, {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I64, "I64", 8}, {StDType::I32, "I32", 4},
    {StDType::I16, "I16", 2},   {StDType::I8, "I8", 1},   {StDType::U8, "U8", 1},
    {StDType::BOOL, "BOOL", 1},
};

bool ParseDType(const std::string& s, StDType* out) {
  for (const auto& r : kDTypes)
    if (s == r.name) return *out = r.t, true;
  return false;
}

}  // namespace

const char* StDTypeName(StDType t) {
  for (const auto& r : kDTypes)
    if (r.t == t) return r.name;
  return "?";
}

size_t StDTypeSize(StDType t) {
  for (const auto& r : kDTypes)
    if (r.t == t) return r.size;
  return 0;
}

int64_t StTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::Errorf("{}: cannot stat: {}", path, std::strerror(e));
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Status::Errorf("{}: mmap failed: {}", path, std::strerror(e));
    }
    f->mapping_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  LS_RETURN_IF_ERROR(f->Parse());
  return f;
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromMemory(const void* data,
                                                                       size_t size,
                                                                       const std::string& label) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = label;
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  LS_RETURN_IF_ERROR(f->Parse());
  return f;
}

Status SafetensorsFile::Parse() {
  if (size_ < 8)
    return Status::Errorf("{}: {} bytes, too short for the 8-byte header length", path_, size_);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | base_[i];
  if (hlen > kMaxHeader || hlen > size_ - 8)
    return Status::Errorf("{}: header length {} at byte 0 exceeds the file ({} bytes) or {} MiB",
                          path_, hlen, size_, kMaxHeader >> 20);
  const char* hbeg = reinterpret_cast<const char*>(base_ + 8);
  nlohmann::json h = nlohmann::json::parse(hbeg, hbeg + hlen, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object())
    return Status::Errorf("{}: header (bytes 8..{}) is not a JSON object", path_, 8 + hlen);
  const uint64_t data_start = 8 + hlen, data_size = size_ - data_start;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = fmt::format("{}: tensor \"{}\"", path_, it.key());
    const auto& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return Status::Errorf("{}: entry needs dtype (string), shape (array), data_offsets [2]",
                            where);
    StTensor t;
    t.name = it.key();
    t.file = path_;
    if (!ParseDType(e["dtype"].get<std::string>(), &t.dtype))
      return Status::Errorf("{}: unknown dtype \"{}\"", where, e["dtype"].get<std::string>());
    uint64_t n = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned())
        return Status::Errorf("{}: shape entry {} is not a non-negative integer", where, d.dump());
      const uint64_t v = d.get<uint64_t>();
      if (v > (1ull << 40) || (v != 0 && n > (1ull << 50) / v))
        return Status::Errorf("{}: shape {} is too large", where, e["shape"].dump());
      n *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Status::Errorf("{}: data_offsets {} are not non-negative integers", where, off.dump());
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size)
      return Status::Errorf(
          "{}: data_offsets [{}, {}] outside the data section ({} bytes at offset {})", where, b,
          en, data_size, data_start);
    if (en - b != n * StDTypeSize(t.dtype))
      return Status::Errorf("{}: data_offsets [{}, {}] hold {} bytes but {} x shape {} needs {}",
                            where, b, en, en - b, StDTypeName(t.dtype), e["shape"].dump(),
                            n * StDTypeSize(t.dtype));
    t.data = base_ + data_start + b;
    t.nbytes = en - b;
    ranges.emplace_back(b, en);
    tensors_.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return Status::Errorf("{}: tensor byte ranges overlap at data offset {}", path_,
                            ranges[i].first);
  std::sort(tensors_.begin(), tensors_.end(),
            [](const StTensor& a, const StTensor& b) { return a.name < b.name; });
  return Status::Ok();
}

const StTensor* Checkpoint::Find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Expected<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  namespace fs = std::filesystem;
  auto ck = std::make_unique<Checkpoint>();
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    std::ifstream in(index);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object())
      return Status::Errorf("{}: not JSON with a \"weight_map\" object", index.string());
    std::map<std::string, std::string> want;  // tensor -> shard file name
    std::set<std::string> shards;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Status::Errorf("{}: weight_map[\"{}\"] is not a file name", index.string(),
                              it.key());
      const std::string f = it.value().get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        return Status::Errorf("{}: weight_map[\"{}\"] = \"{}\" is not a plain file name",
                              index.string(), it.key(), f);
      want[it.key()] = f;
      shards.insert(f);
    }
    std::map<std::string, SafetensorsFile*> opened;
    for (const auto& s : shards) {
      LS_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open((fs::path(dir) / s).string()));
      opened[s] = f.get();
      ck->files_.push_back(std::move(f));
    }
    for (const auto& [name, shard] : want) {
      const StTensor* found = nullptr;
      for (const auto& t : opened[shard]->tensors())
        if (t.name == name) found = &t;
      if (!found)
        return Status::Errorf("{}: tensor \"{}\" is listed for {} but that shard lacks it",
                              index.string(), name, shard);
      ck->by_name_[name] = found;
    }
  } else if (fs::exists(single, ec)) {
    LS_ASSIGN_OR_RETURN(auto f, SafetensorsFile::Open(single.string()));
    for (const auto& t : f->tensors()) ck->by_name_[t.name] = &t;
    ck->files_.push_back(std::move(f));
  } else {
    return Status::Errorf("{}: neither model.safetensors nor model.safetensors.index.json found",
                          dir);
  }
  return ck;
}

}  // namespace lockstep::convert
