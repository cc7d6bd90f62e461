// GGUF reader/writer: round trips, every malformed-input class, truncation, writer atomicity.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <thread>

#include "gguf/gguf.h"
#include "testing/files.h"

namespace lockstep::gguf {
namespace {

namespace fs = std::filesystem;

// An independent little-endian byte builder, so malformed files are made without the writer.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& Put(T x) {
    uint8_t t[sizeof(T)];
    std::memcpy(t, &x, sizeof(T));
    b.insert(b.end(), t, t + sizeof(T));
    return *this;
  }
  Bytes& U8(uint8_t x) { return Put(x); }
  Bytes& U32(uint32_t x) { return Put(x); }
  Bytes& U64(uint64_t x) { return Put(x); }
  Bytes& Str(const std::string& s) {
    U64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& Raw(const std::vector<uint8_t>& r) {
    b.insert(b.end(), r.begin(), r.end());
    return *this;
  }
};

std::vector<uint8_t> Kv(const std::string& key, uint32_t type, const Bytes& payload) {
  Bytes k;
  k.Str(key).U32(type).Raw(payload.b);
  return k.b;
}

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type;
  uint64_t offset;
};

struct RawFile {
  uint32_t magic = 0x46554747, version = 3;
  std::optional<uint64_t> n_tensors, n_kv;
  std::vector<std::vector<uint8_t>> kvs{Kv("general.architecture", 8, Bytes().Str("gemma4"))};
  std::vector<RawTensor> tensors{{"a", {8, 2}, 0, 0}, {"b", {32}, 2, 64}};  // F32, Q4_0
  uint64_t alignment = 32, data_bytes = 82;                                 // "b" ends the file
  std::vector<uint8_t> Build() const {
    Bytes o;
    o.U32(magic).U32(version).U64(n_tensors.value_or(tensors.size()));
    o.U64(n_kv.value_or(kvs.size()));
    for (const auto& kv : kvs) o.Raw(kv);
    for (const auto& t : tensors) {
      o.Str(t.name).U32(static_cast<uint32_t>(t.ne.size()));
      for (auto x : t.ne) o.U64(x);
      o.U32(t.type).U64(t.offset);
    }
    while (o.b.size() % alignment) o.U8(0);
    for (uint64_t k = 0; k < data_bytes; ++k) o.U8(static_cast<uint8_t>(k));
    return o.b;
  }
};

Expected<std::unique_ptr<File>> Parse(const std::vector<uint8_t>& b) {
  return File::FromMemory(b.data(), b.size(), "test.gguf");
}

void ExpectError(const RawFile& f, const std::string& needle) {
  const auto bytes = f.Build();
  auto r = Parse(bytes);
  ASSERT_FALSE(r.ok()) << "expected an error mentioning " << needle;
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("test.gguf"), std::string::npos) << r.status().message();
}

class TmpDir {
 public:
  TmpDir() : p_(fs::temp_directory_path() / ("gguf_test_" + std::to_string(::getpid()))) {
    fs::create_directories(p_);
  }
  ~TmpDir() { fs::remove_all(p_); }
  std::string operator/(const std::string& n) const { return (p_ / n).string(); }

 private:
  fs::path p_;
};

TEST(GgufRaw, BaseFileIsValid) {
  const auto bytes = RawFile().Build();
  auto r = Parse(bytes);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const File& f = **r;
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[1].nbytes, 18u);
  EXPECT_EQ(f.TensorData(f.tensors()[1])[0], 64);  // data byte k holds k
  EXPECT_EQ(*f.Find("general.architecture")->AsString(), "gemma4");
}

TEST(GgufRaw, AcceptsVersion2) {
  RawFile f;
  f.version = 2;
  EXPECT_TRUE(Parse(f.Build()).ok());
}

TEST(GgufRaw, HeaderErrors) {
  RawFile f;
  f.magic = 0x46554746;
  ExpectError(f, "magic = 0x46554746 (at byte 0)");
  f = RawFile();
  f.version = 1;
  ExpectError(f, "version = 1 (at byte 4)");
  f.version = 0x03000000;
  ExpectError(f, "big-endian");
  f = RawFile();
  f.n_tensors = uint64_t{1} << 60;
  ExpectError(f, "n_tensors = 1152921504606846976 (at byte 8)");
  f = RawFile();
  f.n_kv = ~uint64_t{0};
  ExpectError(f, "n_kv");
  f = RawFile();
  f.n_kv = 2;  // claims one more pair than present: the tensor directory is read as a key
  EXPECT_FALSE(Parse(f.Build()).ok());
}

