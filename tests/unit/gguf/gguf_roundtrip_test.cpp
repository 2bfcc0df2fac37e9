// GgufWriter -> GgufFile round trips: every metadata type (scalars and
// arrays), every tensor type, alignment, versions, and the typed getters'
// conversions and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "gguf_test_util.h"
#include "tern/gguf/gguf.h"
#include "testutil.h"

namespace tern::gguf {
namespace {

using ::tern::gguf::test::Bytes;

GgufFile parse(const std::vector<uint8_t>& bytes, const std::string& name = "mem.gguf") {
  return GgufFile::from_memory(bytes, name);
}

// Expects f to throw FormatError whose message contains every one of `parts`.
template <typename F>
void expect_format_error(F&& f, std::initializer_list<std::string_view> parts) {
  try {
    f();
    ADD_FAILURE() << "no FormatError";
  } catch (const FormatError& e) {
    for (std::string_view p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(GgufRoundTrip, ScalarMetadata) {
  GgufWriter w;
  w.set_u8("u8", 200);
  w.set_i8("i8", -100);
  w.set_u16("u16", 60000);
  w.set_i16("i16", -30000);
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set_u64("u64", (1ull << 63) + 5);
  w.set_i64("i64", -(1ll << 62));
  w.set_f32("f32", 3.5f);
  w.set_f64("f64", 0.1);
  w.set_bool("t", true);
  w.set_bool("f", false);
  w.set_string("s", std::string("h\xc3\xa9llo\0x", 8));
  w.set_string("empty", "");
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"u8", "i8", "u16", "i16", "u32", "i32", "u64",
                                                "i64", "f32", "f64", "t", "f", "s", "empty"}));
  EXPECT_EQ(f.type_of("u8"), ValueType::U8);
  EXPECT_EQ(f.type_of("i16"), ValueType::I16);
  EXPECT_EQ(f.type_of("u64"), ValueType::U64);
  EXPECT_EQ(f.type_of("f64"), ValueType::F64);
  EXPECT_EQ(f.type_of("t"), ValueType::BOOL);
  EXPECT_EQ(f.type_of("s"), ValueType::STRING);

  EXPECT_EQ(f.get_u32("u8"), 200u);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_u32("u16"), 60000u);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_u32("u32"), 4000000000u);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_int("i64"), -(1ll << 62));
  EXPECT_EQ(f.value("u64").bits, (1ull << 63) + 5);
  EXPECT_EQ(f.get_f32("f32"), 3.5f);
  EXPECT_EQ(f.get_f32("f64"), 0.1f);
  EXPECT_TRUE(f.get_bool("t"));
  EXPECT_FALSE(f.get_bool_or("f", true));
  EXPECT_EQ(f.get_string("s"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.get_string("empty"), "");

  // Defaults only when missing.
  EXPECT_EQ(f.get_u32_or("nope", 7), 7u);
  EXPECT_EQ(f.get_int_or("nope", -7), -7);
  EXPECT_EQ(f.get_f32_or("nope", 1.5f), 1.5f);
  EXPECT_TRUE(f.get_bool_or("nope", true));
  EXPECT_EQ(f.get_string_or("nope", "d"), "d");
  EXPECT_EQ(f.get_u32_or("u8", 7), 200u);
  EXPECT_FALSE(f.has("nope"));
  EXPECT_TRUE(f.has("u8"));
}

TEST(GgufRoundTrip, GetterErrorsNameFileKeyAndProblem) {
  GgufWriter w;
  w.set_i32("neg", -1);
  w.set_u64("big", 1ull << 40);
  w.set_u64("huge", ~0ull);
  w.set_string("s", "x");
  w.set_i32_array("arr", {1});
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes, "my.gguf");
  expect_format_error([&] { f.get_u32("missing.key"); },
                      {"my.gguf", "missing metadata key", "missing.key"});
  expect_format_error([&] { f.type_of("missing.key"); }, {"my.gguf", "missing.key"});
  expect_format_error([&] { f.get_u32("neg"); }, {"my.gguf", "'neg'", "-1", "does not fit in u32"});
  expect_format_error([&] { f.get_u32("big"); }, {"'big'", "1099511627776", "u32"});
  expect_format_error([&] { f.get_int("huge"); }, {"'huge'", "i64"});
  expect_format_error([&] { f.get_u32("s"); },
                      {"my.gguf", "'s'", "is string", "expected an integer"});
  expect_format_error([&] { f.get_string("neg"); }, {"'neg'", "is i32", "expected string"});
  expect_format_error([&] { f.get_f32("neg"); }, {"'neg'", "expected a float"});
  expect_format_error([&] { f.get_bool("neg"); }, {"'neg'", "expected bool"});
  expect_format_error([&] { f.get_string_array("arr"); },
                      {"'arr'", "array of i32", "expected array of string"});
  expect_format_error([&] { f.get_f32_array("arr"); }, {"array of i32", "expected array of f32"});
  expect_format_error([&] { f.array_length("s"); }, {"'s'", "expected an array"});
  // The *_or variants still reject a wrong type.
  expect_format_error([&] { f.get_string_or("neg", "d"); }, {"'neg'", "expected string"});
  expect_format_error([&] { f.get_u32_or("s", 1); }, {"'s'"});
  expect_format_error([&] { f.tensor("blk.0.attn_q.weight"); },
                      {"my.gguf", "missing tensor 'blk.0.attn_q.weight'"});
  EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight"), nullptr);
}

