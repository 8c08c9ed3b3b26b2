#include "support/fake_kube/test_kubelet.h"

// clang-format off
#include <utility>  // std::exchange, before cpprestsdk's headers (boost::asio needs it)
// clang-format on
#include <arpa/inet.h>
#include <cpprest/asyncrt_utils.h>
#include <cpprest/json.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <random>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "shoal/control/process.h"
#include "support/fake_kube/fake_api_server.h"
#include "support/http_test_client.h"

namespace shoal::testing {

const TestContainerState* TestPodState::container(const std::string& container_name) const {
  for (const auto& c : containers) {
    if (c.name == container_name) return &c;
  }
  return nullptr;
}

namespace {

using web::json::value;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;
namespace fs = std::filesystem;

// The container that Kubernetes would run as a native sidecar: stopped after the others.
constexpr const char* kSidecarContainer = "shoal-sidecar";

// ------------------------------------------------------------------------------------------
// JSON helpers

const value* Field(const value& v, const std::string& key) {
  if (!v.is_object()) return nullptr;
  const auto& obj = v.as_object();
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &it->second;
}

const value* AtPath(const value& root, std::initializer_list<const char*> path) {
  const value* node = &root;
  for (const char* seg : path) {
    node = Field(*node, seg);
    if (node == nullptr) return nullptr;
  }
  return node;
}

std::string Str(const value& root, std::initializer_list<const char*> path) {
  const value* v = AtPath(root, path);
  return v != nullptr && v->is_string() ? v->as_string() : "";
}

std::optional<int64_t> Int(const value& root, std::initializer_list<const char*> path) {
  const value* v = AtPath(root, path);
  if (v == nullptr || !v->is_number() || !v->as_number().is_int64()) return std::nullopt;
  return v->as_number().to_int64();
}

const web::json::array* Array(const value& root, std::initializer_list<const char*> path) {
  const value* v = AtPath(root, path);
  return v != nullptr && v->is_array() ? &v->as_array() : nullptr;
}

std::vector<std::string> Strings(const value& root, std::initializer_list<const char*> path) {
  std::vector<std::string> out;
  if (const auto* a = Array(root, path)) {
    for (const auto& v : *a) out.push_back(v.is_string() ? v.as_string() : v.serialize());
  }
  return out;
}

std::optional<value> Parse(const std::string& text) {
  std::error_code ec;
  value v = value::parse(text, ec);
  if (ec) return std::nullopt;
  return v;
}

std::string Rfc3339Now() {
  const std::time_t secs = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A Go duration as the metrics API writes a window ("1s", "250ms").
std::string GoDuration(milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// ------------------------------------------------------------------------------------------
// What a container runs: $(VAR) expansion and the emulated mount namespace.

// Kubernetes' expansion (third_party/forked/golang/expansion): $(NAME) is the variable's value
// when it is defined and stays as written otherwise; $$ is a literal $.
std::string Expand(const std::string& in, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '$' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    if (in[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (in[i + 1] == '(') {
      const size_t close = in.find(')', i + 2);
      if (close == std::string::npos) {
        out += in.substr(i);
        break;
      }
      auto it = vars.find(in.substr(i + 2, close - i - 2));
      out += it != vars.end() ? it->second : in.substr(i, close - i + 1);
      i = close;
    } else {
      out += '$';
    }
  }
  return out;
}

struct Mount {
  std::string path;  // inside the "container", without a trailing '/'
  std::string host;  // the directory it stands for
};

bool PathChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

// Replaces every mount path in `s` that starts and ends at a path boundary ("/data" in
// "--dir=/data/x" but not in "/database" or "/x/data") with its host directory. `mounts` are
// sorted longest path first, so a nested mount wins over its parent.
std::string RewritePaths(const std::string& s, const std::vector<Mount>& mounts) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    bool replaced = false;
    if (s[i] == '/' && (i == 0 || (!PathChar(s[i - 1]) && s[i - 1] != '/'))) {
      for (const auto& m : mounts) {
        if (s.compare(i, m.path.size(), m.path) != 0) continue;
        const size_t end = i + m.path.size();
        if (end != s.size() && PathChar(s[end])) continue;
        out += m.host;
        i = end;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += s[i++];
  }
  return out;
}

// Network namespaces, emulated like mounts: every pod has its own address on the host's
// loopback, so a pod's own "localhost", "127.0.0.1" and the wildcard "0.0.0.0" (all of the pod's
// addresses) become the pod's IP wherever they stand as a host in argv and env values.
std::string RewriteHosts(const std::string& s, const std::string& pod_ip) {
  if (pod_ip.empty()) return s;
  auto host_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  };
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    bool replaced = false;
    if (i == 0 || !host_char(s[i - 1])) {
      for (const char* host : {"localhost", "127.0.0.1", "0.0.0.0"}) {
        const size_t n = std::strlen(host);
        if (s.compare(i, n, host) != 0) continue;
        if (i + n != s.size() && host_char(s[i + n])) continue;
        out += pod_ip;
        i += n;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += s[i++];
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// Processes

// Starts `argv` (argv[0] a path) in a session of its own with exactly `env`, stdin from
// /dev/null, stdout and stderr appended to `log_path`, in `cwd` when given. The child gets
// SIGKILL when the calling thread ends (PR_SET_PDEATHSIG), so a crashed test leaves no pod
// behind: call it from a thread that outlives the process (the kubelet's own threads).
// fork and exec rather than posix_spawn, which has no parent-death signal; between the two the
// child makes only async-signal-safe calls on what was prepared before the fork.
// `binds` (host directory, path in the container; the path must exist) are bind-mounted in a
// mount namespace of the child's own, invisible to every other process.
using BindMounts = std::vector<std::pair<std::string, std::string>>;
Result<pid_t> SpawnProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, const std::string& log_path,
                           const std::string& cwd, const BindMounts& binds = {},
                           const std::string& hostname = "") {
  if (argv.empty()) return Status::InvalidArgument("no program to run");
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::IoError("opening " + log_path + ": " + std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (null_fd < 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return Status::IoError(std::string("spawning: ") + std::strerror(e));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2}) {
      ::sigaction(sig, &dfl, nullptr);
    }
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    const int w = err_pipe[1];
    // Nothing of the test process (sockets, files) leaks into the pod, except the error pipe,
    // which exec closes.
    if (w > 3) ::close_range(3, static_cast<unsigned>(w - 1), 0);
    ::close_range(static_cast<unsigned>(w + 1), ~0u, 0);
    if (!hostname.empty() &&
        (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(hostname.data(), hostname.size()) != 0)) {
      const int e = errno;
      (void)!::write(w, &e, sizeof e);
      ::_exit(127);
    }
    if (!binds.empty()) {
      // A private copy of the mount table, so the bind mounts below stay in this process.
      if (::unshare(CLONE_NEWNS) != 0 ||
          ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        const int e = errno;
        (void)!::write(w, &e, sizeof e);
        ::_exit(127);
      }
      for (const auto& [host, target] : binds) {
        if (::mount(host.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
          const int e = errno;
          (void)!::write(w, &e, sizeof e);
          ::_exit(127);
        }
      }
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      const int e = errno;
      (void)!::write(w, &e, sizeof e);
      ::_exit(127);
    }
    ::execve(args[0], args.data(), envp.data());
    const int e = errno;
    (void)!::write(w, &e, sizeof e);
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(log_fd);
  ::close(null_fd);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(err_pipe[0]);
    return Status::IoError(std::string("fork: ") + std::strerror(fork_errno));
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_pipe[0], &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  ::close(err_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    ::waitpid(pid, nullptr, 0);
    return Status::IoError("exec " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;
}

// Reaps `pid` if it exited: true with its exit code (128+signal when killed).
bool Reaped(pid_t pid, int* exit_code) {
  int status = 0;
  const pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == 0) return false;
  if (r < 0) {
    *exit_code = -1;
    return errno != EINTR;
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

// One HTTP GET (readinessProbe httpGet): success is a status in [200, 400) within `timeout`.
bool HttpProbe(const std::string& host, int port, const std::string& path, milliseconds timeout) {
  const auto deadline = Steady::now() + timeout;
  auto left = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<milliseconds>(deadline - Steady::now()).count()));
  };
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1;
  if (ok && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ok = errno == EINPROGRESS;
    if (ok) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      ok = ::poll(&p, 1, left()) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
           err == 0;
    }
  }
  if (ok && !path.empty()) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + host + ":" +
                            std::to_string(port) +
                            "\r\nUser-Agent: kube-probe/1.30\r\nAccept: */*\r\n"
                            "Connection: close\r\n\r\n";
    size_t sent = 0;
    while (ok && sent < req.size()) {
      pollfd p{fd, POLLOUT, 0};
      ok = ::poll(&p, 1, left()) == 1;
      const ssize_t n = ok ? ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL) : -1;
      ok = n > 0;
      if (ok) sent += static_cast<size_t>(n);
    }
    std::string head;
    while (ok && head.find("\r\n") == std::string::npos) {
      pollfd p{fd, POLLIN, 0};
      char buf[512];
      ok = ::poll(&p, 1, left()) == 1;
      const ssize_t n = ok ? ::recv(fd, buf, sizeof buf, 0) : -1;
      ok = n > 0;
      if (ok) head.append(buf, static_cast<size_t>(n));
    }
    int code = 0;
    ok =
        ok && std::sscanf(head.c_str(), "HTTP/%*d.%*d %d", &code) == 1 && code >= 200 && code < 400;
  }
  ::close(fd);
  return ok;
}

// RSS of a process in KiB, from /proc/<pid>/status.
std::optional<uint64_t> RssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return std::nullopt;
}

std::string Base64Decode(const std::string& text, bool* ok) {
  try {
    const auto bytes = utility::conversions::from_base64(text);
    *ok = true;
    return std::string(bytes.begin(), bytes.end());
  } catch (...) {
    *ok = false;
    return "";
  }
}

// Writes `content` to `path` if it differs, through a rename, as the kubelet's atomic writer.
void WriteIfChanged(const std::string& path, const std::string& content) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream old;
  if (in) old << in.rdbuf();
  if (in && old.str() == content) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

std::string ShortHash(const std::string& s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010llx",
                static_cast<unsigned long long>(std::hash<std::string>{}(s)&0xffffffffffULL));
  return buf;
}

// The ordinal of `pod` when it is named "<sts>-<N>".
std::optional<int64_t> Ordinal(const std::string& sts, const std::string& pod) {
  if (pod.size() <= sts.size() + 1 || pod.compare(0, sts.size(), sts) != 0 ||
      pod[sts.size()] != '-') {
    return std::nullopt;
  }
  const std::string digits = pod.substr(sts.size() + 1);
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// The uid and kind of the controlling owner reference, if any.
std::pair<std::string, std::string> ControllerRef(const value& obj) {
  if (const auto* refs = Array(obj, {"metadata", "ownerReferences"})) {
    for (const auto& r : *refs) {
      const value* c = Field(r, "controller");
      if (c != nullptr && c->is_boolean() && c->as_bool()) {
        return {Str(r, {"uid"}), Str(r, {"kind"})};
      }
    }
  }
  return {"", ""};
}

// Where in-cluster clients read their ServiceAccount's token (client-go rest.InClusterConfig).
constexpr const char* kServiceAccountMount = "/var/run/secrets/kubernetes.io/serviceaccount";

// A controlling ownerReference to (kind, name, uid) of apps/v1.
value ControllerOf(const std::string& kind, const std::string& name, const std::string& uid) {
  value ref = value::object();
  ref["apiVersion"] = value::string("apps/v1");
  ref["kind"] = value::string(kind);
  ref["name"] = value::string(name);
  ref["uid"] = value::string(uid);
  ref["controller"] = value::boolean(true);
  ref["blockOwnerDeletion"] = value::boolean(true);
  return ref;
}

// A new object for a controller to create: apiVersion, kind, metadata (name, namespace,
// labels) and its controlling ownerReference `owner`.
value OwnedObject(const char* api_version, const char* kind, const std::string& name,
                  const std::string& ns, const value& labels, const value& owner) {
  value obj = value::object();
  obj["apiVersion"] = value::string(api_version);
  obj["kind"] = value::string(kind);
  obj["metadata"]["name"] = value::string(name);
  obj["metadata"]["namespace"] = value::string(ns);
  obj["metadata"]["labels"] = labels;
  obj["metadata"]["ownerReferences"] = value::array({owner});
  return obj;
}

// A controller's new status for an object: starts from the stored one; each field is set only
// when it differs, so `changed` says whether a write is due.
struct StatusUpdate {
  explicit StatusUpdate(const value& obj) {
    const value* old = Field(obj, "status");
    status = old != nullptr && old->is_object() ? *old : value::object();
  }
  void SetInt(const char* k, int64_t v) {
    if (Int(status, {k}) != v) {
      status[k] = value::number(v);
      changed = true;
    }
  }
  void SetStr(const char* k, const std::string& v) {
    if (Str(status, {k}) != v) {
      status[k] = value::string(v);
      changed = true;
    }
  }
  // A condition of that type, status and reason; its lastTransitionTime moves only when the
  // status flips.
  void SetCondition(const char* type, bool ok, const char* reason, const std::string& message) {
    const std::string want = ok ? "True" : "False";
    std::vector<value> conds;
    std::string since = Rfc3339Now();
    if (const auto* cs = Array(status, {"conditions"})) {
      for (const auto& c : *cs) {
        if (Str(c, {"type"}) != type) {
          conds.push_back(c);
          continue;
        }
        if (Str(c, {"status"}) == want && Str(c, {"reason"}) == reason) return;
        if (Str(c, {"status"}) == want) since = Str(c, {"lastTransitionTime"});
      }
    }
    value c = value::object();
    c["type"] = value::string(type);
    c["status"] = value::string(want);
    c["reason"] = value::string(reason);
    c["message"] = value::string(message);
    c["lastTransitionTime"] = value::string(since);
    c["lastUpdateTime"] = value::string(Rfc3339Now());
    conds.push_back(c);
    status["conditions"] = value::array(conds);
    changed = true;
  }
  value status;
  bool changed = false;
};

bool PodReady(const value& pod) {
  if (const auto* conds = Array(pod, {"status", "conditions"})) {
    for (const auto& c : *conds) {
      if (Str(c, {"type"}) == "Ready") return Str(c, {"status"}) == "True";
    }
  }
  return false;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// The kubelet's state

// The state behind TestKubelet. The loop thread lists, controls, supervises, probes and writes
// status; terminator threads stop one pod each. mu_ guards the pods and what the hooks read;
// HTTP calls and probes run without it.
class TestKubelet::Impl {
 public:
  explicit Impl(TestKubeletOptions options) : opts_(std::move(options)) {}

  Status Start();
  void Stop();

 private:
  friend class TestKubelet;

  struct Probe {
    bool http = false;  // httpGet; else tcpSocket
    std::string path;
    int port = 0;
    milliseconds period{10000}, initial_delay{0}, timeout{1000};
    int success_threshold = 1, failure_threshold = 3;
  };

  struct Container {
    std::string name;
    value spec;
    std::string binary;  // "" when the image is unknown
    pid_t pid = -1;
    int restarts = 0;
    bool ever_started = false;
    bool ready = false;
    std::string waiting_reason = "ContainerCreating", waiting_message;
    std::string started_at;
    Steady::time_point started_steady{};
    std::optional<value> last_terminated;
    Steady::time_point next_start{};
    milliseconds backoff{0};
    std::optional<Probe> probe;
    Steady::time_point next_probe{};
    int probe_successes = 0, probe_failures = 0;
    // metrics-server's previous sample: CPU time and when.
    std::chrono::nanoseconds cpu_prev{0};
    Steady::time_point cpu_prev_at{};
  };

  enum class Reason { kDeleted, kScaledDown, kOwnerDeleted };

  struct Volume {
    std::string kind;  // persistentVolumeClaim, secret, emptyDir, hostPath
    std::string host;
    std::string source;  // the claim or the Secret's name
    bool optional = false;
  };

  struct Pod {
    std::string ns, name, uid, ip, dir;
    value object;
    std::map<std::string, Volume> volumes;
    bool volumes_ready = false;
    std::vector<Container> containers;
    std::string start_time;
    bool cond_ready = false;
    std::string cond_ready_since;
    std::string scheduled_since;
    std::string last_status;  // the status body last written
    bool terminating = false;
    std::vector<std::string> claims_to_delete;
    bool metrics_seeded = false;
    // The projected ServiceAccount volume (token, ca.crt, namespace), "" when the pod has none.
    std::string sa_dir;
  };

  struct Terminator {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };

  // --- The loop
  void Loop();
  // Lists every served namespace and acts as the StatefulSet controller and the kubelet.
  void SyncApi();
  void SyncNamespace(const std::string& ns);
  void ControlStatefulSets(const std::string& ns, const std::vector<value>& sets,
                           std::vector<value>& pods, const std::set<std::string>& replicasets);
  // The Deployment and ReplicaSet controllers. Returns the uids of the ReplicaSets that stay,
  // for the garbage collector.
  std::set<std::string> ControlDeployments(const std::string& ns,
                                           const std::vector<value>& deployments,
                                           const std::vector<value>& replicasets,
                                           std::vector<value>& pods);
  // PUT `object_path`/status with the update's status, when something changed.
  void PutStatus(const std::string& object_path, const value& obj, const StatusUpdate& u);
  // Removes a pod a controller owns: terminates it here, or deletes the object.
  void RemovePod(const std::string& ns, const value& pod, const std::string& why);
  // The ServiceAccount controller's "default" account and the pods' tokens (no lock held).
  void SyncServiceAccounts(const std::string& ns, const std::vector<value>& accounts,
                           const std::vector<value>& pods);
  bool InCluster() const { return !opts_.api_service_host.empty(); }
  void RunPods(const std::string& ns, const std::vector<value>& pods);
  // Reaps and restarts containers; returns the earliest time something is due.
  Steady::time_point Supervise();
  void RunProbes();
  void WriteStatuses();
  void SeedMetrics();

  // --- Pods (mu_ held)
  void Admit(const std::string& ns, const value& obj);
  bool SetUpVolumes(Pod& pod);
  void SyncSecretVolumes(Pod& pod);
  void StartContainer(Pod& pod, Container& c, Steady::time_point now);
  struct Config {
    std::vector<std::string> argv, env;
    std::string cwd;
    BindMounts binds;
    std::string hostname;  // in-cluster: the pod's own (a UTS namespace), as gethostname sees it
    std::string error_reason, error_message;
  };
  // "<svc>.<ns>.svc[.cluster.local][:port]" in `s` resolved to a Ready endpoint (mu_ held).
  std::string RewriteServices(const std::string& s) const;
  Config BuildConfig(const Pod& pod, const Container& c,
                     const std::vector<std::string>* command_override) const;
  std::string FieldRef(const Pod& pod, const std::string& path) const;
  // The pod's status as the kubelet reports it; moves the Ready transition time on a flip.
  value StatusOf(Pod& pod);
  void BeginTermination(const std::shared_ptr<Pod>& pod, std::vector<std::string> claims);
  void Terminate(std::shared_ptr<Pod> pod);
  // Polls until every pid in `pids` was reaped, or the deadline or Stop(). Reaped ones are set
  // to -1.
  void WaitGone(std::vector<pid_t*> pids, Steady::time_point deadline,
                std::unique_lock<std::mutex>& lock);

  // --- API
  HttpResponse Api(const std::string& method, const std::string& path,
                   const std::string& body = "");
  std::optional<std::vector<value>> ListItems(const std::string& path);
  void Log(const std::string& line);
  std::string PodDir(const std::string& ns, const std::string& name) const;
  std::string ClaimDir(const std::string& ns, const std::string& claim) const;
  std::string Key(const std::string& ns, const std::string& name) const { return ns + "/" + name; }
  std::string Ns(const std::string& ns) const { return ns.empty() ? opts_.namespaces[0] : ns; }

  TestKubeletOptions opts_;
  std::unique_ptr<HttpTestClient> http_;
  std::thread thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;                // a sync ended, a pod ended, Stop()
  bool started_ = false;                              // guarded by mu_
  bool stopping_ = false;                             // guarded by mu_
  uint64_t syncs_ = 0;                                // guarded by mu_
  std::map<std::string, std::shared_ptr<Pod>> pods_;  // guarded by mu_: by ns/name
  std::map<std::string, int> ips_;                    // guarded by mu_: ns/name -> last octet
  int next_ip_ = 2;                                   // guarded by mu_
  std::set<std::string> tombstones_;                  // guarded by mu_: uids of pods ended
  // Guarded by mu_: claims to delete with a pod that a scale down removed before it was admitted
  // here, by the pod's uid. RunPods can admit it between the scale down's look and its DELETE
  // (creating its claim again); when that pod then ends as deleted, its claims go with it, as
  // the StatefulSet controller's whenScaled: Delete asks.
  std::map<std::string, std::vector<std::string>> claims_of_removed_;
  // guarded by mu_: ns -> the Services of the last list.
  std::map<std::string, std::vector<value>> services_;
  // guarded by mu_: pod uid -> its ServiceAccount token (TokenRequest), once issued.
  std::map<std::string, std::string> tokens_;
  std::mt19937_64 names_rng_{7};  // the loop's: Deployment pods' name suffixes
  // guarded by mu_: ns -> Secret name -> key -> decoded value, from the last list.
  std::map<std::string, std::map<std::string, std::map<std::string, std::string>>> secrets_;
  std::vector<Terminator> terminators_;  // guarded by mu_
  std::mutex log_mu_;
  std::ofstream log_;  // guarded by log_mu_

  // The loop's own state (no lock: one thread).
  std::map<std::string, value> sts_seen_;  // uid -> the StatefulSet as last listed
  Steady::time_point next_list_{};
  Steady::time_point next_metrics_{};
};

std::string TestKubelet::Impl::PodDir(const std::string& ns, const std::string& name) const {
  return opts_.work_dir + "/pods/" + (ns == opts_.namespaces[0] ? "" : ns + "/") + name;
}

std::string TestKubelet::Impl::ClaimDir(const std::string& ns, const std::string& claim) const {
  return opts_.work_dir + "/pvc/" + (ns == opts_.namespaces[0] ? "" : ns + "/") + claim;
}

void TestKubelet::Impl::Log(const std::string& line) {
  std::lock_guard<std::mutex> lock(log_mu_);
  if (log_.is_open()) log_ << Rfc3339Now() << " " << line << std::endl;
}

HttpResponse TestKubelet::Impl::Api(const std::string& method, const std::string& path,
                                    const std::string& body) {
  HttpRequestOptions o;
  o.headers["Authorization"] = "Bearer " + opts_.admin_token;
  if (method == "PATCH") o.content_type = "application/merge-patch+json";
  HttpResponse r = http_->Send(method, path, body, o);
  if (r.status >= 300 && !(method == "DELETE" && r.status == 404)) {
    Log(method + " " + path + ": " + r.Describe());
  }
  return r;
}

std::optional<std::vector<value>> TestKubelet::Impl::ListItems(const std::string& path) {
  HttpResponse r = Api("GET", path);
  if (r.status != 200) return std::nullopt;
  auto list = Parse(r.body);
  if (!list) return std::nullopt;
  std::vector<value> out;
  if (const auto* items = Array(*list, {"items"})) out.assign(items->begin(), items->end());
  return out;
}

Status TestKubelet::Impl::Start() {
  if (opts_.api_url.empty() && opts_.api != nullptr) opts_.api_url = opts_.api->base_url();
  if (opts_.api_url.empty()) return Status::InvalidArgument("TestKubelet: no API server");
  if (opts_.work_dir.empty()) return Status::InvalidArgument("TestKubelet: no work_dir");
  if (opts_.namespaces.empty()) return Status::InvalidArgument("TestKubelet: no namespace");
  std::error_code ec;
  fs::create_directories(opts_.work_dir + "/pods", ec);
  fs::create_directories(opts_.work_dir + "/pvc", ec);
  if (ec) return Status::IoError("creating " + opts_.work_dir + ": " + ec.message());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return Status::FailedPrecondition("TestKubelet: already started");
    started_ = true;
  }
  log_.open(opts_.work_dir + "/kubelet.log", std::ios::app);
  http_ = std::make_unique<HttpTestClient>(opts_.api_url, std::chrono::seconds(10));
  // The node, as a kubelet registers it (an existing one is kept).
  {
    value node = value::object();
    node["apiVersion"] = value::string("v1");
    node["kind"] = value::string("Node");
    node["metadata"]["name"] = value::string(opts_.node_name);
    node["metadata"]["labels"]["kubernetes.io/hostname"] = value::string(opts_.node_name);
    if (!opts_.zone.empty()) {
      node["metadata"]["labels"]["topology.kubernetes.io/zone"] = value::string(opts_.zone);
    }
    (void)Api("POST", "/api/v1/nodes", node.serialize());
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void TestKubelet::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<Terminator> terminators;
  {
    std::lock_guard<std::mutex> lock(mu_);
    terminators.swap(terminators_);
  }
  for (auto& t : terminators) t.thread.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, pod] : pods_) {
    for (auto& c : pod->containers) {
      if (c.pid <= 0) continue;
      ::kill(-c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      c.pid = -1;
    }
  }
  pods_.clear();
}

// ------------------------------------------------------------------------------------------
// The loop: list and act every poll interval; between lists, restarts and probes when due.

void TestKubelet::Impl::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const auto now = Steady::now();
    if (now >= next_list_) {
      SyncApi();
      next_list_ = Steady::now() + opts_.poll_interval;
    }
    Steady::time_point due;
    {
      std::lock_guard<std::mutex> l(mu_);
      due = Supervise();
    }
    RunProbes();
    WriteStatuses();
    if (opts_.api != nullptr && Steady::now() >= next_metrics_) {
      SeedMetrics();
      next_metrics_ = Steady::now() + opts_.metrics_interval;
    }
    lock.lock();
    // Terminations that ended are joined here; the rest at Stop().
    for (auto it = terminators_.begin(); it != terminators_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = terminators_.erase(it);
      } else {
        ++it;
      }
    }
    ++syncs_;
    cv_.notify_all();
    auto wake = std::min(due, next_list_);
    if (opts_.api != nullptr) wake = std::min(wake, next_metrics_);
    cv_.wait_until(lock, std::max(wake, Steady::now() + milliseconds(2)),
                   [&] { return stopping_; });
  }
}