TEST(GgufRaw, MetadataErrors) {
  RawFile f;
  Bytes huge_key;
  huge_key.U64(1u << 30);
  f.kvs = {huge_key.b};
  ExpectError(f, "metadata[0].key = string of length 1073741824 (at byte 24)");
  f.kvs = {Kv("general.name", 8, Bytes().U64(~uint64_t{0}))};
  ExpectError(f, "metadata[0] \"general.name\".value = string of length");
  f.kvs = {Kv("x", 13, Bytes().U32(0))};
  ExpectError(f, "metadata[0] \"x\".type = 13");
  f.kvs = {Kv("x", 9, Bytes().U32(77).U64(1))};
  ExpectError(f, "\"x\".value.elem_type = 77");
  f.kvs = {Kv("x", 9, Bytes().U32(4).U64(uint64_t{1} << 62))};
  ExpectError(f, "\"x\".value.count = 4611686018427387904");
  f.kvs = {Kv("x", 9, Bytes().U32(8).U64(2).Str("ok").U64(999999))};
  ExpectError(f, "\"x\".value[1] = string of length 999999");
  f.kvs = {Kv("x", 7, Bytes().U8(2))};
  ExpectError(f, "\"x\".value = 2");
  f.kvs = {Kv("x", 4, Bytes().U32(1)), Kv("x", 4, Bytes().U32(2))};
  ExpectError(f, "duplicate key");
  f.kvs = {Kv("", 4, Bytes().U32(1))};
  ExpectError(f, "empty key");
  Bytes deep;  // arrays nested 20 deep
  for (int k = 0; k < 20; ++k) deep.U32(9).U64(1);
  deep.U32(4).U64(0);
  f.kvs = {Kv("x", 9, deep)};
  ExpectError(f, "nested deeper");
}

TEST(GgufRaw, AlignmentErrors) {
  RawFile f;
  f.kvs = {Kv("general.alignment", 4, Bytes().U32(0))};
  ExpectError(f, "\"general.alignment\" = 0");
  f.kvs = {Kv("general.alignment", 4, Bytes().U32(48))};
  ExpectError(f, "power of two");
  f.kvs = {Kv("general.alignment", 10, Bytes().U64(32))};
  ExpectError(f, "must be uint32");
  f.kvs = {Kv("general.alignment", 4, Bytes().U32(64))};
  f.alignment = 64;
  EXPECT_TRUE(Parse(f.Build()).ok());  // control: 64-aligned offsets pass
  f.tensors[1].offset = 96;
  f.data_bytes = 128;
  ExpectError(f, "tensor[1] \"b\".offset = 96");
}

TEST(GgufRaw, TensorErrors) {
  RawFile f;
  f.tensors[1].type = 4;  // removed Q4_2 id
  ExpectError(f, "tensor[1] \"b\".type = 4");
  f = RawFile();
  f.tensors[0].ne = {};
  ExpectError(f, "tensor[0] \"a\".n_dims = 0");
  f.tensors[0].ne = {1, 1, 1, 1, 8};
  ExpectError(f, "tensor[0] \"a\".n_dims = 5");
  f.tensors[0].ne = {8, 0};
  ExpectError(f, "tensor[0] \"a\".ne[1] = 0");
  f.tensors[0].ne = {8, ~uint64_t{0}};
  ExpectError(f, "tensor[0] \"a\".ne[1] = -1");
  f.tensors[0].ne = {uint64_t{1} << 40, uint64_t{1} << 40};
  ExpectError(f, "tensor[0] \"a\".ne[1] = 1099511627776");
  f = RawFile();
  f.tensors[1].ne = {33};
  ExpectError(f, "tensor[1] \"b\".ne[0] = 33");
  f = RawFile();
  f.tensors[1].offset = 65;
  ExpectError(f, "tensor[1] \"b\".offset = 65");
  f.tensors[1].offset = 96;
  ExpectError(f, "tensor[1] \"b\".offset = 96");  // [96, 114) ends past the 82 data bytes
  f.tensors[1].offset = ~uint64_t{0} - 31;
  ExpectError(f, "ends past the data section");
  f.tensors[1].offset = 32;
  ExpectError(f, "overlaps tensor[0] \"a\"");
  f = RawFile();
  f.tensors[1].name = "a";
  ExpectError(f, "duplicate tensor name");
  f.tensors[1].name = "";
  ExpectError(f, "tensor[1].name");
}

