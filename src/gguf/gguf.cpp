// GGUF reader: parses and validates a whole file (over mmap or caller memory) before use.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/check.h"

namespace lockstep::gguf {

static_assert(std::endian::native == std::endian::little, "GGUF fields are read as little-endian");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kMaxDepth = 8;             // nested arrays deeper than this are rejected
constexpr uint32_t kMaxDims = 4;

// Names a field lazily: rendering happens only on error, so hot loops over large arrays
// (tokenizer vocabularies) do not format a string per element.
struct Field {
  const Field* parent = nullptr;
  std::string_view text;
  int64_t index = -1;
  std::string Render() const {
    std::string s = parent ? parent->Render() : std::string();
    s += text;
    if (index >= 0) s += fmt::format("[{}]", index);
    return s;
  }
};

// Bytes one element of `t` occupies at least, used to cap counts by the bytes that remain.
uint64_t MinEncodedSize(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;
    case ValueType::ARRAY:
      return 12;
  }
  return 1;
}

bool KnownValueType(uint32_t t) {
  return t <= static_cast<uint32_t>(ValueType::FLOAT64);
}

}  // namespace

// Walks the file front to back; the first problem stops it with a message naming the label,
// the field, the value and the byte offset it was read at.
class Parser {
 public:
  Parser(const uint8_t* data, uint64_t size, const std::string& label)
      : d_(data), n_(size), label_(label) {}
  Status Run(File& f);

 private:
  const uint8_t* d_;
  uint64_t n_;
  uint64_t pos_ = 0;
  const std::string& label_;
  Status err_;
  std::vector<uint64_t> kv_value_at_;    // byte offset of each metadata value
  std::vector<uint64_t> tensor_off_at_;  // byte offset of each tensor's offset field

