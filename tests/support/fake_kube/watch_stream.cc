#include "support/fake_kube/watch_stream.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shoal::testing {

namespace {

using Clock = std::chrono::steady_clock;

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<std::unique_ptr<WatchStream>> WatchStream::Open(const std::string& host, uint16_t port,
                                                       const std::string& path_and_query,
                                                       const std::string& token,
                                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return Status::InvalidArgument("not an IPv4 address: " + host);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  std::unique_ptr<WatchStream> s(new WatchStream(fd));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Status::Unavailable(std::string("connect: ") + std::strerror(errno));
  }
  std::string request = "GET " + path_and_query + " HTTP/1.1\r\nHost: " + host + ":" +
                        std::to_string(port) + "\r\nAccept: application/json\r\n";
  if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
  request += "Connection: close\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return Status::IoError(std::string("send: ") + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  size_t end;
  while ((end = s->raw_.find("\r\n\r\n")) == std::string::npos) {
    if (s->eof_) return Status::IoError("the connection closed before the answer's head");
    if (!s->Fill(deadline)) return Status::Unavailable("no answer head before the deadline");
  }
  const std::string head = s->raw_.substr(0, end);
  s->raw_.erase(0, end + 4);
  // "HTTP/1.1 200 OK"
  const size_t sp = head.find(' ');
  if (sp == std::string::npos) return Status::IoError("malformed status line: " + head);
  s->status_ = std::atoi(head.c_str() + sp + 1);
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string line =
        head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      const std::string name = Lower(line.substr(0, colon));
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      if (name == "transfer-encoding" && Lower(v).find("chunked") != std::string::npos) {
        s->chunked_ = true;
      }
      if (name == "content-length") {
        s->content_length_ = std::stoul(v);
        s->has_length_ = true;
      }
    }
    pos = next;
  }
  s->Decode();
  return s;
}

WatchStream::~WatchStream() {
  if (fd_ >= 0) ::close(fd_);
}

bool WatchStream::Fill(Clock::time_point deadline) {
  if (eof_) return true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(left.count()));
  if (r == 0) return false;
  if (r < 0) {
    if (errno == EINTR) return true;
    eof_ = true;
    return true;
  }
  char buf[16384];
  const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n <= 0) {
    eof_ = true;
  } else {
    raw_.append(buf, static_cast<size_t>(n));
  }
  return true;
}

void WatchStream::Decode() {
  if (!chunked_) {
    body_ += raw_;
    raw_.clear();
    if (has_length_ && body_.size() >= content_length_) done_ = true;
    return;
  }
  while (!done_) {
    const size_t eol = raw_.find("\r\n");
    if (eol == std::string::npos) return;
    const size_t size = std::strtoul(raw_.substr(0, eol).c_str(), nullptr, 16);
    if (raw_.size() < eol + 2 + size + 2) return;
    body_.append(raw_, eol + 2, size);
    raw_.erase(0, eol + 2 + size + 2);
    if (size == 0) done_ = true;
  }
}

WatchStream::Next WatchStream::Read(std::string* line, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const size_t nl = body_.find('\n');
    if (nl != std::string::npos) {
      *line = body_.substr(0, nl);
      body_.erase(0, nl + 1);
      return Next::kLine;
    }
    if (done_ || eof_) {
      if (!body_.empty()) {
        *line = std::move(body_);
        body_.clear();
        return Next::kLine;
      }
      return Next::kEnd;
    }
    if (!Fill(deadline)) return Next::kTimeout;
    Decode();
  }
}

Result<std::string> WatchStream::ReadAll(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done_ && !eof_) {
    if (!Fill(deadline)) return Status::Unavailable("the answer did not end before the deadline");
    Decode();
  }
  std::string out = std::move(body_);
  body_.clear();
  return out;
}

}  // namespace shoal::testing