TEST(GgufRaw, TruncationAtEveryByteIsAnError) {
  const auto full = RawFile().Build();
  ASSERT_TRUE(Parse(full).ok());
  // The tensor data ends the file, so every proper prefix loses at least one needed byte.
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = File::FromMemory(cut.data(), cut.size(), "cut.gguf");
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().rfind("cut.gguf: ", 0), 0u);
    }
  }
}

TEST(GgufRaw, NegativeControlCorruptedByteIsDetected) {
  auto bytes = RawFile().Build();
  ASSERT_TRUE(Parse(bytes).ok());  // control: the untouched file parses
  // The last tensor's type id sits 12 bytes before the end of the directory (type u32, offset
  // u64); turning Q4_0 (2) into 200 must be reported.
  size_t dir_end = 24 + RawFile().kvs[0].size();
  for (const auto& t : RawFile().tensors) dir_end += 8 + t.name.size() + 4 + 8 * t.ne.size() + 12;
  ASSERT_EQ(bytes[dir_end - 12], 2);
  bytes[dir_end - 12] = 200;
  auto r = Parse(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"b\".type = 200"), std::string::npos);
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(GgufWriter, RoundTripsEveryValueType) {
  TmpDir dir;
  Writer w;
  w.Set("u8", Value{ValueType::UINT8, uint64_t{255}});
  w.Set("i8", Value{ValueType::INT8, int64_t{-128}});
  w.Set("u16", Value{ValueType::UINT16, uint64_t{65535}});
  w.Set("i16", Value{ValueType::INT16, int64_t{-32768}});
  w.Set("u32", Value::U32(0xffffffffu));
  w.Set("i32", Value::I32(std::numeric_limits<int32_t>::min()));
  w.Set("u64", Value::U64(~uint64_t{0}));
  w.Set("i64", Value{ValueType::INT64, std::numeric_limits<int64_t>::min()});
  w.Set("f32", Value::F32(0.1f));
  w.Set("f64", Value{ValueType::FLOAT64, 0.1});
  w.Set("bool", Value::Bool(true));
  w.Set("str", Value::Str(std::string("nul\0byte", 8)));
  w.Set("empty", Value::Arr(ValueType::INT32, {}));
  w.Set("strs", Value::Arr(ValueType::STRING, {Value::Str("a"), Value::Str("")}));
  w.Set("nested", Value::Arr(ValueType::ARRAY,
                             {Value::Arr(ValueType::FLOAT32, {Value::F32(1.5f), Value::F32(-2.0f)}),
                              Value::Arr(ValueType::FLOAT32, {})}));
  w.Set("u32", Value::U32(7));  // replaces in place
  const std::string path = dir / "v.gguf";
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto r = File::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const File& f = **r;
  EXPECT_EQ(f.version(), 3u);
  ASSERT_EQ(f.metadata().size(), 15u);
  EXPECT_EQ(f.metadata()[4].first, "u32");
  EXPECT_EQ(*f.Find("u32")->AsInt(), 7);
  EXPECT_EQ(*f.Find("u8")->AsInt(), 255);
  EXPECT_EQ(*f.Find("i8")->AsInt(), -128);
  EXPECT_EQ(*f.Find("i16")->AsInt(), -32768);
  EXPECT_EQ(std::get<uint64_t>(f.Find("u64")->v), ~uint64_t{0});
  EXPECT_FALSE(f.Find("u64")->AsInt().has_value());  // does not fit int64
  EXPECT_EQ(*f.Find("i64")->AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(static_cast<float>(*f.Find("f32")->AsFloat()), 0.1f);
  EXPECT_EQ(*f.Find("f64")->AsFloat(), 0.1);
  EXPECT_EQ(*f.Find("bool")->AsBool(), true);
  EXPECT_EQ(*f.Find("str")->AsString(), std::string("nul\0byte", 8));
  EXPECT_FALSE(f.Find("str")->AsInt().has_value());
  EXPECT_EQ(f.Find("empty")->AsArray()->elem_type, ValueType::INT32);
  EXPECT_EQ(f.Find("strs")->AsArray()->items[1].AsString()->size(), 0u);
  const Array* n = f.Find("nested")->AsArray();
  ASSERT_EQ(n->items.size(), 2u);
  EXPECT_EQ(*n->items[0].AsArray()->items[1].AsFloat(), -2.0);
  EXPECT_EQ(ToString(*f.Find("nested")), "[[1.5, -2], []]");
  for (const auto& [k, v] : f.metadata()) EXPECT_EQ(f.Find(k)->type, v.type) << k;
  // Writing the read-back metadata reproduces the file byte for byte.
  Writer w2;
  for (const auto& [k, v] : f.metadata()) w2.Set(k, v);
  ASSERT_TRUE(w2.WriteFile(dir / "v2.gguf").ok());
  EXPECT_EQ(ReadAll(path), ReadAll(dir / "v2.gguf"));
}

TEST(GgufWriter, RoundTripsEveryTensorType) {
  TmpDir dir;
  Writer w;
  w.SetAlignment(64);
  std::vector<std::vector<uint8_t>> data;
  std::vector<DType> types;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto info = LookupDType(id);
    if (!info) continue;
    const std::vector<int64_t> ne{2 * static_cast<int64_t>(info->block_size), 3};
    std::vector<uint8_t> bytes(RowBytes(info->type, ne[0]) * 3);
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 7 + id);
    data.push_back(bytes);
    types.push_back(info->type);
  }
  for (size_t k = 0; k < types.size(); ++k)
    w.AddTensorCopy(std::string("t.") + std::string(Name(types[k])), types[k],
                    {2 * static_cast<int64_t>(Info(types[k]).block_size), 3}, data[k].data());
  std::vector<std::pair<uint64_t, uint64_t>> prog;
  ASSERT_TRUE(w.WriteFile(dir / "t.gguf", [&](uint64_t d, uint64_t t) {
                 prog.push_back({d, t});
               }).ok());
  auto r = File::Open(dir / "t.gguf");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const File& f = **r;
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(*f.Find("general.alignment")->AsInt(), 64);
  ASSERT_EQ(f.tensors().size(), types.size());
  EXPECT_EQ(types.size(), 32u);
  uint64_t total = 0;
  for (size_t k = 0; k < types.size(); ++k) {
    const TensorInfo& t = f.tensors()[k];
    EXPECT_EQ(t.type, types[k]);
    EXPECT_EQ(t.nbytes, data[k].size()) << t.name;
    EXPECT_EQ(t.n_elements(), 6 * static_cast<int64_t>(Info(types[k]).block_size));
    EXPECT_EQ((f.data_offset() + t.offset) % 64, 0u);
    EXPECT_EQ(0, std::memcmp(f.TensorData(t), data[k].data(), t.nbytes)) << t.name;
    EXPECT_EQ(f.FindTensor(t.name), &t);
    total += t.nbytes;
  }
  EXPECT_EQ(f.file_size() % 64, 0u);  // the last tensor is padded too
  ASSERT_EQ(prog.size(), types.size() + 1);
  EXPECT_EQ(prog.front(), std::make_pair(uint64_t{0}, total));
  EXPECT_EQ(prog.back(), std::make_pair(total, total));
  for (size_t k = 1; k < prog.size(); ++k) EXPECT_GT(prog[k].first, prog[k - 1].first);
}

