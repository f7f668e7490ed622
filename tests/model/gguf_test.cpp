// GGUF reader, writer and llama hyperparameters: the real stories260K.gguf and Llama 2
// vocabulary, writer -> reader round trips of every value and tensor type, and hostile
// files (each check the CVE-style lies a reader must survive), truncations and mutations.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <string_view>
#include <vector>

#include "hedge/model/gguf.hpp"
#include "hedge/model/gguf_llama.hpp"
#include "hedge/model/gguf_writer.hpp"
#include "hedge/os/mapped_file.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"

namespace {

using namespace hedge;
using namespace hedge::model;
using bytes_t = std::vector<std::byte>;

const std::string stories_path = HEDGE_SHARED_DIR "/models/stories260K.gguf";
const std::string vocab_path = HEDGE_SHARED_DIR "/models/llama2-vocab.gguf";

#define SKIP_IF_ABSENT(path) \
  if (!std::ifstream(path).good()) GTEST_SKIP() << path << " is absent (../shared/models)"

/// The error of a parse that must fail, with its code and a substring of its message.
void expect_error(std::span<const std::byte> file, errc code, std::string_view text) {
  const auto parsed = gguf_file::parse(file);
  ASSERT_FALSE(parsed.has_value()) << "expected: " << text;
  EXPECT_EQ(parsed.error().code(), code) << parsed.error().message();
  EXPECT_NE(parsed.error().message().find(text), std::string_view::npos)
      << "message: " << parsed.error().message() << "\nexpected to contain: " << text;
}

/// Reads every key, value, array element and tensor byte range of a parsed file, as a
/// consumer would; a lie the parser let through shows up here under ASan.
std::uint64_t touch_everything(const gguf_file& file) {
  std::uint64_t sum = 0;
  for (const gguf_kv kv : file.metadata()) {
    sum += kv.key.size();
    const gguf_value v = kv.value;
    if (v.is_array()) {
      for (const gguf_value e : v.elements()) {
        if (auto s = e.as_string()) sum += s->empty() ? 0 : static_cast<unsigned char>(s->back());
        if (auto i = e.as_u64()) sum += *i;
        if (auto f = e.as_f64()) sum += *f > 0;
      }
      for (const std::string_view s : v.strings()) sum += s.size();
      if (v.size() > 0) sum += v.array_at(v.size() - 1).has_value();
    } else {
      if (auto s = v.as_string()) sum += s->size();
      if (auto i = v.as_i64()) sum += static_cast<std::uint64_t>(*i);
      if (auto b = v.as_bool()) sum += *b;
    }
  }
  for (const gguf_tensor t : file.tensors()) {
    if (!t.bytes.empty()) sum += static_cast<unsigned>(t.bytes.front()) + static_cast<unsigned>(t.bytes.back());
    sum += t.elements;
  }
  if (auto config = read_llama_config(file)) sum += config->dim;
  return sum;
}

bytes_t read_all(const std::string& path) {
  auto mapped = os::mapped_file::open(path);
  EXPECT_TRUE(mapped.has_value()) << mapped.error().message();
  if (!mapped) return {};
  return {mapped->bytes().begin(), mapped->bytes().end()};
}

/// Raw little-endian GGUF bytes, for files the writer refuses to write.
struct raw_builder {
  bytes_t out;
  raw_builder& u8(std::uint8_t v) {
    out.push_back(std::byte{v});
    return *this;
  }
  raw_builder& u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  raw_builder& u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
    return *this;
  }
  raw_builder& str(std::string_view s) {
    u64(s.size());
    for (char c : s) out.push_back(static_cast<std::byte>(c));
    return *this;
  }
  raw_builder& header(std::uint64_t tensors, std::uint64_t kvs, std::uint32_t version = 3) {
    out.insert(out.end(), {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}});
    return u32(version).u64(tensors).u64(kvs);
  }
  /// A tensor info: name, dims, type, offset.
  raw_builder& tensor(std::string_view name, std::initializer_list<std::uint64_t> dims, std::uint32_t type,
                      std::uint64_t offset) {
    str(name).u32(static_cast<std::uint32_t>(dims.size()));
    for (auto d : dims) u64(d);
    return u32(type).u64(offset);
  }
  raw_builder& pad_to(std::size_t alignment) {
    while (out.size() % alignment != 0) out.push_back(std::byte{0});
    return *this;
  }
  raw_builder& zeros(std::size_t n) {
    out.resize(out.size() + n, std::byte{0});
    return *this;
  }
};

/// a + decimal n + b (std::string's operator+ trips g++ 12's -Wrestrict false positive).
std::string join(std::string_view a, std::uint64_t n, std::string_view b) {
  std::string s{a};
  s.append(std::to_string(n));
  s.append(b);
  return s;
}

std::span<const std::byte> as_bytes(const std::vector<float>& v) { return std::as_bytes(std::span{v}); }

// ---------------------------------------------------------------- the real files

