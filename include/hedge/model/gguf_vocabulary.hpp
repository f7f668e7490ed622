// hedge/model/gguf_vocabulary.hpp: the vocabulary of a GGUF file's tokenizer.ggml.* keys,
// read as llama.cpp's llama_vocab::load reads them (src/llama-vocab.cpp), for the two
// tokenizer models hedge implements; any other is refused by name.
//
//   tokenizer.ggml.model              string: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
//   tokenizer.ggml.pre                string, gpt2 only: the pre-tokenizer (pre_tokenizer.hpp
//                                     lists the names hedge runs; absent or another: refused)
//   tokenizer.ggml.merges             string array, gpt2 only (required): "LEFT RIGHT" by rank
//   tokenizer.ggml.tokens             string array: the pieces, one per id (required)
//   tokenizer.ggml.scores             float32 or int32 array, at least one per token (absent: 0)
//   tokenizer.ggml.token_type         int32 array, at least one per token (absent: normal;
//                                     a value outside 0..6: undefined)
//   tokenizer.ggml.bos_token_id       default 1 (gpt2: 11)     \  an id outside the
//   tokenizer.ggml.eos_token_id       default 2 (gpt2: 11)      | vocabulary keeps the
//   tokenizer.ggml.unknown_token_id   default 0 (gpt2: none)    | default (itself disabled
//   tokenizer.ggml.eot_token_id       default none              | when outside), as
//   tokenizer.ggml.eom_token_id       default none             /  llama.cpp
//   tokenizer.ggml.add_bos_token      default true (gpt2: false; llama3 pre-tokenizer: true)
//   tokenizer.ggml.add_eos_token      default false
//   tokenizer.ggml.add_space_prefix   default true (gpt2: false)
//   general.name                      holding "phi-3" or "phi3" (any case): strip_after_special
//
// The pieces are views of the GGUF's bytes, which must outlive the vocabulary. With memory
// the caller lends (`gguf_vocabulary_bytes`), a SentencePiece vocabulary is read without
// the heap; byte-level BPE's merge table is allocated, so that path refuses "gpt2".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "hedge/core/result.hpp"
#include "hedge/model/bpe_merges.hpp"
#include "hedge/model/gguf.hpp"
#include "hedge/model/pre_tokenizer.hpp"
#include "hedge/model/vocabulary.hpp"

namespace hedge::model {

namespace detail {
/// Reads the vocabulary keys and calls build(count, token_at, settings, merges) with them;
/// `Lent`: the caller lends the memory, and byte-level BPE (its merge table allocates) is refused.
template <bool Lent, class Build>
result<vocabulary> read_gguf_vocabulary(const gguf_file& file, Build&& build) noexcept {
  const auto model = file.find("tokenizer.ggml.model");
  if (!model) return error{errc::parse_error} << "GGUF has no tokenizer.ggml.model key (no vocabulary)";
  const auto model_name = model->as_string();
  if (!model_name) return model_name.error();
  vocabulary_settings settings;
  if (*model_name == "gpt2") {
    settings.model = tokenizer_model::bpe;
    settings.bos = 11;
    settings.eos = 11;
    settings.unk = no_token;
    settings.add_bos = false;
    settings.add_space_prefix = false;
    settings.escape_whitespace = false;
    const auto pre = file.find("tokenizer.ggml.pre");
    if (!pre)
      return error{errc::unsupported} << "tokenizer.ggml.pre is absent: llama.cpp's \"default\" pre-tokenizer is not supported (hedge runs "
                                      << pre_tokenizer_names << ")";
    const auto pre_name = pre->as_string();
    if (!pre_name) return pre_name.error();
    if (!pre_tokenizer_named(*pre_name, settings.pre))
      return error{errc::unsupported} << "tokenizer.ggml.pre \"" << *pre_name << "\" is not supported (hedge runs "
                                      << pre_tokenizer_names << ")";
    if (settings.pre == pre_tokenizer::llama3) {
      settings.ignore_merges = true;
      settings.add_bos = true;
    }
    settings.clean_spaces = settings.pre == pre_tokenizer::gpt2 || settings.pre == pre_tokenizer::llama3;
  } else if (*model_name != "llama") {
    return error{errc::unsupported} << "tokenizer.ggml.model \"" << *model_name
                                    << "\" is not supported: hedge's tokenizer implements \"llama\" (SentencePiece) and \"gpt2\" (byte-level BPE)";
  }

  const auto tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens) return error{errc::parse_error} << "GGUF has no tokenizer.ggml.tokens key";
  if (!tokens->is_array() || tokens->element_type() != gguf_value_type::string)
    return error{errc::parse_error} << "tokenizer.ggml.tokens is not an array of strings";
  const std::uint64_t count = tokens->size();
  if (count > vocabulary::max_tokens)
    return error{errc::unsupported} << "tokenizer.ggml.tokens holds " << count << " tokens, more than " << vocabulary::max_tokens;

  const auto scores = file.find("tokenizer.ggml.scores");
  if (scores) {
    const auto type = scores->element_type();
    if (!scores->is_array() || (type != gguf_value_type::float32 && type != gguf_value_type::int32))
      return error{errc::parse_error} << "tokenizer.ggml.scores is not an array of float32 or int32";
    if (scores->size() < count)
      return error{errc::parse_error} << "tokenizer.ggml.scores has " << scores->size() << " entries for " << count << " tokens";
  }
  const auto types = file.find("tokenizer.ggml.token_type");
  if (types) {
    if (!types->is_array() || types->element_type() != gguf_value_type::int32)
      return error{errc::parse_error} << "tokenizer.ggml.token_type is not an array of int32";
    if (types->size() < count)
      return error{errc::parse_error} << "tokenizer.ggml.token_type has " << types->size() << " entries for " << count << " tokens";
  }

