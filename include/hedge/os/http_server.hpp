// hedge/os/http_server.hpp: a small HTTP/1.1 server on one epoll event loop (Linux).
//
// Why not a thread per connection (cpp-httplib's model): a connection that sends its head one
// byte a second, or says nothing, holds its thread, so a few dozen of them stop all service. Here
// one thread owns every socket (non-blocking, level-triggered epoll), so an idle or slow
// connection costs a few hundred bytes and a timer check, and thousands can be open at once.
//
//   listen socket (backlog listen_backlog) --accept--> connection: read -> http_request_parser
//      -> a complete request goes to a handler thread (handler_threads of them) with an
//         http_response; the response may be written later, from any thread
//      -> the bytes the response writes are sent by the loop thread as the socket takes them
//      -> when the response ends, the next pipelined request on the connection is read
//
// Each limit is a field of http_server_options with its default; what breaks it gets:
//   head not complete header_timeout after its first byte    408, connection closed
//   body not complete body_timeout after the head            408, connection closed
//   head over max_header_bytes / max_header_count            431, connection closed
//   body over max_body_bytes (Content-Length or chunked)     413 at once, connection closed
//   malformed framing (http_request_parser.hpp)              400 / 501 / 505, connection closed
//   no request idle_timeout after the last response          connection closed, silently
//   more than max_connections open                           503, connection closed
//   requests being read hold over max_buffered_bytes in all  503 to the one that crossed it
//   a reader that takes nothing for write_timeout            connection closed (client gone)
// A refused request's connection is closed the way RFC 9112 §9.6 asks: the answer is sent, the
// write side shut, and what the client still sends is read and dropped for up to linger_timeout,
// so the client sees the status instead of a reset.
//
// Requests on one connection are answered in order (pipelining): the next one is read only once
// the previous response has ended. A handler runs on a handler thread; it must not block (a
// long job keeps the http_response, a cheap handle, and answers from its own thread). If every
// handle of a response is dropped before it ended, the server answers 500 (or, mid-stream,
// closes the connection).
//
// http_response writes a whole response (send), or a head then chunks then the end (start,
// write, end: chunked transfer coding, e.g. server-sent events), from any thread. write() blocks
// while more than max_pending_output bytes wait for the socket (back-pressure on the producer),
// up to write_timeout; it returns false once the client has gone, and on_client_gone() runs
// a callback (on the loop thread: it must not call write()) the moment the connection closes
// before the response ended, so a generation can be cancelled, queued or running.
//
// stop(grace): the listening socket closes at once, idle connections close, requests being
// answered get until `grace` to end (responses say Connection: close), then every connection
// closes and run() returns. The application ends its own long responses first (see
// tools/server/main.cpp: waiting requests get 503, streams an error event).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hedge/core/result.hpp"
#include "hedge/os/http_request_parser.hpp"

