#include "http/guarded_listener.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pplx/threadpool.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <filesystem>
#include <future>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <vector>

#include "http/http_util.h"
#include "shoal/common/json.h"
#include "shoal/common/logging.h"
#include "shoal/common/thread_annotations.h"

namespace shoal::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

class ConnectionBase;

struct GuardedListener::Shared {
  Shared(ListenerOptions o, Handler h, asio::io_context& io_context)
      : opts(std::move(o)),
        handler(std::move(h)),
        io(io_context),
        acceptor_strand(asio::make_strand(io_context)),
        retry(acceptor_strand) {}

  const ListenerOptions opts;
  const Handler handler;
  asio::io_context& io;
  asio::strand<asio::io_context::executor_type> acceptor_strand;
  std::optional<tcp::acceptor> acceptor;  // used on acceptor_strand once open
  asio::steady_timer retry;               // on acceptor_strand: accepting again after EMFILE

  Mutex mu;
  CondVar cv;
  bool closed GUARDED_BY(mu) = false;
  int in_handler GUARDED_BY(mu) = 0;  // handler calls under way
  std::list<std::weak_ptr<ConnectionBase>> conns GUARDED_BY(mu);  // in the order they came
  size_t open GUARDED_BY(mu) = 0;

  Mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls_context GUARDED_BY(tls_mu);
  std::string tls_stamp GUARDED_BY(tls_mu);  // the files' sizes and times it was made from
  Clock::time_point tls_checked GUARDED_BY(tls_mu);

  bool tls() const { return !opts.tls.cert_file.empty(); }

  // The TLS context of new connections, made again when its files change (looked at once a
  // second at most): a certificate rotated on disk serves the next connections, no restart. A
  // change that cannot be loaded (a half-written file) keeps the previous context.
  std::shared_ptr<asio::ssl::context> TlsContext() {
    MutexLock lock(tls_mu);
    const auto now = Clock::now();
    if (tls_context && now - tls_checked < std::chrono::seconds(1)) return tls_context;
    tls_checked = now;
    std::string stamp;
    for (const auto* f : {&opts.tls.cert_file, &opts.tls.key_file, &opts.tls.client_ca_file}) {
      std::error_code ec;
      if (f->empty()) continue;
      const auto size = std::filesystem::file_size(*f, ec);
      const auto time = std::filesystem::last_write_time(*f, ec);
      stamp += std::to_string(size) + ":" + std::to_string(time.time_since_epoch().count()) + ";";
    }
    if (tls_context && stamp == tls_stamp) return tls_context;
    try {
      auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
      ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1);
      ctx->use_certificate_chain_file(opts.tls.cert_file);
      ctx->use_private_key_file(opts.tls.key_file, asio::ssl::context::pem);
      if (!opts.tls.client_ca_file.empty()) {
        ctx->load_verify_file(opts.tls.client_ca_file);
        ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
      }
      if (tls_context) Logger("http")->info("msg=\"TLS certificate reloaded\" port={}", opts.port);
      tls_context = std::move(ctx);
      tls_stamp = stamp;
    } catch (const std::exception& e) {
      Logger("http")->error(
          "msg=\"TLS files could not be loaded; keeping the previous ones\" cert={} reason=\"{}\"",
          opts.tls.cert_file, e.what());
    }
    return tls_context;
  }

  // What is read of a body refused for its size, so that a client still sending gets its answer.
  size_t DiscardLimit() const {
    return std::max<size_t>(size_t{16} << 20, 4 * opts.limits.max_body_bytes);
  }
};

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Sv(beast::string_view v) { return {v.data(), v.size()}; }

std::string Ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

// What the listener knows of a connection: its place in the list, whether it may be closed to
// make room. The atomics are read by the listener; the rest is used on the connection's strand.
class ConnectionBase {
 public:
  using Shared = GuardedListener::Shared;
  using Place = std::list<std::weak_ptr<ConnectionBase>>::iterator;

