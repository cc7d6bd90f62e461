// GGUF v3 writer: serializes metadata and streams aligned tensor data to an atomically renamed
// file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/check.h"
#include "gguf/gguf.h"

namespace lockstep::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;

struct Buf {
  std::vector<uint8_t> b;
  template <typename T>
  void Put(T x) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &x, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

// The value as an integer in [lo, hi], whichever integer alternative it holds.
bool IntInRange(const Value& v, int64_t lo, uint64_t hi, uint64_t* bits) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    if (*u > hi) return false;
    *bits = *u;
    return true;
  }
  if (const auto* i = std::get_if<int64_t>(&v.v)) {
    if (*i < lo || (*i > 0 && static_cast<uint64_t>(*i) > hi)) return false;
    *bits = static_cast<uint64_t>(*i);
    return true;
  }
  return false;
}

Status EncodePayload(const Value& v, ValueType t, Buf& out, const std::string& where, int depth);

Status EncodeInt(const Value& v, ValueType t, Buf& out, const std::string& where) {
  struct Range {
    int64_t lo;
    uint64_t hi;
    int bytes;
  };
  Range r{};
  switch (t) {
    case ValueType::UINT8:
      r = {0, 0xff, 1};
      break;
    case ValueType::INT8:
      r = {-128, 127, 1};
      break;
    case ValueType::UINT16:
      r = {0, 0xffff, 2};
      break;
    case ValueType::INT16:
      r = {-32768, 32767, 2};
      break;
    case ValueType::UINT32:
      r = {0, 0xffffffffu, 4};
      break;
    case ValueType::INT32:
      r = {std::numeric_limits<int32_t>::min(), 0x7fffffff, 4};
      break;
    case ValueType::UINT64:
      r = {0, std::numeric_limits<uint64_t>::max(), 8};
      break;
    default:
      r = {std::numeric_limits<int64_t>::min(), 0x7fffffffffffffffu, 8};
      break;
  }
  uint64_t bits = 0;
  if (!IntInRange(v, r.lo, r.hi, &bits)) {
    return Status::Errorf("{}: value {} does not fit {}", where, ToString(v), ValueTypeName(t));
  }
  // Little-endian truncation keeps the two's-complement low bytes, which is the encoding.
  uint8_t tmp[8];
  std::memcpy(tmp, &bits, 8);
  out.b.insert(out.b.end(), tmp, tmp + r.bytes);
  return Status::Ok();
}

Status EncodeArray(const Value& v, Buf& out, const std::string& where, int depth) {
  const Array* a = v.AsArray();
  if (!a) return Status::Errorf("{}: array value holds no array", where);
  if (depth >= 8) return Status::Errorf("{}: arrays nested deeper than 8", where);
  out.Put<uint32_t>(static_cast<uint32_t>(a->elem_type));
  out.Put<uint64_t>(a->items.size());
  for (size_t k = 0; k < a->items.size(); ++k) {
    const Value& item = a->items[k];
    if (item.type != a->elem_type) {
      return Status::Errorf("{}[{}]: item type {} differs from the array's {}", where, k,
                            ValueTypeName(item.type), ValueTypeName(a->elem_type));
    }
    LS_RETURN_IF_ERROR(
        EncodePayload(item, a->elem_type, out, fmt::format("{}[{}]", where, k), depth + 1));
  }
  return Status::Ok();
}

