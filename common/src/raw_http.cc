#include "shoal/common/raw_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shoal {

RawHttpConnection::~RawHttpConnection() { Disconnect(); }

void RawHttpConnection::Disconnect() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  ssl_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  in_.clear();
}

Status RawHttpConnection::Broken(const std::string& what) {
  const int err = errno;
  Disconnect();
  if (err == EAGAIN || err == EWOULDBLOCK || err == EINPROGRESS) {
    return Status::Unavailable(what + " " + host_ + ":" + std::to_string(port_) + ": nothing for " +
                               std::to_string(opts_.timeout.count()) + " ms");
  }
  return Status::Unavailable(what + " " + host_ + ":" + std::to_string(port_) + ": " +
                             (err ? std::strerror(err) : "connection closed"));
}

Status RawHttpConnection::Connect() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &found);
      rc != 0 || !found) {
    return Status::Unavailable("resolving " + host_ + ": " + ::gai_strerror(rc));
  }
  // Each address the name has, in order, until one connects.
  Status last;
  for (const addrinfo* a = found; a; a = a->ai_next) {
    fd_ = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
      last = Status::IoError(std::string("socket: ") + std::strerror(errno));
      continue;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (opts_.timeout.count() > 0) {
      // Bounds connect and send (SO_SNDTIMEO) and each wait for the answer (SO_RCVTIMEO).
      timeval tv{};
      tv.tv_sec = static_cast<time_t>(opts_.timeout.count() / 1000);
      tv.tv_usec = static_cast<suseconds_t>((opts_.timeout.count() % 1000) * 1000);
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    errno = 0;
    if (::connect(fd_, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return opts_.tls.enabled() ? StartTls() : Status::Ok();
    }
    last = Broken("connect");
  }
  ::freeaddrinfo(found);
  return last;
}

Status RawHttpConnection::StartTls() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) {
    Disconnect();
    return Status::Internal("cannot make a TLS context");
  }
  Status st = ConfigureTlsClient(ctx, opts_.tls);
  if (st.ok()) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr) st = Status::Internal("cannot make a TLS connection");
  }
  SSL_CTX_free(ctx);  // the connection holds its own reference
  if (!st.ok()) {
    Disconnect();
    return Status::Unavailable("TLS to " + host_ + ": " + st.message());
  }
  SSL_set_fd(ssl_, fd_);
  SSL_set_tlsext_host_name(ssl_, opts_.tls.server_name.c_str());
  SSL_set1_host(ssl_, opts_.tls.server_name.c_str());
  errno = 0;
  ERR_clear_error();
  if (SSL_connect(ssl_) != 1) {
    const long verify = SSL_get_verify_result(ssl_);
    std::string why = verify != X509_V_OK ? X509_verify_cert_error_string(verify) : "";
    if (why.empty()) {
      char buf[256] = "the handshake failed";
      if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
      why = buf;
    }
    Disconnect();
    return Status::Unavailable("TLS handshake with " + host_ + ":" + std::to_string(port_) +
                               " (as " + opts_.tls.server_name + "): " + why);
  }
  return Status::Ok();
}

ssize_t RawHttpConnection::Send(const char* data, size_t n) {
  if (ssl_ == nullptr) return ::send(fd_, data, n, MSG_NOSIGNAL);
  const int w = SSL_write(ssl_, data, static_cast<int>(std::min<size_t>(n, 1 << 30)));
  return w > 0 ? w : -1;
}

ssize_t RawHttpConnection::Recv(char* buf, size_t n) {
  if (ssl_ == nullptr) return ::recv(fd_, buf, n, 0);
  const int r = SSL_read(ssl_, buf, static_cast<int>(n));
  return r > 0 ? r : (SSL_get_error(ssl_, r) == SSL_ERROR_ZERO_RETURN ? 0 : -1);
}

Result<int> RawHttpConnection::Request(std::string_view method, std::string_view path,
                                       std::string_view body, std::string* response_body) {
  if (fd_ < 0) SHOAL_RETURN_IF_ERROR(Connect());
  head_.clear();
  head_.append(method).append(" ").append(path).append(" HTTP/1.1\r\nHost: ");
  head_.append(opts_.tls.enabled() ? opts_.tls.server_name : host_)
      .append("\r\nContent-Type: ")
      .append(opts_.content_type)
      .append("\r\nContent-Length: ");
  head_.append(std::to_string(body.size())).append("\r\n").append(opts_.headers);
  head_.append("\r\n");
  iovec iov[2] = {{head_.data(), head_.size()}, {const_cast<char*>(body.data()), body.size()}};
  size_t left = head_.size() + body.size();
  int idx = 0;
  if (ssl_ != nullptr) {
    // One record stream: the head and the body written in turn.
    for (std::string_view part : {std::string_view(head_), body}) {
      while (!part.empty()) {
        errno = 0;
        const ssize_t n = Send(part.data(), part.size());
        if (n <= 0) return Broken("send to");
        part.remove_prefix(static_cast<size_t>(n));
      }
    }
    left = 0;
  }
  while (left > 0) {
    errno = 0;
    // sendmsg with MSG_NOSIGNAL: a peer that closed is an error here, never a SIGPIPE.
    msghdr msg{};
    msg.msg_iov = iov + idx;
    msg.msg_iovlen = static_cast<size_t>(2 - idx);
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Broken("send to");
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
  constexpr size_t kMaxHead = 64 << 10;
  size_t head_end;
  char buf[65536];
  while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
    errno = 0;
    ssize_t n = Recv(buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Broken("waiting for the answer of");
    if (in_.size() + static_cast<size_t>(n) > kMaxHead) {
      Disconnect();
      return Status::Unavailable("the answer of " + host_ + " has a head over " +
                                 std::to_string(kMaxHead) + " bytes");
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
  if (length > opts_.max_body) {
    Disconnect();
    return Status::Unavailable("the answer of " + host_ + " has a body of " +
                               std::to_string(length) + " bytes, over the " +
                               std::to_string(opts_.max_body) + " taken");
  }
  const size_t total = head_end + 4 + length;
  while (in_.size() < total) {
    errno = 0;
    ssize_t n = Recv(buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Broken("reading the answer of");
    in_.append(buf, static_cast<size_t>(n));
  }
  if (response_body) response_body->assign(in_, head_end + 4, length);
  in_.erase(0, total);
  return code;
}

}  // namespace shoal