  auto special = [&](std::string_view key, token_id& id) -> result<void> {
    const auto value = file.find(key);
    if (!value) return {};
    const auto v = value->as_u32();
    if (!v) return v.error();
    if (*v < count) id = static_cast<token_id>(*v);
    return {};
  };
  auto flag = [&](std::string_view key, bool& out) -> result<void> {
    const auto value = file.find(key);
    if (!value) return {};
    const auto v = value->as_bool();
    if (!v) return v.error();
    out = *v;
    return {};
  };
  if (auto r = special("tokenizer.ggml.bos_token_id", settings.bos); !r) return r.error();
  if (auto r = special("tokenizer.ggml.eos_token_id", settings.eos); !r) return r.error();
  if (auto r = special("tokenizer.ggml.unknown_token_id", settings.unk); !r) return r.error();
  if (auto r = special("tokenizer.ggml.eot_token_id", settings.eot); !r) return r.error();
  if (auto r = special("tokenizer.ggml.eom_token_id", settings.eom); !r) return r.error();
  if (auto r = flag("tokenizer.ggml.add_bos_token", settings.add_bos); !r) return r.error();
  if (auto r = flag("tokenizer.ggml.add_eos_token", settings.add_eos); !r) return r.error();
  if (auto r = flag("tokenizer.ggml.add_space_prefix", settings.add_space_prefix); !r) return r.error();
  if (const auto name = file.find("general.name")) {
    if (const auto text = name->as_string()) {
      std::string_view n = *text;
      for (std::size_t at = 0; at + 3 < n.size() && !settings.strip_after_special; ++at) {
        const auto lower = [&](std::size_t i) { return n[i] >= 'A' && n[i] <= 'Z' ? static_cast<char>(n[i] + 32) : n[i]; };
        const bool phi = lower(at) == 'p' && lower(at + 1) == 'h' && lower(at + 2) == 'i';
        settings.strip_after_special = phi && (lower(at + 3) == '3' || (lower(at + 3) == '-' && at + 4 < n.size() && lower(at + 4) == '3'));
      }
    }
  }

  bpe_merges merges;
  if constexpr (Lent) {
    if (settings.model == tokenizer_model::bpe)
      return error{errc::unsupported} << "tokenizer.ggml.model \"gpt2\" in caller memory: its merge table is "
                                      << "allocated (only SentencePiece vocabularies are read without the heap)";
  } else if (settings.model == tokenizer_model::bpe) {
    const auto list = file.find("tokenizer.ggml.merges");
    if (!list) return error{errc::parse_error} << "GGUF has no tokenizer.ggml.merges key (required by tokenizer.ggml.model \"gpt2\")";
    if (!list->is_array() || list->element_type() != gguf_value_type::string)
      return error{errc::parse_error} << "tokenizer.ggml.merges is not an array of strings";
    auto merge = list->strings().begin();
    auto built = bpe_merges::build(static_cast<std::size_t>(list->size()), [&](std::size_t) -> result<std::string_view> {
      std::string_view text = *merge;
      ++merge;
      return text;
    });
    if (!built) return built.error();
    merges = std::move(*built);
  }

  auto piece = tokens->strings().begin();
  return build(
      static_cast<std::size_t>(count),
      [&](std::size_t id) -> result<token_record> {
        token_record r;
        r.piece = *piece;
        ++piece;
        if (scores) {
          if (scores->element_type() == gguf_value_type::float32) {
            auto s = scores->array_f32(id);
            if (!s) return s.error();
            r.score = *s;
          } else {
            auto s = scores->array_i32(id);
            if (!s) return s.error();
            r.score = static_cast<float>(*s);
          }
        }
        if (types) {
          auto t = types->array_i32(id);
          if (!t) return t.error();
          r.type = *t >= 0 && *t <= 6 ? static_cast<token_type>(*t) : token_type::undefined;
        }
        return r;
      },
      settings, std::move(merges));
}

}  // namespace detail

inline result<vocabulary> read_gguf_vocabulary(const gguf_file& file) noexcept {
  return detail::read_gguf_vocabulary<false>(file, [](std::size_t count, auto&& token_at, vocabulary_settings settings,
                                                      bpe_merges merges) {
    return vocabulary::build(count, token_at, settings, std::move(merges));
  });
}

/// Bytes the file's vocabulary needs from the caller (vocabulary::memory_bytes of its token count).
inline result<std::size_t> gguf_vocabulary_bytes(const gguf_file& file) noexcept {
  const auto tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens) return error{errc::parse_error} << "GGUF has no tokenizer.ggml.tokens key";
  if (!tokens->is_array() || tokens->element_type() != gguf_value_type::string)
    return error{errc::parse_error} << "tokenizer.ggml.tokens is not an array of strings";
  if (tokens->size() > vocabulary::max_tokens)
    return error{errc::unsupported} << "tokenizer.ggml.tokens holds " << tokens->size() << " tokens, more than "
                                    << vocabulary::max_tokens;
  return vocabulary::memory_bytes(static_cast<std::size_t>(tokens->size()));
}

/// The file's SentencePiece vocabulary in `memory` (gguf_vocabulary_bytes, 64-byte aligned,
/// outliving the vocabulary): no heap.
inline result<vocabulary> read_gguf_vocabulary(const gguf_file& file, std::span<std::byte> memory) noexcept {
  return detail::read_gguf_vocabulary<true>(file, [memory](std::size_t count, auto&& token_at,
                                                           vocabulary_settings settings, bpe_merges merges) {
    return vocabulary::build(count, token_at, settings, std::move(merges), memory);
  });
}

}  // namespace hedge::model