void TestKubelet::Impl::SyncApi() {
  for (const auto& ns : opts_.namespaces) SyncNamespace(ns);
}

void TestKubelet::Impl::SyncNamespace(const std::string& ns) {
  // Pods before StatefulSets: a pod whose owner is missing from the later list was orphaned,
  // never created by an owner the list has not caught up with.
  auto pods = ListItems("/api/v1/namespaces/" + ns + "/pods");
  auto sets = ListItems("/apis/apps/v1/namespaces/" + ns + "/statefulsets");
  auto secrets = ListItems("/api/v1/namespaces/" + ns + "/secrets");
  auto deployments = ListItems("/apis/apps/v1/namespaces/" + ns + "/deployments");
  auto replicasets = ListItems("/apis/apps/v1/namespaces/" + ns + "/replicasets");
  auto services = ListItems("/api/v1/namespaces/" + ns + "/services");
  if (!pods || !sets || !secrets || !deployments || !replicasets || !services) return;
  if (InCluster()) {
    if (auto accounts = ListItems("/api/v1/namespaces/" + ns + "/serviceaccounts")) {
      SyncServiceAccounts(ns, *accounts, *pods);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    services_[ns] = *services;
    auto& by_name = secrets_[ns];
    by_name.clear();
    for (const auto& s : *secrets) {
      auto& data = by_name[Str(s, {"metadata", "name"})];
      if (const value* d = Field(s, "data"); d != nullptr && d->is_object()) {
        for (const auto& [k, v] : d->as_object()) {
          bool ok = false;
          const std::string decoded = Base64Decode(v.is_string() ? v.as_string() : "", &ok);
          if (ok) data[k] = decoded;
        }
      }
      if (const value* d = Field(s, "stringData"); d != nullptr && d->is_object()) {
        for (const auto& [k, v] : d->as_object()) data[k] = v.is_string() ? v.as_string() : "";
      }
    }
    // Objects of pods that ended here are gone or about to be: not seen.
    pods->erase(std::remove_if(pods->begin(), pods->end(),
                               [&](const value& p) {
                                 return tombstones_.count(Str(p, {"metadata", "uid"})) != 0;
                               }),
                pods->end());
  }
  // The scheduler: a pod nobody placed is bound to this node (the Binding subresource).
  for (auto& p : *pods) {
    if (!Str(p, {"spec", "nodeName"}).empty() ||
        !Str(p, {"metadata", "deletionTimestamp"}).empty()) {
      continue;
    }
    const std::string scheduler = Str(p, {"spec", "schedulerName"});
    if (!scheduler.empty() && scheduler != "default-scheduler") continue;
    const std::string pname = Str(p, {"metadata", "name"});
    value binding = value::object();
    binding["apiVersion"] = value::string("v1");
    binding["kind"] = value::string("Binding");
    value meta = value::object();
    meta["name"] = value::string(pname);
    binding["metadata"] = meta;
    value target = value::object();
    target["kind"] = value::string("Node");
    target["name"] = value::string(opts_.node_name);
    binding["target"] = target;
    HttpResponse r = Api("POST", "/api/v1/namespaces/" + ns + "/pods/" + pname + "/binding",
                         binding.serialize());
    if (r.status == 201) {
      Log("scheduler: bound pod " + ns + "/" + pname + " to " + opts_.node_name);
      p["spec"]["nodeName"] = value::string(opts_.node_name);
    }
  }
  const std::set<std::string> live_sets = ControlDeployments(ns, *deployments, *replicasets, *pods);
  ControlStatefulSets(ns, *sets, *pods, live_sets);
  RunPods(ns, *pods);
}

// ------------------------------------------------------------------------------------------
// The StatefulSet controller

void TestKubelet::Impl::ControlStatefulSets(const std::string& ns, const std::vector<value>& sets,
                                            std::vector<value>& pods,
                                            const std::set<std::string>& replicasets) {
  std::set<std::string> live;
  // Pods created now join `pods` at the end (`owned` points into it), for the kubelet's part.
  std::vector<value> created;
  for (const auto& sts : sets) {
    const std::string name = Str(sts, {"metadata", "name"});
    const std::string uid = Str(sts, {"metadata", "uid"});
    live.insert(uid);
    sts_seen_[uid] = sts;
    const int64_t replicas = Int(sts, {"spec", "replicas"}).value_or(1);
    const int64_t start = Int(sts, {"spec", "ordinals", "start"}).value_or(0);
    const bool parallel = Str(sts, {"spec", "podManagementPolicy"}) == "Parallel";
    const value* tmpl = AtPath(sts, {"spec", "template"});
    const value templ = tmpl != nullptr ? *tmpl : value::object();
    const std::string revision = name + "-" + ShortHash(templ.serialize());
    std::vector<std::string> claim_templates;
    if (const auto* vcts = Array(sts, {"spec", "volumeClaimTemplates"})) {
      for (const auto& v : *vcts) claim_templates.push_back(Str(v, {"metadata", "name"}));
    }

    // The pods it owns, by ordinal, and every pod name taken in the namespace.
    std::map<int64_t, const value*> owned;
    std::set<std::string> taken;
    for (const auto& p : pods) {
      const std::string pname = Str(p, {"metadata", "name"});
      taken.insert(pname);
      if (ControllerRef(p).first != uid) continue;
      if (auto ord = Ordinal(name, pname)) owned[*ord] = &p;
    }
    std::set<int64_t> terminating;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [ord, p] : owned) {
        auto it = pods_.find(Key(ns, Str(*p, {"metadata", "name"})));
        if (it != pods_.end() && it->second->terminating) terminating.insert(ord);
      }
    }

    // Scale up: Parallel creates every missing ordinal; OrderedReady the lowest one, once
    // every lower pod is Ready.
    for (int64_t ord = start; ord < start + replicas; ++ord) {
      const std::string pname = name + "-" + std::to_string(ord);
      auto it = owned.find(ord);
      if (it != owned.end()) {
        if (!parallel && (!PodReady(*it->second) || terminating.count(ord) != 0)) break;
        continue;
      }
      if (taken.count(pname) != 0) {
        if (!parallel) break;  // an old pod of that name is still going away
        continue;
      }
      value labels = value::object();
      if (const value* l = AtPath(templ, {"metadata", "labels"}); l != nullptr && l->is_object()) {
        labels = *l;
      }
      labels["statefulset.kubernetes.io/pod-name"] = value::string(pname);
      labels["apps.kubernetes.io/pod-index"] = value::string(std::to_string(ord));
      labels["controller-revision-hash"] = value::string(revision);
      value pod = OwnedObject("v1", "Pod", pname, ns, labels, ControllerOf("StatefulSet", name, uid));
      if (const value* a = AtPath(templ, {"metadata", "annotations"})) {
        pod["metadata"]["annotations"] = *a;
      }
      value spec = Field(templ, "spec") != nullptr ? *Field(templ, "spec") : value::object();
      spec["nodeName"] = value::string(opts_.node_name);
      spec["hostname"] = value::string(pname);
      if (!Str(sts, {"spec", "serviceName"}).empty()) {
        spec["subdomain"] = value::string(Str(sts, {"spec", "serviceName"}));
      }
      // Each claim template becomes a volume of that name on the pod's own claim.
      std::vector<value> volumes;
      if (const auto* vs = Array(spec, {"volumes"})) {
        for (const auto& v : *vs) {
          const std::string vname = Str(v, {"name"});
          if (std::find(claim_templates.begin(), claim_templates.end(), vname) ==
              claim_templates.end()) {
            volumes.push_back(v);
          }
        }
      }
      for (const auto& t : claim_templates) {
        value v = value::object();
        v["name"] = value::string(t);
        value pvc = value::object();
        pvc["claimName"] = value::string(t + "-" + pname);
        v["persistentVolumeClaim"] = pvc;
        volumes.push_back(v);
      }
      if (!volumes.empty()) spec["volumes"] = value::array(volumes);
      pod["spec"] = spec;
      HttpResponse r = Api("POST", "/api/v1/namespaces/" + ns + "/pods", pod.serialize());
      if (r.status == 201) {
        Log("statefulset " + ns + "/" + name + ": created pod " + pname);
        if (auto c = Parse(r.body)) created.push_back(*c);
      }
      if (!parallel) break;
    }

    // Scale down: the highest ordinals first; OrderedReady one at a time.
    std::vector<int64_t> surplus;
    for (auto it = owned.rbegin(); it != owned.rend(); ++it) {
      if (it->first < start || it->first >= start + replicas) surplus.push_back(it->first);
    }
    if (!parallel && !terminating.empty()) surplus.clear();
    if (!parallel && surplus.size() > 1) surplus.resize(1);
    const std::string when_scaled =
        Str(sts, {"spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"});
    for (int64_t ord : surplus) {
      if (terminating.count(ord) != 0) continue;
      const std::string pname = name + "-" + std::to_string(ord);
      std::vector<std::string> claims;
      if (when_scaled == "Delete") {
        for (const auto& t : claim_templates) claims.push_back(t + "-" + pname);
      }
      std::shared_ptr<Pod> local;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = pods_.find(Key(ns, pname));
        if (it != pods_.end() && it->second->uid == Str(*owned[ord], {"metadata", "uid"})) {
          local = it->second;
          Log("statefulset " + ns + "/" + name + ": scaling down, removing pod " + pname);
          BeginTermination(local, claims);
        }
      }
      if (!local) {
        // Not running here (not admitted yet): only the object and the claims go.
        if (!claims.empty()) {
          std::lock_guard<std::mutex> lock(mu_);
          claims_of_removed_[Str(*owned[ord], {"metadata", "uid"})] = claims;
        }
        Api("DELETE", "/api/v1/namespaces/" + ns + "/pods/" + pname);
        std::error_code ec;
        for (const auto& c : claims) fs::remove_all(ClaimDir(ns, c), ec);
      }
    }

    // Status, written when one of its fields changed.
    int64_t count = 0, ready = 0, current = 0, updated = 0;
    const value* old_status = Field(sts, "status");
    std::string current_revision = old_status ? Str(*old_status, {"currentRevision"}) : "";
    bool all_updated = true;
    for (const auto& [ord, p] : owned) {
      if (terminating.count(ord) == 0 &&
          Str(*p, {"metadata", "labels", "controller-revision-hash"}) != revision) {
        all_updated = false;
      }
    }
    if (all_updated || current_revision.empty()) current_revision = revision;
    for (const auto& [ord, p] : owned) {
      ++count;
      if (PodReady(*p)) ++ready;
      if (terminating.count(ord) != 0) continue;
      const std::string rev = Str(*p, {"metadata", "labels", "controller-revision-hash"});
      if (rev == current_revision) ++current;
      if (rev == revision) ++updated;
    }
    const int64_t generation = Int(sts, {"metadata", "generation"}).value_or(0);
    StatusUpdate u(sts);
    u.SetInt("observedGeneration", generation);
    u.SetInt("replicas", count);
    u.SetInt("readyReplicas", ready);
    u.SetInt("availableReplicas", ready);
    u.SetInt("currentReplicas", current);
    u.SetInt("updatedReplicas", updated);
    u.SetStr("currentRevision", current_revision);
    u.SetStr("updateRevision", revision);
    PutStatus("/apis/apps/v1/namespaces/" + ns + "/statefulsets/" + name, sts, u);
  }

  // The garbage collector: pods whose controlling StatefulSet or ReplicaSet is gone.
  for (const auto& p : pods) {
    const auto [owner, kind] = ControllerRef(p);
    if (owner.empty()) continue;
    if (kind == "ReplicaSet" && replicasets.count(owner) == 0) {
      RemovePod(ns, p, "garbage collector: owner of " + ns + "/" +
                           Str(p, {"metadata", "name"}) + " is gone");
      continue;
    }
    if (kind != "StatefulSet" || live.count(owner) != 0) continue;
    const std::string pname = Str(p, {"metadata", "name"});
    std::vector<std::string> claims;
    auto seen = sts_seen_.find(owner);
    if (seen != sts_seen_.end() &&
        Str(seen->second, {"spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"}) ==
            "Delete") {
      const std::string sname = Str(seen->second, {"metadata", "name"});
      if (const auto* vcts = Array(seen->second, {"spec", "volumeClaimTemplates"})) {
        for (const auto& v : *vcts) claims.push_back(Str(v, {"metadata", "name"}) + "-" + pname);
      }
    }
    bool local = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pods_.find(Key(ns, pname));
      if (it != pods_.end() && it->second->uid == Str(p, {"metadata", "uid"})) {
        local = true;
        if (!it->second->terminating) {
          Log("garbage collector: owner of " + ns + "/" + pname + " is gone");
          BeginTermination(it->second, claims);
        }
      }
    }
    if (!local) {
      Api("DELETE", "/api/v1/namespaces/" + ns + "/pods/" + pname);
      std::error_code ec;
      for (const auto& c : claims) fs::remove_all(ClaimDir(ns, c), ec);
    }
  }
  pods.insert(pods.end(), created.begin(), created.end());
}

