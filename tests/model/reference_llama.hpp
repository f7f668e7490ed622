// A float64 llama forward pass for tests: the same model as include/hedge/model/forward.hpp,
// written top to bottom as llama2.c's forward() (run.c), over weights dequantized once.
//
// It runs on the dequantized weights in double, so against it hedge's logits differ by
// its float32 arithmetic, by the activation quantization of its GEMVs (Q8_0 for
// Q4_0/Q8_0 weights, Q8_K for Q4_K/Q6_K) and by the KV element's rounding, and by
// nothing else: the weights themselves are the same numbers. RoPE pairs adjacent elements
// (2i, 2i+1) at angle pos * theta^(-2i/d).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/model/config.hpp"
#include "hedge/model/weights.hpp"

namespace hedge::test {

class reference_llama {
 public:
  /// Dequantizes every matrix of `w` once (any format of all_weight_formats).
  static result<reference_llama> make(const model::llama_weights& w) {
    reference_llama r;
    r.config_ = w.config;
    HEDGE_TRY(dequantize(w.token_embedding, r.embedding_));
    HEDGE_TRY(dequantize(w.output, r.output_));
    r.output_norm_.assign(w.output_norm.data(), w.output_norm.data() + w.output_norm.size());
    for (const model::llama_layer& y : w.layers) {
      layer l;
      l.attn_norm.assign(y.attn_norm.data(), y.attn_norm.data() + y.attn_norm.size());
      l.ffn_norm.assign(y.ffn_norm.data(), y.ffn_norm.data() + y.ffn_norm.size());
      HEDGE_TRY(dequantize(y.wq, l.wq));
      HEDGE_TRY(dequantize(y.wk, l.wk));
      HEDGE_TRY(dequantize(y.wv, l.wv));
      HEDGE_TRY(dequantize(y.wo, l.wo));
      HEDGE_TRY(dequantize(y.w_gate, l.w_gate));
      HEDGE_TRY(dequantize(y.w_up, l.w_up));
      HEDGE_TRY(dequantize(y.w_down, l.w_down));
      r.layers_.push_back(std::move(l));
    }
    r.key_cache_.assign(r.layers_.size(), {});
    r.value_cache_.assign(r.layers_.size(), {});
    return r;
  }

  /// Positions run so far.
  [[nodiscard]] std::size_t length() const noexcept { return position_; }

  /// The logits after `token` at the next position.
  std::vector<double> forward(std::int32_t token) {
    const auto& c = config_;
    const std::size_t dim = c.dim, hidden = c.hidden_dim, head = c.head_dim(), kv_dim = c.kv_dim();
    const std::size_t group = c.group_size(), pos = position_++;
    std::vector<double> x(embedding_.row(static_cast<std::size_t>(token)), embedding_.row(static_cast<std::size_t>(token)) + dim);
    std::vector<double> xn(dim), q(dim), k(kv_dim), v(kv_dim), att(dim), o(dim), gate(hidden), up(hidden), score(pos + 1);

    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const layer& y = layers_[l];
      // Attention block.
      rmsnorm(x, y.attn_norm, xn);
      matmul(y.wq, xn, q);
      matmul(y.wk, xn, k);
      matmul(y.wv, xn, v);
      for (std::size_t i = 0; i < dim; i += 2) rotate(q, i, i % head, head, pos);
      for (std::size_t i = 0; i < kv_dim; i += 2) rotate(k, i, i % head, head, pos);
      key_cache_[l].insert(key_cache_[l].end(), k.begin(), k.end());
      value_cache_[l].insert(value_cache_[l].end(), v.begin(), v.end());
      for (std::size_t h = 0; h < c.n_heads; ++h) {
        const double* qh = q.data() + h * head;
        const std::size_t kv_offset = h / group * head;
        double most = -INFINITY;
        for (std::size_t t = 0; t <= pos; ++t) {
          const double* kt = key_cache_[l].data() + t * kv_dim + kv_offset;
          double dot = 0.0;
          for (std::size_t i = 0; i < head; ++i) dot += qh[i] * kt[i];
          score[t] = dot / std::sqrt(static_cast<double>(head));
          most = std::max(most, score[t]);
        }
        double sum = 0.0;
        for (std::size_t t = 0; t <= pos; ++t) sum += score[t] = std::exp(score[t] - most);
        double* out = att.data() + h * head;
        for (std::size_t i = 0; i < head; ++i) out[i] = 0.0;
        for (std::size_t t = 0; t <= pos; ++t) {
          const double* vt = value_cache_[l].data() + t * kv_dim + kv_offset;
          for (std::size_t i = 0; i < head; ++i) out[i] += score[t] / sum * vt[i];
        }
      }
      matmul(y.wo, att, o);
      for (std::size_t i = 0; i < dim; ++i) x[i] += o[i];
      // Feed-forward block: SwiGLU.
      rmsnorm(x, y.ffn_norm, xn);
      matmul(y.w_gate, xn, gate);
      matmul(y.w_up, xn, up);
      for (std::size_t i = 0; i < hidden; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      matmul(y.w_down, gate, o);
      for (std::size_t i = 0; i < dim; ++i) x[i] += o[i];
    }
    rmsnorm(x, output_norm_, xn);
    std::vector<double> logits(c.vocab_size);
    matmul(output_, xn, logits);
    return logits;
  }