  uint64_t Remaining() const { return n_ - pos_; }
  bool Fail(const Field& field, const std::string& value, uint64_t at, std::string_view why) {
    err_ = Status::Errorf("{}: {} = {} (at byte {}): {}", label_, field.Render(), value, at, why);
    return false;
  }
  bool Need(uint64_t bytes, const Field& field) {
    if (bytes <= Remaining()) return true;
    err_ = Status::Errorf(
        "{}: {} (at byte {}): truncated: needs {} bytes, only {} remain in a "
        "{}-byte file",
        label_, field.Render(), pos_, bytes, Remaining(), n_);
    return false;
  }
  template <typename T>
  bool Read(T* out, const Field& field) {
    if (!Need(sizeof(T), field)) return false;
    std::memcpy(out, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool ReadString(std::string* out, const Field& field);
  bool ReadValue(ValueType t, Value* out, const Field& field, int depth);
  bool ReadArray(Value* out, const Field& field, int depth);
  bool ReadHeader(File& f, uint64_t* n_tensors, uint64_t* n_kv);
  bool ReadMetadata(File& f, uint64_t n_kv);
  bool ReadAlignment(File& f);
  bool ReadTensorInfo(File& f, uint64_t i);
  bool ReadShape(TensorInfo* t, const Field& tf);
  bool CheckLayout(File& f);
};

bool Parser::ReadString(std::string* out, const Field& field) {
  const uint64_t at = pos_;
  uint64_t len = 0;
  if (!Read(&len, field)) return false;
  if (len > Remaining()) {
    return Fail(field, fmt::format("string of length {}", len), at,
                fmt::format("length exceeds the {} bytes left in the file", Remaining()));
  }
  out->assign(reinterpret_cast<const char*>(d_ + pos_), len);
  pos_ += len;
  return true;
}

bool Parser::ReadValue(ValueType t, Value* out, const Field& field, int depth) {
  out->type = t;
  const uint64_t at = pos_;
  switch (t) {
    case ValueType::UINT8: {
      uint8_t x;
      if (!Read(&x, field)) return false;
      out->v = uint64_t{x};
      return true;
    }
    case ValueType::UINT16: {
      uint16_t x;
      if (!Read(&x, field)) return false;
      out->v = uint64_t{x};
      return true;
    }
    case ValueType::UINT32: {
      uint32_t x;
      if (!Read(&x, field)) return false;
      out->v = uint64_t{x};
      return true;
    }
    case ValueType::UINT64: {
      uint64_t x;
      if (!Read(&x, field)) return false;
      out->v = x;
      return true;
    }
    case ValueType::INT8: {
      int8_t x;
      if (!Read(&x, field)) return false;
      out->v = int64_t{x};
      return true;
    }
    case ValueType::INT16: {
      int16_t x;
      if (!Read(&x, field)) return false;
      out->v = int64_t{x};
      return true;
    }
    case ValueType::INT32: {
      int32_t x;
      if (!Read(&x, field)) return false;
      out->v = int64_t{x};
      return true;
    }
    case ValueType::INT64: {
      int64_t x;
      if (!Read(&x, field)) return false;
      out->v = x;
      return true;
    }
    case ValueType::FLOAT32: {
      float x;
      if (!Read(&x, field)) return false;
      out->v = static_cast<double>(x);
      return true;
    }
    case ValueType::FLOAT64: {
      double x;
      if (!Read(&x, field)) return false;
      out->v = x;
      return true;
    }
    case ValueType::BOOL: {
      uint8_t x;
      if (!Read(&x, field)) return false;
      if (x > 1) return Fail(field, fmt::format("{}", x), at, "bool byte must be 0 or 1");
      out->v = x == 1;
      return true;
    }
    case ValueType::STRING: {
      std::string s;
      if (!ReadString(&s, field)) return false;
      out->v = std::move(s);
      return true;
    }
    case ValueType::ARRAY:
      return ReadArray(out, field, depth);
  }
  return Fail(field, fmt::format("{}", static_cast<uint32_t>(t)), at, "unknown value type");
}

bool Parser::ReadArray(Value* out, const Field& field, int depth) {
  const uint64_t at = pos_;
  if (depth >= kMaxDepth) {
    return Fail(field, "array", at, fmt::format("arrays nested deeper than {}", kMaxDepth));
  }
  const Field tf{&field, ".elem_type"};
  uint32_t et = 0;
  if (!Read(&et, tf)) return false;
  if (!KnownValueType(et)) return Fail(tf, fmt::format("{}", et), at, "unknown value type");
  const Field cf{&field, ".count"};
  const uint64_t count_at = pos_;
  uint64_t count = 0;
  if (!Read(&count, cf)) return false;
  const ValueType elem = static_cast<ValueType>(et);
  // Every element takes at least MinEncodedSize bytes, so a count the rest of the file cannot
  // hold is rejected before anything is allocated for it.
  if (count > Remaining() / MinEncodedSize(elem)) {
    return Fail(cf, fmt::format("{}", count), count_at,
                fmt::format("{} elements of {} cannot fit in the {} bytes left", count,
                            ValueTypeName(elem), Remaining()));
  }
  Array arr;
  arr.elem_type = elem;
  arr.items.resize(count);
  for (uint64_t k = 0; k < count; ++k) {
    const Field ef{&field, "", static_cast<int64_t>(k)};
    if (!ReadValue(elem, &arr.items[k], ef, depth + 1)) return false;
  }
  out->v = std::move(arr);
  return true;
}

bool Parser::ReadHeader(File& f, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic = 0;
  if (!Read(&magic, Field{nullptr, "magic"})) return false;
  if (magic != kMagic) {
    return Fail(Field{nullptr, "magic"}, fmt::format("0x{:08x}", magic), 0,
                "not a GGUF file (expected \"GGUF\", 0x46554747)");
  }
  const Field vf{nullptr, "version"};
  if (!Read(&f.version_, vf)) return false;
  if (f.version_ != 2 && f.version_ != 3) {
    const bool swapped = f.version_ == 0x02000000u || f.version_ == 0x03000000u;
    return Fail(vf, fmt::format("{}", f.version_), 4,
                swapped ? "big-endian GGUF is not supported" : "unsupported version (need 2 or 3)");
  }
  const Field tf{nullptr, "n_tensors"};
  if (!Read(n_tensors, tf)) return false;
  const Field kf{nullptr, "n_kv"};
  if (!Read(n_kv, kf)) return false;
  // Smallest encodings: a tensor info is name(8+1) n_dims(4) ne(8) type(4) offset(8); a
  // metadata pair is key(8+1) type(4) value(1).
  if (*n_tensors > n_ / 33) {
    return Fail(tf, fmt::format("{}", *n_tensors), 8,
                fmt::format("more tensors than a {}-byte file can describe", n_));
  }
  if (*n_kv > n_ / 14) {
    return Fail(kf, fmt::format("{}", *n_kv), 16,
                fmt::format("more metadata pairs than a {}-byte file can hold", n_));
  }
  return true;
}

bool Parser::ReadMetadata(File& f, uint64_t n_kv) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string base = fmt::format("metadata[{}]", i);
    const Field bf{nullptr, base};
    const Field kf{&bf, ".key"};
    const uint64_t key_at = pos_;
    std::string key;
    if (!ReadString(&key, kf)) return false;
    if (key.empty()) return Fail(kf, "\"\"", key_at, "empty key");
    const std::string named = fmt::format("metadata[{}] {}", i, ToString(Value::Str(key)));
    if (f.kv_index_.count(key)) {
      return Fail(Field{nullptr, named}, "key", key_at,
                  fmt::format("duplicate key (first at metadata[{}])", f.kv_index_[key]));
    }
    const Field nf{nullptr, named};
    const Field tf{&nf, ".type"};
    const uint64_t type_at = pos_;
    uint32_t t = 0;
    if (!Read(&t, tf)) return false;
    if (!KnownValueType(t)) return Fail(tf, fmt::format("{}", t), type_at, "unknown value type");
    Value v;
    kv_value_at_.push_back(pos_);
    if (!ReadValue(static_cast<ValueType>(t), &v, Field{&nf, ".value"}, 0)) {
      return false;
    }
    f.kv_index_[key] = f.kv_.size();
    f.kv_.emplace_back(std::move(key), std::move(v));
  }
  return true;
}

