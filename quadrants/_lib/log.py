"""Quadrants' log levels (qd.TRACE ... qd.CRITICAL), qd.set_logging_level and the messages the package
logs. qd.init(log_level=...) sets the level (default "info"); a message is printed to stderr when its
level is at or above it."""
import sys

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
supported_log_levels = [TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL]  # lowest first

_level = INFO


def _rank(level):
    if not isinstance(level, str) or level.lower() not in supported_log_levels:
        raise ValueError(f"log level {level!r}: choose one of {', '.join(supported_log_levels)}")
    return supported_log_levels.index(level.lower())


def set_logging_level(level):
    """Messages of `level` and above are printed from now on ("trace", "debug", "info", "warn",
    "error" or "critical"; qd.TRACE ... qd.CRITICAL)."""
    global _level
    _rank(level)
    _level = level.lower()


def get_logging_level():
    return _level


def is_logging_effective(level):
    """Whether a message of `level` would be printed at the current level."""
    return _rank(level) >= _rank(_level)


def _logger(level):
    def log(msg):
        if is_logging_effective(level):
            print(f"[Quadrants] [{level}] {msg}", file=sys.stderr)
    log.__name__ = level
    log.__doc__ = f"Prints `msg` to stderr when {level!r} messages are effective."
    return log


trace, debug, info, warn, error, critical = (_logger(lv) for lv in supported_log_levels)