TEST(Gguf, Stories260KHeaderMetadataAndTensors) {
  SKIP_IF_ABSENT(stories_path);
  auto mapped = os::mapped_file::open(stories_path);
  ASSERT_TRUE(mapped) << mapped.error().message();
  EXPECT_EQ(mapped->size(), 1185376u);
  auto file = gguf_file::parse(mapped->bytes());
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->metadata_count(), 19u);
  EXPECT_EQ(file->tensor_count(), 48u);
  EXPECT_EQ(file->data_offset(), 14176u);

  EXPECT_EQ(*file->find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(*file->find("llama.block_count")->as_u32(), 5u);
  EXPECT_FLOAT_EQ(*file->find("llama.attention.layer_norm_rms_epsilon")->as_f32(), 1e-5f);
  EXPECT_FALSE(file->find("no.such.key").has_value());
  const auto tokens = file->find("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->element_type(), gguf_value_type::string);
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ(*tokens->array_string(0), "<unk>");
  EXPECT_EQ(*tokens->array_string(3), "<0x00>");
  std::size_t count = 0;
  for (const std::string_view piece : tokens->strings()) {
    if (count == 258) {
      EXPECT_EQ(piece, "<0xFF>");
    }
    ++count;
  }
  EXPECT_EQ(count, 512u);
  EXPECT_EQ(*file->find("tokenizer.ggml.token_type")->array_i32(3), 6);  // byte token
  const auto kv3 = file->metadata_at(3);
  ASSERT_TRUE(kv3);
  EXPECT_EQ(kv3->key, "tokenizer.ggml.model");
  EXPECT_FALSE(file->metadata_at(19).has_value());

  const auto down = file->find_tensor("blk.0.ffn_down.weight");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->type, quant::gguf_type::f32);
  EXPECT_EQ(down->n_dims, 2u);
  EXPECT_EQ(down->dims[0], 172u);
  EXPECT_EQ(down->dims[1], 64u);
  EXPECT_EQ(down->elements, 172u * 64u);
  EXPECT_EQ(down->offset, 355840u);
  EXPECT_EQ(down->bytes.size(), 172u * 64u * 4u);
  EXPECT_EQ(down->bytes.data(), mapped->bytes().data() + 14176 + 355840);
  auto w = file->matrix<quant::f32>("blk.0.ffn_down.weight");
  ASSERT_TRUE(w) << w.error().message();
  EXPECT_EQ(w->rows(), 64u);
  EXPECT_EQ(w->cols(), 172u);
  float first;
  std::memcpy(&first, down->bytes.data(), 4);
  EXPECT_EQ((*w)(0, 0), first);
  auto norm = file->vector<quant::f32>("output_norm.weight");
  ASSERT_TRUE(norm) << norm.error().message();
  EXPECT_EQ(norm->size(), 64u);
  const auto last = file->tensor_at(47);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(last->bytes.data() + last->bytes.size(), mapped->bytes().data() + mapped->size());
}

TEST(Gguf, Stories260KLlamaConfig) {
  SKIP_IF_ABSENT(stories_path);
  const bytes_t bytes = read_all(stories_path);
  auto file = gguf_file::parse(bytes);
  ASSERT_TRUE(file) << file.error().message();
  auto config = read_llama_config(*file);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->dim, 64u);
  EXPECT_EQ(config->hidden_dim, 172u);
  EXPECT_EQ(config->n_layers, 5u);
  EXPECT_EQ(config->n_heads, 8u);
  EXPECT_EQ(config->n_kv_heads, 4u);
  EXPECT_EQ(config->vocab_size, 512u);
  EXPECT_EQ(config->context_length, 2048u);
  EXPECT_EQ(config->rope_dim, 8u);
  EXPECT_FLOAT_EQ(config->norm_eps, 1e-5f);
  EXPECT_EQ(config->rope_theta, 10000.0f);
  EXPECT_FALSE(config->shared_classifier);  // the GGUF stores output.weight as a copy
}

TEST(Gguf, Llama2VocabularyHasNoTensors) {
  SKIP_IF_ABSENT(vocab_path);
  const bytes_t bytes = read_all(vocab_path);
  auto file = gguf_file::parse(bytes);
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->tensor_count(), 0u);
  EXPECT_EQ(file->find("tokenizer.ggml.tokens")->size(), 32000u);
  EXPECT_EQ(*file->find("tokenizer.ggml.add_bos_token")->as_bool(), true);
  std::uint64_t pieces = 0;
  for (const std::string_view piece : file->find("tokenizer.ggml.tokens")->strings()) pieces += !piece.empty();
  EXPECT_EQ(pieces, 32000u);
  auto config = read_llama_config(*file);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->vocab_size, 32000u);
  EXPECT_TRUE(config->shared_classifier);
}

/// Every metadata value and tensor of a file, re-added to a writer.
gguf_writer rewrite(const gguf_file& file) {
  gguf_writer w;
  for (const gguf_kv kv : file.metadata()) w.add_value(kv.key, kv.value);
  for (const gguf_tensor t : file.tensors())
    w.add_tensor(t.name, t.type, std::span<const std::uint64_t>{t.dims.data(), t.n_dims}, t.bytes);
  return w;
}

TEST(Gguf, RewritingStories260KGivesTheSameFile) {
  SKIP_IF_ABSENT(stories_path);
  const bytes_t original = read_all(stories_path);
  auto file = gguf_file::parse(original);
  ASSERT_TRUE(file) << file.error().message();
  bytes_t copy;
  ASSERT_TRUE(rewrite(*file).write(copy).ok());
  auto reread = gguf_file::parse(copy);
  ASSERT_TRUE(reread) << reread.error().message();
  ASSERT_EQ(reread->metadata_count(), file->metadata_count());
  ASSERT_EQ(reread->tensor_count(), file->tensor_count());
  auto a = file->metadata().begin();
  for (const gguf_kv kv : reread->metadata()) {
    const gguf_kv original_kv = *a++;
    EXPECT_EQ(kv.key, original_kv.key);
    EXPECT_EQ(kv.value.type(), original_kv.value.type());
    EXPECT_EQ(kv.value.size(), original_kv.value.size());
  }
  auto t = file->tensors().begin();
  for (const gguf_tensor tensor : reread->tensors()) {
    const gguf_tensor original_tensor = *t++;
    EXPECT_EQ(tensor.name, original_tensor.name);
    EXPECT_EQ(tensor.dims, original_tensor.dims);
    EXPECT_EQ(tensor.offset, original_tensor.offset);
    ASSERT_EQ(tensor.bytes.size(), original_tensor.bytes.size());
    EXPECT_EQ(std::memcmp(tensor.bytes.data(), original_tensor.bytes.data(), tensor.bytes.size()), 0);
  }
  // llama.cpp's writer and this one lay the file out identically.
  EXPECT_TRUE(copy == original);
}

// ---------------------------------------------------------------- writer -> reader