  explicit ConnectionBase(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)), waiting_since_(Clock::now().time_since_epoch().count()) {}

  virtual ~ConnectionBase() {
    if (!counted_) return;  // handed over to the connection that took its place
    MutexLock lock(shared_->mu);
    shared_->conns.erase(place_);
    --shared_->open;
    shared_->cv.notify_all();
  }

  // Called by the listener under its mutex, once, before Start.
  void Register(Place place) {
    place_ = place;
    counted_ = true;
  }

  // Closes the connection if it is waiting for a request (the listener needs its place). Once
  // chosen, it no longer counts against the cap.
  virtual void Evict() = 0;
  // Closes the connection, whatever it is doing.
  virtual void Shut() = 0;

  bool busy() const { return busy_.load(); }
  bool evicted() const { return evicted_.load(); }
  int64_t waiting_since() const { return waiting_since_.load(); }

 protected:
  // `next` (a TLS connection on this one's socket) takes this one's place in the listener.
  void HandOver(const std::shared_ptr<ConnectionBase>& next) {
    MutexLock lock(shared_->mu);
    *place_ = next;
    next->Register(place_);
    counted_ = false;
  }

  std::shared_ptr<Shared> shared_;
  std::atomic<bool> busy_{false};       // a request is in progress (read past its headers)
  std::atomic<bool> evicted_{false};    // chosen to make room (closing)
  std::atomic<int64_t> waiting_since_;  // since when it waits for a request (steady ticks)

 private:
  bool counted_ = false;  // holds a place in the listener's list and its count
  Place place_;
};

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One client connection, plain (Stream = beast::tcp_stream) or TLS (TlsStream). Every member is
// used on the connection's strand only.
template <class Stream>
class Connection : public ConnectionBase, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  // `args` make the stream: a socket; or a tcp_stream and an ssl::context.
  template <class... Args>
  Connection(std::shared_ptr<Shared> shared, beast::flat_buffer buffer, Args&&... args)
      : ConnectionBase(std::move(shared)),
        stream_(std::forward<Args>(args)...),
        timer_(stream_.get_executor()),
        buffer_(std::move(buffer)) {}

  ~Connection() override { Release(); }

  void Start(bool refuse) {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this(), refuse] {
      if (refuse) {
        self->Refuse(503, "too_many_connections",
                     "every connection this port allows (" +
                         std::to_string(self->shared_->opts.limits.max_connections) +
                         ") has a request in progress; retry",
                     false);
        return;
      }
      if constexpr (!kTls) {
        if (self->shared_->tls()) return self->Detect();
      }
      self->PlainRequests();
    });
  }

  // A TLS connection (made by Upgrade) shakes hands, then reads requests.
  void StartTls(std::shared_ptr<asio::ssl::context> context) {
    tls_context_ = std::move(context);
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        self->ArmReadTimer(self->limits().header_timeout);
        self->stream_.async_handshake(
            asio::ssl::stream_base::server, self->buffer_.data(),
            [self](beast::error_code ec, size_t used) {
              self->timer_.cancel();
              if (ec) return self->Stop();  // no certificate, a wrong one, not TLS after all
              self->buffer_.consume(used);
              self->principal_ = PeerName(self->stream_.native_handle());
              self->WaitForRequest();
            });
      }
    });
  }

  void Evict() override {
    evicted_.store(true);
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if (!self->busy_.load()) self->Stop();
    });
  }

  void Shut() override {
    asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Stop(); });
  }

  // With TLS on the port: a connection whose first bytes are a TLS handshake goes on as TLS, one
  // that starts with a plain request goes on as plain HTTP (the pod's own containers, peers).
  void Detect() {
    ArmReadTimer(limits().header_timeout);
    beast::async_detect_ssl(stream_, buffer_,
                            [self = this->shared_from_this()](beast::error_code ec, bool tls) {
                              self->timer_.cancel();
                              if (ec) return self->Stop();
                              if (!tls) return self->PlainRequests();
                              self->Upgrade();
                            });
  }

  // A plain connection reads requests, if the port serves plain HTTP.
  void PlainRequests() {
    if (shared_->opts.tls.mutual()) {
      return Refuse(403, "tls_required",
                    "this port is served over TLS with a client certificate of the topic's CA "
                    "only (see docs/security.md)",
                    false);
    }
    WaitForRequest();
  }

  void Upgrade() {
    if constexpr (!kTls) {
      auto context = shared_->TlsContext();
      if (!context) return Stop();
      auto next = std::make_shared<Connection<TlsStream>>(shared_, std::move(buffer_),
                                                          std::move(stream_), *context);
      HandOver(next);
      next->StartTls(std::move(context));
    }
  }

  // The common name of the client certificate a TLS peer showed; empty without one.
  static std::string PeerName(SSL* ssl) {
    X509* cert = SSL_get1_peer_certificate(ssl);
    if (cert == nullptr) return "";
    char name[256] = {0};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof name);
    X509_free(cert);
    return name;
  }

  // A read's time limit: when it passes, the read is cancelled (the socket stays open, so that a
  // refusal can still be answered) and timed_out_ tells its completion why. Beast's own expiry
  // closes the socket; it is kept for writes only.
  void ArmReadTimer(std::chrono::milliseconds limit) {
    timed_out_ = false;
    Tcp().expires_never();
    timer_.expires_after(limit);
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: the read completed first
      self->timed_out_ = true;
      beast::error_code ignored;
      self->Tcp().socket().cancel(ignored);
    });
  }

  void Stop() {
    timer_.cancel();
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    Tcp().close();
  }

 private:
  const ListenerLimits& limits() const { return shared_->opts.limits; }
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void WaitForRequest() {
    busy_.store(false);
    waiting_since_.store(Clock::now().time_since_epoch().count());
    if (buffer_.size() > 0) return ReadHeader();
    // A new connection has header_timeout to send its first request; one between requests,
    // idle_timeout.
    ArmReadTimer(first_ ? limits().header_timeout : limits().idle_timeout);
    first_ = false;
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->timer_.cancel();
                              if (ec) return self->Stop();  // closed, or quiet too long
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(
        std::min<size_t>(limits().max_header_bytes, std::numeric_limits<uint32_t>::max())));
    parser_->body_limit(limits().max_body_bytes);
    ArmReadTimer(limits().header_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->timer_.cancel();
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    busy_.store(true);
    if (ec == bhttp::error::header_limit) {
      return Refuse(431, "header_too_large",
                    "the request line and headers are over " +
                        std::to_string(limits().max_header_bytes) + " bytes (--max-header-bytes)",
                    false);
    }
    if (ec && timed_out_) {
      return Refuse(408, "request_timeout",
                    "the request's headers did not arrive within " + Ms(limits().header_timeout) +
                        " (--header-timeout-ms)",
                    false);
    }
    if (ec == bhttp::error::body_limit) return RefuseTooLarge();
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset) {
      return Stop();
    }
    if (ec) return Refuse(400, "bad_request", "not an HTTP/1.1 request: " + ec.message(), false);

    auto& msg = parser_->get();
    try {
      request_.emplace(std::string(msg.method_string()));
      web::uri uri(std::string(msg.target()));
      web::uri::decode(uri.path());  // a path that is not valid percent-encoding: refused here
      request_->set_request_uri(uri);
    } catch (const std::exception& e) {
      return Refuse(400, "bad_uri",
                    std::string("the request target is not a valid URI: ") + e.what(), true);
    }
    for (const auto& field : msg) {
      request_->headers().add(std::string(field.name_string()), std::string(field.value()));
    }
    // Who is calling, as TLS proved it; never as the client says.
    request_->headers().remove(kPrincipalHeader);
    if (!principal_.empty()) request_->headers().add(kPrincipalHeader, principal_);
    beast::error_code addr_ec;
    const auto remote = Tcp().socket().remote_endpoint(addr_ec);
    if (!addr_ec) request_->_get_impl()->_set_remote_address(remote.address().to_string());
    if (shared_->opts.admit) {
      Status st = shared_->opts.admit(*request_);
      if (!st.ok()) {
        return Refuse(HttpCode(st), std::string(st.code_name()), st.message(), true);
      }
    }
    if (parser_->content_length() && *parser_->content_length() > limits().max_body_bytes) {
      return RefuseTooLarge();
    }
    if (shared_->opts.requests && !parser_->is_done()) {
      // What the body may take: its declared length, or the limit for a chunked one.
      const size_t want =
          parser_->content_length() ? *parser_->content_length() : limits().max_body_bytes;
      if (!shared_->opts.requests->TryTake(want)) {
        return Refuse(503, "busy",
                      "request bodies being read and handled hold the request budget (" +
                          std::to_string(shared_->opts.requests->limit()) +
                          " bytes, --request-budget-bytes); retry",
                      true);
      }
      request_held_ = want;
    }
    if (!parser_->is_done() && IEquals(Sv(msg[bhttp::field::expect]), "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      Tcp().expires_after(limits().write_timeout);
      asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = this->shared_from_this()](beast::error_code ec, size_t) {
                          if (ec) return self->Stop();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return Dispatch();
    ArmReadTimer(limits().body_timeout);
    bhttp::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          self->timer_.cancel();
          if (ec == bhttp::error::body_limit) return self->RefuseTooLarge();
          if (ec && self->timed_out_) {
            return self->Refuse(400, "body_timeout",
                                "the body did not arrive whole within " +
                                    Ms(self->limits().body_timeout) +
                                    " of its headers (--body-timeout-ms)",
                                false);
          }
          if (ec) {
            return self->Refuse(400, "bad_body", "the body did not arrive whole: " + ec.message(),
                                false);
          }
          self->Dispatch();
        });
  }

  void Dispatch() {
    auto& msg = parser_->get();
    keep_alive_ = msg.keep_alive();
    head_ = msg.method() == bhttp::verb::head;
    web::http::http_request req = std::move(*request_);
    request_.reset();
    std::string content_type;
    const bool typed = req.headers().match(web::http::header_names::content_type, content_type);
    const size_t size = msg.body().size();
    req.set_body(std::move(msg.body()));
    // set_body names a type of its own; the handler sees the one the client sent.
    if (typed) {
      req.headers()[web::http::header_names::content_type] = content_type;
    } else {
      req.headers().remove(web::http::header_names::content_type);
    }
    req._get_impl()->_complete(size);
    parser_.reset();

    req.get_response().then([self =
                                 this->shared_from_this()](pplx::task<web::http::http_response> t) {
      std::optional<bhttp::response<bhttp::string_body>> res;
      try {
        res = self->Convert(t.get());
      } catch (...) {
        res.reset();
      }
      asio::post(self->stream_.get_executor(), [self, res = std::move(res)]() mutable {
        if (!res) return self->Stop();
        self->Send(std::move(*res), self->keep_alive_);
      });
    });
    {
      MutexLock lock(shared_->mu);
      if (shared_->closed) {
        req._reply_if_not_already(503);
        return;
      }
      ++shared_->in_handler;
    }
    try {
      shared_->handler(req);
    } catch (...) {
      req._reply_if_not_already(500);
    }
    MutexLock lock(shared_->mu);
    --shared_->in_handler;
    shared_->cv.notify_all();
  }

  // cpprestsdk's answer as Beast's. Runs on a pool thread; touches no connection state but what
  // Dispatch set before the handler ran.
  bhttp::response<bhttp::string_body> Convert(web::http::http_response r) const {
    bhttp::response<bhttp::string_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(r.status_code()));
    bool close = false;
    for (const auto& [name, value] : r.headers()) {
      if (IEquals(name, "Content-Length") || IEquals(name, "Transfer-Encoding")) continue;
      if (IEquals(name, "Connection")) {
        close = close || IEquals(value, "close");
        continue;
      }
      res.set(name, value);
    }
    std::string body;
    if (auto in = r.body()) {
      auto buf = in.streambuf();
      while (true) {
        const size_t have = body.size();
        body.resize(have + std::max<size_t>(buf.in_avail(), 4096));
        const size_t n =
            buf.getn(reinterpret_cast<uint8_t*>(body.data() + have), body.size() - have).get();
        body.resize(have + n);
        if (n == 0) break;
      }
    }
    res.content_length(body.size());
    if (!head_) res.body() = std::move(body);
    if (close) res.set(bhttp::field::connection, "close");
    return res;
  }

  // Writes an answer; then reads the next request, or closes the connection.
  void Send(bhttp::response<bhttp::string_body> res, bool keep_alive, bool drain = false) {
    bool closing = !keep_alive || IEquals(Sv(res[bhttp::field::connection]), "close");
    {
      MutexLock lock(shared_->mu);
      closing = closing || shared_->closed;
    }
    res.keep_alive(!closing);
    answer_.emplace(std::move(res));
    held_ = answer_->body().size();
    if (shared_->opts.answers) shared_->opts.answers->Take(held_);
    Tcp().expires_after(limits().write_timeout);
    bhttp::async_write(
        stream_, *answer_,
        [self = this->shared_from_this(), closing, drain](beast::error_code ec, size_t) {
          self->Release();
          self->answer_.reset();
          if (ec) return self->Stop();
          if (drain) return self->Drain();
          if (closing) return self->Stop();
          self->WaitForRequest();
        });
  }

  // Gives the bytes of the answer being written, and of the request it answers, back to their
  // budgets.
  void Release() {
    if (held_ > 0 && shared_->opts.answers) shared_->opts.answers->Give(held_);
    held_ = 0;
    if (request_held_ > 0 && shared_->opts.requests) shared_->opts.requests->Give(request_held_);
    request_held_ = 0;
  }

  void RefuseTooLarge() {
    std::string size = "over " + std::to_string(limits().max_body_bytes);
    if (parser_) {
      const auto declared = parser_->get()[bhttp::field::content_length];
      if (!declared.empty()) size = std::string(declared);
    }
    Refuse(413, "too_large",
           "the body is " + size + " bytes; the limit is " +
               std::to_string(limits().max_body_bytes) + " (--max-body-bytes)",
           true);
  }

  // Answers a refusal and closes the connection. `drain`: the client may still be sending a
  // body; what it sends is read and dropped (up to the discard limit) before the close, so that
  // it reads its answer instead of a reset.
  void Refuse(int code, const std::string& error, const std::string& reason, bool drain) {
    busy_.store(true);
    if (shared_->opts.on_refused) shared_->opts.on_refused(code, error);
    bhttp::response<bhttp::string_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(code));
    res.set(bhttp::field::content_type, "application/json");
    res.body() = json::ErrorBody(error, reason);
    res.prepare_payload();
    parser_.reset();
    request_.reset();
    Send(std::move(res), false, drain);
  }

  void Drain() {
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    drained_ = 0;
    ArmReadTimer(limits().body_timeout);
    DrainMore();
  }

  void DrainMore() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(64 << 10),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > self->shared_->DiscardLimit()) {
                                self->timer_.cancel();
                                return self->Stop();
                              }
                              self->DrainMore();
                            });
  }

  Stream stream_;
  asio::steady_timer timer_;  // a read's time limit (ArmReadTimer)
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::optional<web::http::http_request> request_;             // headers in, body not yet
  std::optional<bhttp::response<bhttp::string_body>> answer_;  // being written
  size_t held_ = 0;          // bytes of answer_ counted in the answer budget
  size_t request_held_ = 0;  // bytes of the request in progress counted in the request budget
  size_t drained_ = 0;  // bytes dropped after a refusal
  bool first_ = true;   // no request read yet
  bool keep_alive_ = true;
  bool head_ = false;
  std::string principal_;                            // the TLS client certificate's common name
  std::shared_ptr<asio::ssl::context> tls_context_;  // a TLS connection's, kept while it lives
};