 private:
  struct matrix {
    std::size_t rows = 0, cols = 0;
    std::vector<double> values;
    [[nodiscard]] const double* row(std::size_t r) const noexcept { return values.data() + r * cols; }
  };
  struct layer {
    std::vector<double> attn_norm, ffn_norm;
    matrix wq, wk, wv, wo, w_gate, w_up, w_down;
  };

  static result<void> dequantize(const model::weight_matrix& w, matrix& out) {
    out.rows = w.rows;
    out.cols = w.cols;
    out.values.resize(w.rows * w.cols);
    std::vector<float> row(w.cols);
    for (std::size_t r = 0; r < w.rows; ++r) {
      HEDGE_TRY(model::dequantize_row<model::all_weight_formats>(w, r, row));
      for (std::size_t i = 0; i < w.cols; ++i) out.values[r * w.cols + i] = row[i];
    }
    return ok();
  }

  static void matmul(const matrix& w, const std::vector<double>& x, std::vector<double>& y) {
    for (std::size_t r = 0; r < w.rows; ++r) {
      double sum = 0.0;
      const double* row = w.row(r);
      for (std::size_t i = 0; i < w.cols; ++i) sum += row[i] * x[i];
      y[r] = sum;
    }
  }

  void rmsnorm(const std::vector<double>& x, const std::vector<double>& weight, std::vector<double>& out) const {
    double ss = 0.0;
    for (const double v : x) ss += v * v;
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + static_cast<double>(config_.norm_eps));
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = weight[i] * (x[i] * scale);
  }

  /// Rotates the pair (v[i], v[i + 1]), element `in_head` of its head, by its angle at `pos`.
  void rotate(std::vector<double>& v, std::size_t i, std::size_t in_head, std::size_t head, std::size_t pos) const {
    const double angle = static_cast<double>(pos) *
                         std::pow(static_cast<double>(config_.rope_theta), -static_cast<double>(in_head) / static_cast<double>(head));
    const double a = v[i], b = v[i + 1];
    v[i] = a * std::cos(angle) - b * std::sin(angle);
    v[i + 1] = a * std::sin(angle) + b * std::cos(angle);
  }

  model::llama_config config_;
  matrix embedding_, output_;
  std::vector<double> output_norm_;
  std::vector<layer> layers_;
  std::vector<std::vector<double>> key_cache_, value_cache_;  ///< per layer: [position][kv_dim]
  std::size_t position_ = 0;
};

}  // namespace hedge::test