TEST(GgufWriter, FailingFillLeavesNoFile) {
  TmpDir dir;
  const std::string path = dir / "a.gguf";
  { std::ofstream(path) << "previous"; }
  Writer w;
  w.AddTensor("ok", DType::F32, {4}, [](uint8_t* d) { std::memset(d, 1, 16); });
  w.AddTensor("bad", DType::F32, {4}, [](uint8_t*) { throw std::runtime_error("disk on fire"); });
  const Status s = w.WriteFile(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("disk on fire"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"bad\""), std::string::npos) << s.message();
  EXPECT_EQ(testing::TempSiblings(path), 0);
  const auto old = ReadAll(path);
  EXPECT_EQ(std::string(old.begin(), old.end()), "previous");  // untouched
  // Control: the same writer without the failing tensor replaces the file.
  Writer ok;
  ok.AddTensor("ok", DType::F32, {4}, [](uint8_t* d) { std::memset(d, 1, 16); });
  ASSERT_TRUE(ok.WriteFile(path).ok());
  EXPECT_TRUE(File::Open(path).ok());
  EXPECT_EQ(testing::TempSiblings(path), 0);
}

// The temporary is a new uniquely named file: a symlink at the old fixed name OUT.tmp is never
// followed (its target used to be overwritten), and two writers of one output each rename a
// complete file of their own (they used to interleave into one temporary).
TEST(GgufWriter, TemporaryIsUniqueAndNeverFollowsASymlink) {
  TmpDir dir;
  const std::string path = dir / "out.gguf", victim = dir / "victim.txt";
  { std::ofstream(victim) << "keep me"; }
  fs::create_symlink(victim, path + ".tmp");
  Writer w;
  w.AddTensor("t", DType::F32, {4}, [](uint8_t* d) { std::memset(d, 1, 16); });
  ASSERT_TRUE(w.WriteFile(path).ok());
  const auto kept = ReadAll(victim);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "keep me");
  EXPECT_TRUE(File::Open(path).ok());
  fs::remove(path + ".tmp");
  EXPECT_EQ(testing::TempSiblings(path), 0);

  std::vector<std::thread> writers;
  for (int i = 0; i < 4; ++i)
    writers.emplace_back([&path, i] {
      Writer wi;
      wi.AddTensor("t", DType::F32, {1 << 18}, [i](uint8_t* d) { std::memset(d, i + 1, 1 << 20); });
      EXPECT_TRUE(wi.WriteFile(path).ok());
    });
  for (auto& t : writers) t.join();
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const auto* t = (*f)->FindTensor("t");
  ASSERT_NE(t, nullptr);
  const uint8_t* data = (*f)->TensorData(*t);
  int differing = 0;  // one writer's bytes throughout
  for (uint64_t i = 0; i < t->nbytes; ++i) differing += data[i] != data[0];
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(testing::TempSiblings(path), 0);
}

