// hedge/engine/privacy.hpp: personal data replaced by typed placeholders before any byte
// leaves the device, and restored in the answer the caller sees.
//
//   "call me at +1 415 555 0100"  --redact-->  "call me at <PHONE_1>"   (vault: PHONE_1 -> +1 415...)
//   cloud stream "... <PHO" "NE_1> ..."  --restore-->  "... +1 415 555 0100 ..."
//
// The vault lives for one request and never leaves the process: the same value gets the
// same placeholder in every message of the request (so the cloud can refer back to it),
// and the continuation text of a hand-off is redacted with the same vault. The restorer
// holds back at most the longest placeholder's bytes (a placeholder split across chunks is
// restored whole) and releases everything else at once, so the caller's time to first
// token stays the cloud's. Text the cloud produced that merely looks like a placeholder
// but is not in the vault passes through unchanged. The restorer also scans the cloud's own
// text for PII it produced itself (an invented phone number): it is reported, not masked,
// since restored values are PII by design and must reach the caller (re-masking them was
// LiteLLM's #28316). Detection is route/pii_detector.hpp's, so routing and redaction agree.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hedge/route/pii_detector.hpp"
#include "hedge/route/request.hpp"

namespace hedge::engine {

/// What the privacy rule does with a request's data.
struct privacy_options {
  /// Data classes that never leave the device (the whole request stays on the edge).
  route::data_class restricted = route::data_class::personal | route::data_class::regulated |
                                 route::data_class::contractual;
  /// Entities replaced by placeholders before a cloud call.
  route::pii_entity redact = route::pii_entity::all;
  /// Entities that keep the whole request on the device even redacted (e.g. SSNs): the
  /// router's privacy policy sees them in the routed text and answers edge-only.
  route::pii_entity keep_on_device = route::pii_entity::none;
};

/// The placeholder's type name of an entity, e.g. "CARD" in <CARD_1>.
constexpr std::string_view placeholder_name(route::pii_entity e) noexcept {
  switch (e) {
    case route::pii_entity::email: return "EMAIL";
    case route::pii_entity::phone: return "PHONE";
    case route::pii_entity::credit_card: return "CARD";
    case route::pii_entity::iban: return "IBAN";
    case route::pii_entity::ssn: return "SSN";
    case route::pii_entity::ipv4: return "IPV4";
    case route::pii_entity::ipv6: return "IPV6";
    case route::pii_entity::mac: return "MAC";
    case route::pii_entity::date_of_birth: return "DOB";
    default: return "PII";
  }
}

/// One request's originals, by placeholder. Storage is reused across requests (clear()).
class privacy_vault {
 public:
  struct entry {
    route::pii_entity entity;
    std::uint32_t placeholder_offset, placeholder_size;
    std::uint32_t original_offset, original_size;
  };

  void clear() noexcept {
    text_.clear();
    entries_.clear();
    counters_.fill(0);
  }
  void reserve(std::size_t entries, std::size_t bytes) {
    entries_.reserve(entries);
    text_.reserve(bytes);
  }

  /// The placeholder for `original`: the existing one when the value was seen before.
  std::string_view placeholder_for(route::pii_entity entity, std::string_view original) {
    for (const entry& e : entries_)
      if (e.entity == entity && view(e.original_offset, e.original_size) == original)
        return view(e.placeholder_offset, e.placeholder_size);
    std::size_t kind = 0;
    for (auto bits = static_cast<std::uint16_t>(entity); bits > 1; bits >>= 1) ++kind;
    const std::uint32_t number = ++counters_[kind < counters_.size() ? kind : counters_.size() - 1];
    entry e{};
    e.entity = entity;
    e.placeholder_offset = static_cast<std::uint32_t>(text_.size());
    text_.push_back('<');
    text_.append(placeholder_name(entity));
    text_.push_back('_');
    char digits[12];
    std::size_t n = 0;
    for (std::uint32_t v = number; v != 0 || n == 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    while (n > 0) text_.push_back(digits[--n]);
    text_.push_back('>');
    e.placeholder_size = static_cast<std::uint32_t>(text_.size() - e.placeholder_offset);
    e.original_offset = static_cast<std::uint32_t>(text_.size());
    text_.append(original);
    e.original_size = static_cast<std::uint32_t>(original.size());
    if (e.placeholder_size > longest_) longest_ = e.placeholder_size;
    entries_.push_back(e);
    return view(e.placeholder_offset, e.placeholder_size);
  }

  /// The original behind a placeholder, or empty when it is not one of this vault's.
  [[nodiscard]] std::string_view original_of(std::string_view placeholder) const noexcept {
    for (const entry& e : entries_)
      if (view(e.placeholder_offset, e.placeholder_size) == placeholder) return view(e.original_offset, e.original_size);
    return {};
  }

  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }
  [[nodiscard]] std::span<const entry> entries() const noexcept { return entries_; }
  /// The longest placeholder ever made by this vault: what a restorer may hold back.
  [[nodiscard]] std::size_t longest_placeholder() const noexcept { return longest_; }
  [[nodiscard]] std::string_view original(const entry& e) const noexcept { return view(e.original_offset, e.original_size); }