namespace hedge::os {

struct http_server_options {
  std::string host = "127.0.0.1";  ///< numeric IPv4 or IPv6 address, or a name to resolve
  std::uint16_t port = 0;          ///< 0: a free port (see http_server::port())
  int listen_backlog = 4096;       ///< connections the kernel queues before accept (capped by somaxconn)
  std::size_t max_connections = 4096;  ///< open at once; the next gets 503
  http_request_limits request{};       ///< header bytes 16 KiB, header lines 100, body 8 MiB
  std::chrono::milliseconds header_timeout{10'000};  ///< the whole head, from its first byte
  std::chrono::milliseconds body_timeout{30'000};    ///< the whole body, from the end of the head
  std::chrono::milliseconds idle_timeout{5'000};     ///< keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{30'000};   ///< the longest a client may take no byte
  std::chrono::milliseconds linger_timeout{2'000};   ///< reading and dropping after a refusal
  std::size_t max_pending_output = 1u << 20;  ///< unsent bytes per connection before write() waits
  /// Request bytes held by all connections still reading theirs (1,000 slow 8 MiB uploads
  /// would hold 8 GB); the read that crosses it gets 503.
  std::size_t max_buffered_bytes = 256u << 20;
  std::size_t handler_threads = 2;            ///< threads that run the handler
};

/// One extra response header.
struct http_response_header {
  std::string_view name, value;
};

/// The reason phrase of a status.
constexpr std::string_view http_reason(int status) noexcept {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}

/// Raises this process's soft limit on open files to `wanted` (at most the hard limit), so
/// `max_connections` sockets can be open (a common soft limit is 1024); returns the limit now.
inline std::size_t raise_open_file_limit(std::size_t wanted) noexcept {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return 0;
  if (files.rlim_cur < wanted) {
    files.rlim_cur = files.rlim_max == RLIM_INFINITY || files.rlim_max > wanted ? wanted : files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
    ::getrlimit(RLIMIT_NOFILE, &files);
  }
  return static_cast<std::size_t>(files.rlim_cur);
}

namespace detail {

/// The Date header's value now, in RFC 9110 §5.6.7's IMF-fixdate form.
inline std::string http_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
  return std::string(text, n);
}

/// Wakes the loop thread: connections with new output, and stop().
struct http_wake {
  int fd = -1;  // eventfd
  std::mutex mutex;
  std::vector<std::uint64_t> dirty;
  bool closed = false;

  void notify(std::uint64_t id) {
    {
      std::lock_guard lock(mutex);
      if (closed) return;
      dirty.push_back(id);
    }
    ring();
  }
  void ring() const noexcept {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &one, sizeof one);
  }
};

/// What a connection shares with the threads that write its responses. Everything under mutex.
struct http_outbox {
  std::mutex mutex;
  std::condition_variable drained;
  std::uint64_t id = 0;  // the connection's
  std::shared_ptr<http_wake> wake;
  std::size_t max_pending = 0;
  std::chrono::milliseconds write_timeout{0};

  std::string out;  // bytes for the socket, from out_offset
  std::size_t out_offset = 0;
  bool gone = false;  // the connection closed: nothing more is sent

  // The exchange (request and its response) being answered.
  std::uint64_t exchange = 0;
  bool active = false, started = false, chunked = false, ended = false, abandoned = false;
  bool head_only = false;     // a HEAD request: no body bytes
  bool close_after = false;   // Connection: close on the response, then close
  bool http10 = false;        // no chunked coding: the body ends with the connection
  std::function<void()> on_gone;

  [[nodiscard]] std::size_t pending() const noexcept { return out.size() - out_offset; }

  void append_head(int status, std::string_view content_type, std::span<const http_response_header> headers,
                   std::string_view framing) {
    out += "HTTP/1.1 ";
    out += std::to_string(status);
    out += ' ';
    out += http_reason(status);
    out += "\r\nDate: ";
    out += http_date();  // an origin server with a clock sends it (RFC 9110 §6.6.1)
    out += "\r\n";
    if (!content_type.empty()) out.append("Content-Type: ").append(content_type).append("\r\n");
    for (const auto& h : headers) out.append(h.name).append(": ").append(h.value).append("\r\n");
    out += framing;
    if (close_after) out += "Connection: close\r\n";
    out += "\r\n";
  }
};

/// One exchange's handle; dropping the last one before the response ended abandons it.
struct http_exchange {
  std::shared_ptr<http_outbox> box;
  std::uint64_t number = 0;

  http_exchange(std::shared_ptr<http_outbox> b, std::uint64_t n) : box(std::move(b)), number(n) {}
  http_exchange(const http_exchange&) = delete;
  http_exchange& operator=(const http_exchange&) = delete;
  ~http_exchange() {
    bool tell = false;
    {
      std::lock_guard lock(box->mutex);
      if (box->active && box->exchange == number && !box->ended && !box->gone) box->abandoned = tell = true;
    }
    if (tell) box->wake->notify(box->id);
  }
};

}  // namespace detail

/// Writes one response, from any thread. Copies share the response.
class http_response {
 public:
  http_response() = default;
  explicit http_response(std::shared_ptr<detail::http_exchange> x) noexcept : x_(std::move(x)) {}

  /// The whole response with its Content-Length. False if one was already started or the
  /// client has gone.
  bool send(int status, std::string_view content_type, std::string_view body,
            std::span<const http_response_header> headers = {}) {
    return act([&](detail::http_outbox& b) {
      if (b.started) return false;
      b.started = b.ended = true;
      b.append_head(status, content_type, headers, "Content-Length: " + std::to_string(body.size()) + "\r\n");
      if (!b.head_only) b.out.append(body);
      return true;
    });
  }