bool Parser::ReadAlignment(File& f) {
  auto it = f.kv_index_.find("general.alignment");
  if (it == f.kv_index_.end()) return true;  // default 32
  const Value& v = f.kv_[it->second].second;
  const std::string name = fmt::format("metadata[{}] \"general.alignment\"", it->second);
  const Field af{nullptr, name};
  if (v.type != ValueType::UINT32) {
    return Fail(af, ToString(v), kv_value_at_[it->second],
                fmt::format("must be uint32, found {}", ValueTypeName(v.type)));
  }
  const uint64_t a = std::get<uint64_t>(v.v);
  if (a == 0 || !std::has_single_bit(a)) {
    return Fail(af, fmt::format("{}", a), kv_value_at_[it->second],
                "alignment must be a non-zero power of two");
  }
  f.alignment_ = a;
  return true;
}

bool Parser::ReadShape(TensorInfo* t, const Field& tf) {
  const Field nf{&tf, ".n_dims"};
  const uint64_t nd_at = pos_;
  uint32_t n_dims = 0;
  if (!Read(&n_dims, nf)) return false;
  if (n_dims == 0 || n_dims > kMaxDims) {
    return Fail(nf, fmt::format("{}", n_dims), nd_at, "must be 1..4");
  }
  uint64_t elems = 1;
  for (uint32_t j = 0; j < n_dims; ++j) {
    const Field df{&tf, ".ne", j};
    const uint64_t at = pos_;
    uint64_t raw = 0;
    if (!Read(&raw, df)) return false;
    const int64_t ne = static_cast<int64_t>(raw);
    if (ne <= 0) return Fail(df, fmt::format("{}", ne), at, "dimension must be positive");
    if (__builtin_mul_overflow(elems, raw, &elems) ||
        elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Fail(df, fmt::format("{}", ne), at, "element count overflows int64");
    }
    t->ne.push_back(ne);
  }
  return true;
}

bool Parser::ReadTensorInfo(File& f, uint64_t i) {
  TensorInfo t;
  const std::string base = fmt::format("tensor[{}]", i);
  const uint64_t name_at = pos_;
  if (!ReadString(&t.name, Field{nullptr, base + ".name"})) return false;
  const std::string named = base + " " + ToString(Value::Str(t.name));
  const Field tf{nullptr, named};
  if (t.name.empty()) return Fail(Field{nullptr, base + ".name"}, "\"\"", name_at, "empty name");
  if (f.tensor_index_.count(t.name)) {
    return Fail(
        Field{&tf, ".name"}, ToString(Value::Str(t.name)), name_at,
        fmt::format("duplicate tensor name (first at tensor[{}])", f.tensor_index_[t.name]));
  }
  if (!ReadShape(&t, tf)) return false;
  const Field yf{&tf, ".type"};
  const uint64_t type_at = pos_;
  uint32_t type_id = 0;
  if (!Read(&type_id, yf)) return false;
  const auto info = LookupDType(type_id);
  if (!info) return Fail(yf, fmt::format("{}", type_id), type_at, "unknown tensor type");
  t.type = info->type;
  if (t.ne[0] % info->block_size != 0) {
    return Fail(Field{&tf, ".ne[0]"}, fmt::format("{}", t.ne[0]), type_at,
                fmt::format("not a multiple of {}'s block size {}", info->name, info->block_size));
  }
  uint64_t nbytes = static_cast<uint64_t>(t.ne[0] / info->block_size) * info->type_size;
  for (size_t j = 1; j < t.ne.size(); ++j) {
    if (__builtin_mul_overflow(nbytes, static_cast<uint64_t>(t.ne[j]), &nbytes)) {
      return Fail(Field{&tf, ".ne", static_cast<int64_t>(j)}, fmt::format("{}", t.ne[j]), type_at,
                  "byte size overflows uint64");
    }
  }
  t.nbytes = nbytes;
  const Field of{&tf, ".offset"};
  const uint64_t off_at = pos_;
  if (!Read(&t.offset, of)) return false;
  if (t.offset % f.alignment_ != 0) {
    return Fail(of, fmt::format("{}", t.offset), off_at,
                fmt::format("not a multiple of the alignment {}", f.alignment_));
  }
  tensor_off_at_.push_back(off_at);
  f.tensor_index_[t.name] = f.tensors_.size();
  f.tensors_.push_back(std::move(t));
  return true;
}

