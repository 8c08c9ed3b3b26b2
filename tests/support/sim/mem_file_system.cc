#include "support/sim/mem_file_system.h"

#include <algorithm>

namespace shoal::testing {

// A handle on a node. Reads and writes go to what the process sees.
class MemFile final : public storage::File {
 public:
  MemFile(MemFileSystem& fs, std::string path, std::shared_ptr<MemFileSystem::Node> node)
      : fs_(fs), path_(std::move(path)), node_(std::move(node)) {}

  Status ReadAt(uint64_t pos, char* buf, size_t len) const override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    if (!fs_.fail_reads_.empty() && path_.find(fs_.fail_reads_) != std::string::npos) {
      return Status::IoError("pread " + path_ + ": Input/output error (injected)");
    }
    if (pos + len > node_->data.size()) return Status::IoError(path_ + ": read past the end");
    std::copy_n(node_->data.data() + pos, len, buf);
    return Status::Ok();
  }
  Status WriteAt(uint64_t pos, const char* buf, size_t len) override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    if (node_->data.size() < pos + len) node_->data.resize(pos + len, '\0');
    std::copy_n(buf, len, node_->data.data() + pos);
    node_->mtime_ms = fs_.Now();
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    node_->data.resize(size, '\0');
    return Status::Ok();
  }
  Status Sync() override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    return fs_.SyncNode(path_, *node_);
  }
  Result<uint64_t> Size() const override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    return static_cast<uint64_t>(node_->data.size());
  }
  Result<int64_t> ModifiedMs() const override {
    std::lock_guard<std::mutex> lock(fs_.mu_);
    return node_->mtime_ms;
  }

 private:
  MemFileSystem& fs_;
  const std::string path_;
  std::shared_ptr<MemFileSystem::Node> node_;
};

std::string MemFileSystem::Parent(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

Status MemFileSystem::SyncNode(const std::string& path, Node& node) {
  if (fail_count_ > 0 && !fail_pattern_.empty() && path.find(fail_pattern_) != std::string::npos) {
    --fail_count_;
    return Status::IoError("fdatasync " + path + ": Input/output error (injected)");
  }
  node.durable = node.data;
  return Status::Ok();
}

Result<std::unique_ptr<storage::File>> MemFileSystem::Open(const std::string& path, bool truncate) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(Parent(path))) return Status::IoError("opening " + path + ": no such directory");
  auto& node = files_[path];
  if (!node) {
    node = std::make_shared<Node>();
    node->mtime_ms = Now();
  } else if (!node->exists) {
    // A new file under the name of one removed without a durable removal: a new node, so that a
    // crash can still bring the old one back.
    auto fresh = std::make_shared<Node>();
    fresh->durable = node->durable;
    fresh->durable_exists = node->durable_exists;
    fresh->data.clear();
    fresh->mtime_ms = Now();
    node = fresh;
  }
  node->exists = true;
  if (truncate) node->data.clear();
  return std::unique_ptr<storage::File>(new MemFile(*this, path, node));
}

Status MemFileSystem::ReadWholeFile(const std::string& path, std::string* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end() || !it->second->exists) return Status::NotFound(path + " does not exist");
  *out = it->second->data;
  return Status::Ok();
}

Status MemFileSystem::WriteFileAtomic(const std::string& path, const std::string& contents) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(Parent(path))) return Status::IoError("creating " + path + ": no such directory");
  if (fail_count_ > 0 && !fail_pattern_.empty() && path.find(fail_pattern_) != std::string::npos) {
    --fail_count_;
    return Status::IoError("fdatasync " + path + ".tmp: Input/output error (injected)");
  }
  // A rename over the old name: a new node (open handles keep the old one, as an inode).
  auto node = std::make_shared<Node>();
  node->data = node->durable = contents;
  node->exists = node->durable_exists = true;
  node->mtime_ms = Now();
  files_[path] = std::move(node);
  return Status::Ok();
}

Status MemFileSystem::Remove(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) it->second->exists = false;
  return Status::Ok();
}

Status MemFileSystem::RemoveAll(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string under = path + "/";
  std::erase_if(files_, [&](const auto& f) { return f.first == path || f.first.rfind(under, 0) == 0; });
  std::erase_if(dirs_, [&](const std::string& d) { return d == path || d.rfind(under, 0) == 0; });
  return Status::Ok();
}

Status MemFileSystem::CreateDirs(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string p = path;
  while (!p.empty() && p != "." && p != "/") {
    dirs_.insert(p);
    p = Parent(p);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> MemFileSystem::List(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(dir)) return Status::NotFound(dir + " is absent");
  const std::string under = dir + "/";
  std::set<std::string> names;
  for (const auto& [path, node] : files_) {
    if (node->exists && path.rfind(under, 0) == 0 && path.find('/', under.size()) == std::string::npos) {
      names.insert(path.substr(under.size()));
    }
  }
  for (const auto& d : dirs_) {
    if (d.rfind(under, 0) == 0 && d.find('/', under.size()) == std::string::npos) {
      names.insert(d.substr(under.size()));
    }
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Status MemFileSystem::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    if (Parent(it->first) == dir) {
      it->second->durable_exists = it->second->exists;
      if (!it->second->exists) {
        it = files_.erase(it);
        continue;
      }
    }
    ++it;
  }
  return Status::Ok();
}

void MemFileSystem::Crash(const std::string& prefix, std::mt19937_64* torn) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first.rfind(prefix, 0) != 0) {
      ++it;
      continue;
    }
    // Open handles of the crashed process keep the old node; the file system goes on with one
    // that holds what the disk held.
    const Node& old = *it->second;
    if (!old.durable_exists) {
      it = files_.erase(it);
      continue;
    }
    auto node = std::make_shared<Node>();
    node->durable = node->data = old.durable;
    node->exists = node->durable_exists = true;
    node->mtime_ms = old.mtime_ms;
    if (torn && old.exists && old.data.size() > old.durable.size() &&
        old.data.compare(0, old.durable.size(), old.durable) == 0) {
      const size_t extra = (*torn)() % (old.data.size() - old.durable.size() + 1);
      node->data = node->durable = old.data.substr(0, old.durable.size() + extra);
    }
    it->second = std::move(node);
    ++it;
  }
}

void MemFileSystem::Writeback(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it != files_.end()) it->second->durable = it->second->data;
}

void MemFileSystem::FailSyncs(const std::string& pattern, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_pattern_ = pattern;
  fail_count_ = count;
}

void MemFileSystem::FailReads(const std::string& pattern) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_reads_ = pattern;
}

uint64_t MemFileSystem::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [path, node] : files_) n += node->data.size();
  return n;
}

}  // namespace shoal::testing