  /// The head of a response whose body follows in write() calls (chunked; to an HTTP/1.0
  /// client, ended by closing the connection).
  bool start(int status, std::string_view content_type, std::span<const http_response_header> headers = {}) {
    return act([&](detail::http_outbox& b) {
      if (b.started) return false;
      b.started = b.chunked = true;
      if (b.http10) b.close_after = true;
      b.append_head(status, content_type, headers, b.http10 ? "" : "Transfer-Encoding: chunked\r\n");
      if (b.head_only) b.ended = true;
      return true;
    });
  }

  /// One piece of the body; waits while max_pending_output bytes are unsent (at most
  /// write_timeout). False once the client has gone (or the wait timed out).
  bool write(std::string_view data) {
    if (!x_) return false;
    detail::http_outbox& b = *x_->box;
    {
      std::unique_lock lock(b.mutex);
      if (!b.drained.wait_for(lock, b.write_timeout, [&] { return b.gone || b.pending() <= b.max_pending; }))
        return false;
      if (!mine(b) || !b.chunked || b.ended) return false;
      if (data.empty()) return true;  // an empty chunk would end the body
      if (!b.http10) {
        char size[24];
        const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
        b.out.append(size, static_cast<std::size_t>(n));
      }
      b.out.append(data);
      if (!b.http10) b.out += "\r\n";
    }
    b.wake->notify(b.id);
    return true;
  }

  /// Ends a started response.
  bool end() {
    return act([&](detail::http_outbox& b) {
      if (!b.chunked || b.ended) return false;
      if (!b.http10 && !b.head_only) b.out += "0\r\n\r\n";
      b.ended = true;
      return true;
    });
  }

  /// True once the connection closed before the response ended.
  [[nodiscard]] bool client_gone() const {
    if (!x_) return true;
    std::lock_guard lock(x_->box->mutex);
    return x_->box->gone;
  }

  /// Runs `f` once, on the loop thread, when the connection closes before the response ended
  /// (at once, on this thread, if it already has).
  void on_client_gone(std::function<void()> f) {
    if (!x_) return;
    {
      std::lock_guard lock(x_->box->mutex);
      if (!x_->box->gone) {
        x_->box->on_gone = std::move(f);
        return;
      }
    }
    f();
  }

 private:
  bool mine(const detail::http_outbox& b) const noexcept { return !b.gone && b.active && b.exchange == x_->number; }

  template <class F>
  bool act(F&& f) {
    if (!x_) return false;
    detail::http_outbox& b = *x_->box;
    {
      std::lock_guard lock(b.mutex);
      if (!mine(b) || !f(b)) return false;
    }
    b.wake->notify(b.id);
    return true;
  }

  std::shared_ptr<detail::http_exchange> x_;
};

class http_server {
 public:
  using handler = std::function<void(http_request&&, http_response)>;
  /// The body of a response the server writes itself (400, 408, 413, 431, 500, 503, ...);
  /// `target` is the request's when its request line was read, else empty. Called on the
  /// loop thread (it may count the refusal).
  using error_body = std::function<std::string(int status, std::string_view target, std::string_view message)>;

  /// Binds and listens; serve with run().
  static result<std::unique_ptr<http_server>> listen(http_server_options options, handler h,
                                                     error_body errors = {},
                                                     std::string error_content_type = "text/plain; charset=utf-8") {
    auto s = std::unique_ptr<http_server>(new http_server(std::move(options), std::move(h), std::move(errors),
                                                          std::move(error_content_type)));
    HEDGE_TRY(s->open());
    return s;
  }

  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;
  ~http_server() {
    stop(std::chrono::milliseconds{0});
    {
      std::lock_guard lock(wake_->mutex);
      wake_->closed = true;
    }
    join_handlers();
    for (auto& [id, c] : connections_) drop(*c, false);
    connections_.clear();
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (wake_->fd >= 0) ::close(wake_->fd);
  }

  /// The port listened on.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  [[nodiscard]] const http_server_options& options() const noexcept { return options_; }

