#pragma once
// Loading a driver library at run time (the GPU runtimes are never linked at build time).
#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace qd {

// dlopens the first of `names` that loads; on failure `error` says `why` and dlopen's reason for
// the first name (the one that matters), and the result is null. Never dlclose'd: drivers keep
// threads and state alive until the process exits.
inline void *open_first_library(std::initializer_list<const char *> names, const std::string &why,
                                std::string &error) {
  std::string first;
  for (const char *name : names) {
    if (void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    const char *e = dlerror();
    if (first.empty() && e) first = e;
  }
  error = why + ": " + first;
  return nullptr;
}

// Fills `slot` with `symbol`; the first missing one is recorded in `error` ("<library> lacks X").
template <typename F>
void resolve_symbol(void *lib, const char *symbol, F &slot, const char *library, std::string &error) {
  slot = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!slot && error.empty()) error = std::string(library) + " lacks " + symbol;
}

}  // namespace qd