// ------------------------------------------------------------------------------------------
// The Deployment controller (pkg/controller/deployment), without ReplicaSet objects

void TestKubelet::Impl::PutStatus(const std::string& object_path, const value& obj,
                                  const StatusUpdate& u) {
  if (!u.changed) return;
  value body = value::object();
  value meta = value::object();
  meta["name"] = value::string(Str(obj, {"metadata", "name"}));
  meta["uid"] = value::string(Str(obj, {"metadata", "uid"}));
  body["metadata"] = meta;
  body["status"] = u.status;
  Api("PUT", object_path + "/status", body.serialize());
}

void TestKubelet::Impl::RemovePod(const std::string& ns, const value& p, const std::string& why) {
  const std::string pname = Str(p, {"metadata", "name"});
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pods_.find(Key(ns, pname));
    if (it != pods_.end() && it->second->uid == Str(p, {"metadata", "uid"})) {
      if (!it->second->terminating) {
        Log(why);
        BeginTermination(it->second, {});
      }
      return;
    }
  }
  Log(why);
  Api("DELETE", "/api/v1/namespaces/" + ns + "/pods/" + pname);
}

std::set<std::string> TestKubelet::Impl::ControlDeployments(
    const std::string& ns, const std::vector<value>& deployments,
    const std::vector<value>& replicasets, std::vector<value>& pods) {
  std::set<std::string> live, live_sets;
  for (const auto& d : deployments) live.insert(Str(d, {"metadata", "uid"}));
  // ReplicaSets whose Deployment is gone go (the garbage collector), their pods after them.
  for (const auto& rs : replicasets) {
    const auto [owner, kind] = ControllerRef(rs);
    if (kind == "Deployment" && live.count(owner) == 0) {
      Log("garbage collector: owner of replicaset " + ns + "/" + Str(rs, {"metadata", "name"}) +
          " is gone");
      Api("DELETE", "/apis/apps/v1/namespaces/" + ns + "/replicasets/" + Str(rs, {"metadata", "name"}));
      continue;
    }
    live_sets.insert(Str(rs, {"metadata", "uid"}));
  }
  std::vector<value> created;
  for (const auto& d : deployments) {
    const std::string name = Str(d, {"metadata", "name"});
    const std::string uid = Str(d, {"metadata", "uid"});
    const int64_t replicas = Int(d, {"spec", "replicas"}).value_or(1);
    const value* tmpl = AtPath(d, {"spec", "template"});
    const value templ = tmpl != nullptr ? *tmpl : value::object();
    const std::string hash = ShortHash(templ.serialize());
    const std::string rs_name = name + "-" + hash;
    const bool recreate = Str(d, {"spec", "strategy", "type"}) == "Recreate";

    // Its ReplicaSets; the current template's is created when missing.
    std::vector<value> sets;
    for (const auto& rs : replicasets) {
      if (ControllerRef(rs).first == uid) sets.push_back(rs);
    }
    int64_t revision = 0;
    const value* current_set = nullptr;
    for (const auto& rs : sets) {
      const std::string r = Str(rs, {"metadata", "annotations", "deployment.kubernetes.io/revision"});
      revision = std::max<int64_t>(revision, r.empty() ? 0 : std::atoll(r.c_str()));
      if (Str(rs, {"metadata", "labels", "pod-template-hash"}) == hash) current_set = &rs;
    }
    value pod_template = templ;
    if (!pod_template.has_field("metadata")) pod_template["metadata"] = value::object();
    if (!pod_template["metadata"].has_field("labels")) pod_template["metadata"]["labels"] = value::object();
    pod_template["metadata"]["labels"]["pod-template-hash"] = value::string(hash);
    if (current_set == nullptr) {
      value rs = OwnedObject("apps/v1", "ReplicaSet", rs_name, ns, pod_template["metadata"]["labels"],
                             ControllerOf("Deployment", name, uid));
      value& annotations = rs["metadata"]["annotations"];
      annotations["deployment.kubernetes.io/revision"] = value::string(std::to_string(revision + 1));
      annotations["deployment.kubernetes.io/desired-replicas"] = value::string(std::to_string(replicas));
      value spec = value::object();
      spec["replicas"] = value::number(replicas);
      value selector = value::object();
      value match = value::object();
      if (const value* m = AtPath(d, {"spec", "selector", "matchLabels"}); m != nullptr && m->is_object()) {
        match = *m;
      }
      match["pod-template-hash"] = value::string(hash);
      selector["matchLabels"] = match;
      spec["selector"] = selector;
      spec["template"] = pod_template;
      rs["spec"] = spec;
      HttpResponse r = Api("POST", "/apis/apps/v1/namespaces/" + ns + "/replicasets", rs.serialize());
      if (r.status != 201) continue;
      auto stored = Parse(r.body);
      if (!stored) continue;
      Log("deployment " + ns + "/" + name + ": created replicaset " + rs_name);
      sets.push_back(*stored);
      live_sets.insert(Str(*stored, {"metadata", "uid"}));
      current_set = &sets.back();
    }
    const std::string rs_uid = Str(*current_set, {"metadata", "uid"});
    std::set<std::string> set_uids;
    for (const auto& rs : sets) set_uids.insert(Str(rs, {"metadata", "uid"}));

    std::vector<const value*> current, old;
    std::map<std::string, std::pair<int64_t, int64_t>> per_set;  // rs uid -> pods, ready
    bool old_terminating = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& p : pods) {
        const std::string owner = ControllerRef(p).first;
        if (set_uids.count(owner) == 0) continue;
        auto it = pods_.find(Key(ns, Str(p, {"metadata", "name"})));
        if (it != pods_.end() && it->second->terminating) {
          if (owner != rs_uid) old_terminating = true;
          continue;
        }
        auto& [count, ready] = per_set[owner];
        ++count;
        ready += PodReady(p) ? 1 : 0;
        (owner == rs_uid ? current : old).push_back(&p);
      }
    }
    const int64_t current_ready = per_set[rs_uid].second;

    // Old pods go once the new template's pods are Ready (RollingUpdate), or at once (Recreate).
    if (recreate || current_ready >= replicas) {
      for (const value* p : old) {
        RemovePod(ns, *p, "deployment " + ns + "/" + name + ": removing old pod " +
                              Str(*p, {"metadata", "name"}));
      }
    }
    // Surplus of the current template: the newest first.
    if (static_cast<int64_t>(current.size()) > replicas) {
      std::sort(current.begin(), current.end(), [](const value* a, const value* b) {
        return Str(*a, {"metadata", "creationTimestamp"}) > Str(*b, {"metadata", "creationTimestamp"});
      });
      for (size_t i = 0; i < current.size() - static_cast<size_t>(replicas); ++i) {
        RemovePod(ns, *current[i], "deployment " + ns + "/" + name + ": scaling down, removing " +
                                       Str(*current[i], {"metadata", "name"}));
      }
    }
    const bool wait_for_old = recreate && (!old.empty() || old_terminating);
    for (int64_t i = static_cast<int64_t>(current.size()); i < replicas && !wait_for_old; ++i) {
      static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
      std::string pname = rs_name + "-";
      for (int k = 0; k < 5; ++k) pname += kAlphabet[names_rng_() % (sizeof(kAlphabet) - 1)];
      value pod = OwnedObject("v1", "Pod", pname, ns, pod_template["metadata"]["labels"],
                              ControllerOf("ReplicaSet", rs_name, rs_uid));
      if (const value* a = AtPath(templ, {"metadata", "annotations"})) {
        pod["metadata"]["annotations"] = *a;
      }
      value spec = Field(templ, "spec") != nullptr ? *Field(templ, "spec") : value::object();
      spec["nodeName"] = value::string(opts_.node_name);
      pod["spec"] = spec;
      HttpResponse r = Api("POST", "/api/v1/namespaces/" + ns + "/pods", pod.serialize());
      if (r.status == 201) {
        Log("replicaset " + ns + "/" + rs_name + ": created pod " + pname);
        if (auto c = Parse(r.body)) created.push_back(*c);
      }
    }

    // The ReplicaSets' replicas and status (pkg/controller/replicaset).
    for (const auto& rs : sets) {
      const std::string id = Str(rs, {"metadata", "uid"});
      const std::string rname = Str(rs, {"metadata", "name"});
      const int64_t want = id == rs_uid ? replicas : (old.empty() ? 0 : Int(rs, {"spec", "replicas"}).value_or(0));
      if (Int(rs, {"spec", "replicas"}).value_or(-1) != want) {
        Api("PATCH", "/apis/apps/v1/namespaces/" + ns + "/replicasets/" + rname,
            R"({"spec":{"replicas":)" + std::to_string(want) + "}}");
      }
      const auto [count, ready] = per_set[id];
      StatusUpdate u(rs);
      u.SetInt("observedGeneration", Int(rs, {"metadata", "generation"}).value_or(0));
      u.SetInt("replicas", count);
      u.SetInt("fullyLabeledReplicas", count);
      u.SetInt("readyReplicas", ready);
      u.SetInt("availableReplicas", ready);
      PutStatus("/apis/apps/v1/namespaces/" + ns + "/replicasets/" + rname, rs, u);
    }

    // The Deployment's status, as pkg/controller/deployment/sync.go calculateStatus writes it.
    const int64_t total = static_cast<int64_t>(current.size() + old.size());
    int64_t ready = 0;
    for (const auto& [id, counts] : per_set) ready += counts.second;
    StatusUpdate u(d);
    u.SetInt("observedGeneration", Int(d, {"metadata", "generation"}).value_or(0));
    u.SetInt("replicas", total);
    u.SetInt("updatedReplicas", static_cast<int64_t>(current.size()));
    u.SetInt("readyReplicas", ready);
    u.SetInt("availableReplicas", ready);
    u.SetInt("unavailableReplicas", std::max<int64_t>(0, replicas - ready));
    const bool available = ready >= replicas;
    const bool complete = current_ready >= replicas && old.empty() &&
                          static_cast<int64_t>(current.size()) == replicas;
    u.SetCondition("Available", available,
              available ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
              available ? "Deployment has minimum availability."
                        : "Deployment does not have minimum availability.");
    u.SetCondition("Progressing", true, complete ? "NewReplicaSetAvailable" : "ReplicaSetUpdated",
              complete ? "ReplicaSet \"" + rs_name + "\" has successfully progressed."
                       : "ReplicaSet \"" + rs_name + "\" is progressing.");
    PutStatus("/apis/apps/v1/namespaces/" + ns + "/deployments/" + name, d, u);
  }
  pods.insert(pods.end(), created.begin(), created.end());
  return live_sets;
}

