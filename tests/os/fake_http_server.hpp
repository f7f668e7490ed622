// A fault-injecting HTTP server for the transport tests: raw POSIX sockets on 127.0.0.1 (a free
// port from bind(0)), one connection at a time, on its own thread. Each test scripts the reply
// byte by byte (valid SSE, a cut chunk, a short Content-Length body, silence, a slow drip, a
// reset), which no real server library would let it do. Every wait is bounded: reads give up
// after 2 s, pauses end early when the server stops or the client hangs up.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace hedge::test {

class fake_http_server {
 public:
  class connection {
   public:
    connection(int fd, const std::atomic<bool>& stopping, std::string request)
        : fd_(fd), stopping_(stopping), request_(std::move(request)) {}

    [[nodiscard]] const std::string& request() const { return request_; }

    /// Writes all of `bytes`; false when the client has gone.
    bool send(std::string_view bytes) {
      while (!bytes.empty()) {
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
      }
      return true;
    }

    /// Waits `d`; false (early) when the server stops or the client closes the connection.
    bool pause(std::chrono::milliseconds d) {
      const auto end = std::chrono::steady_clock::now() + d;
      while (std::chrono::steady_clock::now() < end) {
        if (stopping_.load()) return false;
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10) > 0) {
          char c;
          if (::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0) return false;
        }
      }
      return true;
    }

    /// Closes with a TCP RST (SO_LINGER 0) instead of a FIN.
    void reset() {
      linger l{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      ::close(fd_);
      fd_ = -1;
    }

    [[nodiscard]] int fd() const { return fd_; }

   private:
    int fd_;
    const std::atomic<bool>& stopping_;
    std::string request_;
  };

  using handler = std::function<void(connection&)>;

  explicit fake_http_server(handler h) : handler_(std::move(h)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listen_fd_, 16);
    socklen_t length = sizeof address;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  fake_http_server(const fake_http_server&) = delete;
  fake_http_server& operator=(const fake_http_server&) = delete;
  ~fake_http_server() {
    stopping_ = true;
    thread_.join();
    ::close(listen_fd_);
  }

  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  [[nodiscard]] std::string last_request() const {
    std::lock_guard lock(mutex_);
    return last_request_;
  }
  [[nodiscard]] int connections() const { return connections_.load(); }

 private:
  void serve() {
    while (!stopping_.load()) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      std::string request = read_request(fd);
      {
        std::lock_guard lock(mutex_);
        last_request_ = request;
      }
      connection c(fd, stopping_, std::move(request));
      handler_(c);
      if (c.fd() >= 0) ::close(c.fd());
    }
  }

  /// The head and a Content-Length body, within 2 s.
  static std::string read_request(int fd) {
    std::string data;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::size_t wanted = std::string::npos;
    while (std::chrono::steady_clock::now() < end && data.size() < (1u << 20)) {
      if (wanted == std::string::npos) {
        if (const std::size_t head_end = data.find("\r\n\r\n"); head_end != std::string::npos) {
          std::size_t body = 0;
          std::string lower = data.substr(0, head_end);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (const std::size_t at = lower.find("content-length:"); at != std::string::npos)
            body = std::stoul(lower.substr(at + 15));
          wanted = head_end + 4 + body;
        }
      }
      if (wanted != std::string::npos && data.size() >= wanted) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      data.append(buffer, static_cast<std::size_t>(n));
    }
    return data;
  }

  handler handler_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::string last_request_;
  std::thread thread_;
};

}  // namespace hedge::test