Status EncodePayload(const Value& v, ValueType t, Buf& out, const std::string& where, int depth) {
  switch (t) {
    case ValueType::FLOAT32:
    case ValueType::FLOAT64: {
      const auto* d = std::get_if<double>(&v.v);
      if (!d) return Status::Errorf("{}: {} value holds no float", where, ValueTypeName(t));
      if (t == ValueType::FLOAT32)
        out.Put<float>(static_cast<float>(*d));
      else
        out.Put<double>(*d);
      return Status::Ok();
    }
    case ValueType::BOOL: {
      const auto b = v.AsBool();
      if (!b) return Status::Errorf("{}: bool value holds no bool", where);
      out.Put<uint8_t>(*b ? 1 : 0);
      return Status::Ok();
    }
    case ValueType::STRING: {
      const std::string* s = v.AsString();
      if (!s) return Status::Errorf("{}: string value holds no string", where);
      out.PutString(*s);
      return Status::Ok();
    }
    case ValueType::ARRAY:
      return EncodeArray(v, out, where, depth);
    default:
      break;
  }
  if (static_cast<uint32_t>(t) > static_cast<uint32_t>(ValueType::FLOAT64)) {
    return Status::Errorf("{}: unknown value type {}", where, static_cast<uint32_t>(t));
  }
  return EncodeInt(v, t, out, where);
}

uint64_t AlignUp(uint64_t x, uint64_t a) {
  return x % a == 0 ? x : x + (a - x % a);
}

uint64_t TensorBytes(DType type, const std::vector<int64_t>& ne) {
  const auto& info = Info(type);
  CHECKF(!ne.empty() && ne.size() <= 4, "tensor must have 1..4 dims, got {}", ne.size());
  for (int64_t x : ne) CHECKF(x > 0, "tensor dimension {} is not positive", x);
  CHECKF(ne[0] % info.block_size == 0, "ne[0]={} is not a multiple of {}'s block size {}", ne[0],
         info.name, info.block_size);
  uint64_t n = static_cast<uint64_t>(ne[0] / info.block_size) * info.type_size;
  for (size_t j = 1; j < ne.size(); ++j)
    CHECKF(!__builtin_mul_overflow(n, static_cast<uint64_t>(ne[j]), &n), "tensor size overflows");
  return n;
}