// ------------------------------------------------------------------------------------------
// ServiceAccounts: the controller's "default" account and the kubelet's projected tokens

void TestKubelet::Impl::SyncServiceAccounts(const std::string& ns,
                                            const std::vector<value>& accounts,
                                            const std::vector<value>& pods) {
  std::set<std::string> names;
  for (const auto& a : accounts) names.insert(Str(a, {"metadata", "name"}));
  if (names.count("default") == 0) {
    // pkg/controller/serviceaccount: every namespace has a "default" ServiceAccount.
    Api("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts",
        R"({"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}})");
  }
  for (const auto& p : pods) {
    if (Str(p, {"spec", "nodeName"}) != opts_.node_name) continue;
    const value* automount = AtPath(p, {"spec", "automountServiceAccountToken"});
    if (automount != nullptr && automount->is_boolean() && !automount->as_bool()) continue;
    const std::string uid = Str(p, {"metadata", "uid"});
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (tokens_.count(uid) != 0) continue;
    }
    std::string sa = Str(p, {"spec", "serviceAccountName"});
    if (sa.empty()) sa = "default";
    if (names.count(sa) == 0) continue;  // the pod waits for its account
    value req = value::object();
    req["apiVersion"] = value::string("authentication.k8s.io/v1");
    req["kind"] = value::string("TokenRequest");
    value spec = value::object();
    spec["expirationSeconds"] = value::number(3607);
    value bound = value::object();
    bound["apiVersion"] = value::string("v1");
    bound["kind"] = value::string("Pod");
    bound["name"] = value::string(Str(p, {"metadata", "name"}));
    bound["uid"] = value::string(uid);
    spec["boundObjectRef"] = bound;
    req["spec"] = spec;
    HttpResponse r =
        Api("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token", req.serialize());
    if (r.status != 201) continue;
    auto answer = Parse(r.body);
    if (!answer) continue;
    const std::string token = Str(*answer, {"status", "token"});
    if (token.empty()) continue;
    std::lock_guard<std::mutex> lock(mu_);
    tokens_[uid] = token;
  }
}