  /// Serves until stop(); returns once every connection has closed.
  result<void> run() {
    for (std::size_t i = 0; i < options_.handler_threads; ++i) handlers_.emplace_back([this] { handle_loop(); });
    epoll_event events[256];
    auto last_tick = clock::now();
    while (true) {
      const int n = ::epoll_wait(epoll_fd_, events, 256, tick_ms);
      if (n < 0 && errno != EINTR) return error{errc::io_error} << "epoll_wait: " << std::strerror(errno);
      const auto now = clock::now();
      for (int i = 0; i < n; ++i) {
        const std::uint64_t id = events[i].data.u64;
        if (id == listen_id) accept_all(now);
        else if (id == wake_id) drain_wake();
        else if (auto it = connections_.find(id); it != connections_.end()) on_event(*it->second, events[i].events, now);
      }
      flush_dirty(now);
      if (stop_requested_.load() && !stopping_) begin_stop(now);
      if (now - last_tick >= std::chrono::milliseconds(tick_ms)) {
        last_tick = now;
        check_timers(now);
      }
      if (stopping_ && (connections_.empty() || now >= stop_deadline_)) break;
    }
    for (auto& [id, c] : connections_) drop(*c, true);
    connections_.clear();
    join_handlers();
    return ok();
  }

  /// Stops accepting and ends run() once the open responses ended, at most `grace` from now.
  /// Thread-safe (not async-signal-safe: call it from a thread that waited for the signal).
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds{1000}) {
    grace_ms_.store(grace.count());
    stop_requested_.store(true);
    wake_->ring();
  }

  /// Connections open now (read on the loop thread, approximate elsewhere).
  [[nodiscard]] std::size_t connection_count() const noexcept { return open_count_.load(); }

 private:
  using clock = std::chrono::steady_clock;
  static constexpr std::uint64_t listen_id = 0, wake_id = 1;
  static constexpr int tick_ms = 50;
  static constexpr std::size_t read_chunk = 64 * 1024;

  enum class phase { reading, busy, lingering };

  struct connection {
    int fd = -1;
    std::uint64_t id = 0;
    std::shared_ptr<detail::http_outbox> box;
    http_request_parser parser;
    std::string in;  // read, not yet parsed (pipelined requests wait here)
    std::size_t held = 0;  // in + the parser's bytes, as counted in held_total_
    phase state = phase::reading;
    bool want_out = false, reading_paused = false;
    clock::time_point idle_since, head_started, body_started, last_progress, linger_until;
  };

  http_server(http_server_options o, handler h, error_body errors, std::string error_type)
      : options_(std::move(o)), handler_(std::move(h)), error_body_(std::move(errors)),
        error_content_type_(std::move(error_type)), wake_(std::make_shared<detail::http_wake>()) {}

