// The on-disk kernel cache's store: round trip, keys, and entries that must never load.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "cache/disk_cache.h"

using namespace qd;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/qd-disk-cache-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

std::string read_file(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string &p, const std::string &data) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << data;
}

}  // namespace

TEST_CASE("disk cache: round trip, salted keys, private directory") {
  std::string root = temp_dir(), dir = root + "/a/b";
  DiskCache cache(dir, "compiler 1");
  REQUIRE(cache.enabled());
  struct stat st;
  REQUIRE(stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  std::string key = cache.key("module text");
  CHECK(key.size() == 64);
  CHECK(key != DiskCache("", "compiler 2").key("module text"));  // the salt is part of the key
  CHECK(key == DiskCache("", "compiler 1").key("module text"));
  CHECK_FALSE(cache.load(key).has_value());
  std::string payload("object\0code", 11);
  cache.store(key, payload);
  auto got = cache.load(key);
  REQUIRE(got.has_value());
  CHECK(*got == payload);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().writes == 1);
  CHECK(DiskCache::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::system(("rm -rf " + root).c_str());
}

TEST_CASE("disk cache: corrupt, truncated and misplaced entries are ignored") {
  std::string dir = temp_dir();
  DiskCache cache(dir, "salt");
  std::string k1 = cache.key("one"), k2 = cache.key("two");
  cache.store(k1, "payload one");
  struct stat st;
  CHECK(stat((dir + "/" + k1 + ".qdc").c_str(), &st) != 0);  // kept in memory until flush()
  cache.flush();
  std::string entry = read_file(dir + "/" + k1 + ".qdc");
  CHECK_FALSE(entry.empty());

  std::string flipped = entry;
  flipped.back() ^= 1;
  write_file(dir + "/" + k1 + ".qdc", flipped);
  CHECK_FALSE(cache.load(k1).has_value());
  write_file(dir + "/" + k1 + ".qdc", entry.substr(0, entry.size() - 3));
  CHECK_FALSE(cache.load(k1).has_value());
  write_file(dir + "/" + k1 + ".qdc", "");
  CHECK_FALSE(cache.load(k1).has_value());
  write_file(dir + "/" + k2 + ".qdc", entry);  // a whole entry under another key
  CHECK_FALSE(cache.load(k2).has_value());
  CHECK_FALSE(cache.load("../" + k1).has_value());  // not a key
  cache.store(k1, "payload one");                     // rewritten whole
  CHECK(cache.load(k1) == std::optional<std::string>("payload one"));
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("disk cache: a directory others can write to is not used") {
  std::string dir = temp_dir();
  REQUIRE(chmod(dir.c_str(), 0777) == 0);
  CHECK_FALSE(DiskCache(dir, "salt").enabled());
  CHECK_FALSE(DiskCache("", "salt").enabled());
  std::system(("rm -rf " + dir).c_str());
}
