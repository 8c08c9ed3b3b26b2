#include "http/http_util.h"

#include <algorithm>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "shoal/common/json.h"

namespace shoal::http {

namespace {

// The request header ReadBody sets on a request whose body it gave up (not part of the wire
// contract; a client that sends it only gets its connection closed after the answer).
constexpr char kCloseMark[] = "X-Shoal-Close-After-Reply";

using RequestImpl = std::shared_ptr<web::http::details::_http_request>;

// How long a body given up has to end by itself before it is completed from here (AbandonBody).
constexpr auto kSettle = std::chrono::milliseconds(1000);

void Complete(const RequestImpl& impl, const std::exception_ptr& error) {
  try {
    impl->_complete(0, error);
  } catch (...) {
  }
}

// One thread for the whole process that gives up bodies past their deadline, and completes
// bodies given up once they had kSettle to end by themselves.
class BodyWatchdog {
 public:
  static BodyWatchdog& Instance() {
    static BodyWatchdog* w = new BodyWatchdog();  // never destroyed: pool threads may use it
    return *w;
  }
  struct Entry {
    std::chrono::steady_clock::time_point at;
    std::weak_ptr<web::http::details::_http_request> req;
    std::exception_ptr settle;  // set: complete the body at `at`; else give it up then
  };
  std::list<Entry>::iterator Watch(const http_request& req, std::chrono::milliseconds timeout) {
    return Add({std::chrono::steady_clock::now() + timeout, req._get_impl(), nullptr});
  }
  void Done(std::list<Entry>::iterator it) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(it);
  }
  // Completes the body kSettle from now; the entry goes once done.
  void Settle(const RequestImpl& impl, std::exception_ptr error) {
    Add({std::chrono::steady_clock::now() + kSettle, impl, std::move(error)});
  }

 private:
  BodyWatchdog() {
    std::thread([this] { Run(); }).detach();
  }
  std::list<Entry>::iterator Add(Entry e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.insert(entries_.end(), std::move(e));
    cv_.notify_one();
    return it;
  }
  void Run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Entry> entries_;
};

// Gives up the body of `impl`. cpprestsdk's connection sends the answer once the body is
// complete and then closes its socket, on whichever pool thread finished the write, while its own
// read of the body may be starting its next socket read on another thread: a read started on a
// socket being closed crashes the process (SIGSEGV in epoll_reactor::start_op). Completing the
// body from here at once does that to a client still sending, so a body is given up in two steps:
//   1. its stream is closed for writing, with an error: the connection's next piece of the body
//      fails to go in, and the connection completes the body and stops reading by itself, as at
//      the end of any body; only then is the answer sent and the socket closed;
//   2. a client that sends nothing more would hold that forever, so kSettle later the body is
//      completed from here. The connection is then waiting on the socket (a piece that arrives
//      now fails to go in and starts no other read), which it may close.
// `unread`: the body was not read at all. If nothing of it is in the stream either and it is not
// chunked (a chunked body's size lines are read without going into the stream), no read of it
// was under way when the stream closed, and step 2 follows at once.
void AbandonBody(const RequestImpl& impl, const std::string& why, bool unread = false) {
  const auto error = std::make_exception_ptr(std::runtime_error(why));
  bool idle = false;
  try {
    const auto& body = impl->outstream();
    body.close(error).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (...) {
      }
    });
    idle = unread && body.streambuf().in_avail() == 0 &&
           !impl->headers().has(web::http::header_names::transfer_encoding);
  } catch (...) {
  }
  if (idle) return Complete(impl, error);
  BodyWatchdog::Instance().Settle(impl, error);
}

void BodyWatchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto next = std::chrono::steady_clock::time_point::max();
    for (const auto& e : entries_) next = std::min(next, e.at);
    cv_.wait_until(lock, next);
    const auto now = std::chrono::steady_clock::now();
    std::vector<RequestImpl> late;
    std::vector<std::pair<RequestImpl, std::exception_ptr>> settle;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->at > now) {
        ++it;
        continue;
      }
      auto impl = it->req.lock();
      if (it->settle) {
        if (impl) settle.emplace_back(std::move(impl), it->settle);
        it = entries_.erase(it);
        continue;
      }
      it->at = std::chrono::steady_clock::time_point::max();  // once; the reader calls Done
      if (impl) late.push_back(std::move(impl));
      ++it;
    }
    lock.unlock();
    for (auto& impl : late) AbandonBody(impl, "body timed out");
    for (auto& [impl, error] : settle) Complete(impl, error);
    lock.lock();
  }
}

// The answer to a body given up carries "Connection: close": the rest of that body is never
// read, so the connection cannot carry another request. Only the thread that answers marks it.
void CloseAfterReply(const http_request& req) {
  try {
    auto& headers = const_cast<http_request&>(req).headers();
    if (!headers.has(kCloseMark)) headers.add(kCloseMark, "1");
  } catch (...) {
  }
}

// A body over the limit is read no further than this and then given up (the connection is closed
// after the answer). Below it, the rest of the body is read and thrown away piece by piece, so
// that a client still sending gets its 413 on a healthy connection instead of a reset.
size_t DiscardLimit(size_t max_bytes) {
  return std::max<size_t>(size_t{16} << 20, 4 * max_bytes);
}

// State of one incremental read: a body without Content-Length, or one being thrown away.
struct PieceRead {
  http_request req;
  size_t max_bytes;      // what may be kept
  size_t discard_limit;  // what may be read at all
  size_t seen = 0;       // bytes read so far
  std::string body;      // kept while seen <= max_bytes
  std::vector<uint8_t> piece;
  std::function<void(std::string)> then;
  std::function<void(const Status&)> on_error;
  std::list<BodyWatchdog::Entry>::iterator watch;
};

Status TooLarge(size_t seen, size_t max_bytes) {
  return Status::TooLarge("the body is " + std::to_string(seen) + " bytes or more; the limit is " +
                          std::to_string(max_bytes) + " (--max-body-bytes)");
}

void ReadMore(std::shared_ptr<PieceRead> r) {
  auto buf = r->req.body().streambuf();
  buf.getn(r->piece.data(), r->piece.size()).then([r](pplx::task<size_t> t) {
    size_t n = 0;
    try {
      n = t.get();
    } catch (const std::exception& e) {
      BodyWatchdog::Instance().Done(r->watch);
      CloseAfterReply(r->req);
      r->on_error(r->seen > r->max_bytes
                      ? TooLarge(r->seen, r->max_bytes)
                      : Status::InvalidArgument(std::string("the body did not arrive whole (") +
                                                e.what() + ")"));
      return;
    }
    if (n == 0) {  // the whole body is in
      BodyWatchdog::Instance().Done(r->watch);
      if (r->seen > r->max_bytes) return r->on_error(TooLarge(r->seen, r->max_bytes));
      r->then(std::move(r->body));
      return;
    }
    r->seen += n;
    if (r->seen > r->discard_limit) {
      BodyWatchdog::Instance().Done(r->watch);
      CloseAfterReply(r->req);
      AbandonBody(r->req._get_impl(), "body too large");
      r->on_error(TooLarge(r->seen, r->max_bytes));
      return;
    }
    if (r->seen <= r->max_bytes) {
      r->body.append(reinterpret_cast<const char*>(r->piece.data()), n);
    } else if (!r->body.empty()) {
      std::string().swap(r->body);  // over the limit: nothing more is kept
    }
    ReadMore(std::move(r));
  });
}

}  // namespace

int HttpCode(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk:
      return 200;
    case Status::Code::kInvalidArgument:
      return 400;
    case Status::Code::kNotFound:
      return 404;
    case Status::Code::kTooLarge:
      return 413;
    case Status::Code::kFailedPrecondition:
    case Status::Code::kConflict:
    case Status::Code::kStaleEpoch:
    case Status::Code::kSequenceUnknown:
    case Status::Code::kDataLost:
      return 409;
    case Status::Code::kUnauthenticated:
      return 401;
    case Status::Code::kUnavailable:
      return 503;
    case Status::Code::kNoSpace:
      return 507;
    default:
      return 500;
  }
}

