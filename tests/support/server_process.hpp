// tests/support/server_process.hpp: hedge-server as a child process on a free loopback port,
// for tests of clients against the real server. Killed (SIGKILL) on demand or at the end.
#pragma once

#include <csignal>
#include <cstdio>
#include <string>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace hedge::test {

class server_process {
 public:
  /// Runs `binary -m model --port 0 extra...`; url() is empty when it did not start.
  server_process(const std::string& binary, const std::string& model, std::vector<std::string> extra = {}) {
    int out[2];
    if (pipe(out) != 0) return;
    std::vector<std::string> args{binary, "-m", model, "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* lines = fdopen(out[0], "r");
    char line[256];
    // The first line is `listening on http://HOST:PORT`; a server that does not start closes the pipe.
    if (lines != nullptr && std::fgets(line, sizeof line, lines) != nullptr) {
      const std::string s(line);
      if (const auto at = s.find("http://"); at != std::string::npos) url_ = s.substr(at, s.find_first_of("\r\n", at) - at);
    }
    if (lines != nullptr) std::fclose(lines);
  }
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;
  ~server_process() { kill(); }
  void kill() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  [[nodiscard]] const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace hedge::test
