# The C++ core (pybind11 extension, csrc/python/bindings.cpp): internal, typed loosely on purpose.
from typing import Any

def __getattr__(name: str) -> Any: ...
