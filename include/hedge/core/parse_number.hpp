// hedge/core/parse_number.hpp: a number read whole from text, the one way hedge reads the
// numbers of its files (route weights, labelled CSV) and of the tools' command lines.
#pragma once

#include <charconv>
#include <cmath>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace hedge {

/// Reads all of s as one number of type T with std::from_chars (no leading '+' or spaces;
/// a float in the C locale's syntax) into out. False when s is empty, holds anything else,
/// is out of T's range, or is a float that is not finite (std::atof would read "abc" as 0).
template <class T>
bool parse_number(std::string_view s, T& out) noexcept {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc{} || end != s.data() + s.size()) return false;
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(out);
  return true;
}

}  // namespace hedge