std::string TestKubelet::Impl::RewriteServices(const std::string& s) const {
  if (s.find(".svc") == std::string::npos) return s;
  std::string out = s;
  for (const auto& [ns, services] : services_) {
    for (const auto& svc : services) {
      const std::string name = Str(svc, {"metadata", "name"});
      for (const std::string& host :
           {name + "." + ns + ".svc.cluster.local", name + "." + ns + ".svc"}) {
        size_t at = out.find(host);
        if (at == std::string::npos) continue;
        if (at > 0 && (std::isalnum(static_cast<unsigned char>(out[at - 1])) ||
                       out[at - 1] == '-' || out[at - 1] == '.')) {
          continue;
        }
        const size_t end = at + host.size();
        if (end < out.size() && (std::isalnum(static_cast<unsigned char>(out[end])) ||
                                 out[end] == '-' || out[end] == '.')) {
          continue;
        }
        // A Ready endpoint: a pod of the namespace whose labels the selector matches.
        const value* selector = AtPath(svc, {"spec", "selector"});
        const Pod* endpoint = nullptr;
        for (const auto& [key, pod] : pods_) {
          if (pod->ns != ns || pod->terminating || !pod->cond_ready || selector == nullptr ||
              !selector->is_object() || selector->as_object().size() == 0) {
            continue;
          }
          bool match = true;
          for (const auto& [k, v] : selector->as_object()) {
            if (Str(pod->object, {"metadata", "labels", k.c_str()}) !=
                (v.is_string() ? v.as_string() : "")) {
              match = false;
            }
          }
          if (match) {
            endpoint = pod.get();
            break;
          }
        }
        if (endpoint == nullptr) continue;
        std::string replacement = endpoint->ip;
        size_t replaced_end = end;
        if (end < out.size() && out[end] == ':') {
          size_t digits = end + 1;
          while (digits < out.size() && std::isdigit(static_cast<unsigned char>(out[digits]))) {
            ++digits;
          }
          const std::string port = out.substr(end + 1, digits - end - 1);
          if (const auto* ports = Array(svc, {"spec", "ports"}); ports != nullptr && !port.empty()) {
            for (const auto& sp : *ports) {
              if (std::to_string(Int(sp, {"port"}).value_or(-1)) != port) continue;
              const value* target = Field(sp, "targetPort");
              int64_t target_port = std::stoll(port);
              if (target != nullptr && target->is_number()) {
                target_port = target->as_integer();
              } else if (target != nullptr && target->is_string()) {
                if (const auto* cs = Array(endpoint->object, {"spec", "containers"})) {
                  for (const auto& c : *cs) {
                    if (const auto* cps = Array(c, {"ports"})) {
                      for (const auto& cp : *cps) {
                        if (Str(cp, {"name"}) == target->as_string()) {
                          target_port = Int(cp, {"containerPort"}).value_or(target_port);
                        }
                      }
                    }
                  }
                }
              }
              replacement += ":" + std::to_string(target_port);
              replaced_end = digits;
            }
          }
        }
        out = out.substr(0, at) + replacement + out.substr(replaced_end);
      }
    }
  }
  return out;
}

// ------------------------------------------------------------------------------------------
// The kubelet: admission, volumes, containers, probes, status, termination

void TestKubelet::Impl::RunPods(const std::string& ns, const std::vector<value>& pods) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, const value*> by_name;
  for (const auto& p : pods) {
    if (Str(p, {"spec", "nodeName"}) != opts_.node_name) continue;
    by_name[Str(p, {"metadata", "name"})] = &p;
  }
  // Pods here whose object is gone, was replaced (another uid) or is being deleted.
  for (auto& [key, pod] : pods_) {
    if (pod->ns != ns || pod->terminating) continue;
    auto it = by_name.find(pod->name);
    const bool gone = it == by_name.end() || Str(*it->second, {"metadata", "uid"}) != pod->uid ||
                      !Str(*it->second, {"metadata", "deletionTimestamp"}).empty();
    if (gone) {
      Log("pod " + key + " was deleted");
      std::vector<std::string> claims;
      if (auto c = claims_of_removed_.find(pod->uid); c != claims_of_removed_.end()) {
        claims = std::move(c->second);
        claims_of_removed_.erase(c);
      }
      BeginTermination(pod, std::move(claims));
    } else {
      pod->object = *it->second;
    }
  }
  for (const auto& [name, obj] : by_name) {
    if (!Str(*obj, {"metadata", "deletionTimestamp"}).empty()) continue;
    auto it = pods_.find(Key(ns, name));
    if (it == pods_.end()) {
      // A pod that ended here since the list was taken (its object not gone from the list yet)
      // is not admitted again: a real kubelet never restarts a pod it terminated.
      if (tombstones_.count(Str(*obj, {"metadata", "uid"})) != 0) continue;
      Admit(ns, *obj);
      continue;
    }
    Pod& pod = *it->second;
    if (pod.terminating) continue;  // a new pod of that name waits for the old one to end
    if (!pod.volumes_ready) {
      pod.volumes_ready = SetUpVolumes(pod);
    } else {
      SyncSecretVolumes(pod);
    }
  }
}

