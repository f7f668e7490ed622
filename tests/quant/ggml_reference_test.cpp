// Every format's reference quantizer and dequantizer against ggml's own: the bytes and
// floats of tests/quant/data/ggml_quant_reference.txt, which
// scripts/ggml_quant_reference.py made with the libggml-base.so of node-llama-cpp 3.22.1
// (quantize_row_<type>_ref and dequantize_row_<type> on the inputs stored beside them).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "hedge/quant/block_format.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q5_0.hpp"
#include "hedge/quant/q5_1.hpp"
#include "hedge/quant/q5_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace {

namespace q = hedge::quant;

struct reference_case {
  std::string name;
  std::vector<std::uint8_t> input, blocks, dequantized;
};

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

/// The file's cases by type name ("q5_k", ...).
std::map<std::string, std::vector<reference_case>> load_reference() {
  std::map<std::string, std::vector<reference_case>> out;
  std::ifstream in(std::string(HEDGE_SOURCE_DIR) + "/tests/quant/data/ggml_quant_reference.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string type, name, input, blocks, dequantized;
    fields >> type >> name >> input >> blocks >> dequantized;
    out[type].push_back({name, from_hex(input), from_hex(blocks), from_hex(dequantized)});
  }
  return out;
}

const std::map<std::string, std::vector<reference_case>>& reference() {
  static const auto cases = load_reference();
  return cases;
}

template <class F>
class GgmlReference : public ::testing::Test {};
using GgmlFormats = ::testing::Types<q::q8_0, q::q4_0, q::q5_0, q::q5_1, q::q4_k, q::q5_k, q::q6_k, q::q8_k>;
TYPED_TEST_SUITE(GgmlReference, GgmlFormats);

TYPED_TEST(GgmlReference, BytesAndDequantizedValuesEqualGgmls) {
  using F = TypeParam;
  const auto found = reference().find(std::string(F::name));
  ASSERT_NE(found, reference().end()) << "no cases for " << F::name << " in ggml_quant_reference.txt";
  ASSERT_EQ(found->second.size(), 4u);
  for (const auto& c : found->second) {
    const std::size_t n = c.input.size() / sizeof(float);
    ASSERT_EQ(n % F::block_elements, 0u) << c.name;
    std::vector<float> x(n);
    std::memcpy(x.data(), c.input.data(), c.input.size());
    std::vector<typename F::block> blocks(n / F::block_elements);
    ASSERT_EQ(blocks.size() * sizeof(typename F::block), c.blocks.size()) << c.name;
    ASSERT_TRUE(q::quantize<F>({x.data(), n}, {blocks.data(), blocks.size()})) << c.name;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto* ours = reinterpret_cast<const std::uint8_t*>(&blocks[b]);
      const std::vector<std::uint8_t> mine(ours, ours + sizeof(typename F::block));
      const std::vector<std::uint8_t> theirs(c.blocks.begin() + static_cast<std::ptrdiff_t>(b * mine.size()),
                                             c.blocks.begin() + static_cast<std::ptrdiff_t>((b + 1) * mine.size()));
      EXPECT_EQ(mine, theirs) << F::name << " case " << c.name << " block " << b;
    }
    // Dequantize ggml's bytes (not ours), so a dequantizer bug shows even where the
    // quantizer's does too.
    std::vector<typename F::block> theirs(blocks.size());
    std::memcpy(static_cast<void*>(theirs.data()), c.blocks.data(), c.blocks.size());
    std::vector<float> back(n);
    ASSERT_TRUE(q::dequantize<F>({theirs.data(), theirs.size()}, {back.data(), n}));
    std::vector<float> expected(n);
    std::memcpy(expected.data(), c.dequantized.data(), c.dequantized.size());
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(back[i], expected[i]) << F::name << " case " << c.name << " element " << i;
  }
}

}  // namespace