  result<void> open() {
    wake_->fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (wake_->fd < 0 || epoll_fd_ < 0) return error{errc::io_error} << "epoll/eventfd: " << std::strerror(errno);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(options_.port);
    if (const int rc = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &found); rc != 0)
      return error{errc::invalid_argument} << "cannot resolve " << options_.host << ": " << ::gai_strerror(rc);
    int last_errno = 0;
    for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int yes = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, options_.listen_backlog) == 0) {
        listen_fd_ = fd;
        sockaddr_storage bound{};
        socklen_t len = sizeof bound;
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
        port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                  : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      } else {
        last_errno = errno;
        ::close(fd);
      }
    }
    ::freeaddrinfo(found);
    if (listen_fd_ < 0)
      return error{errc::io_error} << "cannot listen on " << options_.host << ":" << options_.port << ": "
                                   << std::strerror(last_errno);
    add(listen_fd_, listen_id, EPOLLIN);
    add(wake_->fd, wake_id, EPOLLIN);
    return ok();
  }

  void add(int fd, std::uint64_t id, std::uint32_t events) const {
    epoll_event e{};
    e.events = events;
    e.data.u64 = id;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &e);
  }

  void watch(connection& c) const {
    epoll_event e{};
    // Level-triggered: a paused connection must not be watched for input.
    const bool read = !c.reading_paused;
    e.events = (read ? static_cast<std::uint32_t>(EPOLLIN | EPOLLRDHUP) : 0u) |
               (c.want_out ? static_cast<std::uint32_t>(EPOLLOUT) : 0u);
    e.data.u64 = c.id;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &e);
  }

  void accept_all(clock::time_point now) {
    while (!stopping_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        // EMFILE: out of descriptors; the connection stays queued until one is free (the
        // next tick tries again) rather than spinning on a level-triggered listen socket.
        if (errno == EMFILE || errno == ENFILE) {
          epoll_event e{};
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, &e);
          accept_paused_ = true;
        }
        return;
      }
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      if (connections_.size() >= options_.max_connections) {
        const std::string body = error_text(503, {}, "more than " + std::to_string(options_.max_connections) + " connections");
        const std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + error_content_type_ +
                                  "\r\nContent-Length: " + std::to_string(body.size()) +
                                  "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
        [[maybe_unused]] const ssize_t sent = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
        ::close(fd);
        continue;
      }
      auto c = std::make_unique<connection>();
      c->fd = fd;
      c->id = next_id_++;
      c->parser = http_request_parser(options_.request);
      c->box = std::make_shared<detail::http_outbox>();
      c->box->id = c->id;
      c->box->wake = wake_;
      c->box->max_pending = options_.max_pending_output;
      c->box->write_timeout = options_.write_timeout;
      c->idle_since = c->last_progress = now;
      add(fd, c->id, EPOLLIN | EPOLLRDHUP);
      connections_.emplace(c->id, std::move(c));
      open_count_.store(connections_.size());
    }
  }

  void drain_wake() const {
    std::uint64_t count = 0;
    [[maybe_unused]] const ssize_t n = ::read(wake_->fd, &count, sizeof count);
  }

  void on_event(connection& c, std::uint32_t events, clock::time_point now) {
    const std::uint64_t id = c.id;
    if (events & (EPOLLHUP | EPOLLERR)) return close(c, true);  // reset, or closed both ways
    if (events & EPOLLOUT) flush(c, now);
    if (!connections_.count(id)) return;
    if (events & (EPOLLIN | EPOLLRDHUP)) read_from(c, now);
  }

  void read_from(connection& c, clock::time_point now) {
    const std::uint64_t id = c.id;
    char buffer[read_chunk];
    while (true) {
      // While a response is pending, read ahead no more than one more head's worth.
      if (c.state == phase::busy && c.in.size() > options_.request.max_header_bytes) {
        c.reading_paused = true;
        return watch(c);
      }
      const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
      if (n > 0) {
        if (c.state == phase::lingering) continue;  // read and dropped
        c.in.append(buffer, static_cast<std::size_t>(n));
        if (c.state == phase::reading) {
          parse(c, now);
          if (!connections_.count(id)) return;
        }
        account(c);
        if (held_total_ > options_.max_buffered_bytes && c.state == phase::reading && c.parser.started()) {
          refuse(c, 503, "the server holds more than " + std::to_string(options_.max_buffered_bytes) +
                             " bytes of requests being read; retry later", now);
          if (!connections_.count(id)) return;
          account(c);
        }
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      // End of stream or an error. A client that closes its side while its answer is pending
      // has left, as nginx reads it too (HTTP clients do not half-close to wait for an answer):
      // its response is dropped and on_client_gone runs, so a waiting job can be skipped.
      return close(c, true);
    }
  }

  /// Counts what the connection holds into held_total_.
  void account(connection& c) {
    const std::size_t now_held = c.in.size() + c.parser.buffered_bytes();
    held_total_ = held_total_ - c.held + now_held;
    c.held = now_held;
  }

  /// Reads requests out of c.in while the connection is free to take one.
  void parse(connection& c, clock::time_point now) {
    const std::uint64_t id = c.id;
    while (c.state == phase::reading && !c.in.empty()) {
      const bool was_started = c.parser.started();
      std::string_view view = c.in;
      const std::size_t before = view.size();
      const auto step = c.parser.feed(view);
      c.in.erase(0, before - view.size());
      if (!was_started && c.parser.started()) c.head_started = now;
      switch (step) {
        case http_request_parser::step::need_more: return;
        case http_request_parser::step::head_done:
          c.body_started = now;
          if (c.parser.expects_continue() && c.parser.minor_version() >= 1) {
            std::lock_guard lock(c.box->mutex);
            c.box->out += "HTTP/1.1 100 Continue\r\n\r\n";
          }
          flush(c, now);
          if (!connections_.count(id)) return;
          break;
        case http_request_parser::step::failed:
          return refuse(c, c.parser.status(), std::string(c.parser.message()), now);
        case http_request_parser::step::complete:
          dispatch(c, c.parser.take(), now);
          account(c);
          return;
      }
    }
  }

  void dispatch(connection& c, http_request&& request, clock::time_point) {
    std::shared_ptr<detail::http_exchange> x;
    {
      std::lock_guard lock(c.box->mutex);
      auto& b = *c.box;
      ++b.exchange;
      b.active = true;
      b.started = b.chunked = b.ended = b.abandoned = false;
      b.head_only = request.method == "HEAD";
      b.http10 = request.minor_version == 0;
      b.close_after = !request.keep_alive() || stopping_;
      b.on_gone = nullptr;
      x = std::make_shared<detail::http_exchange>(c.box, b.exchange);
    }
    c.state = phase::busy;
    {
      std::lock_guard lock(queue_mutex_);
      queue_.emplace_back(std::move(request), http_response(std::move(x)));
    }
    queue_ready_.notify_one();
  }

  /// Answers a request the server refuses itself, then closes the connection.
  void refuse(connection& c, int status, const std::string& message, clock::time_point now) {
    c.in.clear();
    const std::string target = c.parser.target();
    c.parser = http_request_parser(options_.request);  // what it held is freed now
    {
      std::lock_guard lock(c.box->mutex);
      auto& b = *c.box;
      ++b.exchange;
      b.active = true;
      b.started = b.ended = true;
      b.close_after = true;
      b.head_only = false;
      const std::string body = error_text(status, target, message);
      b.append_head(status, error_content_type_, {}, "Content-Length: " + std::to_string(body.size()) + "\r\n");
      b.out += body;
    }
    c.state = phase::busy;
    flush(c, now);
  }

  std::string error_text(int status, std::string_view target, std::string_view message) const {
    return error_body_ ? error_body_(status, target, message) : std::string(message) + "\n";
  }

  void flush_dirty(clock::time_point now) {
    std::vector<std::uint64_t> ids;
    {
      std::lock_guard lock(wake_->mutex);
      ids.swap(wake_->dirty);
    }
    for (const std::uint64_t id : ids)
      if (auto it = connections_.find(id); it != connections_.end()) flush(*it->second, now);
  }

  /// Sends what the outbox holds; ends the exchange when its response is out.
  void flush(connection& c, clock::time_point now) {
    bool finished = false, close_after = false, abandoned_midway = false, failed = false;
    {
      std::lock_guard lock(c.box->mutex);
      auto& b = *c.box;
      if (b.active && b.abandoned && !b.ended) {
        if (!b.started) {
          const std::string body = error_text(500, {}, "the handler gave no response");
          b.close_after = true;
          b.append_head(500, error_content_type_, {}, "Content-Length: " + std::to_string(body.size()) + "\r\n");
          b.out += body;
          b.started = b.ended = true;
        } else {
          abandoned_midway = true;
        }
      }
      while (!abandoned_midway && b.pending() > 0) {
        const ssize_t n = ::send(c.fd, b.out.data() + b.out_offset, b.pending(), MSG_NOSIGNAL);
        if (n > 0) {
          b.out_offset += static_cast<std::size_t>(n);
          c.last_progress = now;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        failed = true;
        break;
      }
      if (b.pending() == 0) {
        b.out.clear();
        b.out_offset = 0;
      } else if (b.out_offset > (1u << 16) && b.out_offset > b.out.size() / 2) {
        b.out.erase(0, b.out_offset);
        b.out_offset = 0;
      }
      b.drained.notify_all();
      if (!failed && !abandoned_midway && b.active && b.ended && b.pending() == 0) {
        finished = true;
        close_after = b.close_after || stopping_;
        b.active = false;
        b.on_gone = nullptr;
      }
      const bool want = b.pending() > 0;
      if (want != c.want_out) {
        c.want_out = want;
        watch(c);
      }
    }
    if (failed || abandoned_midway) return close(c, true);
    if (!finished) return;
    if (c.state == phase::lingering) return;
    if (close_after && stopping_) return close(c, false);
    if (close_after) return linger(c, now);
    c.state = phase::reading;
    c.idle_since = now;
    if (c.reading_paused) {
      c.reading_paused = false;
      watch(c);
    }
    parse(c, now);
  }

  /// Shuts the write side and drops what the client still sends, until linger_timeout.
  void linger(connection& c, clock::time_point now) {
    ::shutdown(c.fd, SHUT_WR);
    c.state = phase::lingering;
    c.in.clear();
    c.linger_until = now + options_.linger_timeout;
    if (c.reading_paused) {
      c.reading_paused = false;
      watch(c);
    }
  }

  /// Closes and forgets the connection; `gone`: its response (if any) did not end.
  void close(connection& c, bool gone) {
    const std::uint64_t id = c.id;
    held_total_ -= c.held;
    drop(c, gone);
    connections_.erase(id);
    open_count_.store(connections_.size());
  }

  void drop(connection& c, bool gone) {
    std::function<void()> tell;
    {
      std::lock_guard lock(c.box->mutex);
      auto& b = *c.box;
      b.gone = true;
      if (gone && b.active && !b.ended) tell = std::move(b.on_gone);
      b.on_gone = nullptr;
      b.out.clear();
      b.out_offset = 0;
      b.drained.notify_all();
    }
    ::close(c.fd);
    c.fd = -1;
    if (tell) tell();
  }

  void check_timers(clock::time_point now) {
    if (accept_paused_ && !stopping_) {
      accept_paused_ = false;
      add(listen_fd_, listen_id, EPOLLIN);
    }
    std::vector<std::uint64_t> expired, late;
    for (auto& [id, c] : connections_) {
      switch (c->state) {
        case phase::reading:
          if (!c->parser.started()) {
            if (now - c->idle_since >= options_.idle_timeout || stopping_) expired.push_back(id);
          } else if (c->parser.in_head() ? now - c->head_started >= options_.header_timeout
                                         : now - c->body_started >= options_.body_timeout) {
            late.push_back(id);
          }
          break;
        case phase::busy: {
          std::lock_guard lock(c->box->mutex);
          if (c->box->pending() > 0 && now - c->last_progress >= options_.write_timeout) expired.push_back(id);
          break;
        }
        case phase::lingering:
          if (now >= c->linger_until) expired.push_back(id);
          break;
      }
    }
    for (const auto id : expired)
      if (auto it = connections_.find(id); it != connections_.end()) close(*it->second, true);
    for (const auto id : late)
      if (auto it = connections_.find(id); it != connections_.end()) {
        connection& c = *it->second;
        const bool head = c.parser.in_head();
        refuse(c, 408,
               head ? "the request head was not complete within " + std::to_string(options_.header_timeout.count()) + " ms"
                    : "the request body was not complete within " + std::to_string(options_.body_timeout.count()) + " ms",
               now);
        if (connections_.count(id)) account(*connections_.at(id));
      }
  }

  void begin_stop(clock::time_point now) {
    stopping_ = true;
    stop_deadline_ = now + std::chrono::milliseconds(grace_ms_.load());
    epoll_event e{};
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, &e);
    ::close(listen_fd_);
    listen_fd_ = -1;
    std::vector<std::uint64_t> idle;
    for (auto& [id, c] : connections_)
      if (c->state != phase::busy) idle.push_back(id);
    for (const auto id : idle) close(*connections_.at(id), true);
    {
      std::lock_guard lock(queue_mutex_);
      handlers_stopping_ = true;
    }
    queue_ready_.notify_all();
  }

  void handle_loop() {
    while (true) {
      std::pair<http_request, http_response> job;
      {
        std::unique_lock lock(queue_mutex_);
        queue_ready_.wait(lock, [&] { return handlers_stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      handler_(std::move(job.first), std::move(job.second));
    }
  }

  void join_handlers() {
    {
      std::lock_guard lock(queue_mutex_);
      handlers_stopping_ = true;
    }
    queue_ready_.notify_all();
    for (auto& t : handlers_)
      if (t.joinable()) t.join();
    handlers_.clear();
  }

  http_server_options options_;
  handler handler_;
  error_body error_body_;
  std::string error_content_type_;
  std::shared_ptr<detail::http_wake> wake_;
  int epoll_fd_ = -1, listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::uint64_t next_id_ = 2;
  std::unordered_map<std::uint64_t, std::unique_ptr<connection>> connections_;
  std::atomic<std::size_t> open_count_{0};
  std::size_t held_total_ = 0;  // connection::held summed
  bool accept_paused_ = false;
  std::atomic<bool> stop_requested_{false};
  std::atomic<long long> grace_ms_{1000};
  bool stopping_ = false;
  clock::time_point stop_deadline_{};

  std::mutex queue_mutex_;
  std::condition_variable queue_ready_;
  std::deque<std::pair<http_request, http_response>> queue_;
  bool handlers_stopping_ = false;
  std::vector<std::thread> handlers_;
};

}  // namespace hedge::os
