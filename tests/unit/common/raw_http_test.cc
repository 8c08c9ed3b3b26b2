// RawHttpConnection against a real listening socket on port 0, served by a thread that plays
// the peer: an answer read whole over a kept connection with the configured header lines, a peer
// that never answers (the timeout), one that announces a body over the cap (refused before it is
// read), and a name instead of an address.
#include "shoal/common/raw_http.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace shoal {
namespace {

using namespace std::chrono_literals;

// One listening socket on 127.0.0.1, port 0; `serve` runs on its own thread with each accepted
// connection's descriptor, then it is closed.
class Peer {
 public:
  explicit Peer(std::function<void(int)> serve) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      serve(c);
      ::close(c);
    });
  }
  ~Peer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// Reads one request head (and its body of `body` bytes) from `fd`.
std::string ReadRequest(int fd, size_t body) {
  std::string in;
  char buf[4096];
  while (in.find("\r\n\r\n") == std::string::npos || in.size() < in.find("\r\n\r\n") + 4 + body) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

void Send(int fd, const std::string& s) { (void)::send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

// A peer's part that reads one request and sends `answer`.
std::function<void(int)> Answering(std::string answer) {
  return [answer = std::move(answer)](int fd) {
    ReadRequest(fd, 0);
    Send(fd, answer);
  };
}

RawHttpOptions WithTimeout(std::chrono::milliseconds timeout) {
  RawHttpOptions o;
  o.timeout = timeout;
  return o;
}

TEST(RawHttpTest, AnswersAreReadWholeOverOneConnectionWithTheConfiguredHeaders) {
  std::string first, second;
  Peer peer([&](int fd) {
    first = ReadRequest(fd, 4);
    Send(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    second = ReadRequest(fd, 0);
    Send(fd, "HTTP/1.1 409 Conflict\r\ncontent-length: 2\r\n\r\n{}");
  });
  RawHttpOptions o;
  o.timeout = 5s;
  o.headers = "Authorization: Bearer t\r\n";
  RawHttpConnection conn("127.0.0.1", peer.port(), o);
  std::string body;
  auto code = conn.Request("POST", "/a", "ping", &body);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 200);
  EXPECT_EQ(body, "hello");
  EXPECT_NE(first.find("POST /a HTTP/1.1\r\n"), std::string::npos) << first;
  EXPECT_NE(first.find("\r\nAuthorization: Bearer t\r\n"), std::string::npos) << first;
  EXPECT_EQ(first.substr(first.size() - 4), "ping");
  code = conn.Request("GET", "/b", "", &body);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 409);
  EXPECT_EQ(body, "{}");
  EXPECT_NE(second.find("GET /b HTTP/1.1\r\n"), std::string::npos) << second;
}

TEST(RawHttpTest, APeerThatNeverAnswersCostsOneTimeout) {
  Peer peer([](int fd) {
    ReadRequest(fd, 0);
    char c;
    (void)::recv(fd, &c, 1, 0);  // until the client gives up and closes
  });
  RawHttpOptions o;
  o.timeout = 300ms;
  RawHttpConnection conn("127.0.0.1", peer.port(), o);
  const auto t0 = std::chrono::steady_clock::now();
  auto code = conn.Request("GET", "/", "", nullptr);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(code.status().message().find("nothing for 300 ms"), std::string::npos)
      << code.status().ToString();
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
}

TEST(RawHttpTest, ABodyOverTheCapIsRefusedBeforeItIsRead) {
  Peer peer(Answering("HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nxx"));
  RawHttpOptions o = WithTimeout(5s);
  o.max_body = 1000;
  RawHttpConnection conn("127.0.0.1", peer.port(), o);
  auto code = conn.Request("GET", "/", "", nullptr);
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find("over the 1000 taken"), std::string::npos)
      << code.status().ToString();
}

TEST(RawHttpTest, AHostNameIsResolved) {
  Peer peer(Answering("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"));
  RawHttpConnection conn("localhost", peer.port(), WithTimeout(5s));
  auto code = conn.Request("GET", "/", "", nullptr);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 204);
}

}  // namespace
}  // namespace shoal
