// Hostile and broken GGUF input: every rule the reader enforces, every
// prefix of a valid file, and random byte flips. Each must end in a
// FormatError that names the file and the problem, never a crash.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "gguf_test_util.h"
#include "tern/gguf/gguf.h"

namespace tern::gguf {
namespace {

using ::tern::gguf::test::Bytes;

// Parses `bytes` as "bad.gguf" and expects a FormatError naming the file and
// containing `what`.
void expect_rejected(const std::vector<uint8_t>& bytes, std::string_view what) {
  try {
    GgufFile::from_memory(bytes, "bad.gguf");
    ADD_FAILURE() << "accepted; expected: " << what;
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected: " << what;
  }
}

// A one-tensor file whose tensor info is given by `info`, data section padded.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, DType type, uint64_t offset,
                                size_t data_bytes, std::string_view name = "w") {
  Bytes b;
  b.header(1, 0).tensor(name, dims, type, offset).pad_to(32).zeros(data_bytes);
  return b.b;
}

TEST(GgufValidation, Magic) {
  expect_rejected({}, "too small to be a GGUF file (0 bytes)");
  expect_rejected({'G', 'G', 'U'}, "too small");
  auto b = Bytes().header(0, 0).b;
  b[3] = 'X';
  expect_rejected(b, "not a GGUF file (it does not start with the 'GGUF' magic)");
}

// The file may be anything (a secret someone asked the server to open as an
// adapter): its first bytes never appear in the message.
TEST(GgufValidation, MagicNotEchoed) {
  const std::vector<uint8_t> b = {'r', 'o', 'o', 't', ':', '$', '6', '$', 0, 0, 0, 0,
                                  0,   0,   0,   0,   0,   0,   0,   0,   0, 0, 0, 0};
  try {
    GgufFile::from_memory(b, "bad.gguf");
    ADD_FAILURE() << "accepted";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find("root"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not a GGUF file"), std::string::npos) << msg;
  }
}

TEST(GgufValidation, Versions) {
  expect_rejected(Bytes().header(0, 0, 1).b, "GGUF version 1 is not supported");
  expect_rejected(Bytes().header(0, 0, 4).b, "unsupported GGUF version 4");
  expect_rejected(Bytes().header(0, 0, 0x03000000).b, "big-endian GGUF files are not supported");
  EXPECT_NO_THROW(GgufFile::from_memory(Bytes().header(0, 0, 2).b, "v2"));
}

TEST(GgufValidation, AbsurdCounts) {
  expect_rejected(Bytes().header(0, uint64_t(1) << 60).b,
                  "metadata count 1152921504606846976 is impossible");
  expect_rejected(Bytes().header(~uint64_t(0), 0).b, "tensor count");
  // Counts that would fit only if entries were smaller than the minimum.
  expect_rejected(Bytes().header(0, 2).kv_u32("a", 1).b, "metadata count 2 is impossible");
  expect_rejected(Bytes().header(2, 0).tensor("a", {1}, DType::F32, 0).b,
                  "tensor count 2 is impossible");
}

TEST(GgufValidation, TruncatedStrings) {
  // Key length runs past the end.
  expect_rejected(Bytes().header(0, 1).u64(1000).u32(4).u8(0).b,
                  "key of metadata entry 0 has length 1000");
  // String value length runs past the end.
  expect_rejected(
      Bytes().header(0, 1).str("k").u32(uint32_t(ValueType::STRING)).u64(~uint64_t(0)).b,
      "value of metadata 'k' has length 18446744073709551615");
  // Tensor name length runs past the end (after a valid header).
  auto b = Bytes().header(1, 0).u64(1ull << 62).u32(1).u64(1).u32(0).u64(0).b;
  expect_rejected(b, "name of tensor 0 has length");
}

TEST(GgufValidation, Keys) {
  expect_rejected(Bytes().header(0, 2).kv_u32("a", 1).kv_u32("a", 2).b,
                  "duplicate metadata key 'a'");
  expect_rejected(Bytes().header(0, 1).kv_u32("", 1).b, "metadata entry 0 has an empty key");
  std::string long_key(70000, 'k');
  expect_rejected(Bytes().header(0, 1).kv_u32(long_key, 1).b, "longer than 65535 bytes");
  expect_rejected(Bytes().header(0, 1).str("k").u32(13).u32(0).b,
                  "metadata 'k' has unknown value type 13");
  expect_rejected(Bytes().header(0, 1).str("k\x01").u32(99).u32(0).b,
                  "'k\\x01' has unknown value type 99");
  expect_rejected(Bytes().header(0, 1).str("k").u32(uint32_t(ValueType::BOOL)).u8(2).u32(0).b,
                  "metadata 'k' has invalid bool byte 2");
  // A value cut short.
  expect_rejected(Bytes().header(0, 1).str("k").u32(uint32_t(ValueType::U64)).u32(0).u8(1).b,
                  "truncated: value of metadata 'k' needs 8 bytes but only 5 remain");
}

TEST(GgufValidation, Arrays) {
  const uint32_t kArr = uint32_t(ValueType::ARRAY);
  // Length bounded by the remaining bytes: 2^40 u32s cannot follow.
  expect_rejected(Bytes()
                      .header(0, 1)
                      .str("a")
                      .u32(kArr)
                      .u32(uint32_t(ValueType::U32))
                      .u64(1ull << 40)
                      .u64(0)
                      .b,
                  "array 'a' claims 1099511627776 elements");
  // Even a "cheap" element type is bounded: strings take at least 8 bytes each.
  expect_rejected(
      Bytes().header(0, 1).str("a").u32(kArr).u32(uint32_t(ValueType::STRING)).u64(3).zeros(20).b,
      "array 'a' claims 3 elements");
  expect_rejected(Bytes().header(0, 1).str("a").u32(kArr).u32(77).u64(0).b,
                  "array 'a' has unknown element type 77");
  expect_rejected(
      Bytes().header(0, 1).str("a").u32(kArr).u32(uint32_t(ValueType::BOOL)).u64(2).u8(1).u8(5).b,
      "array 'a' has invalid bool byte 5");
  // A string inside an array running past the end.
  expect_rejected(Bytes()
                      .header(0, 1)
                      .str("a")
                      .u32(kArr)
                      .u32(uint32_t(ValueType::STRING))
                      .u64(1)
                      .u64(9)
                      .u8('x')
                      .b,
                  "string in array 'a' has length 9");

  // Nested arrays: depth 4 (outermost included) parses, depth 5 is rejected.
  auto nested = [&](int depth) {
    Bytes b;
    b.header(0, 1).str("n").u32(kArr);
    for (int d = 1; d < depth; ++d) b.u32(kArr).u64(1);
    b.u32(uint32_t(ValueType::U8)).u64(2).u8(7).u8(8);
    return b.b;
  };
  const auto ok_bytes = nested(4);
  const GgufFile ok = GgufFile::from_memory(ok_bytes, "nested.gguf");
  EXPECT_EQ(ok.value("n").elem_type, ValueType::ARRAY);
  EXPECT_EQ(ok.array_length("n"), 1u);
  EXPECT_THROW(ok.get_i32_array("n"), FormatError);
  expect_rejected(nested(5), "metadata 'n' nests arrays deeper than 4");
  // Deep nesting whose claimed lengths are absurd is rejected without recursion blow-up.
  Bytes deep;
  deep.header(0, 1).str("d").u32(kArr);
  for (int d = 0; d < 10000; ++d) deep.u32(kArr).u64(1);
  expect_rejected(deep.b, "nests arrays deeper than 4");
}

TEST(GgufValidation, Alignment) {
  auto with_alignment = [](auto put_value) {
    Bytes b;
    b.header(1, 1).str("general.alignment");
    put_value(b);
    b.tensor("w", {4}, DType::F32, 0).pad_to(64).zeros(16);
    return b.b;
  };
  expect_rejected(with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::U32)).u32(48); }),
                  "general.alignment 48 is not a power of two");
  expect_rejected(with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::U32)).u32(0); }),
                  "general.alignment 0 is not a power of two");
  expect_rejected(
      with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::I32)).u32(uint32_t(-64)); }),
      "general.alignment -64");
  expect_rejected(with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::U64)).u64(1ull << 33); }),
                  "is not a power of two");
  expect_rejected(with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::STRING)).str("32"); }),
                  "general.alignment must be an integer, not string");
  const auto ok_bytes = with_alignment([](Bytes& b) { b.u32(uint32_t(ValueType::U32)).u32(16); });
  EXPECT_EQ(GgufFile::from_memory(ok_bytes, "a16").alignment(), 16u);
}

