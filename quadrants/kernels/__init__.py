"""Kernels and funcs: argument binding, specialisation on compile-time arguments, the cache, launch."""
