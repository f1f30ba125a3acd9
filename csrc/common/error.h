#pragma once
// Errors the core raises; the bindings turn them into the Python exception classes of
// quadrants/types/exceptions.py (CompileError -> QuadrantsSyntaxError / QuadrantsTypeError).
#include <stdexcept>
#include <string>

namespace qd {

// Where a statement came from in the user's kernel source.
struct SourceLoc {
  std::string file;
  int line = 0;
  std::string text;  // the source line itself, shown in error messages
};

// Codegen: the backend could not produce valid code (an internal error, or a target limit).
enum class ErrorKind { Syntax, Type, Codegen };

class CompileError : public std::runtime_error {
 public:
  CompileError(ErrorKind kind, const std::string &message, const SourceLoc &loc = {})
      : std::runtime_error(format(message, loc)), kind(kind), loc(loc) {}
  ErrorKind kind;
  SourceLoc loc;

  static std::string format(const std::string &message, const SourceLoc &loc) {
    if (loc.file.empty()) return message;
    std::string s = loc.file + ":" + std::to_string(loc.line) + ":\n    " + loc.text + "\n" + message;
    return s;
  }
};

[[noreturn]] inline void type_error(const std::string &msg, const SourceLoc &loc) {
  throw CompileError(ErrorKind::Type, msg, loc);
}
[[noreturn]] inline void syntax_error(const std::string &msg, const SourceLoc &loc) {
  throw CompileError(ErrorKind::Syntax, msg, loc);
}

// A device or driver failure at run time (no GPU, a failed launch, ...): surfaces as RuntimeError.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace qd
