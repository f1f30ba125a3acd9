"""The deprecated host-side entry points: parallel_sort and PrefixSumExecutor (docs/algorithms.md).

Both run the device-wide algorithms of this package in kernels of their own: parallel_sort is the
radix sort (stable; the reference's was an odd-even merge sort, not stable), PrefixSumExecutor an
exclusive scan followed by an add (inclusive, in place). They run on every arch (the reference's
PrefixSumExecutor: CUDA and Vulkan only)."""
import warnings

import numpy as np

from quadrants import types as T
from quadrants.memory.field import Field
from quadrants.kernels.kernel import Kernel
from quadrants.memory.ndarray import Ndarray, ndarray
from quadrants.types import template

from quadrants import language as qd
from quadrants.algorithms._common import SCALAR_DTYPES, check_depth, min_depth_for
from quadrants.algorithms._radix_sort import sort, sort_scratch_slots
from quadrants.algorithms._scan import exclusive_scan_add, exclusive_scan_scratch_slots


_ND = qd.types.ndarray(ndim=1)
_sort_kernels = {}


def _sort_kernel(keys_field, values_field):
    """A kernel sorting the caller's field / ndarray (a field is a template argument, an ndarray an
    ndarray argument; the temporaries are ndarray arguments: new ones do not recompile)."""
    key = (keys_field, values_field)
    if key not in _sort_kernels:
        KA = template() if keys_field else _ND
        VA = template() if values_field else _ND

        def _sort_impl(keys: KA, tmp_keys: _ND, values: VA, tmp_values: _ND, scratch: _ND, n: qd.i32,
                       key_dtype: template(), has_values: template(), end_bit: template(), depth: template()):
            sort(keys, tmp_keys, values, tmp_values, scratch, n, key_dtype, has_values, end_bit, depth)

        _sort_kernels[key] = Kernel(_sort_impl)
    return _sort_kernels[key]


def _copy_in_impl(src: template(), dst: _ND, n: qd.i32, off: template()):
    for i in range(n):
        dst[i] = src[i + off]


def _copy_out_impl(src: _ND, dst: template(), n: qd.i32, off: template()):
    for i in range(n):
        dst[i + off] = src[i]


_copy_in, _copy_out = Kernel(_copy_in_impl), Kernel(_copy_out_impl)


class _ZeroBased:
    """A field with an offset (qd.field(..., offset=)) staged in an ndarray indexed from 0, and
    written back on exit; any other array as it is."""

    def __init__(self, a):
        self.a = a
        self.off = a.offset[0] if isinstance(a, Field) and a.offset else 0

    def __enter__(self):
        if not self.off:
            return self.a
        self.buf = ndarray(self.a.dtype, shape=self.a.shape)
        _copy_in(self.a, self.buf, self.a.shape[0], self.off)
        return self.buf

    def __exit__(self, *exc):
        if self.off and exc[0] is None:
            _copy_out(self.buf, self.a, self.a.shape[0], self.off)
        return False


def _check_1d(name, a):
    if not isinstance(a, (Field, Ndarray)) or len(a.shape) != 1 or getattr(a, "element_shape", ()):
        raise TypeError(f"qd.algorithms.parallel_sort: {name} must be a 1-D qd.field or qd.ndarray of scalars, "
                        f"got {a!r}")