namespace {

void Accept(const std::shared_ptr<GuardedListener::Shared>& s);

// Takes a new connection in; over the cap, makes room by closing the connection that has waited
// longest for a request, or refuses the new one if every connection is busy.
void Admit(const std::shared_ptr<GuardedListener::Shared>& s, tcp::socket socket) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  auto conn =
      std::make_shared<Connection<beast::tcp_stream>>(s, beast::flat_buffer(), std::move(socket));
  std::vector<std::shared_ptr<ConnectionBase>> all;  // released outside the lock (destructors)
  std::shared_ptr<ConnectionBase> victim;
  bool refuse = false;
  {
    MutexLock lock(s->mu);
    if (s->open >= s->opts.limits.max_connections) {
      all.reserve(s->conns.size());
      for (auto& w : s->conns) {
        if (auto c = w.lock()) all.push_back(std::move(c));
      }
    }
    ++s->open;
    conn->Register(s->conns.insert(s->conns.end(), conn));
  }
  size_t counted = 0;  // connections not already closing to make room
  for (auto& c : all) {
    if (c->evicted()) continue;
    ++counted;
    if (c->busy()) continue;
    if (!victim || c->waiting_since() < victim->waiting_since()) victim = c;
  }
  if (counted >= s->opts.limits.max_connections) {
    refuse = !victim;
    if (victim) victim->Evict();
    if (refuse && s->opts.on_refused) s->opts.on_refused(503, "too_many_connections");
  }
  conn->Start(refuse);
}