TEST(Gguf, EveryValueTypeRoundTrips) {
  const std::array<std::uint8_t, 3> u8s = {0, 7, 255};
  const std::array<std::int16_t, 2> i16s = {-32768, 32767};
  const std::array<float, 3> f32s = {1.5f, -0.0f, 3e38f};
  const std::array<bool, 3> bools = {true, false, true};
  const std::array<std::int64_t, 1> i64s = {std::numeric_limits<std::int64_t>::min()};
  const std::array<double, 2> f64s = {0.1, -1e300};
  const std::array<std::string_view, 3> strings = {"", "héllo", std::string_view{"a\0b", 3}};
  const std::vector<std::string> owned = {"x", "yz"};
  const std::array<std::uint32_t, 0> none = {};
  gguf_writer w;
  w.add("u8", std::uint8_t{200})
      .add("i8", std::int8_t{-100})
      .add("u16", std::uint16_t{65535})
      .add("i16", std::int16_t{-2})
      .add("u32", std::uint32_t{4000000000u})
      .add("i32", std::int32_t{-7})
      .add("f32", 0.25f)
      .add("bool", true)
      .add("string", "text")
      .add("empty", "")
      .add("u64", std::uint64_t{1} << 40)
      .add("i64", std::int64_t{-(std::int64_t{1} << 40)})
      .add("f64", 1e100)
      .add_array("a.u8", std::span<const std::uint8_t>{u8s})
      .add_array("a.i16", std::span<const std::int16_t>{i16s})
      .add_array("a.f32", std::span<const float>{f32s})
      .add_array("a.bool", std::span<const bool>{bools})
      .add_array("a.i64", std::span<const std::int64_t>{i64s})
      .add_array("a.f64", std::span<const double>{f64s})
      .add_array("a.string", std::span<const std::string_view>{strings})
      .add_array("a.owned", std::span<const std::string>{owned})
      .add_array("a.empty", std::span<const std::uint32_t>{none});
  bytes_t out;
  ASSERT_TRUE(w.write(out).ok());
  auto file = gguf_file::parse(out);
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->metadata_count(), 22u);
  EXPECT_EQ(*file->find("u8")->as_u32(), 200u);
  EXPECT_EQ(*file->find("i8")->as_i32(), -100);
  EXPECT_EQ(*file->find("u16")->as_u32(), 65535u);
  EXPECT_EQ(*file->find("i16")->as_i64(), -2);
  EXPECT_EQ(*file->find("u32")->as_u64(), 4000000000u);
  EXPECT_EQ(*file->find("i32")->as_i32(), -7);
  EXPECT_EQ(*file->find("f32")->as_f32(), 0.25f);
  EXPECT_EQ(*file->find("bool")->as_bool(), true);
  EXPECT_EQ(*file->find("string")->as_string(), "text");
  EXPECT_EQ(*file->find("empty")->as_string(), "");
  EXPECT_EQ(*file->find("u64")->as_u64(), std::uint64_t{1} << 40);
  EXPECT_EQ(*file->find("i64")->as_i64(), -(std::int64_t{1} << 40));
  EXPECT_EQ(*file->find("f64")->as_f64(), 1e100);
  EXPECT_EQ(*file->find("a.u8")->array_u32(2), 255u);
  EXPECT_EQ(*file->find("a.i16")->array_i32(0), -32768);
  EXPECT_EQ(*file->find("a.f32")->array_f32(2), 3e38f);
  EXPECT_EQ(*file->find("a.bool")->array_at(1)->as_bool(), false);
  EXPECT_EQ(*file->find("a.i64")->array_at(0)->as_i64(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(*file->find("a.f64")->array_at(1)->as_f64(), -1e300);
  const auto a_string = file->find("a.string");
  EXPECT_EQ(a_string->size(), 3u);
  EXPECT_EQ(*a_string->array_string(0), "");
  EXPECT_EQ(*a_string->array_string(1), "héllo");
  EXPECT_EQ(*a_string->array_string(2), std::string_view("a\0b", 3));
  EXPECT_EQ(*file->find("a.owned")->array_string(1), "yz");
  EXPECT_EQ(file->find("a.empty")->size(), 0u);
  EXPECT_EQ(file->find("a.empty")->element_type(), gguf_value_type::uint32);
  EXPECT_EQ(file->find("a.empty")->elements().begin(), file->find("a.empty")->elements().end());

  // Re-writing the parsed values (add_value) gives the same bytes.
  bytes_t again;
  ASSERT_TRUE(rewrite(*file).write(again).ok());
  EXPECT_TRUE(again == out);
}

TEST(Gguf, IntegerReadsAcceptAnyWidthThatFits) {
  gguf_writer w;
  w.add("neg", std::int32_t{-1})
      .add("big", std::uint64_t{1} << 33)
      .add("i64max", std::numeric_limits<std::int64_t>::max())
      .add("u32big", std::uint32_t{3000000000u})
      .add("f64huge", 1e300)
      .add("text", "7");
  bytes_t out;
  ASSERT_TRUE(w.write(out).ok());
  auto file = gguf_file::parse(out);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->find("neg")->as_u32().error().code(), errc::out_of_range);
  EXPECT_EQ(*file->find("neg")->as_i64(), -1);
  EXPECT_EQ(file->find("big")->as_u32().error().code(), errc::out_of_range);
  EXPECT_EQ(*file->find("big")->as_i64(), std::int64_t{1} << 33);
  EXPECT_EQ(*file->find("i64max")->as_u64(), static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(file->find("u32big")->as_i32().error().code(), errc::out_of_range);
  EXPECT_EQ(file->find("f64huge")->as_f32().error().code(), errc::out_of_range);
  const auto as_int = file->find("text")->as_u32();
  EXPECT_EQ(as_int.error().code(), errc::invalid_argument);
  EXPECT_NE(as_int.error().message().find("key text is string, not an integer"), std::string_view::npos)
      << as_int.error().message();
  EXPECT_EQ(file->find("neg")->as_string().error().code(), errc::invalid_argument);
  EXPECT_EQ(file->find("neg")->as_f32().error().code(), errc::invalid_argument);
  EXPECT_EQ(file->find("neg")->as_bool().error().code(), errc::invalid_argument);
  EXPECT_EQ(file->find("neg")->array_at(0).error().code(), errc::invalid_argument);
}

/// A file with one tensor of each format hedge reads, made from random floats with the
/// reference quantizers; checks each typed view against the writer's bytes.
template <quant::BlockFormat F>
void add_quantized(gguf_writer& w, std::vector<std::vector<std::byte>>& storage, std::string_view name,
                   std::size_t rows, std::size_t cols) {
  std::mt19937 rng(static_cast<unsigned>(rows * 31 + cols));
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  std::vector<typename F::block> blocks(rows * cols / F::block_elements);
  ASSERT_TRUE(quant::quantize<F>(x, blocks).ok());
  const auto bytes = std::as_bytes(std::span{blocks});
  storage.emplace_back(bytes.begin(), bytes.end());
  w.add_tensor(name, F::type_id, {cols, rows}, storage.back());
}

template <quant::BlockFormat F>
void expect_matrix(const gguf_file& file, std::string_view name, std::size_t rows, std::size_t cols,
                   std::span<const std::byte> expected) {
  auto m = file.matrix<F>(name);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->rows(), rows);
  EXPECT_EQ(m->cols(), cols / F::block_elements);
  EXPECT_TRUE(m->dense());
  EXPECT_EQ(std::memcmp(m->data(), expected.data(), expected.size()), 0) << name;
  const auto* base = file.bytes().data();
  EXPECT_GE(reinterpret_cast<const std::byte*>(m->data()), base);  // a view of the file, not a copy
  EXPECT_LE(reinterpret_cast<const std::byte*>(m->data()) + expected.size(), base + file.bytes().size());
}

