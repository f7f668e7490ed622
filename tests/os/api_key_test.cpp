// os::api_key: loading from the environment and from a file, validation, and redaction.
#include "hedge/os/api_key.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "hedge/os/steady_clock.hpp"

namespace {

using hedge::errc;
using hedge::os::api_key;
using hedge::os::key_file_access;

constexpr std::string_view secret = "sk-proj-Abc123_xyz-TOPSECRET";

void expect_no_secret(std::string_view message) {
  EXPECT_EQ(message.find("TOPSECRET"), std::string_view::npos) << message;
}

/// A file in a fresh temporary folder, removed with it.
struct key_file {
  std::filesystem::path dir;
  std::string path;
  key_file(std::string_view content, ::mode_t mode) {
    std::string pattern = (std::filesystem::temp_directory_path() / "hedge-key-XXXXXX").string();
    dir = ::mkdtemp(pattern.data());
    path = (dir / "key").string();
    std::ofstream(path, std::ios::binary) << content;
    ::chmod(path.c_str(), mode);
  }
  ~key_file() { std::filesystem::remove_all(dir); }
};

TEST(ApiKey, FromEnvironmentTrimmedAndNeverPrinted) {
  ::setenv("HEDGE_TEST_API_KEY", (std::string(secret) + " \n").c_str(), 1);
  const auto key = hedge::os::api_key_from_env("HEDGE_TEST_API_KEY");
  ASSERT_TRUE(key) << key.error().message();
  EXPECT_EQ(key->reveal(), secret);
  const auto header = key->authorization_header();
  EXPECT_EQ(header.name, "Authorization");
  EXPECT_EQ(header.value, "Bearer " + std::string(secret));
  std::ostringstream printed;
  printed << *key;
  EXPECT_EQ(printed.str(), "[api key redacted]");
  EXPECT_EQ(::testing::PrintToString(*key).find("TOPSECRET"), std::string::npos);

  api_key copy = *key;
  api_key moved = std::move(copy);
  EXPECT_EQ(moved.reveal(), secret);
  EXPECT_EQ(copy.reveal(), "");  // NOLINT(bugprone-use-after-move): a moved-from key is wiped
  EXPECT_EQ(copy.authorization_header().value, "");
  ::unsetenv("HEDGE_TEST_API_KEY");
}

TEST(ApiKey, EnvironmentErrorsNameTheVariableNotTheValue) {
  ::unsetenv("HEDGE_TEST_API_KEY");
  auto key = hedge::os::api_key_from_env("HEDGE_TEST_API_KEY");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message().find("HEDGE_TEST_API_KEY is not set"), std::string_view::npos);

  ::setenv("HEDGE_TEST_API_KEY", " \t\n", 1);
  key = hedge::os::api_key_from_env("HEDGE_TEST_API_KEY");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message().find("is empty"), std::string_view::npos);

  // A CR/LF or space inside would forge or split the Authorization header.
  ::setenv("HEDGE_TEST_API_KEY", "sk-TOPSECRET\r\nX-Evil: 1", 1);
  key = hedge::os::api_key_from_env("HEDGE_TEST_API_KEY");
  ASSERT_FALSE(key);
  EXPECT_EQ(key.error().code(), errc::invalid_argument);
  EXPECT_NE(key.error().message().find("offset 12"), std::string_view::npos) << key.error().message();
  expect_no_secret(key.error().message());
  ::unsetenv("HEDGE_TEST_API_KEY");
}

TEST(ApiKey, FromFileFirstLine) {
  const key_file file(std::string(secret) + "\r\nsecond line\n", 0600);
  const auto key = hedge::os::api_key_from_file(file.path);
  ASSERT_TRUE(key) << key.error().message();
  EXPECT_EQ(key->reveal(), secret);
}

TEST(ApiKey, FileErrors) {
  {
    const key_file empty("\n\n", 0600);
    const auto key = hedge::os::api_key_from_file(empty.path);
    ASSERT_FALSE(key);
    EXPECT_NE(key.error().message().find("is empty"), std::string_view::npos) << key.error().message();
  }
  {
    const key_file readable(std::string(secret) + "\n", 0644);
    auto key = hedge::os::api_key_from_file(readable.path);
    ASSERT_FALSE(key);
    EXPECT_EQ(key.error().code(), errc::rejected);
    EXPECT_NE(key.error().message().find("other users"), std::string_view::npos);
    expect_no_secret(key.error().message());
    key = hedge::os::api_key_from_file(readable.path, key_file_access::any);
    ASSERT_TRUE(key) << key.error().message();
    EXPECT_EQ(key->reveal(), secret);
  }
  {
    const key_file huge(std::string(5000, 'k'), 0600);
    const auto key = hedge::os::api_key_from_file(huge.path);
    ASSERT_FALSE(key);
    EXPECT_NE(key.error().message().find("longer than 4096"), std::string_view::npos);
  }
  const auto missing = hedge::os::api_key_from_file("/nonexistent/hedge/key");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), errc::io_error);
  {
    const key_file fifo_dir("", 0600);
    const std::string fifo = (fifo_dir.dir / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto key = hedge::os::api_key_from_file(fifo);  // returns at once, no writer needed
    ASSERT_FALSE(key);
    EXPECT_NE(key.error().message().find("not a regular file"), std::string_view::npos);
  }
  const auto directory = hedge::os::api_key_from_file("/tmp");
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().message().find("not a regular file"), std::string_view::npos);
}

TEST(ApiKey, LoadTriesTheConventionalPlacesInOrder) {
  ::unsetenv("HEDGE_API_KEY");
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("HEDGE_API_KEY_FILE");
  EXPECT_FALSE(hedge::os::api_key_configured());
  auto key = hedge::os::load_api_key();
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message().find("HEDGE_API_KEY_FILE"), std::string_view::npos);

  const key_file file("sk-from-file\n", 0600);
  ::setenv("HEDGE_API_KEY_FILE", file.path.c_str(), 1);
  EXPECT_TRUE(hedge::os::api_key_configured());
  key = hedge::os::load_api_key();
  ASSERT_TRUE(key) << key.error().message();
  EXPECT_EQ(key->reveal(), "sk-from-file");

  ::setenv("OPENAI_API_KEY", "sk-openai", 1);
  key = hedge::os::load_api_key();
  ASSERT_TRUE(key);
  EXPECT_EQ(key->reveal(), "sk-openai");

  ::setenv("HEDGE_API_KEY", "sk-hedge", 1);
  key = hedge::os::load_api_key();
  ASSERT_TRUE(key);
  EXPECT_EQ(key->reveal(), "sk-hedge");
  ::unsetenv("HEDGE_API_KEY");
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("HEDGE_API_KEY_FILE");
}

TEST(SteadyClock, IsMonotonicAndSleeps) {
  const hedge::os::steady_clock clock;
  const auto a = clock.now();
  clock.sleep_for(std::chrono::milliseconds(5));
  clock.sleep_for(std::chrono::milliseconds(-1));
  EXPECT_GE(clock.now() - a, std::chrono::milliseconds(5));
}

}  // namespace