void Accept(const std::shared_ptr<GuardedListener::Shared>& s) {
  s->acceptor->async_accept(
      asio::make_strand(s->io),
      asio::bind_executor(s->acceptor_strand, [s](beast::error_code ec, tcp::socket socket) {
        {
          MutexLock lock(s->mu);
          if (s->closed) return;
        }
        if (ec == asio::error::operation_aborted) return;
        if (ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space) {
          // Out of descriptors: accepting again at once would spin; connections close meanwhile.
          s->retry.expires_after(std::chrono::milliseconds(50));
          s->retry.async_wait([s](beast::error_code) { Accept(s); });
          return;
        }
        if (!ec) Admit(s, std::move(socket));
        Accept(s);
      }));
}

}  // namespace

GuardedListener::GuardedListener(ListenerOptions options, Handler handler)
    : shared_(std::make_shared<Shared>(std::move(options), std::move(handler),
                                       crossplat::threadpool::shared_instance().service())) {}

GuardedListener::~GuardedListener() { Close(); }

Status GuardedListener::Open() {
  const auto& o = shared_->opts;
  const std::string where = "http://" + o.host + ":" + std::to_string(o.port);
  if (shared_->tls() && !shared_->TlsContext()) {
    return Status::InvalidArgument(
        "cannot load the TLS certificate " + o.tls.cert_file + " with its key " + o.tls.key_file +
        (o.tls.client_ca_file.empty() ? std::string()
                                      : " and the client CA " + o.tls.client_ca_file) +
        " (PEM files expected)");
  }
  beast::error_code ec;
  tcp::endpoint endpoint;
  auto address = asio::ip::make_address(o.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, o.port);
  } else {
    tcp::resolver resolver(shared_->io);
    auto found = resolver.resolve(o.host, std::to_string(o.port), ec);
    if (ec || found.empty()) {
      return Status::Unavailable("cannot listen on " + where + ": " +
                                 (ec ? ec.message() : "the host resolves to no address"));
    }
    endpoint = found.begin()->endpoint();
  }
  tcp::acceptor acceptor(shared_->acceptor_strand);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::Unavailable("cannot listen on " + where + ": " + ec.message());
  bound_port_.store(acceptor.local_endpoint().port());
  shared_->acceptor.emplace(std::move(acceptor));
  asio::dispatch(shared_->acceptor_strand, [s = shared_] { Accept(s); });
  return Status::Ok();
}