TEST(Gguf, TypedTensorViewsOfEveryFormat) {
  gguf_writer w;
  std::vector<std::vector<std::byte>> storage;
  storage.reserve(8);
  add_quantized<quant::f32>(w, storage, "f32", 3, 5);
  add_quantized<quant::f16>(w, storage, "f16", 2, 7);
  add_quantized<quant::bf16>(w, storage, "bf16", 4, 3);
  add_quantized<quant::q8_0>(w, storage, "q8_0", 3, 64);
  add_quantized<quant::q4_0>(w, storage, "q4_0", 5, 32);
  add_quantized<quant::q4_k>(w, storage, "q4_k", 2, 512);
  add_quantized<quant::q6_k>(w, storage, "q6_k", 3, 256);
  const std::vector<float> bias = {1.f, 2.f, 3.f};
  w.add_tensor("bias", quant::gguf_type::f32, {3}, as_bytes(bias));
  bytes_t out;
  ASSERT_TRUE(w.write(out).ok());
  auto file = gguf_file::parse(out);
  ASSERT_TRUE(file) << file.error().message();
  expect_matrix<quant::f32>(*file, "f32", 3, 5, storage[0]);
  expect_matrix<quant::f16>(*file, "f16", 2, 7, storage[1]);
  expect_matrix<quant::bf16>(*file, "bf16", 4, 3, storage[2]);
  expect_matrix<quant::q8_0>(*file, "q8_0", 3, 64, storage[3]);
  expect_matrix<quant::q4_0>(*file, "q4_0", 5, 32, storage[4]);
  expect_matrix<quant::q4_k>(*file, "q4_k", 2, 512, storage[5]);
  expect_matrix<quant::q6_k>(*file, "q6_k", 3, 256, storage[6]);
  for (const gguf_tensor t : file->tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;

  auto bias_view = file->vector<quant::f32>("bias");
  ASSERT_TRUE(bias_view);
  EXPECT_EQ((*bias_view)[2], 3.f);
  // A 1-D tensor is also a one-row matrix.
  EXPECT_EQ(file->matrix<quant::f32>("bias")->rows(), 1u);

  const auto wrong_type = file->matrix<quant::q8_0>("q4_k");
  EXPECT_EQ(wrong_type.error().code(), errc::invalid_argument);
  EXPECT_NE(wrong_type.error().message().find("tensor 'q4_k' is q4_k (type 12), not q8_0"), std::string_view::npos)
      << wrong_type.error().message();
  const auto not_vector = file->vector<quant::f32>("f32");
  EXPECT_EQ(not_vector.error().code(), errc::shape_mismatch);
  EXPECT_NE(not_vector.error().message().find("tensor 'f32' is 5x3, not a vector"), std::string_view::npos)
      << not_vector.error().message();
  const auto missing = file->matrix<quant::f32>("nope");
  EXPECT_NE(missing.error().message().find("no tensor named 'nope'"), std::string_view::npos);
}

TEST(Gguf, TensorShapesAndAlignment) {
  const std::vector<float> cube(2 * 3 * 4, 1.f);
  gguf_writer w;
  w.add_tensor("cube", quant::gguf_type::f32, {2, 3, 4}, as_bytes(cube));
  bytes_t out;
  ASSERT_TRUE(w.write(out).ok());
  auto file = gguf_file::parse(out);
  ASSERT_TRUE(file) << file.error().message();
  const auto cube_info = file->find_tensor("cube");
  EXPECT_EQ(cube_info->n_dims, 3u);
  EXPECT_EQ(cube_info->rows(), 12u);
  const auto matrix = file->matrix<quant::f32>("cube");
  EXPECT_EQ(matrix.error().code(), errc::shape_mismatch);
  EXPECT_NE(matrix.error().message().find("tensor 'cube' has 3 dims, a matrix has at most 2"), std::string_view::npos)
      << matrix.error().message();
}

TEST(Gguf, MisalignedTensorDataIsAnErrorNotAView) {
  // With general.alignment 1, a float tensor after a tensor of 1 (or 2) int8 values starts
  // off a 4-byte boundary (the file buffer itself is 16-byte aligned).
  const std::vector<float> four(4, 2.f);
  const std::vector<std::byte> small(2, std::byte{9});
  for (std::size_t lead = 1; lead <= 2; ++lead) {
    gguf_writer w;
    w.add("general.alignment", std::uint32_t{1});
    w.add_tensor("lead", static_cast<quant::gguf_type>(24), {lead}, std::span{small}.first(lead));  // i8
    w.add_tensor("after", quant::gguf_type::f32, {4}, as_bytes(four));
    bytes_t out;
    ASSERT_TRUE(w.write(out).ok());
    auto file = gguf_file::parse(out);
    ASSERT_TRUE(file) << file.error().message();
    EXPECT_EQ(file->alignment(), 1u);
    EXPECT_EQ(file->find_tensor("after")->offset, lead);
    if ((file->data_offset() + lead) % alignof(float) == 0) continue;
    const auto misaligned = file->vector<quant::f32>("after");
    ASSERT_FALSE(misaligned);
    EXPECT_EQ(misaligned.error().code(), errc::misaligned);
    EXPECT_NE(misaligned.error().message().find("tensor 'after' data is not 4-byte aligned"), std::string_view::npos)
        << misaligned.error().message();
    return;
  }
  FAIL() << "no layout put the tensor off a 4-byte boundary";
}

TEST(Gguf, VersionTwoParses) {
  gguf_writer w;
  w.add("k", std::uint32_t{1});
  bytes_t out;
  ASSERT_TRUE(w.write(out).ok());
  out[4] = std::byte{2};
  auto file = gguf_file::parse(out);
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(file->version(), 2u);
}

TEST(Gguf, WriterRejectsWhatTheReaderWould) {
  const std::vector<float> six(6, 0.f);
  const auto check = [](gguf_writer& w, std::string_view text) {
    bytes_t out;
    const auto r = w.write(out);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message().find(text), std::string_view::npos) << r.error().message();
    EXPECT_TRUE(out.empty());
  };
  {
    gguf_writer w;
    w.add("a", 1.f).add("a", 2.f);
    check(w, "key 'a' added twice");
  }
  {
    gguf_writer w;
    w.add("general.alignment", std::uint32_t{48});
    check(w, "general.alignment 48 is not a power of two");
  }
  {
    gguf_writer w;
    w.add("general.alignment", std::uint64_t{64});
    check(w, "general.alignment must be uint32");
  }
  {
    gguf_writer w;
    w.add_tensor("t", quant::gguf_type::f32, {4}, as_bytes(six));
    check(w, "tensor 't' has 24 bytes, its shape needs 16");
  }
  {
    gguf_writer w;
    w.add_tensor("t", quant::gguf_type::q8_0, {6}, as_bytes(six));
    check(w, "row of 6 is not a multiple of q8_0's block");
  }
  {
    gguf_writer w;
    w.add_tensor("t", quant::gguf_type::f32, {6}, as_bytes(six)).add_tensor("t", quant::gguf_type::f32, {6},
                                                                               as_bytes(six));
    check(w, "tensor 't' added twice");
  }
  {
    gguf_writer w;
    w.add_tensor(std::string(65, 'n'), quant::gguf_type::f32, {6}, as_bytes(six));
    check(w, "name is not 1 to 64 bytes");
  }
}