TEST(GgufRoundTrip, ArraysOfEveryType) {
  GgufWriter w;
  w.set_string_array("strs", {"hello", "", std::string("a\0b", 3), "\xe2\x96\x81the"});
  w.set_i32_array(
      "i32s", {1, -2, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()});
  w.set_f32_array("f32s", {0.5f, -1.25f, 1e30f});
  w.set_array<uint8_t>("u8s", {0, 255});
  w.set_array<int8_t>("i8s", {-128, 127});
  w.set_array<uint16_t>("u16s", {65535});
  w.set_array<int16_t>("i16s", {-32768, 5});
  w.set_array<uint32_t>("u32s", {7, 2147483647u});
  w.set_array<uint32_t>("u32s_big", {2147483648u});
  w.set_array<uint64_t>("u64s", {3});
  w.set_array<int64_t>("i64s", {-3, 1ll << 40});
  w.set_array<double>("f64s", {0.25, -2.0});
  w.set_array<bool>("bools", {true, false, true});
  w.set_array<float>("empty", {});
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);

  EXPECT_EQ(f.get_string_array("strs"),
            (std::vector<std::string>{"hello", "", std::string("a\0b", 3), "\xe2\x96\x81the"}));
  EXPECT_EQ(f.get_i32_array("i32s"),
            (std::vector<int32_t>{1, -2, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(f.get_f32_array("f32s"), (std::vector<float>{0.5f, -1.25f, 1e30f}));
  EXPECT_EQ(f.get_i32_array("u8s"), (std::vector<int32_t>{0, 255}));
  EXPECT_EQ(f.get_i32_array("i8s"), (std::vector<int32_t>{-128, 127}));
  EXPECT_EQ(f.get_i32_array("u16s"), (std::vector<int32_t>{65535}));
  EXPECT_EQ(f.get_i32_array("i16s"), (std::vector<int32_t>{-32768, 5}));
  EXPECT_EQ(f.get_i32_array("u32s"), (std::vector<int32_t>{7, 2147483647}));
  expect_format_error([&] { f.get_i32_array("u32s_big"); },
                      {"'u32s_big'", "element 0", "2147483648", "i32"});
  EXPECT_EQ(f.get_i32_array("u64s"), (std::vector<int32_t>{3}));
  expect_format_error([&] { f.get_i32_array("i64s"); }, {"element 1", "1099511627776"});
  EXPECT_EQ(f.get_f32_array("f64s"), (std::vector<float>{0.25f, -2.0f}));
  EXPECT_TRUE(f.get_f32_array("empty").empty());

  for (auto [key, et, n] :
       std::vector<std::tuple<std::string, ValueType, size_t>>{{"strs", ValueType::STRING, 4},
                                                               {"u8s", ValueType::U8, 2},
                                                               {"i8s", ValueType::I8, 2},
                                                               {"u16s", ValueType::U16, 1},
                                                               {"i16s", ValueType::I16, 2},
                                                               {"u32s", ValueType::U32, 2},
                                                               {"i32s", ValueType::I32, 4},
                                                               {"u64s", ValueType::U64, 1},
                                                               {"i64s", ValueType::I64, 2},
                                                               {"f32s", ValueType::F32, 3},
                                                               {"f64s", ValueType::F64, 2},
                                                               {"bools", ValueType::BOOL, 3},
                                                               {"empty", ValueType::F32, 0}}) {
    EXPECT_EQ(f.type_of(key), ValueType::ARRAY) << key;
    EXPECT_EQ(f.value(key).elem_type, et) << key;
    EXPECT_EQ(f.array_length(key), n) << key;
  }
  const auto bools = f.value("bools").payload;
  EXPECT_EQ(std::vector<uint8_t>(bools.begin(), bools.end()), (std::vector<uint8_t>{1, 0, 1}));
}

TEST(GgufRoundTrip, SettingAKeyAgainReplacesIt) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_string("b", "x");
  w.set_string("a", "now a string");
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.get_string("a"), "now a string");
}

