// A client on a raw TCP socket, for what an HTTP library would not send (a header that never
// ends, a body that stalls, an answer never read), and what a process holds (/proc).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace shoal::testing {

class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  // Sends all of `data`; false once the peer closed or reset the connection.
  bool Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Whether an answer (or the close) is waiting to be read, without blocking.
  bool Readable(int timeout_ms = 0) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, timeout_ms) > 0;
  }
  // Reads until the peer closes or `timeout` passes; what arrived.
  std::string ReadAll(std::chrono::milliseconds timeout) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now())
                                            .count());
      if (!Readable(std::max(left, 1))) continue;
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // The first `n` bytes that arrived (fewer if the peer closes or `timeout` passes), left unread.
  std::string Peek(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::string out(n, '\0');
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      ssize_t got = ::recv(fd_, out.data(), n, MSG_PEEK | MSG_DONTWAIT);
      if (got == 0) return {};
      if (got >= static_cast<ssize_t>(n)) return out;
      Readable(10);
    }
    return {};
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

// A "VmRSS:"-like line of /proc/PID/status, in bytes; 0 when it cannot be read.
inline uint64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size())) * 1024;
  }
  return 0;
}
// Resident memory now, and at its peak.
inline uint64_t RssBytes(pid_t pid) { return ProcStatusBytes(pid, "VmRSS:"); }
inline uint64_t PeakRssBytes(pid_t pid) { return ProcStatusBytes(pid, "VmHWM:"); }

// Descriptors the process holds now.
inline size_t OpenFiles(pid_t pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

}  // namespace shoal::testing