 private:
  [[nodiscard]] std::string_view view(std::uint32_t offset, std::uint32_t size) const noexcept {
    return std::string_view(text_).substr(offset, size);
  }

  std::string text_;
  std::vector<entry> entries_;
  std::array<std::uint32_t, 16> counters_{};
  std::size_t longest_ = 0;
};

/// Replaces every entity of `options.redact` in `text` by its placeholder, appending the
/// result to `out`. Returns how many spans were replaced.
template <class A = arch::best>
std::size_t redact(std::string_view text, const privacy_options& options, privacy_vault& vault, std::string& out,
                   A arch = {}) {
  // Entities kept on the device stay in the text, where the router's privacy policy sees them.
  const auto entities = static_cast<route::pii_entity>(static_cast<std::uint16_t>(options.redact) &
                                                       ~static_cast<std::uint16_t>(options.keep_on_device));
  const route::pii_detector detector(entities);
  std::array<route::pii_match, 32> matches;
  std::size_t replaced = 0, at = 0;
  while (at < text.size()) {
    const std::string_view rest = text.substr(at);
    const std::size_t found = detector.find(rest, matches, arch);
    std::size_t copied = 0;
    for (std::size_t i = 0; i < found; ++i) {
      const auto& m = matches[i];
      out.append(rest.substr(copied, m.offset - copied));
      out.append(vault.placeholder_for(m.entity, rest.substr(m.offset, m.length)));
      copied = m.offset + m.length;
      ++replaced;
    }
    // A full match array means more may follow: go on after the last one.
    if (found < matches.size()) {
      out.append(rest.substr(copied));
      break;
    }
    at += copied;
  }
  return replaced;
}

/// Restores placeholders in a stream of text pieces (see the file comment).
class restorer {
 public:
  explicit restorer(const privacy_vault& vault) noexcept : vault_(&vault) {}

  void reset() noexcept {
    held_.clear();
    model_pii_ = 0;
  }
  void reserve(std::size_t bytes) { held_.reserve(bytes); }

  /// Feeds a piece; emit(std::string_view) gets the restored text that can be released.
  template <class Emit>
  void feed(std::string_view piece, Emit&& emit) {
    held_.append(piece);
    release(false, emit);
  }
  /// The end of the stream: everything held is released.
  template <class Emit>
  void finish(Emit&& emit) {
    release(true, emit);
  }
  /// Entities found in the released text that were not restored values (the model's own).
  [[nodiscard]] std::size_t model_pii() const noexcept { return model_pii_; }
  [[nodiscard]] std::size_t held_bytes() const noexcept { return held_.size(); }

 private:
  template <class Emit>
  void release(bool all, Emit& emit) {
    const std::string_view h(held_);
    const std::size_t longest = vault_->longest_placeholder();
    std::size_t start = 0, i = 0;
    while (i < h.size()) {
      if (h[i] != '<' || longest == 0) {
        ++i;
        continue;
      }
      const std::size_t close = h.find('>', i);
      if (close == std::string_view::npos || close - i + 1 > longest) {
        // No '>' yet: a placeholder may be arriving, unless it could no longer fit.
        if (close == std::string_view::npos && !all && h.size() - i < longest) break;
        ++i;
        continue;
      }
      const std::string_view original = vault_->original_of(h.substr(i, close - i + 1));
      if (original.empty()) {
        ++i;
        continue;
      }
      put(h.substr(start, i - start), emit);
      emit(original);
      start = i = close + 1;
    }
    const std::size_t keep = i < h.size() ? h.size() - i : 0;
    put(h.substr(start, h.size() - keep - start), emit);
    held_.erase(0, h.size() - keep);
  }

  template <class Emit>
  void put(std::string_view text, Emit& emit) {
    if (text.empty()) return;
    if (route::pii_detector{}.first(text)) ++model_pii_;
    emit(text);
  }

  const privacy_vault* vault_;
  std::string held_;
  std::size_t model_pii_ = 0;
};

}  // namespace hedge::engine