void TestKubelet::Impl::Admit(const std::string& ns, const value& obj) {
  auto pod = std::make_shared<Pod>();
  pod->ns = ns;
  pod->name = Str(obj, {"metadata", "name"});
  pod->uid = Str(obj, {"metadata", "uid"});
  pod->object = obj;
  const std::string key = Key(ns, pod->name);
  auto ip = ips_.find(key);
  if (ip == ips_.end()) ip = ips_.emplace(key, next_ip_++).first;
  pod->ip = opts_.ip_prefix + "." + std::to_string(ip->second);
  pod->dir = PodDir(ns, pod->name);
  std::error_code ec;
  fs::create_directories(pod->dir, ec);
  pod->start_time = Rfc3339Now();
  pod->scheduled_since = pod->start_time;
  pod->cond_ready_since = pod->start_time;
  if (const auto* cs = Array(obj, {"spec", "containers"})) {
    for (const auto& spec : *cs) {
      Container c;
      c.name = Str(spec, {"name"});
      c.spec = spec;
      const auto command = Strings(spec, {"command"});
      const std::string image = command.empty() ? Str(spec, {"image"}) : command[0];
      auto bin = opts_.images.find(image);
      if (bin != opts_.images.end()) {
        c.binary = bin->second;
      } else {
        c.waiting_reason = "ErrImagePull";
        c.waiting_message = "image \"" + image + "\" is not in the test kubelet's image map";
      }
      if (const value* rp = Field(spec, "readinessProbe")) {
        Probe p;
        const value* http = Field(*rp, "httpGet");
        const value* tcp = Field(*rp, "tcpSocket");
        const value* action = http != nullptr ? http : tcp;
        if (action != nullptr) {
          p.http = http != nullptr;
          p.path = p.http ? Str(*http, {"path"}) : "";
          if (p.http && p.path.empty()) p.path = "/";
          const value* port = Field(*action, "port");
          if (port != nullptr && port->is_number()) {
            p.port = port->as_integer();
          } else if (port != nullptr && port->is_string()) {
            // A named port of the container.
            if (const auto* ports = Array(spec, {"ports"})) {
              for (const auto& cp : *ports) {
                if (Str(cp, {"name"}) == port->as_string()) {
                  p.port = static_cast<int>(Int(cp, {"containerPort"}).value_or(0));
                }
              }
            }
          }
          const auto secs = [&](const char* k, int64_t d) {
            return milliseconds(Int(*rp, {k}).value_or(d) * 1000);
          };
          p.period = opts_.probe_period.value_or(secs("periodSeconds", 10));
          p.initial_delay = opts_.probe_period ? milliseconds(0) : secs("initialDelaySeconds", 0);
          p.timeout = secs("timeoutSeconds", 1);
          p.success_threshold = static_cast<int>(Int(*rp, {"successThreshold"}).value_or(1));
          p.failure_threshold = static_cast<int>(Int(*rp, {"failureThreshold"}).value_or(3));
          c.probe = p;
        }
        // An exec probe is not run: the container counts as having no probe.
      }
      pod->containers.push_back(std::move(c));
    }
  }
  pod->volumes_ready = SetUpVolumes(*pod);
  pods_[key] = pod;
  Log("pod " + key + " admitted with IP " + pod->ip);
}

bool TestKubelet::Impl::SetUpVolumes(Pod& pod) {
  std::error_code ec;
  bool ready = true;
  if (const auto* vs = Array(pod.object, {"spec", "volumes"})) {
    for (const auto& v : *vs) {
      const std::string name = Str(v, {"name"});
      if (pod.volumes.count(name) != 0) continue;
      Volume vol;
      if (const value* pvc = Field(v, "persistentVolumeClaim")) {
        vol.kind = "persistentVolumeClaim";
        vol.source = Str(*pvc, {"claimName"});
        vol.host = ClaimDir(pod.ns, vol.source);
      } else if (const value* secret = Field(v, "secret")) {
        vol.kind = "secret";
        vol.source = Str(*secret, {"secretName"});
        const value* opt = Field(*secret, "optional");
        vol.optional = opt != nullptr && opt->is_boolean() && opt->as_bool();
        vol.host = pod.dir + "/secret-" + name;
        const auto& secrets = secrets_[pod.ns];
        if (!vol.optional && secrets.find(vol.source) == secrets.end()) {
          // As a real kubelet: the pod waits in ContainerCreating until the Secret exists.
          ready = false;
          continue;
        }
      } else if (const value* hp = Field(v, "hostPath")) {
        vol.kind = "hostPath";
        vol.host = Str(*hp, {"path"});
      } else {
        // emptyDir, and what is not emulated (configMap, downwardAPI, projected): a fresh
        // directory of the pod.
        vol.kind = "emptyDir";
        vol.host = pod.dir + "/" + name;
        fs::remove_all(vol.host, ec);
      }
      fs::create_directories(vol.host, ec);
      pod.volumes[name] = vol;
    }
  }
  if (InCluster() && pod.sa_dir.empty()) {
    const value* automount = AtPath(pod.object, {"spec", "automountServiceAccountToken"});
    if (automount == nullptr || !automount->is_boolean() || automount->as_bool()) {
      // The kube-api-access projected volume: the token SyncServiceAccounts obtained.
      auto token = tokens_.find(pod.uid);
      if (token == tokens_.end()) {
        ready = false;
      } else {
        const std::string dir = pod.dir + "/serviceaccount";
        fs::create_directories(dir, ec);
        std::ifstream ca(opts_.api_ca_file);
        std::stringstream ca_text;
        ca_text << ca.rdbuf();
        WriteIfChanged(dir + "/token", token->second);
        WriteIfChanged(dir + "/ca.crt", ca_text.str());
        WriteIfChanged(dir + "/namespace", pod.ns);
        pod.sa_dir = dir;
      }
    }
  }
  SyncSecretVolumes(pod);
  return ready;
}

void TestKubelet::Impl::SyncSecretVolumes(Pod& pod) {
  const auto& secrets = secrets_[pod.ns];
  std::error_code ec;
  for (const auto& [name, vol] : pod.volumes) {
    if (vol.kind != "secret") continue;
    auto s = secrets.find(vol.source);
    if (s == secrets.end()) continue;  // deleted meanwhile: the files stay, as in Kubernetes
    std::map<std::string, std::string> files = s->second;
    // `items` project chosen keys to chosen paths.
    const value none = value::array();
    const auto* specs = Array(pod.object, {"spec", "volumes"});
    for (const auto& v : specs != nullptr ? *specs : none.as_array()) {
      if (Str(v, {"name"}) != name) continue;
      if (const auto* items = Array(v, {"secret", "items"})) {
        std::map<std::string, std::string> projected;
        for (const auto& item : *items) {
          auto data = s->second.find(Str(item, {"key"}));
          if (data != s->second.end()) projected[Str(item, {"path"})] = data->second;
        }
        files = projected;
      }
    }
    for (const auto& [file, content] : files) {
      const fs::path path = fs::path(vol.host) / file;
      fs::create_directories(path.parent_path(), ec);
      WriteIfChanged(path.string(), content);
    }
    for (const auto& entry : fs::directory_iterator(vol.host, ec)) {
      if (entry.is_regular_file() && files.count(entry.path().filename().string()) == 0) {
        fs::remove(entry.path(), ec);
      }
    }
  }
}

std::string TestKubelet::Impl::FieldRef(const Pod& pod, const std::string& path) const {
  if (path == "metadata.name") return pod.name;
  if (path == "metadata.namespace") return pod.ns;
  if (path == "metadata.uid") return pod.uid;
  if (path == "status.podIP" || path == "status.podIPs") return pod.ip;
  if (path == "status.hostIP" || path == "status.hostIPs") return opts_.ip_prefix + ".1";
  if (path == "spec.nodeName") return opts_.node_name;
  if (path == "spec.serviceAccountName") {
    const std::string sa = Str(pod.object, {"spec", "serviceAccountName"});
    return sa.empty() ? "default" : sa;
  }
  for (const char* kind : {"labels", "annotations"}) {
    const std::string prefix = std::string("metadata.") + kind + "['";
    if (path.rfind(prefix, 0) == 0 && path.size() > prefix.size() + 2) {
      const std::string k = path.substr(prefix.size(), path.size() - prefix.size() - 2);
      const value* m = AtPath(pod.object, {"metadata", kind});
      const value* v = m != nullptr ? Field(*m, k) : nullptr;
      return v != nullptr && v->is_string() ? v->as_string() : "";
    }
  }
  return "";
}