TEST(Gguf, WriterSinkErrorsStopTheWrite) {
  const std::vector<float> data(8, 1.f);
  gguf_writer w;
  w.add("k", "v").add_tensor("t", quant::gguf_type::f32, {8}, as_bytes(data));
  int calls = 0;
  const auto r = w.write([&](std::span<const std::byte>) -> result<void> {
    ++calls;
    return error{errc::io_error} << "disk full";
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "disk full");
  EXPECT_EQ(calls, 1);
}

// ---------------------------------------------------------------- llama hyperparameters

/// A minimal llama file: the required keys, and token_embd.weight (dim x vocab).
gguf_writer minimal_llama(std::vector<float>& embedding, std::uint32_t dim = 16, std::uint32_t vocab = 10) {
  embedding.assign(std::size_t{dim} * vocab, 0.5f);
  gguf_writer w;
  w.add("general.architecture", "llama")
      .add("llama.embedding_length", dim)
      .add("llama.feed_forward_length", std::uint32_t{40})
      .add("llama.block_count", std::uint32_t{2})
      .add("llama.attention.head_count", std::uint32_t{4})
      .add("llama.context_length", std::uint32_t{128});
  return w;
}

result<llama_config> config_of(const gguf_writer& w, bytes_t& out) {
  out.clear();
  HEDGE_TRY(w.write(out));
  auto file = gguf_file::parse(out);
  if (!file) return file.error();
  return read_llama_config(*file);
}

TEST(GgufLlama, DefaultsForAbsentKeys) {
  std::vector<float> embedding;
  gguf_writer w = minimal_llama(embedding);
  w.add_tensor("token_embd.weight", quant::gguf_type::f32, {16, 10}, as_bytes(embedding));
  bytes_t out;
  auto config = config_of(w, out);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->n_kv_heads, 4u);         // head_count
  EXPECT_EQ(config->rope_dim, 4u);           // dim / head_count
  EXPECT_EQ(config->norm_eps, 1e-5f);
  EXPECT_EQ(config->rope_theta, 10000.0f);
  EXPECT_EQ(config->vocab_size, 10u);        // token_embd.weight's rows, without a tokenizer
  EXPECT_TRUE(config->shared_classifier);    // no output.weight
}

