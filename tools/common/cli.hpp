// tools/common/cli.hpp: what every hedge command-line tool does the same way. Its messages
// on standard error start with the program's name ("hedge-generate: ..."), a usage error
// is followed by the usage text, and the exit status is 0 done (--help included), 1 the
// work failed, 2 a usage error. Numbers are read whole (hedge::parse_number). The tools
// whose arguments are flags and `NAME VALUE` pairs share one option loop (parse_options).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "hedge/core/parse_number.hpp"
#include "hedge/core/result.hpp"

namespace hedge::tools {

/// A tool's name and usage text (static strings), for its messages and exit statuses.
class cli {
 public:
  constexpr cli(const char* program, const char* usage) noexcept : program_(program), usage_(usage) {}

  /// "PROGRAM: message" and the usage text on standard error; returns 2.
  int usage_error(std::string_view message) const {
    std::fprintf(stderr, "%s: %.*s\n%s", program_, static_cast<int>(message.size()), message.data(), usage_);
    return 2;
  }

  /// "PROGRAM: message" on standard error; returns 1.
  int fail(std::string_view message) const {
    std::fprintf(stderr, "%s: %.*s\n", program_, static_cast<int>(message.size()), message.data());
    return 1;
  }
  int fail(const error& e) const { return fail(e.message()); }

  /// The usage text on standard output (-h, --help); returns 0.
  int help() const {
    std::fputs(usage_, stdout);
    return 0;
  }

  /// What an option's handler made of it.
  enum class option { taken, bad_value, unknown };

  /// The option loop: for each argument, -h or --help prints the usage text and ends (0);
  /// `flag(name)` true takes it as a flag; otherwise its value is the next argument and
  /// `handle(name, value)` takes it. A missing value ("option NAME needs a value", or
  /// "unexpected argument 'NAME'" when it does not start with '-'), an unknown option
  /// ("unknown option NAME") and a bad value ("bad value for NAME: 'VALUE'") are usage
  /// errors (2). Returns the exit status when the loop ends the program, none otherwise.
  template <class Flag, class Handle>
  std::optional<int> parse_options(int argc, char** argv, Flag flag, Handle handle) const {
    for (int i = 1; i < argc; ++i) {
      const std::string_view name = argv[i];
      if (name == "--help" || name == "-h") return help();
      if (flag(name)) continue;
      if (i + 1 >= argc)
        return usage_error(name.substr(0, 1) == "-" ? "option " + std::string(name) + " needs a value"
                                                    : "unexpected argument '" + std::string(name) + "'");
      const std::string_view value = argv[++i];
      switch (handle(name, value)) {
        case option::taken:
          break;
        case option::bad_value:
          return usage_error("bad value for " + std::string(name) + ": '" + std::string(value) + "'");
        case option::unknown:
          return usage_error("unknown option " + std::string(name));
      }
    }
    return std::nullopt;
  }

  /// taken when ok, else bad_value: an option handler's answer for a value it checked.
  static constexpr option checked(bool ok) noexcept { return ok ? option::taken : option::bad_value; }

 private:
  const char* program_;
  const char* usage_;
};

/// For tools without flags: parse_options' `flag`.
inline bool no_flags(std::string_view) noexcept { return false; }

}  // namespace hedge::tools