TestKubelet::Impl::Config TestKubelet::Impl::BuildConfig(
    const Pod& pod, const Container& c, const std::vector<std::string>* command_override) const {
  Config out;
  std::map<std::string, std::string> vars;
  std::vector<std::pair<std::string, std::string>> env;
  const auto secrets = secrets_.find(pod.ns);
  if (const auto* list = Array(c.spec, {"env"})) {
    for (const auto& e : *list) {
      const std::string name = Str(e, {"name"});
      std::string v;
      if (const value* from = Field(e, "valueFrom")) {
        if (const value* f = Field(*from, "fieldRef")) {
          v = FieldRef(pod, Str(*f, {"fieldPath"}));
        } else if (const value* s = Field(*from, "secretKeyRef")) {
          const std::string sname = Str(*s, {"name"}), key = Str(*s, {"key"});
          const value* opt = Field(*s, "optional");
          const bool optional = opt != nullptr && opt->is_boolean() && opt->as_bool();
          const std::map<std::string, std::string>* data = nullptr;
          if (secrets != secrets_.end()) {
            auto it = secrets->second.find(sname);
            if (it != secrets->second.end()) data = &it->second;
          }
          auto kv = data != nullptr ? data->find(key)
                                    : std::map<std::string, std::string>::const_iterator();
          if (data == nullptr || kv == data->end()) {
            if (optional) continue;
            out.error_reason = "CreateContainerConfigError";
            out.error_message =
                data == nullptr ? "secret \"" + sname + "\" not found"
                                : "couldn't find key " + key + " in Secret " + pod.ns + "/" + sname;
            return out;
          }
          v = kv->second;
        }
      } else {
        v = Expand(Str(e, {"value"}), vars);
      }
      vars[name] = v;
      env.emplace_back(name, v);
    }
  }

  std::vector<Mount> mounts;
  if (const auto* list = Array(c.spec, {"volumeMounts"})) {
    for (const auto& m : *list) {
      auto vol = pod.volumes.find(Str(m, {"name"}));
      if (vol == pod.volumes.end()) {
        out.error_reason = "CreateContainerConfigError";
        out.error_message = "volume \"" + Str(m, {"name"}) + "\" is not mounted";
        return out;
      }
      std::string path = Str(m, {"mountPath"});
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      if (path.size() <= 1) continue;
      std::string host = vol->second.host;
      if (!Str(m, {"subPath"}).empty()) {
        host += "/" + Str(m, {"subPath"});
        std::error_code ec;
        fs::create_directories(host, ec);
      }
      mounts.push_back({path, host});
    }
  }
  for (const auto& [path, host] : opts_.image_paths) mounts.push_back({path, host});
  std::sort(mounts.begin(), mounts.end(),
            [](const Mount& a, const Mount& b) { return a.path.size() > b.path.size(); });

  const std::vector<std::string> command =
      command_override != nullptr ? *command_override : Strings(c.spec, {"command"});
  const std::string image = command.empty() ? Str(c.spec, {"image"}) : command[0];
  auto bin = opts_.images.find(image);
  if (bin == opts_.images.end()) {
    out.error_reason = "ErrImagePull";
    out.error_message = "image \"" + image + "\" is not in the test kubelet's image map";
    return out;
  }
  out.argv.push_back(bin->second);
  std::vector<std::string> rest;
  if (!command.empty()) rest.assign(command.begin() + 1, command.end());
  if (command_override == nullptr) {
    for (const auto& a : Strings(c.spec, {"args"})) rest.push_back(a);
  }
  // $(VAR) is expanded in command and args only; a kubelet leaves lifecycle hook commands as
  // written (kubernetes/kubernetes#90624): a hook reads its container's environment itself.
  for (const auto& a : rest) {
    out.argv.push_back(RewriteServices(
        RewriteHosts(RewritePaths(command_override ? a : Expand(a, vars), mounts), pod.ip)));
  }
  if (InCluster()) out.hostname = pod.name;
  if (!pod.sa_dir.empty()) {
    std::error_code ec;
    fs::create_directories(kServiceAccountMount, ec);
    out.binds.emplace_back(pod.sa_dir, kServiceAccountMount);
  }
  const std::string wd = Str(c.spec, {"workingDir"});
  out.cwd = wd.empty() ? "" : RewritePaths(wd, mounts);

  // The process sees the container's env and, so that the binaries run, PATH and the
  // sanitizers' options of the test itself.
  std::map<std::string, std::string> final_env;
  for (const char* pass : {"PATH", "TMPDIR", "LD_LIBRARY_PATH", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                           "TSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* v = std::getenv(pass)) final_env[pass] = v;
  }
  final_env["HOSTNAME"] = pod.name;
  if (InCluster()) {
    // The kubernetes Service's variables, as the kubelet sets them in every container.
    const std::string host = opts_.api_service_host, port = std::to_string(opts_.api_service_port);
    final_env["KUBERNETES_SERVICE_HOST"] = host;
    final_env["KUBERNETES_SERVICE_PORT"] = port;
    final_env["KUBERNETES_SERVICE_PORT_HTTPS"] = port;
    final_env["KUBERNETES_PORT"] = "tcp://" + host + ":" + port;
    final_env["KUBERNETES_PORT_" + port + "_TCP"] = "tcp://" + host + ":" + port;
  }
  for (const auto& [k, v] : env) {
    final_env[k] = RewriteServices(RewriteHosts(RewritePaths(v, mounts), pod.ip));
  }
  for (const auto& [k, v] : final_env) out.env.push_back(k + "=" + v);
  return out;
}

void TestKubelet::Impl::StartContainer(Pod& pod, Container& c, Steady::time_point now) {
  Config cfg = BuildConfig(pod, c, nullptr);
  if (!cfg.error_reason.empty()) {
    c.waiting_reason = cfg.error_reason;
    c.waiting_message = cfg.error_message;
    c.next_start = now + opts_.poll_interval;
    return;
  }
  auto pid = SpawnProcess(cfg.argv, cfg.env, pod.dir + "/" + c.name + ".log", cfg.cwd, cfg.binds,
                          cfg.hostname);
  if (c.ever_started) ++c.restarts;
  if (!pid.ok()) {
    c.waiting_reason = "RunContainerError";
    c.waiting_message = pid.status().message();
    c.backoff = std::clamp(c.backoff * 2, opts_.backoff_min, opts_.backoff_max);
    c.next_start = now + c.backoff;
    c.ever_started = true;
    Log("pod " + pod.ns + "/" + pod.name + " container " + c.name + ": " + c.waiting_message);
    return;
  }
  c.pid = *pid;
  c.ever_started = true;
  c.ready = !c.probe.has_value();
  c.waiting_reason.clear();
  c.waiting_message.clear();
  c.started_at = Rfc3339Now();
  c.started_steady = now;
  c.cpu_prev = std::chrono::nanoseconds(0);
  c.cpu_prev_at = now;
  c.probe_successes = c.probe_failures = 0;
  if (c.probe) c.next_probe = now + c.probe->initial_delay;
  Log("pod " + pod.ns + "/" + pod.name + " container " + c.name + " started, pid " +
      std::to_string(c.pid) + ", restarts " + std::to_string(c.restarts));
}

Steady::time_point TestKubelet::Impl::Supervise() {
  const auto now = Steady::now();
  auto due = now + opts_.poll_interval;
  for (auto& [key, pod] : pods_) {
    if (pod->terminating || !pod->volumes_ready) continue;
    const std::string policy = Str(pod->object, {"spec", "restartPolicy"});
    for (auto& c : pod->containers) {
      int code = 0;
      if (c.pid > 0 && Reaped(c.pid, &code)) {
        Log("pod " + key + " container " + c.name + " exited with " + std::to_string(code));
        value term = value::object();
        term["exitCode"] = value::number(code);
        term["reason"] = value::string(code == 0 ? "Completed" : "Error");
        if (code > 128) term["signal"] = value::number(code - 128);
        term["startedAt"] = value::string(c.started_at);
        term["finishedAt"] = value::string(Rfc3339Now());
        c.last_terminated = term;
        c.pid = -1;
        c.ready = false;
        const bool restart =
            policy.empty() || policy == "Always" || (policy == "OnFailure" && code != 0);
        if (!restart) {
          c.waiting_reason = "Terminated";
          c.next_start = Steady::time_point::max();
          continue;
        }
        // Kubernetes' crash-loop backoff, shortened for tests; reset after a long run.
        c.backoff = now - c.started_steady >= opts_.backoff_reset
                        ? opts_.backoff_min
                        : std::clamp(c.backoff * 2, opts_.backoff_min, opts_.backoff_max);
        c.next_start = now + c.backoff;
        c.waiting_reason = "CrashLoopBackOff";
        c.waiting_message = "back-off " + std::to_string(c.backoff.count()) +
                            "ms restarting failed container=" + c.name + " pod=" + pod->name;
      }
      if (c.pid <= 0 && !c.binary.empty() && c.next_start != Steady::time_point::max()) {
        if (now >= c.next_start) {
          StartContainer(*pod, c, now);
        }
        if (c.pid <= 0) due = std::min(due, c.next_start);
      }
      if (c.pid > 0 && c.probe) due = std::min(due, c.next_probe);
    }
  }
  return due;
}

void TestKubelet::Impl::RunProbes() {
  struct Due {
    std::shared_ptr<Pod> pod;
    size_t index;
    pid_t pid;
    Probe probe;
    std::string ip;
  };
  std::vector<Due> due;
  const auto now = Steady::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, pod] : pods_) {
      if (pod->terminating) continue;
      for (size_t i = 0; i < pod->containers.size(); ++i) {
        auto& c = pod->containers[i];
        if (c.pid > 0 && c.probe && now >= c.next_probe) {
          due.push_back({pod, i, c.pid, *c.probe, pod->ip});
          c.next_probe = now + c.probe->period;
        }
      }
    }
  }
  for (auto& d : due) {
    const bool ok =
        HttpProbe(d.ip, d.probe.port, d.probe.http ? d.probe.path : "", d.probe.timeout);
    std::lock_guard<std::mutex> lock(mu_);
    auto& c = d.pod->containers[d.index];
    if (c.pid != d.pid || d.pod->terminating) continue;
    if (ok) {
      c.probe_failures = 0;
      if (++c.probe_successes >= d.probe.success_threshold) c.ready = true;
    } else {
      c.probe_successes = 0;
      if (++c.probe_failures >= d.probe.failure_threshold) c.ready = false;
    }
  }
}

value TestKubelet::Impl::StatusOf(Pod& pod) {
  value status = value::object();
  bool all_started = true, all_ready = !pod.containers.empty();
  std::vector<std::string> unready;
  std::vector<value> statuses;
  for (const auto& c : pod.containers) {
    all_started &= c.ever_started;
    const bool ready = c.pid > 0 && c.ready;
    all_ready &= ready;
    if (!ready) unready.push_back(c.name);
    value cs = value::object();
    cs["name"] = value::string(c.name);
    const auto command = Strings(c.spec, {"command"});
    cs["image"] = value::string(Str(c.spec, {"image"}).empty() ? (command.empty() ? "" : command[0])
                                                               : Str(c.spec, {"image"}));
    cs["imageID"] = value::string(c.binary);
    cs["ready"] = value::boolean(ready);
    cs["started"] = value::boolean(c.pid > 0);
    cs["restartCount"] = value::number(c.restarts);
    value state = value::object();
    if (c.pid > 0) {
      cs["containerID"] = value::string("test://" + std::to_string(c.pid));
      value running = value::object();
      running["startedAt"] = value::string(c.started_at);
      state["running"] = running;
    } else if (c.next_start == Steady::time_point::max() && c.last_terminated) {
      state["terminated"] = *c.last_terminated;
    } else {
      value waiting = value::object();
      waiting["reason"] = value::string(c.waiting_reason);
      if (!c.waiting_message.empty()) waiting["message"] = value::string(c.waiting_message);
      state["waiting"] = waiting;
    }
    cs["state"] = state;
    value last = value::object();
    if (c.last_terminated) last["terminated"] = *c.last_terminated;
    cs["lastState"] = last;
    statuses.push_back(cs);
  }
  if (all_ready != pod.cond_ready) {
    pod.cond_ready = all_ready;
    pod.cond_ready_since = Rfc3339Now();
  }
  auto condition = [&](const char* type, bool ok, const std::string& since) {
    value c = value::object();
    c["type"] = value::string(type);
    c["status"] = value::string(ok ? "True" : "False");
    c["lastTransitionTime"] = value::string(since);
    if (!ok) {
      std::string list;
      for (const auto& n : unready) list += (list.empty() ? "" : " ") + n;
      c["reason"] = value::string("ContainersNotReady");
      c["message"] = value::string("containers with unready status: [" + list + "]");
    }
    return c;
  };
  // Every container ended and none restarts: the pod completed (pkg/kubelet getPhase).
  bool all_done = !pod.containers.empty(), all_zero = true;
  for (const auto& c : pod.containers) {
    const bool done = c.pid <= 0 && c.ever_started && c.next_start == Steady::time_point::max() &&
                      c.last_terminated.has_value();
    all_done &= done;
    if (done) all_zero &= Int(*c.last_terminated, {"exitCode"}).value_or(1) == 0;
  }
  status["phase"] = value::string(all_done ? (all_zero ? "Succeeded" : "Failed")
                                  : all_started ? "Running"
                                                : "Pending");
  status["conditions"] =
      value::array({condition("PodScheduled", true, pod.scheduled_since),
                    condition("Initialized", true, pod.scheduled_since),
                    condition("ContainersReady", all_ready, pod.cond_ready_since),
                    condition("Ready", all_ready, pod.cond_ready_since)});
  const std::string host_ip = opts_.ip_prefix + ".1";
  status["hostIP"] = value::string(host_ip);
  value hip = value::object();
  hip["ip"] = value::string(host_ip);
  status["hostIPs"] = value::array({hip});
  status["podIP"] = value::string(pod.ip);
  value pip = value::object();
  pip["ip"] = value::string(pod.ip);
  status["podIPs"] = value::array({pip});
  status["startTime"] = value::string(pod.start_time);
  status["containerStatuses"] = value::array(statuses);
  status["qosClass"] = value::string("BestEffort");
  return status;
}

void TestKubelet::Impl::WriteStatuses() {
  struct Write {
    std::shared_ptr<Pod> pod;
    std::string path, body, status;
  };
  std::vector<Write> writes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, pod] : pods_) {
      if (pod->terminating) continue;
      const value computed = StatusOf(*pod);
      const std::string status = computed.serialize();
      if (status == pod->last_status) continue;
      value body = value::object();
      value meta = value::object();
      meta["name"] = value::string(pod->name);
      meta["namespace"] = value::string(pod->ns);
      meta["uid"] = value::string(pod->uid);
      body["metadata"] = meta;
      body["status"] = computed;
      writes.push_back({pod, "/api/v1/namespaces/" + pod->ns + "/pods/" + pod->name + "/status",
                        body.serialize(), status});
    }
  }
  for (auto& w : writes) {
    HttpResponse r = Api("PUT", w.path, w.body);
    if (r.status == 200) {
      std::lock_guard<std::mutex> lock(mu_);
      w.pod->last_status = w.status;
    }
  }
}