TEST(GgufLlama, ExplicitKeysAndPerLayerArrays) {
  std::vector<float> embedding;
  gguf_writer w = minimal_llama(embedding);
  const std::array<std::uint32_t, 2> kv_heads = {2, 2};
  const std::array<std::string_view, 10> tokens = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  w.add_array("llama.attention.head_count_kv", std::span<const std::uint32_t>{kv_heads})
      .add("llama.rope.dimension_count", std::uint32_t{2})
      .add("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .add("llama.rope.freq_base", 500000.0)  // float64 is accepted too
      .add_array("tokenizer.ggml.tokens", std::span<const std::string_view>{tokens})
      .add_tensor("token_embd.weight", quant::gguf_type::f32, {16, 10}, as_bytes(embedding))
      .add_tensor("output.weight", quant::gguf_type::f32, {16, 10}, as_bytes(embedding));
  bytes_t out;
  auto config = config_of(w, out);
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(config->n_kv_heads, 2u);
  EXPECT_EQ(config->rope_dim, 2u);
  EXPECT_EQ(config->norm_eps, 1e-6f);
  EXPECT_EQ(config->rope_theta, 500000.0f);
  EXPECT_EQ(config->vocab_size, 10u);
  EXPECT_FALSE(config->shared_classifier);
}

TEST(GgufLlama, ErrorsNameTheArchitectureOrKey) {
  bytes_t out;
  {
    gguf_writer w;
    w.add("general.architecture", "gpt2");
    const auto config = config_of(w, out);
    EXPECT_EQ(config.error().code(), errc::unsupported);
    EXPECT_NE(config.error().message().find("architecture 'gpt2' is not supported"), std::string_view::npos);
  }
  {
    gguf_writer w;
    w.add("general.architecture", "llama").add("llama.embedding_length", std::uint32_t{16});
    const auto config = config_of(w, out);
    EXPECT_EQ(config.error().code(), errc::parse_error);
    EXPECT_NE(config.error().message().find("key llama.block_count is missing"), std::string_view::npos)
        << config.error().message();
  }
  {
    std::vector<float> embedding;
    gguf_writer w = minimal_llama(embedding);
    const std::array<std::uint32_t, 2> varying = {2, 4};
    w.add_array("llama.attention.head_count_kv", std::span<const std::uint32_t>{varying});
    const auto config = config_of(w, out);
    EXPECT_EQ(config.error().code(), errc::unsupported);
    EXPECT_NE(config.error().message().find("varies across layers"), std::string_view::npos);
  }
  {
    std::vector<float> embedding;
    gguf_writer w = minimal_llama(embedding);
    w.add("llama.vocab_size", std::uint32_t{11})
        .add_tensor("token_embd.weight", quant::gguf_type::f32, {16, 10}, as_bytes(embedding));
    const auto config = config_of(w, out);
    EXPECT_EQ(config.error().code(), errc::shape_mismatch);
    EXPECT_NE(config.error().message().find("token_embd.weight' is 16x10"), std::string_view::npos);
  }
  {
    std::vector<float> embedding;
    gguf_writer w = minimal_llama(embedding);
    w.add("llama.attention.head_count_kv", std::uint32_t{3})
        .add_tensor("token_embd.weight", quant::gguf_type::f32, {16, 10}, as_bytes(embedding));
    const auto config = config_of(w, out);
    EXPECT_EQ(config.error().code(), errc::invalid_argument);  // config.check(): 4 heads, 3 kv heads
  }
}

// ---------------------------------------------------------------- hostile files

TEST(GgufHostile, BadMagicAndShortFiles) {
  expect_error({}, errc::parse_error, "not a GGUF file: 0 bytes");
  raw_builder ggml;
  ggml.u32(0x67676d6cu).u32(3);
  expect_error(ggml.out, errc::parse_error, "not a GGUF file: magic is 6c 6d 67 67");
  raw_builder header_only;
  header_only.header(0, 0);
  header_only.out.resize(20);
  expect_error(header_only.out, errc::parse_error, "truncated at byte 16: metadata count needs 8 bytes, 4 left");
}

TEST(GgufHostile, UnsupportedVersions) {
  for (std::uint32_t version : {0u, 1u, 4u, 0xFFFFFFFFu}) {
    raw_builder b;
    b.header(0, 0, version);
    expect_error(b.out, errc::unsupported, join("GGUF version ", version, " is not supported"));
  }
  raw_builder big_endian;
  big_endian.header(0, 0, 0x03000000u);
  expect_error(big_endian.out, errc::unsupported, "big-endian GGUF (version 3)");
}

TEST(GgufHostile, HugeStringLengths) {
  raw_builder key;
  key.header(0, 1).u64(std::uint64_t{1} << 60).zeros(16);
  expect_error(key.out, errc::parse_error, "key at byte 24 claims 1152921504606846976 bytes, 16 left");
  raw_builder value;
  value.header(0, 1).str("k").u32(8).u64(std::uint64_t{1} << 60).zeros(4);
  expect_error(value.out, errc::parse_error, "string value at byte 37 claims 1152921504606846976 bytes");
  raw_builder element;
  element.header(0, 1).str("k").u32(9).u32(8).u64(2).str("ok").u64(~std::uint64_t{0});
  expect_error(element.out, errc::parse_error, "(element 1 of key 'k')");
  raw_builder long_key;
  long_key.header(0, 1).str(std::string(70000, 'k')).u32(0).u8(0);
  expect_error(long_key.out, errc::parse_error, "has 70000 bytes, more than 65535");
}

TEST(GgufHostile, HugeCounts) {
  raw_builder array;
  array.header(0, 1).str("k").u32(9).u32(4).u64(std::uint64_t{1} << 62).zeros(64);
  expect_error(array.out, errc::parse_error, "array of key 'k' at byte 24 claims 4611686018427387904 uint32 elements");
  raw_builder strings;
  strings.header(0, 1).str("k").u32(9).u32(8).u64(std::uint64_t{1} << 40).zeros(64);
  expect_error(strings.out, errc::parse_error, "claims 1099511627776 string elements, 64 bytes left");
  raw_builder tensors;
  tensors.header(~std::uint64_t{0}, 0).zeros(100);
  expect_error(tensors.out, errc::parse_error, "header claims 18446744073709551615 tensors");
  raw_builder kvs;
  kvs.header(0, std::uint64_t{1} << 63).zeros(100);
  expect_error(kvs.out, errc::parse_error, "header claims 9223372036854775808 metadata entries");
  // Counts the bytes could hold, beyond the limits.
  raw_builder many_kvs;
  many_kvs.header(0, gguf_limits::max_metadata_count + 1).zeros(14 * (gguf_limits::max_metadata_count + 1));
  expect_error(many_kvs.out, errc::unsupported, "4097 metadata entries, more than the 4096 supported");
  raw_builder many_tensors;
  many_tensors.header(gguf_limits::max_tensor_count + 1, 0).zeros(33 * (gguf_limits::max_tensor_count + 1));
  expect_error(many_tensors.out, errc::unsupported, "65537 tensors, more than the 65536 supported");
}

TEST(GgufHostile, ValueTypes) {
  raw_builder nested;
  nested.header(0, 1).str("k").u32(9).u32(9).u64(1).u32(4).u64(1).u32(7);
  expect_error(nested.out, errc::unsupported, "key 'k' at byte 24 is an array of arrays");
  raw_builder unknown;
  unknown.header(0, 1).str("k").u32(13).u64(0);
  expect_error(unknown.out, errc::parse_error, "key 'k' at byte 24 has unknown value type 13");
  raw_builder unknown_element;
  unknown_element.header(0, 1).str("k").u32(9).u32(99).u64(0);
  expect_error(unknown_element.out, errc::parse_error, "unknown array element type 99");
  raw_builder bad_bool;
  bad_bool.header(0, 1).str("k").u32(7).u8(2);
  expect_error(bad_bool.out, errc::parse_error, "bool at byte 37 of key 'k' is 2, not 0 or 1");
  raw_builder bad_bool_array;
  bad_bool_array.header(0, 1).str("k").u32(9).u32(7).u64(3).u8(1).u8(0).u8(5);
  expect_error(bad_bool_array.out, errc::parse_error, "bool at byte 51 in array of key 'k' is 5");
  raw_builder empty_key;
  empty_key.header(0, 1).str("").u32(0).u8(0).zeros(1);
  expect_error(empty_key.out, errc::parse_error, "empty key at byte 24");
  raw_builder control;
  control.header(0, 1).str("a\x1b[2Jb").u32(13);
  expect_error(control.out, errc::parse_error, "key 'a?[2Jb'");  // no escape sequence reaches a terminal
}

TEST(GgufHostile, Alignment) {
  for (std::uint32_t alignment : {0u, 3u, 48u}) {
    raw_builder b;
    b.header(0, 1).str("general.alignment").u32(4).u32(alignment);
    expect_error(b.out, errc::parse_error,
                 join("general.alignment at byte 24 is ", alignment, ", not a power of two"));
  }
  raw_builder wide;
  wide.header(0, 1).str("general.alignment").u32(10).u64(32);
  expect_error(wide.out, errc::parse_error, "general.alignment at byte 24 is uint64, not uint32");
  // A huge power of two puts the data section past the end.
  raw_builder huge;
  huge.header(1, 1).str("general.alignment").u32(4).u32(0x80000000u).tensor("t", {1}, 0, 0).zeros(64);
  expect_error(huge.out, errc::parse_error, "starts past the end of the file");
}

/// One f32 tensor info per (name, elements, offset), then the data section of `data_bytes`.
bytes_t tensor_file(std::initializer_list<std::tuple<std::string_view, std::uint64_t, std::uint64_t>> tensors,
                    std::size_t data_bytes) {
  raw_builder b;
  b.header(tensors.size(), 0);
  for (const auto& [name, elements, offset] : tensors) b.tensor(name, {elements}, 0, offset);
  return b.pad_to(32).zeros(data_bytes).out;
}

TEST(GgufHostile, TensorInfos) {
  raw_builder overflow;
  overflow.header(1, 0).tensor("t", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, 0, 0);
  expect_error(overflow.out, errc::parse_error, "tensor 't' has more than 2^63 elements (dim 1 is 4294967296)");
  raw_builder bytes_overflow;
  bytes_overflow.header(1, 0).tensor("t", {std::uint64_t{1} << 62}, 0, 0);
  expect_error(bytes_overflow.out, errc::parse_error, "blocks exceeds 2^63 bytes");
  raw_builder zero;
  zero.header(1, 0).tensor("t", {4, 0}, 0, 0);
  expect_error(zero.out, errc::parse_error, "tensor 't' dim 1 is 0");
  for (std::uint32_t dims : {0u, 5u}) {
    raw_builder b;
    b.header(1, 0).str("t").u32(dims).zeros(64);
    expect_error(b.out, errc::parse_error, join("tensor 't' at byte 24 has ", dims, " dims, not 1 to 4"));
  }
  raw_builder type;
  type.header(1, 0).tensor("t", {32}, 4, 0);
  expect_error(type.out, errc::unsupported, "tensor 't' has unknown type 4");
  raw_builder row;
  row.header(1, 0).tensor("t", {33}, 8, 0);
  expect_error(row.out, errc::parse_error, "tensor 't' row of 33 is not a multiple of q8_0's block of 32");
  raw_builder name;
  name.header(1, 0).tensor(std::string(65, 'n'), {1}, 0, 0);
  expect_error(name.out, errc::parse_error, "tensor name at byte 24 has 65 bytes, more than 64");
  raw_builder no_name;
  no_name.header(1, 0).tensor("", {1}, 0, 0).zeros(8);
  expect_error(no_name.out, errc::parse_error, "tensor 0 at byte 24 has no name");
}

TEST(GgufHostile, TensorData) {
  ASSERT_TRUE(gguf_file::parse(tensor_file({{"a", 8, 0}, {"b", 8, 32}}, 64)).has_value());
  expect_error(tensor_file({{"a", 8, 0}, {"b", 8, 16}}, 64), errc::parse_error,
               "tensor 'b' data offset 16 is not a multiple of the alignment 32");
  expect_error(tensor_file({{"a", 16, 0}, {"b", 8, 32}}, 96), errc::parse_error,
               "tensor 'b' data offset 32 overlaps tensor 'a' ending at 64");
  expect_error(tensor_file({{"a", 8, 32}, {"b", 8, 0}}, 64), errc::parse_error,
               "tensor 'b' data offset 0 overlaps tensor 'a' ending at 64");
  expect_error(tensor_file({{"a", 8, 0}, {"b", 9, 32}}, 64), errc::parse_error,
               "tensor 'b' data [32, +36) runs past the data section's 64 bytes");
  expect_error(tensor_file({{"a", 8, std::uint64_t{1} << 63}}, 64), errc::parse_error,
               "tensor 'a' data [9223372036854775808, +32) runs past");
  expect_error(tensor_file({{"a", 8, ~std::uint64_t{0} - 31}}, 64), errc::parse_error, "runs past");
}

TEST(GgufHostile, DuplicateKeysAndTensorNames) {
  raw_builder keys;
  keys.header(0, 3).str("a").u32(0).u8(1).str("b").u32(0).u8(2).str("a").u32(0).u8(3);
  expect_error(keys.out, errc::parse_error, "duplicate key 'a'");
  expect_error(tensor_file({{"w", 8, 0}, {"w", 8, 32}}, 64), errc::parse_error, "duplicate tensor name 'w'");

  // Across the duplicate search's chunks of 256 names, and with none.
  const auto tensors = [](std::size_t count, std::size_t first, std::size_t second) {
    raw_builder b;
    b.header(count, 0);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t id = i == second ? first : i;
      b.tensor(join("t", id, ""), {8}, 0, 32 * i);
    }
    return b.pad_to(32).zeros(32 * count).out;
  };
  EXPECT_TRUE(gguf_file::parse(tensors(700, 0, 700)).has_value());
  expect_error(tensors(700, 10, 650), errc::parse_error, "duplicate tensor name 't10'");
  expect_error(tensors(700, 300, 301), errc::parse_error, "duplicate tensor name 't300'");
  expect_error(tensors(700, 0, 699), errc::parse_error, "duplicate tensor name 't0'");
  const auto kvs = [](std::size_t count, std::size_t first, std::size_t second) {
    raw_builder b;
    b.header(0, count);
    for (std::size_t i = 0; i < count; ++i) b.str(join("key.", i == second ? first : i, "")).u32(0).u8(0);
    return b.out;
  };
  EXPECT_TRUE(gguf_file::parse(kvs(600, 0, 600)).has_value());
  expect_error(kvs(600, 5, 590), errc::parse_error, "duplicate key 'key.5'");
}

