// hedge/os/api_key.hpp: the cloud endpoint's API key, from the environment or a file, never
// from the command line (argv is readable by every user through /proc/PID/cmdline and lands in
// shell histories), and never in a log.
//
// An api_key prints as "[api key redacted]" (operator<<, so GoogleTest and iostreams too), does
// not convert to a string, and wipes its bytes when destroyed. Its only outlet is the
// Authorization header (authorization_header()) and reveal(), for a transport that needs the
// bare key. Error messages name the variable or the file, never its content.
//
// Accepted keys: after trimming surrounding whitespace (a file's trailing newline, a stray
// space), 1 to 4096 bytes of visible ASCII (0x21-0x7e): a key with a space, CR, LF or another
// control byte would split or forge headers, so it is refused rather than sent.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "hedge/cloud/transport.hpp"
#include "hedge/core/result.hpp"

namespace hedge::os {

class api_key {
 public:
  static constexpr std::size_t max_length = 4096;

  /// A key read from a secret store (firmware keystore, a vault client). `source` names where it
  /// came from in error messages ("HEDGE_API_KEY"). Never pass a command-line argument here.
  static result<api_key> from_secret(std::string_view raw, std::string_view source) noexcept {
    const std::string_view key = trim(raw);
    if (key.empty()) return error{errc::invalid_argument} << "API key from " << source << " is empty";
    if (key.size() > max_length)
      return error{errc::invalid_argument} << "API key from " << source << " is longer than " << max_length << " bytes";
    for (std::size_t i = 0; i < key.size(); ++i) {
      const auto c = static_cast<unsigned char>(key[i]);
      if (c < 0x21 || c > 0x7e)
        return error{errc::invalid_argument} << "API key from " << source << " has a space, control or non-ASCII byte at offset " << i;
    }
    api_key k;
    k.header_.reserve(bearer.size() + key.size());
    k.header_ = bearer;
    k.header_ += key;
    return k;
  }

  api_key(const api_key& other) : header_(other.header_) {}
  api_key(api_key&& other) noexcept : header_(std::move(other.header_)) { other.wipe(); }
  api_key& operator=(const api_key& other) {
    if (this != &other) {
      wipe();
      header_ = other.header_;
    }
    return *this;
  }
  api_key& operator=(api_key&& other) noexcept {
    if (this != &other) {
      wipe();
      header_ = std::move(other.header_);
      other.wipe();
    }
    return *this;
  }
  ~api_key() { wipe(); }

  /// The bare key. Only for building a request; never print it.
  [[nodiscard]] std::string_view reveal() const noexcept {
    const std::string_view h = header_;
    return h.size() > bearer.size() ? h.substr(bearer.size()) : std::string_view{};
  }

  /// "Authorization: Bearer <key>", as OpenAI-compatible servers expect (RFC 6750 §2.1). The
  /// view lives as long as this api_key; a moved-from key gives an empty value.
  [[nodiscard]] cloud::http_header authorization_header() const noexcept { return {"Authorization", header_}; }

  friend std::ostream& operator<<(std::ostream& out, const api_key&) { return out << "[api key redacted]"; }

 private:
  static constexpr std::string_view bearer = "Bearer ";

  api_key() = default;

  static constexpr std::string_view trim(std::string_view s) noexcept {
    constexpr std::string_view space = " \t\r\n\v\f";
    while (!s.empty() && space.find(s.front()) != std::string_view::npos) s.remove_prefix(1);
    while (!s.empty() && space.find(s.back()) != std::string_view::npos) s.remove_suffix(1);
    return s;
  }

  /// Overwrites the bytes through a volatile pointer, which the compiler may not drop as a dead store.
  void wipe() noexcept {
    volatile char* p = header_.data();
    for (std::size_t i = 0; i < header_.size(); ++i) p[i] = '\0';
    header_.clear();
  }

  std::string header_;  ///< "Bearer " + key
};

/// The key in environment variable `name`.
inline result<api_key> api_key_from_env(const char* name) noexcept {
  const char* value = std::getenv(name);
  if (value == nullptr) return error{errc::invalid_argument} << "environment variable " << name << " is not set";
  return api_key::from_secret(value, name);
}

/// Who besides the owner may read a key file.
enum class key_file_access {
  owner_and_group,  ///< refuse a file that other users can read or write (like ssh's private keys)
  any,              ///< accept it (container secret mounts are often 0444 or 0644)
};

/// The key on the first line of the file at `path`.
inline result<api_key> api_key_from_file(const std::string& path,
                                         key_file_access access = key_file_access::owner_and_group) noexcept {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer (no effect on a regular file).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return error{errc::io_error} << "cannot open API key file " << path << ": " << std::strerror(errno);
  struct ::stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return error{errc::io_error} << "API key file " << path << " is not a regular file";
  }
  if (access == key_file_access::owner_and_group && (info.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    ::close(fd);
    return error{errc::rejected} << "API key file " << path << " is readable or writable by other users (chmod o-rw)";
  }
  // One more byte than the longest key and its newline tells an over-long line from a full one.
  char buffer[api_key::max_length + 64];
  std::size_t size = 0;
  while (size < sizeof buffer) {
    const ssize_t n = ::read(fd, buffer + size, sizeof buffer - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int reason = errno;
      ::close(fd);
      return error{errc::io_error} << "cannot read API key file " << path << ": " << std::strerror(reason);
    }
    if (n == 0) break;
    size += static_cast<std::size_t>(n);
  }
  ::close(fd);
  std::string_view text{buffer, size};
  if (const std::size_t newline = text.find('\n'); newline != std::string_view::npos) text = text.substr(0, newline);
  const std::string source = "file " + path;
  auto key = api_key::from_secret(text, source);
  volatile char* p = buffer;
  for (std::size_t i = 0; i < size; ++i) p[i] = '\0';
  return key;
}

/// The variables load_api_key reads, in order: two that hold the key, then one that names a
/// file holding it.
inline constexpr const char* api_key_variables[] = {"HEDGE_API_KEY", "OPENAI_API_KEY"};
inline constexpr const char* api_key_file_variable = "HEDGE_API_KEY_FILE";

/// Whether any of load_api_key's variables is set: a caller that may go without a key (a
/// loopback server) asks this first, and reports load_api_key's error only when it is.
inline bool api_key_configured() noexcept {
  for (const char* name : api_key_variables)
    if (std::getenv(name) != nullptr) return true;
  return std::getenv(api_key_file_variable) != nullptr;
}

/// The conventional places, in order: $HEDGE_API_KEY, $OPENAI_API_KEY, then the file named by
/// $HEDGE_API_KEY_FILE.
inline result<api_key> load_api_key() noexcept {
  for (const char* name : api_key_variables)
    if (std::getenv(name) != nullptr) return api_key_from_env(name);
  if (const char* file = std::getenv(api_key_file_variable)) return api_key_from_file(file);
  return error{errc::invalid_argument} << "no API key: set HEDGE_API_KEY or OPENAI_API_KEY, or HEDGE_API_KEY_FILE to a file holding it";
}

}  // namespace hedge::os