def parallel_sort(keys, values=None):
    """Sorts keys ascending in place (values along, when given). Deprecated: use qd.algorithms.sort
    (a @qd.func, composed into your own kernel). Runs the radix sort, which is stable."""
    warnings.warn("qd.algorithms.parallel_sort is deprecated; use qd.algorithms.sort (a @qd.func, called at the "
                  "top level of a kernel) instead: see docs/algorithms.md", DeprecationWarning, stacklevel=2)
    _check_1d("keys", keys)
    if values is not None:
        _check_1d("values", values)
        if values.shape != keys.shape:
            raise ValueError(f"qd.algorithms.parallel_sort: values has shape {values.shape}, keys {keys.shape}")
    N = keys.shape[0]
    if N <= 1:
        return
    kd, vd = keys.dtype, (values.dtype if values is not None else None)
    if kd not in SCALAR_DTYPES or (vd is not None and vd not in SCALAR_DTYPES):
        # a dtype the radix sort does not take (i8, f16, ...): sorted on the host, stably
        h = keys.to_numpy()
        order = np.argsort(h, kind="stable")
        keys.from_numpy(h[order])
        if values is not None:
            values.from_numpy(values.to_numpy()[order])
        return
    depth = min_depth_for(N)
    tmp_keys = ndarray(kd, shape=(N,))
    scratch = ndarray(T.u32, shape=(sort_scratch_slots(N, depth),))
    if values is None:
        with _ZeroBased(keys) as k0:
            k = _sort_kernel(isinstance(k0, Field), isinstance(k0, Field))
            k(k0, tmp_keys, k0, tmp_keys, scratch, N, kd, False, kd.bits, depth)
    else:
        with _ZeroBased(keys) as k0, _ZeroBased(values) as v0:
            k = _sort_kernel(isinstance(k0, Field), isinstance(v0, Field))
            k(k0, tmp_keys, v0, ndarray(vd, shape=(N,)), scratch, N, kd, True, kd.bits, depth)


def _inclusive_impl(arr: template(), tmp: _ND, scratch: _ND, n: qd.i32, depth: template()):
    exclusive_scan_add(arr, tmp, scratch, n, qd.i32, depth)
    for i in range(n):
        arr[i] += tmp[i]


def _inclusive_nd_impl(arr: _ND, tmp: _ND, scratch: _ND, n: qd.i32, depth: template()):
    exclusive_scan_add(arr, tmp, scratch, n, qd.i32, depth)
    for i in range(n):
        arr[i] += tmp[i]


_inclusive_kernel = Kernel(_inclusive_impl)
_inclusive_nd_kernel = Kernel(_inclusive_nd_impl)


class PrefixSumExecutor:
    """Inclusive in-place prefix sum of a 1-D i32 field / ndarray of a fixed length. Deprecated: use
    qd.algorithms.exclusive_scan_add (a @qd.func) instead."""

    def __init__(self, length):
        warnings.warn("qd.algorithms.PrefixSumExecutor is deprecated; use qd.algorithms.exclusive_scan_add (a "
                      "@qd.func, called at the top level of a kernel) instead: see docs/algorithms.md",
                      DeprecationWarning, stacklevel=2)
        length = int(length)
        if length < 0:
            raise ValueError(f"qd.algorithms.PrefixSumExecutor: length must be >= 0, got {length}")
        self.sorting_length = length
        self._depth = check_depth(min_depth_for(length))
        self._tmp = ndarray(T.i32, shape=(max(length, 1),))
        self._scratch = ndarray(T.u32, shape=(exclusive_scan_scratch_slots(length, self._depth),))

    def run(self, input_arr):
        """input_arr[i] = input_arr[0] + ... + input_arr[i], for i < length."""
        if getattr(input_arr, "dtype", None) != T.i32:
            raise RuntimeError("Only qd.i32 type is supported for prefix sum.")
        if not isinstance(input_arr, (Field, Ndarray)) or len(input_arr.shape) != 1:
            raise TypeError("qd.algorithms.PrefixSumExecutor.run: input_arr must be a 1-D i32 qd.field or qd.ndarray")
        if input_arr.shape[0] < self.sorting_length:
            raise ValueError(f"qd.algorithms.PrefixSumExecutor.run: input_arr has {input_arr.shape[0]} elements, "
                             f"fewer than the executor's length {self.sorting_length}")
        if self.sorting_length:
            with _ZeroBased(input_arr) as a:
                k = _inclusive_kernel if isinstance(a, Field) else _inclusive_nd_kernel
                k(a, self._tmp, self._scratch, self.sorting_length, self._depth)