TEST(GgufValidation, TensorInfos) {
  expect_rejected(one_tensor({4}, DType(4), 0, 16), "tensor 'w' has unknown type 4");
  expect_rejected(one_tensor({4}, DType(31), 0, 16),
                  "unknown type 31 (Q4_0_4_4, a layout llama.cpp no longer reads from GGUF)");
  expect_rejected(one_tensor({32}, DType(37), 0, 16), "unknown type 37 (IQ4_NL_4_8");
  expect_rejected(one_tensor({4}, DType(43), 0, 16), "tensor 'w' has unknown type 43");
  // Every type llama.cpp still writes parses, with its own block size: a
  // row that is not whole blocks is named by the type.
  expect_rejected(one_tensor({32}, DType::IQ3_XXS, 0, 98),
                  "row length 32, not a multiple of the IQ3_XXS block size 256");
  expect_rejected(one_tensor({1, 1, 1, 1, 1}, DType::F32, 0, 4),
                  "tensor 'w' has 5 dimensions (must be 1 to 4)");
  expect_rejected(one_tensor({}, DType::F32, 0, 4), "has 0 dimensions");
  expect_rejected(one_tensor({4, 0}, DType::F32, 0, 16), "tensor 'w' has invalid dimension 1 = 0");
  expect_rejected(one_tensor({1ull << 63}, DType::F32, 0, 16),
                  "invalid dimension 0 = 9223372036854775808");
  expect_rejected(one_tensor({1ull << 32, 1ull << 32}, DType::F32, 0, 16),
                  "too many elements (overflow)");
  expect_rejected(one_tensor({1ull << 40}, DType::F32, 0, 16),
                  "needs more bytes than the file holds");
  // 2^61 elements of 8 bytes: the byte count wraps to 0 in 64 bits unless checked.
  expect_rejected(one_tensor({1ull << 61}, DType::F64, 0, 16),
                  "needs more bytes than the file holds");
  expect_rejected(one_tensor({1ull << 58, 8}, DType::I64, 0, 16),
                  "needs more bytes than the file holds");
  expect_rejected(one_tensor({33}, DType::Q4_0, 0, 64),
                  "tensor 'w' has row length 33, not a multiple of the Q4_0 block size 32");
  expect_rejected(one_tensor({4}, DType::F32, 0, 16, std::string(65, 'n')),
                  "has a name longer than 64 bytes");
  Bytes dup;
  dup.header(2, 0)
      .tensor("w", {4}, DType::F32, 0)
      .tensor("w", {4}, DType::F32, 32)
      .pad_to(32)
      .zeros(64);
  expect_rejected(dup.b, "duplicate tensor name 'w'");
}