void GuardedListener::Close() {
  std::vector<std::shared_ptr<ConnectionBase>> open;
  {
    MutexLock lock(shared_->mu);
    if (shared_->closed) return;
    shared_->closed = true;
    for (auto& w : shared_->conns) {
      if (auto c = w.lock()) open.push_back(std::move(c));
    }
  }
  if (shared_->acceptor) {
    std::promise<void> stopped;
    auto done = stopped.get_future();
    asio::dispatch(shared_->acceptor_strand, [s = shared_, &stopped] {
      beast::error_code ec;
      s->acceptor->close(ec);
      s->retry.cancel();
      stopped.set_value();
    });
    done.wait();
  }
  // Connections waiting for a request close now; one whose request is in progress closes once
  // its answer is written (Send sees `closed`), or after a grace if none comes.
  for (auto& c : open) c->Evict();
  open.clear();
  MutexLock lock(shared_->mu);
  const auto grace = Clock::now() + std::chrono::seconds(2);
  while (shared_->open != 0 && Clock::now() < grace) shared_->cv.wait_until(lock, grace);
  for (auto& w : shared_->conns) {
    if (auto c = w.lock()) open.push_back(std::move(c));
  }
  lock.unlock();
  for (auto& c : open) c->Shut();
  open.clear();
  // No handler is called after this; one under way finishes first (bounded).
  lock.lock();
  const auto bound = Clock::now() + std::chrono::seconds(10);
  while (shared_->in_handler != 0 && Clock::now() < bound) shared_->cv.wait_until(lock, bound);
}

size_t GuardedListener::connections() const {
  MutexLock lock(shared_->mu);
  return shared_->open;
}

}  // namespace shoal::http