pplx::task<void> ReplyJson(const http_request& req, int code, std::string body) {
  try {
    web::http::http_response resp(static_cast<web::http::status_code>(code));
    resp.set_body(std::move(body), "application/json");
    if (req.headers().has(kCloseMark)) resp.headers().add("Connection", "close");
    return req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (...) {
        // The client went away; nothing to answer.
      }
    });
  } catch (...) {
    return pplx::task_from_result();
  }
}

int ReplyError(const http_request& req, const Status& status) {
  const int code = HttpCode(status);
  ReplyJson(req, code, json::ErrorBody(status.code_name(), status.message()));
  return code;
}

int ReplyError(const http_request& req, int code, const std::string& error,
               const std::string& reason) {
  ReplyJson(req, code, json::ErrorBody(error, reason));
  return code;
}

std::vector<std::string> PathSegments(const http_request& req) {
  std::vector<std::string> out;
  try {
    for (auto& s : web::uri::split_path(req.relative_uri().path())) {
      out.push_back(web::uri::decode(s));
    }
  } catch (...) {
    out.clear();
  }
  return out;
}

std::map<std::string, std::string> Query(const http_request& req) {
  std::map<std::string, std::string> out;
  try {
    for (auto& [k, v] : web::uri::split_query(req.relative_uri().query())) {
      out[web::uri::decode(k)] = web::uri::decode(v);
    }
  } catch (...) {
  }
  return out;
}

void ReadBody(const http_request& req, size_t max_bytes, std::chrono::milliseconds timeout,
              std::function<void(std::string)> then, std::function<void(const Status&)> on_error) {
  const auto& headers = req.headers();
  const bool declared = headers.has(web::http::header_names::content_length);
  const auto length = declared ? headers.content_length() : 0;
  if (declared && length > DiscardLimit(max_bytes)) {
    CloseAfterReply(req);
    AbandonBody(req._get_impl(), "body too large", /*unread=*/true);
    on_error(Status::TooLarge("the body is " + std::to_string(length) +
                              " bytes; the limit is " + std::to_string(max_bytes) +
                              " (--max-body-bytes); it was not read"));
    return;
  }
  auto watch = BodyWatchdog::Instance().Watch(req, timeout);
  if (declared && length <= max_bytes) {
    // The connection reads exactly `length` bytes, within the limit.
    auto request = req;  // a handle; keeps the request alive in the continuation
    request.extract_vector().then([request, watch, then = std::move(then),
                                   on_error = std::move(on_error),
                                   timeout](pplx::task<std::vector<unsigned char>> t) {
      BodyWatchdog::Instance().Done(watch);
      std::vector<unsigned char> bytes;
      try {
        bytes = t.get();
      } catch (const std::exception& e) {
        CloseAfterReply(request);
        on_error(Status::InvalidArgument(
            std::string("the body did not arrive whole within ") +
            std::to_string(timeout.count()) + " ms of its headers (" + e.what() + ")"));
        return;
      }
      then(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    });
    return;
  }
  // Chunked, or declared over the limit but within what is thrown away: piece by piece.
  auto r = std::make_shared<PieceRead>();
  r->req = req;
  r->max_bytes = max_bytes;
  r->discard_limit = DiscardLimit(max_bytes);
  r->piece.resize(64 << 10);
  r->then = std::move(then);
  r->on_error = std::move(on_error);
  r->watch = watch;
  ReadMore(std::move(r));
}

Status OpenListener(web::http::experimental::listener::http_listener& listener) {
  try {
    listener.open().wait();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot listen on " + listener.uri().to_string() + ": " + e.what());
  }
}

}  // namespace shoal::http