// Owns the temporary output: closes it and removes it unless Commit() renamed it into place.
// The temporary is a new file with a unique name next to the output (mkostemp: O_EXCL, so an
// existing file or symlink of that name is never opened), so two writers to one output never
// share it and whether the output was written is decided by the rename alone.
class TmpFile {
 public:
  TmpFile(std::string path) : path_(std::move(path)) {}
  ~TmpFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  }
  Status Open() {
    std::string name = path_ + ".tmp.XXXXXX";
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ < 0) return Status::Errorf("{}: cannot create: {}", name, std::strerror(errno));
    tmp_ = name;
    const mode_t mask = ::umask(0);  // mkostemp makes 0600; a model file is 0666 & ~umask
    ::umask(mask);
    ::fchmod(fd_, 0666 & ~mask);
    return Status::Ok();
  }
  Status Write(const uint8_t* p, uint64_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, std::min<uint64_t>(n, 1u << 30));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Status::Errorf("{}: write failed: {}", tmp_, std::strerror(errno));
      p += w;
      n -= static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }
  Status Commit() {
    if (::fsync(fd_) != 0)
      return Status::Errorf("{}: fsync failed: {}", tmp_, std::strerror(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Status::Errorf("{}: close failed: {}", tmp_, std::strerror(errno));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Status::Errorf("{}: rename to {} failed: {}", tmp_, path_, std::strerror(errno));
    }
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void Writer::Set(const std::string& key, Value v) {
  // The alignment key and the writer's alignment are one setting.
  if (key == "general.alignment") {
    const auto a = v.AsInt();
    alignment_ = a && *a > 0 ? static_cast<uint64_t>(*a) : 0;
  }
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

void Writer::AddTensor(const std::string& name, DType type, std::vector<int64_t> ne,
                       std::function<void(uint8_t* dst)> fill) {
  const uint64_t nbytes = TensorBytes(type, ne);
  tensors_.push_back(PendingTensor{name, type, std::move(ne), nbytes, std::move(fill)});
}

void Writer::AddTensorCopy(const std::string& name, DType type, std::vector<int64_t> ne,
                           const void* src) {
  const uint64_t nbytes = TensorBytes(type, ne);
  AddTensor(name, type, std::move(ne),
            [src, nbytes](uint8_t* dst) { std::memcpy(dst, src, nbytes); });
}

Status Writer::WriteFile(const std::string& path,
                         const std::function<void(uint64_t, uint64_t)>& progress,
                         const std::atomic<bool>* cancel) const {
  if (alignment_ == 0 || !std::has_single_bit(alignment_) || alignment_ > 0xffffffffu) {
    return Status::Errorf("{}: general.alignment = {}: must be a power of two that fits uint32",
                          path, alignment_);
  }
  std::set<std::string> names;
  for (const auto& t : tensors_)
    if (t.name.empty() || !names.insert(t.name).second)
      return Status::Errorf("{}: tensor name \"{}\" is empty or duplicated", path, t.name);

  // Metadata; the alignment key is written whenever it differs from the default or was set.
  auto kv = kv_;
  bool has_align = false;
  for (auto& [k, v] : kv)
    if (k == "general.alignment")
      has_align = true, v = Value::U32(static_cast<uint32_t>(alignment_));
  if (!has_align && alignment_ != 32)
    kv.emplace_back("general.alignment", Value::U32(static_cast<uint32_t>(alignment_)));

  Buf h;
  h.Put<uint32_t>(kMagic);
  h.Put<uint32_t>(3);
  h.Put<uint64_t>(tensors_.size());
  h.Put<uint64_t>(kv.size());
  for (const auto& [k, v] : kv) {
    if (k.empty()) return Status::Errorf("{}: empty metadata key", path);
    h.PutString(k);
    h.Put<uint32_t>(static_cast<uint32_t>(v.type));
    LS_RETURN_IF_ERROR(EncodePayload(v, v.type, h, fmt::format("{}: metadata \"{}\"", path, k), 0));
  }
  uint64_t offset = 0, total = 0;
  for (const auto& t : tensors_) {
    h.PutString(t.name);
    h.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t x : t.ne) h.Put<uint64_t>(static_cast<uint64_t>(x));
    h.Put<uint32_t>(static_cast<uint32_t>(t.type));
    h.Put<uint64_t>(offset);
    offset = AlignUp(offset + t.nbytes, alignment_);
    total += t.nbytes;
  }
  const uint64_t data_offset = AlignUp(h.b.size(), alignment_);
  h.b.resize(tensors_.empty() ? h.b.size() : data_offset, 0);

  TmpFile out(path);
  LS_RETURN_IF_ERROR(out.Open());
  LS_RETURN_IF_ERROR(out.Write(h.b.data(), h.b.size()));
  std::vector<uint8_t> buf;
  const std::vector<uint8_t> zeros(std::min<uint64_t>(alignment_, 4096), 0);
  uint64_t done = 0;
  if (progress) progress(0, total);
  const auto cancelled = [cancel] { return cancel && cancel->load(std::memory_order_relaxed); };
  for (const auto& t : tensors_) {
    if (cancelled()) return Status::Errorf("{}: interrupted, not written", path);
    buf.assign(t.nbytes, 0);  // zeroed so a fill that skips bytes still writes deterministic data
    try {
      if (t.fill) t.fill(buf.data());
    } catch (const std::exception& e) {
      return Status::Errorf("{}: filling tensor \"{}\" failed: {}", path, t.name, e.what());
    } catch (...) {
      return Status::Errorf("{}: filling tensor \"{}\" failed", path, t.name);
    }
    LS_RETURN_IF_ERROR(out.Write(buf.data(), t.nbytes));
    for (uint64_t pad = AlignUp(t.nbytes, alignment_) - t.nbytes; pad > 0;) {
      const uint64_t n = std::min<uint64_t>(pad, zeros.size());
      LS_RETURN_IF_ERROR(out.Write(zeros.data(), n));
      pad -= n;
    }
    done += t.nbytes;
    if (progress) progress(done, total);
  }
  if (cancelled()) return Status::Errorf("{}: interrupted, not written", path);
  return out.Commit();
}

}  // namespace lockstep::gguf