void TestKubelet::Impl::SeedMetrics() {
  struct Sample {
    std::shared_ptr<Pod> pod;
    std::string body;
  };
  std::vector<Sample> samples;
  std::vector<std::shared_ptr<Pod>> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Steady::now();
    for (auto& [key, pod] : pods_) {
      if (pod->terminating) continue;
      std::vector<value> containers;
      for (auto& c : pod->containers) {
        if (c.pid <= 0) continue;
        const auto cpu = control::ProcessCpuTime(c.pid);
        const auto rss = RssKib(c.pid);
        if (!cpu || !rss) continue;
        const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(now - c.cpu_prev_at);
        const double used = static_cast<double>((*cpu - c.cpu_prev).count());
        const auto nanocores =
            wall.count() > 0 ? static_cast<int64_t>(used * 1e9 / static_cast<double>(wall.count()))
                             : 0;
        c.cpu_prev = *cpu;
        c.cpu_prev_at = now;
        value usage = value::object();
        usage["cpu"] = value::string(std::to_string(std::max<int64_t>(nanocores, 0)) + "n");
        usage["memory"] = value::string(std::to_string(*rss) + "Ki");
        value cm = value::object();
        cm["name"] = value::string(c.name);
        cm["usage"] = usage;
        containers.push_back(cm);
      }
      if (containers.empty()) {
        if (pod->metrics_seeded) gone.push_back(pod);
        continue;
      }
      value m = value::object();
      value meta = value::object();
      meta["name"] = value::string(pod->name);
      meta["namespace"] = value::string(pod->ns);
      if (const value* l = AtPath(pod->object, {"metadata", "labels"})) meta["labels"] = *l;
      m["metadata"] = meta;
      m["timestamp"] = value::string(Rfc3339Now());
      m["window"] = value::string(GoDuration(opts_.metrics_interval));
      m["containers"] = value::array(containers);
      samples.push_back({pod, m.serialize()});
    }
  }
  for (const auto& s : samples) {
    if (opts_.api->Seed("/apis/metrics.k8s.io/v1beta1/namespaces/" + s.pod->ns + "/pods", s.body)
            .ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      s.pod->metrics_seeded = true;
    }
  }
  for (const auto& p : gone) {
    (void)opts_.api->Unseed("/apis/metrics.k8s.io/v1beta1/namespaces/" + p->ns + "/pods/" +
                            p->name);
    std::lock_guard<std::mutex> lock(mu_);
    p->metrics_seeded = false;
  }
}

// ------------------------------------------------------------------------------------------
// Termination

void TestKubelet::Impl::BeginTermination(const std::shared_ptr<Pod>& pod,
                                         std::vector<std::string> claims) {
  if (pod->terminating) return;
  pod->terminating = true;
  pod->claims_to_delete = std::move(claims);
  auto done = std::make_shared<std::atomic<bool>>(false);
  terminators_.push_back({std::thread([this, pod, done] {
                            Terminate(pod);
                            done->store(true);
                          }),
                          done});
}

void TestKubelet::Impl::WaitGone(std::vector<pid_t*> pids, Steady::time_point deadline,
                                 std::unique_lock<std::mutex>& lock) {
  while (true) {
    bool all = true;
    for (pid_t* p : pids) {
      int code = 0;
      if (*p > 0 && Reaped(*p, &code)) *p = -1;
      all &= *p <= 0;
    }
    if (all || stopping_ || Steady::now() >= deadline) return;
    // Polling for the exits: the children are ours, but SIGCHLD is not ours to take.
    cv_.wait_for(lock, milliseconds(5), [&] { return stopping_; });
  }
}

void TestKubelet::Impl::Terminate(std::shared_ptr<Pod> pod) {
  const std::string path = "/api/v1/namespaces/" + pod->ns + "/pods/" + pod->name;
  // Not ready from now on: what the endpoints and the operator see while the pod stops.
  std::string body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : pod->containers) c.ready = false;
    value b = value::object();
    value meta = value::object();
    meta["name"] = value::string(pod->name);
    meta["uid"] = value::string(pod->uid);
    b["metadata"] = meta;
    b["status"] = StatusOf(*pod);
    body = b.serialize();
  }
  Api("PUT", path + "/status", body);

  const auto grace_seconds = Int(pod->object, {"spec", "terminationGracePeriodSeconds"});
  const milliseconds grace =
      grace_seconds ? milliseconds(*grace_seconds * 1000) : opts_.default_grace;
  const auto deadline = Steady::now() + grace;
  std::unique_lock<std::mutex> lock(mu_);
  // Main containers first, then the sidecar, as Kubernetes stops native sidecars last: each
  // group runs its preStop hooks, then gets SIGTERM, then is waited for.
  for (const bool sidecars : {false, true}) {
    std::vector<Container*> group;
    for (auto& c : pod->containers) {
      if ((c.name == kSidecarContainer) == sidecars && c.pid > 0) group.push_back(&c);
    }
    std::vector<pid_t> hooks;
    for (Container* c : group) {
      const auto hook = Strings(c->spec, {"lifecycle", "preStop", "exec", "command"});
      if (hook.empty()) continue;
      Config cfg = BuildConfig(*pod, *c, &hook);
      if (!cfg.error_reason.empty()) {
        Log("pod " + pod->name + " container " + c->name + " preStop: " + cfg.error_message);
        continue;
      }
      auto pid =
          SpawnProcess(cfg.argv, cfg.env, pod->dir + "/" + c->name + ".log", cfg.cwd, cfg.binds,
                       cfg.hostname);
      if (pid.ok()) hooks.push_back(*pid);
    }
    std::vector<pid_t*> hook_ptrs;
    for (auto& h : hooks) hook_ptrs.push_back(&h);
    WaitGone(hook_ptrs, deadline, lock);
    for (pid_t h : hooks) {
      if (h <= 0) continue;
      ::kill(-h, SIGKILL);
      ::waitpid(h, nullptr, 0);
    }
    std::vector<pid_t*> pids;
    for (Container* c : group) {
      ::kill(-c->pid, SIGTERM);
      pids.push_back(&c->pid);
    }
    WaitGone(pids, deadline, lock);
  }
  for (auto& c : pod->containers) {
    if (c.pid <= 0) continue;
    Log("pod " + pod->name + " container " + c.name + " killed at the end of the grace period");
    ::kill(-c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    c.pid = -1;
  }
  const bool stopping = stopping_;
  const bool seeded = pod->metrics_seeded;
  lock.unlock();

  if (!stopping) {
    value options = value::object();
    options["kind"] = value::string("DeleteOptions");
    options["apiVersion"] = value::string("v1");
    options["gracePeriodSeconds"] = value::number(0);
    value pre = value::object();
    pre["uid"] = value::string(pod->uid);
    options["preconditions"] = pre;
    Api("DELETE", path, options.serialize());
    if (opts_.api != nullptr && seeded) {
      (void)opts_.api->Unseed("/apis/metrics.k8s.io/v1beta1/namespaces/" + pod->ns + "/pods/" +
                              pod->name);
    }
  }
  std::error_code ec;
  for (const auto& [name, vol] : pod->volumes) {
    if (vol.kind == "emptyDir" && opts_.keep_ended_empty_dirs) {
      fs::rename(vol.host, vol.host + ".ended-" + pod->uid, ec);
      continue;
    }
    if (vol.kind == "emptyDir" || vol.kind == "secret") fs::remove_all(vol.host, ec);
  }
  for (const auto& claim : pod->claims_to_delete) {
    Log("pod " + pod->name + ": deleting claim " + claim);
    fs::remove_all(ClaimDir(pod->ns, claim), ec);
  }
  lock.lock();
  tombstones_.insert(pod->uid);
  auto it = pods_.find(Key(pod->ns, pod->name));
  if (it != pods_.end() && it->second == pod) pods_.erase(it);
  Log("pod " + pod->ns + "/" + pod->name + " ended");
  cv_.notify_all();
}

// ------------------------------------------------------------------------------------------
// TestKubelet

TestKubelet::TestKubelet(TestKubeletOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

TestKubelet::~TestKubelet() { Stop(); }

Status TestKubelet::Start() { return impl_->Start(); }

void TestKubelet::Stop() { impl_->Stop(); }

std::vector<TestPodState> TestKubelet::Pods() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  std::vector<TestPodState> out;
  for (const auto& [key, pod] : impl_->pods_) {
    TestPodState p;
    p.ns = pod->ns;
    p.name = pod->name;
    p.uid = pod->uid;
    p.ip = pod->ip;
    p.terminating = pod->terminating;
    p.ready = !pod->containers.empty();
    for (const auto& c : pod->containers) {
      TestContainerState s;
      s.name = c.name;
      s.pid = c.pid;
      s.restarts = c.restarts;
      s.ready = c.pid > 0 && c.ready;
      s.waiting_reason = c.pid > 0 ? "" : c.waiting_reason;
      p.ready &= s.ready;
      p.containers.push_back(s);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::optional<TestPodState> TestKubelet::Pod(const std::string& name, const std::string& ns) const {
  const std::string want = impl_->Ns(ns);
  for (auto& p : Pods()) {
    if (p.ns == want && p.name == name) return p;
  }
  return std::nullopt;
}

Status TestKubelet::KillContainer(const std::string& pod, const std::string& container, int signal,
                                  const std::string& ns) {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  auto it = impl_->pods_.find(impl_->Key(impl_->Ns(ns), pod));
  if (it == impl_->pods_.end()) return Status::NotFound("no pod " + pod + " runs here");
  for (const auto& c : it->second->containers) {
    if (c.name != container) continue;
    if (c.pid <= 0)
      return Status::NotFound("container " + container + " of " + pod + " is not running");
    ::kill(-c.pid, signal);
    return Status::Ok();
  }
  return Status::NotFound("pod " + pod + " has no container " + container);
}

std::string TestKubelet::HostPath(const std::string& pod, const std::string& volume,
                                  const std::string& ns) const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  auto it = impl_->pods_.find(impl_->Key(impl_->Ns(ns), pod));
  if (it == impl_->pods_.end()) return "";
  auto v = it->second->volumes.find(volume);
  return v == it->second->volumes.end() ? "" : v->second.host;
}

std::string TestKubelet::ClaimPath(const std::string& claim) const {
  return impl_->ClaimDir(impl_->opts_.namespaces.empty() ? "" : impl_->opts_.namespaces[0], claim);
}

bool TestKubelet::WaitFor(const std::function<bool()>& predicate,
                          std::chrono::milliseconds timeout) const {
  const auto deadline = Steady::now() + timeout;
  while (true) {
    if (predicate()) return true;
    std::unique_lock<std::mutex> lock(impl_->mu_);
    if (Steady::now() >= deadline) return false;
    const uint64_t seen = impl_->syncs_;
    // Also re-checked every 50 ms: the predicate may look at things outside the kubelet.
    impl_->cv_.wait_until(lock, std::min(deadline, Steady::now() + milliseconds(50)),
                          [&] { return impl_->syncs_ != seen || impl_->stopping_; });
  }
}

uint64_t TestKubelet::syncs() const {
  std::lock_guard<std::mutex> lock(impl_->mu_);
  return impl_->syncs_;
}

}  // namespace shoal::testing
