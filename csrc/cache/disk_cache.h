#pragma once
// The on-disk kernel cache (qd.init(offline_cache=True)): compiled code stored under a directory,
// one file per key, shared by processes.
//
// An entry is loaded only when it is a regular file owned by this user, in a directory owned by this
// user and writable by no one else, and its recorded key, size and SHA-256 content hash all match;
// anything else (corrupt, truncated, foreign) is ignored, and the caller compiles and rewrites it.
// Entries are kept in memory when stored and written by flush() (the end of a program: qd.reset(), the
// next qd.init(), exit), each to a private temporary file renamed into place, so concurrent readers
// and writers only ever see whole entries.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qd {

class DiskCache {
 public:
  DiskCache() = default;
  // Creates `dir` (mode 0700) if needed. Caching stays off when `dir` is empty or unsafe to use.
  DiskCache(const std::string &dir, std::string salt);

  bool enabled() const { return !dir_.empty(); }
  // The key of `content` (what the compiled code is a function of), salted with the compiler's identity.
  std::string key(std::string_view content) const;
  std::optional<std::string> load(const std::string &key) const;
  void store(const std::string &key, std::string_view payload) const;  // queued for flush(); never throws
  void flush() const;  // writes the queued entries (best effort)

  static std::string sha256_hex(std::string_view data);

  // Loads that found a valid entry, loads that did not (absent, corrupt, foreign), entries stored.
  struct Stats {
    int64_t hits = 0, misses = 0, writes = 0;
  };
  const Stats &stats() const { return stats_; }

 private:
  std::string path(const std::string &key) const { return dir_ + "/" + key + ".qdc"; }
  void write_entry(const std::string &key, std::string_view payload) const;
  std::string dir_;
  mutable std::vector<std::pair<std::string, std::string>> pending_;
  std::string salt_;
  mutable Stats stats_;
};

}  // namespace qd