TEST(GgufHostile, EveryTruncationOfStories260KFailsWithAMessage) {
  SKIP_IF_ABSENT(stories_path);
  const bytes_t bytes = read_all(stories_path);
  auto whole = gguf_file::parse(bytes);
  ASSERT_TRUE(whole);
  const std::size_t header_end = whole->data_offset();
  std::size_t failures = 0;
  const auto try_prefix = [&](std::size_t n) {
    // A copy of exactly n bytes: ASan sees any read past the prefix.
    const bytes_t prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const auto parsed = gguf_file::parse(prefix);
    ASSERT_FALSE(parsed.has_value()) << "prefix of " << n << " bytes parsed";
    ASSERT_FALSE(parsed.error().message().empty());
    ++failures;
  };
  for (std::size_t n = 0; n <= header_end; ++n) try_prefix(n);
  for (std::size_t n = header_end + 1; n < bytes.size(); n += 4099) try_prefix(n);
  try_prefix(bytes.size() - 1);
  EXPECT_GT(failures, header_end);
  const auto at_data = gguf_file::parse(std::span{bytes}.first(header_end + 100));
  EXPECT_NE(at_data.error().message().find("tensor 'token_embd.weight' data [0, +131072) runs past the data section's 100 bytes"),
            std::string_view::npos)
      << at_data.error().message();
}