TEST(GgufWriter, RejectsInvalidInputs) {
  TmpDir dir;
  Writer w;
  w.SetAlignment(48);
  EXPECT_NE(w.WriteFile(dir / "x.gguf").message().find("general.alignment = 48"),
            std::string::npos);
  Writer d;
  d.AddTensor("t", DType::F32, {4}, {});
  d.AddTensor("t", DType::F32, {4}, {});
  EXPECT_NE(d.WriteFile(dir / "x.gguf").message().find("duplicated"), std::string::npos);
  Writer v;
  v.Set("k", Value{ValueType::UINT8, uint64_t{256}});
  EXPECT_NE(v.WriteFile(dir / "x.gguf").message().find("does not fit uint8"), std::string::npos);
  Writer m;
  m.Set("k", Value::Arr(ValueType::UINT32, {Value::U32(1), Value::I32(2)}));
  EXPECT_NE(m.WriteFile(dir / "x.gguf").message().find("\"k\"[1]"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

TEST(GgufFile, OpenReportsMissingAndEmptyFiles) {
  TmpDir dir;
  auto r = File::Open(dir / "missing.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.gguf"), std::string::npos);
  { std::ofstream(dir / "empty.gguf"); }
  r = File::Open(dir / "empty.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
}

TEST(GgufValue, ToStringAbbreviatesAndEscapes) {
  std::vector<Value> many;
  for (int k = 0; k < 20; ++k) many.push_back(Value::I32(k));
  EXPECT_EQ(ToString(Value::Arr(ValueType::INT32, many), 3), "[0, 1, 2, ... (20 items)]");
  EXPECT_EQ(ToString(Value::Str("a\n\"")), "\"a\\x0a\\\"\"");
  EXPECT_EQ(ToString(Value::F32(0.1f)), "0.1");
  EXPECT_EQ(ValueTypeName(ValueType::FLOAT64), "float64");
}

}  // namespace
}  // namespace lockstep::gguf
