#include "cache/disk_cache.h"

#include <fcntl.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/SHA256.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace qd {

namespace {

constexpr char kMagic[] = "QDKCACHE1\n";  // format version 1
constexpr size_t kMagicLen = sizeof(kMagic) - 1;
constexpr size_t kKeyLen = 64;   // hex SHA-256
constexpr size_t kHashLen = 32;  // raw SHA-256 of the payload
constexpr size_t kHeaderLen = kMagicLen + kKeyLen + kHashLen + 8;

std::string sha256_raw(std::string_view data) {
  auto h = llvm::SHA256::hash(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data.data()), data.size()));
  return std::string(reinterpret_cast<const char *>(h.data()), h.size());
}

// Creates each missing component; the last one private to the user.
bool make_dirs(const std::string &dir) {
  for (size_t pos = 1; pos <= dir.size(); pos++) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), pos == dir.size() ? 0700 : 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

// Ours and writable only by us: nobody else can plant an entry.
bool private_dir(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return st.st_uid == geteuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

bool write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::string DiskCache::sha256_hex(std::string_view data) {
  static const char digits[] = "0123456789abcdef";
  std::string raw = sha256_raw(data), hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

DiskCache::DiskCache(const std::string &dir, std::string salt) : salt_(std::move(salt)) {
  if (dir.empty()) return;
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (make_dirs(d) && private_dir(d)) dir_ = d;
}

std::string DiskCache::key(std::string_view content) const {
  std::string s = salt_;
  s += '\0';
  s.append(content);
  return sha256_hex(s);
}

std::optional<std::string> DiskCache::load(const std::string &key) const {
  if (!enabled() || key.size() != kKeyLen) return std::nullopt;
  for (const auto &[k, payload] : pending_) {  // stored by this program, not yet written
    if (k == key) {
      stats_.hits++;
      return payload;
    }
  }
  int fd = open(path(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    stats_.misses++;
    return std::nullopt;
  }
  std::optional<std::string> out;
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
      static_cast<size_t>(st.st_size) >= kHeaderLen && static_cast<size_t>(st.st_size) < (size_t(1) << 32)) {
    std::string data(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < data.size()) {
      ssize_t r = ::read(fd, data.data() + got, data.size() - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    uint64_t size = 0;
    if (got == data.size()) std::memcpy(&size, data.data() + kMagicLen + kKeyLen + kHashLen, 8);
    if (got == data.size() && data.compare(0, kMagicLen, kMagic) == 0 &&
        data.compare(kMagicLen, kKeyLen, key) == 0 && size == data.size() - kHeaderLen) {
      std::string_view payload(data.data() + kHeaderLen, size);
      if (sha256_raw(payload) == data.substr(kMagicLen + kKeyLen, kHashLen)) out = std::string(payload);
    }
  }
  close(fd);
  (out ? stats_.hits : stats_.misses)++;
  return out;
}

void DiskCache::store(const std::string &key, std::string_view payload) const {
  if (!enabled() || key.size() != kKeyLen) return;
  pending_.emplace_back(key, std::string(payload));
  stats_.writes++;
}

void DiskCache::flush() const {
  for (const auto &[key, payload] : pending_) write_entry(key, payload);
  pending_.clear();
}

void DiskCache::write_entry(const std::string &key, std::string_view payload) const {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = dir_ + "/." + key + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::string header(kMagic, kMagicLen);
  header += key;
  header += sha256_raw(payload);
  uint64_t size = payload.size();
  header.append(reinterpret_cast<const char *>(&size), 8);
  bool ok = write_all(fd, header.data(), header.size()) && write_all(fd, payload.data(), payload.size());
  ok = (close(fd) == 0) && ok;
  // rename() replaces atomically: a reader sees the old whole entry or the new one, never a mix.
  if (!ok || rename(tmp.c_str(), path(key).c_str()) != 0) unlink(tmp.c_str());
}

}  // namespace qd