bool Parser::CheckLayout(File& f) {
  // The data section starts at the first aligned byte after the tensor directory.
  const uint64_t a = f.alignment_;
  f.data_offset_ = pos_ % a == 0 ? pos_ : pos_ + (a - pos_ % a);
  if (f.tensors_.empty()) return true;
  const uint64_t avail = f.data_offset_ <= n_ ? n_ - f.data_offset_ : 0;
  std::vector<size_t> order(f.tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorInfo& t = f.tensors_[k];
    if (t.offset > avail || t.nbytes > avail - t.offset) {
      return Fail(
          Field{nullptr, fmt::format("tensor[{}] {}.offset", k, ToString(Value::Str(t.name)))},
          fmt::format("{}", t.offset), tensor_off_at_[k],
          fmt::format("data [{}, +{}) ends past the data section ({} bytes from byte {})", t.offset,
                      t.nbytes, avail, f.data_offset_));
    }
  }
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return f.tensors_[x].offset < f.tensors_[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& p = f.tensors_[order[k - 1]];
    const TensorInfo& c = f.tensors_[order[k]];
    if (p.offset + p.nbytes > c.offset) {
      return Fail(Field{nullptr, fmt::format("tensor[{}] {}.offset", order[k],
                                             ToString(Value::Str(c.name)))},
                  fmt::format("{}", c.offset), tensor_off_at_[order[k]],
                  fmt::format("overlaps tensor[{}] {} at [{}, {})", order[k - 1],
                              ToString(Value::Str(p.name)), p.offset, p.offset + p.nbytes));
    }
  }
  return true;
}

Status Parser::Run(File& f) {
  uint64_t n_tensors = 0, n_kv = 0;
  if (!ReadHeader(f, &n_tensors, &n_kv)) return err_;
  if (!ReadMetadata(f, n_kv)) return err_;
  if (!ReadAlignment(f)) return err_;
  for (uint64_t i = 0; i < n_tensors; ++i)
    if (!ReadTensorInfo(f, i)) return err_;
  if (!CheckLayout(f)) return err_;
  return Status::Ok();
}

Expected<std::unique_ptr<File>> File::FromMemory(const void* data, size_t size,
                                                 const std::string& label) {
  std::unique_ptr<File> f(new File());
  f->path_ = label;
  f->base_ = static_cast<const uint8_t*>(data);
  f->size_ = size;
  Parser p(f->base_, size, label);
  LS_RETURN_IF_ERROR(p.Run(*f));
  return f;
}

Expected<std::unique_ptr<File>> File::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Errorf("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Errorf("{}: not a regular file", path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return Status::Errorf("{}: magic (at byte 0): truncated: the file is empty", path);
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (m == MAP_FAILED) return Status::Errorf("{}: mmap failed: {}", path, std::strerror(map_errno));
  std::unique_ptr<File> f(new File());
  f->mapping_ = m;  // owned from here on, so the destructor unmaps on any error below
  f->path_ = path;
  f->base_ = static_cast<const uint8_t*>(m);
  f->size_ = size;
  Parser p(f->base_, size, path);
  LS_RETURN_IF_ERROR(p.Run(*f));
  return f;
}

File::~File() {
  if (mapping_) ::munmap(mapping_, size_);
}

const Value* File::Find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* File::TensorData(const TensorInfo& t) const {
  CHECKF(data_offset_ <= size_ && t.offset <= size_ - data_offset_ &&
             t.nbytes <= size_ - data_offset_ - t.offset,
         "tensor {} is not inside {}", t.name, path_);
  return base_ + data_offset_ + t.offset;
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t x : ne) n *= x;
  return n;
}

}  // namespace lockstep::gguf