TEST(GgufValidation, TensorData) {
  expect_rejected(one_tensor({4}, DType::F32, 4, 32),
                  "tensor 'w' data offset 4 is not a multiple of the alignment 32");
  expect_rejected(one_tensor({4}, DType::F32, 32, 40),
                  "tensor 'w' data [32, +16) runs past the end");
  expect_rejected(one_tensor({4}, DType::F32, 0, 15),
                  "runs past the end of the data section (15 bytes)");
  expect_rejected(one_tensor({4}, DType::F32, ~uint64_t(0) / 32 * 32, 16), "runs past the end");
  // Tensors declared but the file ends before the (aligned) data section.
  auto b = Bytes().header(1, 0).tensor("w", {4}, DType::F32, 0).b;
  expect_rejected(b, "starts past the end of the file");
  // Exactly enough data is fine.
  const auto ok = one_tensor({4}, DType::F32, 0, 16);
  EXPECT_EQ(GgufFile::from_memory(ok, "ok").tensor("w").nbytes, 16u);
}

TEST(GgufValidation, EveryPrefixOfAValidFileIsRejected) {
  const auto full = test::small_valid_file();
  const GgufFile f = GgufFile::from_memory(full, "full");  // the whole file parses
  ASSERT_EQ(f.tensors().size(), 3u);
  ASSERT_EQ(f.tensors().back().data + f.tensors().back().nbytes, full.data() + full.size())
      << "the fixture must end exactly at its last tensor's data";
  for (size_t n = 0; n < full.size(); ++n) {
    // Copy into an exactly-sized buffer so a read past the end is caught by ASan.
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + ptrdiff_t(n));
    try {
      GgufFile::from_memory(prefix, "prefix.gguf");
      ADD_FAILURE() << "prefix of " << n << " bytes was accepted";
    } catch (const FormatError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("prefix.gguf: ", 0), 0u) << e.what();
    }
  }
}

TEST(GgufValidation, RandomByteFlipsNeverCrash) {
  const auto full = test::small_valid_file();
  std::mt19937 rng(20240611);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % b.size();
      // Mostly flip bits; sometimes write a byte that tends to make big values.
      b[at] = (rng() % 4 == 0) ? uint8_t(0xff) : uint8_t(b[at] ^ (1u << (rng() % 8)));
    }
    if (rng() % 8 == 0) b.resize(rng() % b.size());  // and sometimes truncate
    try {
      const GgufFile f = GgufFile::from_memory(b, "flip.gguf");
      test::touch_all(f);
      ++parsed;
    } catch (const FormatError& e) {
      ASSERT_EQ(std::string(e.what()).rfind("flip.gguf: ", 0), 0u) << e.what();
      ++rejected;
    }
  }
  // Both outcomes must occur, or the test is not testing much.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace tern::gguf
