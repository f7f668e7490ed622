// Golden bytes from tests/quant/golden_gen.py, an independent binary32 model of
// ggml's reference quantizers: hedge's quantizers must produce the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q6_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"

namespace {

namespace q = hedge::quant;

/// The generator's inputs: an integer LCG scaled by 2^-scale_shift (exact in binary32).
std::vector<float> lcg_inputs(std::uint64_t seed, std::size_t n, int scale_shift = 18) {
  std::vector<float> out(n);
  std::uint64_t s = seed;
  for (auto& v : out) {
    s = (s * 1103515245u + 12345u) & 0x7FFFFFFFu;
    v = std::ldexp(static_cast<float>(static_cast<std::int64_t>(s % 2000001) - 1000000), -scale_shift);
  }
  return out;
}

std::string hex(const void* data, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto byte = static_cast<const unsigned char*>(data)[i];
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

template <class F>
std::string quantize_hex(const std::vector<float>& x) {
  typename F::block b{};
  F::quantize_block(std::span<const float, F::block_elements>(x.data(), F::block_elements), b);
  return hex(&b, sizeof b);
}

TEST(Golden, Q8_0MatchesGgmlModel) {
  EXPECT_EQ(quantize_hex<q::q8_0>(lcg_inputs(1, 32)), "77274535e97602e6819fc16d94e12cb57863a3a3374724a11a66fb59943e00d1b590");
}

TEST(Golden, Q4_0MatchesGgmlModel) {
  EXPECT_EQ(quantize_hex<q::q4_0>(lcg_inputs(2, 32)), "5bb76355d7fd1622ac9f0c502e2f72a53d22");
}

TEST(Golden, Q4_KMatchesGgmlModel) {
  EXPECT_EQ(quantize_hex<q::q4_k>(lcg_inputs(3, 256)),
            "2220f12bf5fcfdfdf2f8fafdafbab9fd48cf9a656c09ccc4a434d69ff0e0317e015225e00f5402024ba70a1a2906769e"
            "ee94a5458066f31837103eb6b6f1a12712f9c90b662a64cf2418ecfaf35fa6df2414ee6677e0f4de6a9b4dd8e4ce5d8e"
            "c0ceb2fd8831adf816439ec8ab0329acd1126fb1841a03016fcc8998bcb35687d7145082fd6eca14bbd256227014af88");
}

TEST(Golden, Q4_KShapedBlockMatchesGgmlModel) {
  // Sub-block 2 all positive (the fitted min clamps to 0), 5 all zero
  // (max == min path), 6 with an outlier (its scale sets d).
  auto x = lcg_inputs(4, 256);
  for (std::size_t i = 64; i < 96; ++i) x[i] = std::fabs(x[i]) + 0.25f;
  for (std::size_t i = 160; i < 192; ++i) x[i] = 0.f;
  x[200] = 100.f;
  EXPECT_EQ(quantize_hex<q::q4_k>(x),
            "062ffc2b0504c304fa38c0f99400ff44c79c6ac82c24cd17f4886a5c743795f818baf8c15d00a07d52f036fab94320c9"
            "eac69832893344fa24f84501b8d4ac271af402fc36841a977c04aad625a7f4a7030f05010f080b070a0f020f0c010009"
            "060f030e05080501070f0a00040e090cb0009181f0c1a161dfe13130202170e001c1c121a060a1a1f0318190f0d19130");
}

TEST(Golden, Q8_KMatchesGgmlModel) {
  EXPECT_EQ(quantize_hex<q::q8_k>(lcg_inputs(5, 256)),
            "9d0ef43ccf9f65108151bb06da7450060579dc1859cd55a4793754052457b75c30cb27f8acd9628826c328ec928e213d"
            "65ff6904b2772b43623bf34dc85fe83e6b0d0f5ac7b7ce3c324f452c0f5d3820716f744f54d88ec683de6a112fe9b449"
            "f0fbc4f74153baec02c416016141dfe2215fe26e959f942944158cd03b86c64d196e98a6a2f53907fcb53e7048c1deae"
            "b7a8b4a8311fc79693514565002d7ec44e00385aa1ff8eb615b436d9e7bfb3db45e5bf1252d02d6762479bac3873ba61"
            "c2cfe654d67b4009ca58906a4fc759b11c38761c0accc5ac37ea322149124f4a713905684cd0070e9eb67da0f87f3d6d"
            "20402500950ac727dc37ff0b01644cd4e1214b398c00d001bbffa202e10217ff4a013ffe86fe8a01ebfd3701bc01c601"
            "4801b500");
}

TEST(Golden, Q6_KMatchesGgmlModel) {
  EXPECT_EQ(quantize_hex<q::q6_k>(lcg_inputs(6, 256)),
            "d5b621c22803bef0e8a208fcdf0a8566dafb1ca5e1c5f8acc866e1e4c2fa7f2037099986f9f734ef7185380bb7238e2a"
            "51517b736acaf16b2115d6541ae44ebfee9eaa9491f40bd421190908d30128a0f2e516c435da7dbb3219a80f155949e0"
            "58faeec0c708b28146b22e888b01ab49672624673e0c6f9a2122244d65a51ae34534f8b774c639cb1265ac51a661bd72"
            "1639468fa0e68122363ed8b9d6cfb29f5ba0239b4430af2e3086b84134f339066c76fe681b346c09c24532f18d24db58"
            "837f8084846d6f827a837b858c886a88d493");
}

TEST(Golden, Q6_KShapedBlockMatchesGgmlModel) {
  // Sub-block 3 all zero (levels 0, scale 0), 7 all negative, 9 constant, 12 an
  // outlier whose scale sets d (negative: d > 0), 14 alternating signs of one
  // magnitude (the positive side clamps at level 31).
  auto x = lcg_inputs(7, 256);
  for (std::size_t i = 48; i < 64; ++i) x[i] = 0.f;
  for (std::size_t i = 112; i < 128; ++i) x[i] = -std::fabs(x[i]);
  for (std::size_t i = 144; i < 160; ++i) x[i] = 0.75f;
  x[200] = -20.f;
  for (std::size_t i = 224; i < 240; ++i) x[i] = i % 2 ? 1.5f : -1.5f;
  EXPECT_EQ(quantize_hex<q::q6_k>(x),
            "960559f07fa2ed8e9ae64c872c767405f7b6e2bda0c7dc57c82ca37451288a505418195a265ecfc15bd73707353393f4"
            "50107040b030b09040106070e010e0d0100ad1d9b3b8560515415d5dd60d1c3cb252f2d292c232127212e2d292928202"
            "26e421ef20ed22e727e328e627ed25e4642a103a0d4cda274cd723313bf9e3e16c01307893352682a24ab1186fc7468e"
            "1330427111706133430053731240231020e21add12d22be308e12be716eb28e3601c40d4240c34f868b400ac3cc4b0cc"
            "e8eaea001218ebe81605161580eaf6e9299d");
}

TEST(Golden, Q6_KTinyBlockKeepsTheSearchLevels) {
  // |x| < 2^-40: the scales are found, but d rounds to fp16 zero, so every
  // sub-block keeps the levels of make_qx_quants' search (as ggml's does).
  EXPECT_EQ(quantize_hex<q::q6_k>(lcg_inputs(8, 256, 60)),
            "b69320be37811dbeccfcf0201a920254d45b906f92076ff8f400c5ba44ec2fb6fe4c0ccee834c908e8c97882f0a66a2b"
            "45e9a51af19f869372f06394974b0fe106b3a950a18b9ee39d4d0e0f45f86043ae000e10262744ce7824ba8c37ec6e93"
            "8801436a3fa4d02f25c8440624c6907263341afdfb8f339567503f0b2507d7e090cd1dac5c2b24eb969f7794f1698ab5"
            "053e9365c1434cbe8dc0770f7e8c1dbf78dc0dcb0c8be101135b8e39a8d39c1143c2c344bc6c1851b633622889b1df84"
            "7c797c808679847f8a7f85897781887a0000");
}

}  // namespace