TEST(GgufRoundTrip, EveryTensorTypeKeepsItsBytes) {
  std::mt19937 rng(7);
  GgufWriter w;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> want;
  for (uint32_t raw = 0; raw < 64; ++raw) {
    const auto tr = dtype_traits(raw);
    if (!tr) continue;
    const std::vector<int64_t> dims{int64_t(tr->block_elems) * 2, 3};
    std::vector<uint8_t> data(size_t(2 * 3) * tr->block_bytes);
    for (auto& b : data) b = uint8_t(rng());
    const std::string name = "t." + std::string(tr->name);
    w.add_tensor(name, DType(raw), dims, data);
    want.emplace_back(name, data);
  }
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  ASSERT_EQ(f.tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    const auto tr = dtype_traits(t.type);
    EXPECT_EQ(t.name, want[i].first);
    EXPECT_EQ(&f.tensor(t.name), &t);
    EXPECT_EQ(t.dims, (std::vector<int64_t>{int64_t(tr.block_elems) * 2, 3}));
    EXPECT_EQ(t.n_elements(), int64_t(tr.block_elems) * 6);
    EXPECT_EQ(t.n_rows(), 3);
    EXPECT_EQ(t.row_bytes(), size_t(tr.block_bytes) * 2);
    EXPECT_EQ(t.nbytes, want[i].second.size());
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(size_t(t.data - f.file_bytes().data()), f.data_offset() + t.offset);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.nbytes), want[i].second) << t.name;
  }
}

TEST(GgufRoundTrip, FloatTensorsEncodedWithTheReferenceQuantizers) {
  std::vector<float> v(64 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.37f * float(i)) * 3.0f;
  GgufWriter w;
  const std::vector<DType> types{DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                 DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1};
  for (DType t : types)
    w.add_tensor(std::string(dtype_name(t)), t, {64, 3}, kernels::quantize_ref(t, v));
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  for (DType t : types) {
    const TensorInfo& ti = f.tensor(dtype_name(t));
    EXPECT_EQ(ti.type, t);
    std::vector<uint8_t> q(dtype_row_bytes(t, v.size()));
    kernels::quantize_row_ref(t, v.data(), q.data(), int64_t(v.size()));
    EXPECT_EQ(std::vector<uint8_t>(ti.data, ti.data + ti.nbytes), q) << dtype_name(t);
    std::vector<float> y(v.size());
    kernels::dequantize_row(t, ti.data, y.data(), int64_t(y.size()));
    for (size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], v[i], 0.45f) << dtype_name(t) << " " << i;
  }
  EXPECT_THROW(kernels::quantize_ref(DType::Q8_K, std::vector<float>(256)), InvalidArgument);
  EXPECT_THROW(kernels::quantize_ref(DType::Q8_0, std::vector<float>(48)), InvalidArgument);
  EXPECT_THROW(w.add_tensor_f32("short", {64}, std::vector<float>(63)), InvalidArgument);
}

TEST(GgufRoundTrip, WriterRejectsBadTensors) {
  GgufWriter w;
  w.add_tensor("a", DType::F32, {2}, std::vector<uint8_t>(8));
  EXPECT_THROW(w.add_tensor("a", DType::F32, {2}, std::vector<uint8_t>(8)),
               InvalidArgument);  // duplicate
  EXPECT_THROW(w.add_tensor("b", DType::F32, {2}, std::vector<uint8_t>(7)),
               InvalidArgument);  // size
  EXPECT_THROW(w.add_tensor("c", DType::Q4_0, {16}, std::vector<uint8_t>(9)),
               InvalidArgument);  // block
  EXPECT_THROW(w.add_tensor("d", DType::F32, {}, {}), InvalidArgument);
  EXPECT_THROW(w.add_tensor("e", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)),
               InvalidArgument);
  EXPECT_THROW(w.add_tensor("f", DType::F32, {0}, {}), InvalidArgument);
  EXPECT_THROW(w.add_tensor("g", DType(4), {1}, std::vector<uint8_t>(4)), InvalidArgument);
}