TEST(GgufHostile, MutatedStories260KParsesOrFailsWithAMessage) {
  SKIP_IF_ABSENT(stories_path);
  bytes_t bytes = read_all(stories_path);
  auto whole = gguf_file::parse(bytes);
  ASSERT_TRUE(whole);
  const std::size_t region = whole->data_offset();
  std::mt19937_64 rng(16);
  const std::array<std::uint64_t, 8> lies = {0, 1, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, std::uint64_t{1} << 32,
                                             std::uint64_t{1} << 63, ~std::uint64_t{0}};
  std::size_t parsed = 0, failed = 0;
  for (int round = 0; round < 6000; ++round) {
    const std::size_t at = rng() % region;
    const int kind = static_cast<int>(rng() % 3);
    const std::size_t width = kind == 2 ? std::min<std::size_t>(8, region - at) : 1;
    std::array<std::byte, 8> saved{};
    std::memcpy(saved.data(), bytes.data() + at, width);
    if (kind == 0) bytes[at] ^= static_cast<std::byte>(1u << (rng() % 8));
    else if (kind == 1) bytes[at] = static_cast<std::byte>(rng());
    else {
      const std::uint64_t lie = lies[rng() % lies.size()];
      for (std::size_t i = 0; i < width; ++i) bytes[at + i] = static_cast<std::byte>(lie >> (8 * i));
    }
    const auto file = gguf_file::parse(bytes);
    if (file) {
      ++parsed;
      (void)touch_everything(*file);
    } else {
      ++failed;
      EXPECT_FALSE(file.error().message().empty());
    }
    std::memcpy(bytes.data() + at, saved.data(), width);
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(failed, 0u);
}

// ---------------------------------------------------------------- os::mapped_file

TEST(MappedFile, ErrorsNameTheFileAndReason) {
  const auto missing = os::mapped_file::open("/nonexistent/model.gguf");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::io_error);
  EXPECT_EQ(missing.error().message(), "cannot open /nonexistent/model.gguf: No such file or directory");
  const auto directory = os::mapped_file::open("/");
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().message(), "cannot map /: Is a directory");
}

TEST(MappedFile, EmptyFileIsAnEmptySpanAndMovesTransferTheMapping) {
  const std::string path = ::testing::TempDir() + "hedge_gguf_empty_test";
  { std::ofstream(path, std::ios::binary | std::ios::trunc); }
  auto empty = os::mapped_file::open(path);
  ASSERT_TRUE(empty) << empty.error().message();
  EXPECT_TRUE(empty->bytes().empty());
  expect_error(empty->bytes(), errc::parse_error, "not a GGUF file: 0 bytes");
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << "GGUF"; }
  auto four = os::mapped_file::open(path);
  ASSERT_TRUE(four);
  os::mapped_file moved = std::move(*four);
  EXPECT_TRUE(four->bytes().empty());
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_EQ(moved.bytes()[3], std::byte{'F'});
  std::remove(path.c_str());
}

}  // namespace
