#include "shoal/client/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shoal::client {

RawHttpConnection::~RawHttpConnection() { Disconnect(); }

void RawHttpConnection::Disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
}

Status RawHttpConnection::Connect() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  if (::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr) != 1) {
    Disconnect();
    return Status::InvalidArgument("not an IPv4 address: " + host_);
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = Status::Unavailable("connect " + host_ + ":" + std::to_string(port_) + ": " +
                                   std::strerror(errno));
    Disconnect();
    return s;
  }
  return Status::Ok();
}

Result<int> RawHttpConnection::Request(std::string_view method, std::string_view path,
                                       std::string_view body, std::string* response_body) {
  if (fd_ < 0) SHOAL_RETURN_IF_ERROR(Connect());
  head_.clear();
  head_.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ");
  head_.append(host_).append("\r\nContent-Type: application/json\r\nContent-Length: ");
  head_.append(std::to_string(body.size())).append("\r\n\r\n");
  iovec iov[2] = {{head_.data(), head_.size()}, {const_cast<char*>(body.data()), body.size()}};
  size_t left = head_.size() + body.size();
  int idx = 0;
  while (left > 0) {
    ssize_t n = ::writev(fd_, iov + idx, 2 - idx);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Disconnect();
      return Status::Unavailable(std::string("send: ") + std::strerror(errno));
    }
    left -= static_cast<size_t>(n);
    while (idx < 2 && static_cast<size_t>(n) >= iov[idx].iov_len) {
      n -= static_cast<ssize_t>(iov[idx].iov_len);
      ++idx;
    }
    if (idx < 2) {
      iov[idx].iov_base = static_cast<char*>(iov[idx].iov_base) + n;
      iov[idx].iov_len -= static_cast<size_t>(n);
    }
  }
  // Read the head, then exactly Content-Length bytes of body.
  size_t head_end;
  char buf[65536];
  while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Disconnect();
      return Status::Unavailable("connection closed before the answer");
    }
    in_.append(buf, static_cast<size_t>(n));
  }
  int code = 0;
  if (in_.size() < 12 || std::sscanf(in_.c_str() + 9, "%3d", &code) != 1) {
    Disconnect();
    return Status::Internal("malformed HTTP status line");
  }
  size_t length = 0;
  for (size_t pos = in_.find("\r\n"); pos < head_end; pos = in_.find("\r\n", pos + 2)) {
    static constexpr std::string_view kLen = "content-length:";
    if (head_end - pos - 2 > kLen.size() &&
        strncasecmp(in_.c_str() + pos + 2, kLen.data(), kLen.size()) == 0) {
      length = std::strtoull(in_.c_str() + pos + 2 + kLen.size(), nullptr, 10);
    }
  }
  const size_t total = head_end + 4 + length;
  while (in_.size() < total) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Disconnect();
      return Status::Unavailable("connection closed inside the answer");
    }
    in_.append(buf, static_cast<size_t>(n));
  }
  if (response_body) response_body->assign(in_, head_end + 4, length);
  in_.erase(0, total);
  return code;
}

}  // namespace shoal::client