TEST(GgufRoundTrip, CustomAlignment) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  w.add_tensor("a", DType::F32, {3}, std::vector<uint8_t>(12, 1));
  w.add_tensor("b", DType::F32, {5}, std::vector<uint8_t>(20, 2));
  const auto bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 64u);
  EXPECT_EQ(f.tensor("b").data[19], 2);

  GgufWriter bad;
  bad.set_u32("general.alignment", 48);
  EXPECT_THROW(bad.to_bytes(), InvalidArgument);
}

TEST(GgufRoundTrip, VersionTwoIsAccepted) {
  auto bytes = test::small_valid_file();
  bytes[4] = 2;  // version u32 at byte 4
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
}

TEST(GgufRoundTrip, EmptyFileWithNoTensorsOrMetadata) {
  const auto bytes = GgufWriter().to_bytes();
  const GgufFile f = parse(bytes);
  EXPECT_TRUE(f.keys().empty());
  EXPECT_TRUE(f.tensors().empty());
  // Without tensors the header alone is a complete file (padding optional).
  const GgufFile g = parse(Bytes().header(0, 0).b);
  EXPECT_TRUE(g.tensors().empty());
}

TEST(GgufRoundTrip, OpenFromDiskAndMove) {
  const std::string path = tern::test::temp_path("roundtrip.gguf");
  GgufWriter w;
  w.set_string("general.name", "tiny");
  w.add_tensor("w", DType::Q8_0, {32, 2},
               kernels::quantize_ref(DType::Q8_0, std::vector<float>(64, 1.0f)));
  w.write(path);
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.mapping().size(), f.file_bytes().size());
  EXPECT_EQ(f.mapping().data(), f.file_bytes().data());
  GgufFile g = std::move(f);  // views into the mapping survive the move
  EXPECT_EQ(g.get_string("general.name"), "tiny");
  std::vector<float> row(32);
  kernels::dequantize_row(DType::Q8_0, g.tensor("w").data, row.data(), 32);
  EXPECT_NEAR(row[0], 1.0f, 1e-3f);  // d = fp16(1/127)

  EXPECT_THROW(GgufFile::open(tern::test::temp_path("does-not-exist.gguf")), IoError);
  EXPECT_THROW(w.write(tern::test::temp_path("no/such/dir/x.gguf")), IoError);
}

// set_value copies every key exactly (type, bits, array payload), so a file
// rebuilt from another's keys and tensors has the same bytes; write() streams
// the bytes to_bytes() builds.
TEST(GgufRoundTrip, SetValueCopiesKeysExactlyAndWriteStreamsToBytes) {
  GgufWriter w;
  w.set_u8("u8", 200);
  w.set_i16("i16", -3);
  w.set_u64("u64", 1ull << 40);
  w.set_f32("f32", 0.1f);
  w.set_f64("f64", 0.1);
  w.set_bool("b", true);
  w.set_string("s", "x\xe2\x96\x81y");
  w.set_string_array("strs", {"a", "", "bc"});
  w.set_array<uint16_t>("u16s", {1, 65535});
  w.set_u32("general.alignment", 64);
  w.add_tensor("t", DType::Q8_0, {32, 3},
               kernels::quantize_ref(DType::Q8_0, std::vector<float>(96, 0.5f)));
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile f = parse(bytes);
  GgufWriter copy;
  for (const std::string& key : f.keys()) copy.set_value(key, f.value(key));
  for (const TensorInfo& t : f.tensors())
    copy.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  EXPECT_EQ(copy.to_bytes(), bytes);
  const std::string path = tern::test::temp_path("streamed.gguf");
  copy.write(path);
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(std::vector<uint8_t>(g.file_bytes().begin(), g.file_bytes().end()), bytes);
}

TEST(GgufRoundTrip, OpenNamesThePathInFormatErrors) {
  const std::string path = tern::test::temp_path("not-a-model.gguf");
  GgufWriter w;
  auto bytes = w.to_bytes();
  bytes[0] = 'X';
  {
    std::FILE* fp = std::fopen(path.c_str(), "wb");
    ASSERT_NE(fp, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), fp);
    std::fclose(fp);
  }
  expect_format_error([&] { GgufFile::open(path); }, {path, "not a GGUF file"});
  // The file's own bytes are never echoed: a path that is not a model (a
  // secret file) must not leak its first bytes through the error.
  try {
    GgufFile::open(path);
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()).find("XGUF"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::gguf
