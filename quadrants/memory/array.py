"""What fields and ndarrays share: memory owned by the runtime of one qd.init(), copied to and
from numpy and torch, copied between arrays, and exported through DLPack."""
import operator

import numpy as np

from quadrants._lib import runtime
from quadrants.memory.host import PyMatrix
from quadrants.types import scope
from quadrants.types.exceptions import OUT_OF_BOUND, QuadrantsOutOfBoundsError, QuadrantsTypeError
from quadrants.types.primitive_types import describe, is_py_scalar

_COPY_FALSE_NEEDS_CPU = "a zero-copy view needs arch=qd.cpu (other arches keep their memory on the device)"


class _HostMemory:
    """Exposes a cpu allocation to numpy; holds the array it belongs to, so the memory outlives the view."""

    def __init__(self, owner, shape, dtype):
        self.owner = owner
        self.__array_interface__ = {"data": (owner.handle, False), "shape": tuple(shape),
                                    "typestr": dtype.str, "version": 3}


def python_scope(what):
    """Raises QuadrantsSyntaxError (naming the kernel line) when called while a kernel is compiled:
    Python-scope operations would run once, at compile time, not at each launch."""
    ctx = scope.current()
    if ctx is not None:
        ctx.syntax_error(f"{what} is a Python-scope operation and cannot be used inside a kernel or @qd.func (it "
                         f"would run once, while the kernel compiles); call it before or after the kernel")


def _scope_checked(method):
    def checked(self, *args, **kwargs):
        python_scope(f"{method.__name__}()")
        return method(self, *args, **kwargs)
    checked.__name__ = checked.__qualname__ = method.__name__
    checked.__doc__ = method.__doc__
    checked._qd_builtin = True  # the front end calls it (with kernel values too) so that it can refuse
    return checked


def host_array(value, dtype, what):
    """`value` (a number, a sequence or array of numbers) as a numpy array of `dtype` (None: numpy's
    choice), for writing into a field or ndarray from Python: numpy's value conversion, and a TypeError / OverflowError /
    ValueError naming `what` for what it cannot convert (a function, a string, 2**64 into an i32)."""
    try:
        a = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (ValueError, TypeError) as e:  # ragged nesting, an object numpy cannot read
        raise ValueError(f"{what}: {describe(value)} is not a number or a rectangular array of numbers ({e})") from None
    if not (a.dtype.kind in "biuf" or a.dtype.kind == "O" and all(is_py_scalar(e) for e in a.flat)):
        raise TypeError(f"{what}: expected a number or an array of numbers, got {describe(value)}")
    if dtype is None:  # numpy's inferred dtype
        if a.dtype.kind == "O":
            raise OverflowError(f"{what}: {describe(value)} does not fit in 64 bits")
        return a
    try:
        return np.asarray(value, dtype=dtype.np)  # Python numbers: numpy checks their range
    except OverflowError:
        raise OverflowError(f"{what}: {describe(value)} does not fit in {dtype}{dtype.range_text()}") from None
    except (ValueError, TypeError) as e:  # NaN or infinity into an integer dtype
        raise ValueError(f"{what}: cannot convert {describe(value)} to {dtype} ({e})") from None


def _repeated_word(v):
    """The 4-byte word whose repetition is the memory of an array filled with the scalar `v` (a numpy
    0-d array), or None: not a scalar, or 8-byte elements whose two halves differ."""
    if v.ndim:
        return None
    b = v.tobytes()
    if len(b) < 4:
        b = b * (4 // len(b))
    elif len(b) == 8 and b[:4] != b[4:]:
        return None
    return int(np.frombuffer(b[:4], dtype=np.uint32)[0])


class _IndexCountError(IndexError, AssertionError):
    """A Python-scope index with the wrong number of integers (an AssertionError as in Quadrants)."""


class RuntimeArray:
    """Subclasses set dtype, full_shape, handle and _program."""

    handle = None
    _program = None
    _qd_layout = None  # a permutation of the axes: the canonical axis at each memory level, outermost first

    @property
    def layout(self):
        """The axes in memory order, outermost first, as canonical axis numbers ((1, 0): the second axis
        outermost; what order="ji" / layout= gave); None for the row-major order."""
        return self._qd_layout
    grad = None  # the gradient companion (needs_grad=True), an array of the same kind, shape and layout

    @property
    def n(self):
        """Rows of a vector / matrix array's elements (a vector's size); None for scalar elements."""
        return self.element_shape[0] if self.element_shape else None

    @property
    def m(self):
        """Columns of a matrix array's elements; 1 for vectors, None for scalar elements."""
        return self.element_shape[1] if len(self.element_shape) > 1 else (1 if self.element_shape else None)

    @property
    def _lead_shape(self):
        return tuple(self.full_shape[:len(self.full_shape) - len(self.element_shape)])

    @property
    def _physical_shape(self):
        """The shape of the storage: the canonical shape permuted by the layout."""
        lead = self._lead_shape
        return tuple(lead[a] for a in self._qd_layout) if self._qd_layout else lead

    @property
    def _storage_shape(self):
        return self._physical_shape + tuple(self.element_shape)

    def _canonical(self, stored):
        """A numpy array of the storage shape seen in canonical axis order (a view)."""
        if not self._qd_layout:
            return stored
        n = len(self._qd_layout)
        inverse = [self._qd_layout.index(i) for i in range(n)]
        return stored.transpose(inverse + list(range(n, stored.ndim)))

    def _stored(self, canonical):
        """The inverse of _canonical: a canonical-order array in storage order (a view)."""
        if not self._qd_layout:
            return canonical
        n = len(self._qd_layout)
        return canonical.transpose(list(self._qd_layout) + list(range(n, canonical.ndim)))

    def _check(self):
        if self._program is not runtime._program:
            raise RuntimeError(f"{self!r} belongs to an earlier qd.init(); create it again")

    def _release(self):
        try:
            if self.handle is not None and self._program is runtime._program:
                self._program.runtime.deallocate(self.handle)
        except Exception:
            pass  # interpreter shutdown

    def __del__(self):
        self._release()

    # --- shapes -----------------------------------------------------------------------------------
    def _host_shape(self, keep_dims):
        """The numpy shape: a vector's elements are (n,), or (n, 1) with keep_dims; an (n, 1)
        matrix's are (n,) unless keep_dims (Quadrants' rule)."""
        shape = tuple(self.full_shape[:len(self.full_shape) - len(self.element_shape)])
        elem = tuple(self.element_shape)
        if keep_dims and len(elem) == 1:
            elem = elem + (1,)
        elif not keep_dims and len(elem) == 2 and elem[1] == 1:
            elem = elem[:1]
        return shape + elem

    def _fits(self, shape):
        """Whether an array of `shape` holds these elements: the same leading axes, and element axes
        equal up to axes of size 1 (a 3-vector takes (3,), (3, 1) or (1, 3))."""
        n = len(self.full_shape) - len(self.element_shape)
        if not self.element_shape:  # scalar elements: exactly the array's shape
            return tuple(shape) == tuple(self.full_shape)
        squeeze = lambda dims: tuple(d for d in dims if d != 1)  # noqa: E731
        return (tuple(shape[:n]) == tuple(self.full_shape[:n])
                and squeeze(shape[n:]) == squeeze(self.element_shape))

    def _zero_copy_view(self):
        """A numpy array over this array's memory (arch=qd.cpu), or None elsewhere."""
        self._check()
        if self._program.config.arch is not runtime.cpu or self.handle is None:
            return None
        return self._canonical(np.asarray(_HostMemory(self, self._storage_shape, self.dtype.np)))

    # --- one element --------------------------------------------------------------------------------
    def _label(self):
        return repr(self)

    def _offset(self, key):
        """The byte offset of element `key`: one integer per dimension (a bare integer for one, None
        or () for none); IndexError / TypeError naming the array otherwise."""
        shape = self._lead_shape
        if key is None:
            key = ()
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(shape):
            raise _IndexCountError(f"{self._label()} has {len(shape)} dimension(s), got index {key}: Slicing is not "
                                   f"supported on qd.field; give one integer per dimension")
        flat = 0
        for k, n in zip(key, shape):
            if isinstance(k, slice):
                raise TypeError(f"{self._label()}[{key if len(key) > 1 else key[0]!r}]: Detected illegal element of "
                                f"type: slice. Please be aware that slicing a qd.field is not supported so far.")
            if isinstance(k, (bool, np.bool_)) or not hasattr(k, "__index__"):
                raise TypeError(f"{self._label()}[{key if len(key) > 1 else key[0]!r}]: an index must be an "
                                f"integer, got {describe(k)}")
            k = operator.index(k)
            if not 0 <= k < n:
                raise QuadrantsOutOfBoundsError(f"{OUT_OF_BOUND}: index {key} out of range for shape {shape}")
        ks = tuple(operator.index(k) for k in key)
        if self._qd_layout:
            ks = tuple(ks[a] for a in self._qd_layout)
        for k, n in zip(ks, self._physical_shape):
            flat = flat * n + k
        return flat * int(np.prod(self.element_shape, dtype=np.int64)) * self.dtype.np.itemsize

    def _read_element(self, key):
        """Element `key`, read alone: a Python int / float / bool for scalar elements (as the
        reference returns), a vector / matrix (numpy-backed, with .n, .norm(), ...) otherwise."""
        out = np.empty(self.element_shape, dtype=self.dtype.np)
        self._program.runtime.read(self.handle, self._offset(key), out.reshape(-1))
        if not self.element_shape:
            return out[()].item()
        out = out.view(PyMatrix)
        out._qd_dtype = self.dtype
        out._qd_source = (self, key)  # x[i][0, 1] = v and x[i].y = v write the element back
        return out

    def _write_element(self, key, value):
        what = f"{self._label()}[{key!r}] = ..."
        value = host_array(value, self.dtype, what)
        try:
            arr = np.ascontiguousarray(np.broadcast_to(value, self.element_shape))
        except ValueError:
            raise ValueError(f"{what}: a value of shape {value.shape} does not fit an element of shape "
                             f"{self.element_shape}") from None
        self._program.runtime.write(self.handle, self._offset(key), arr.reshape(-1))

    # --- numpy ------------------------------------------------------------------------------------
    @_scope_checked
    def to_numpy(self, dtype=None, *, keep_dims=False, copy=True):
        """A numpy array of the contents. dtype: convert to it. keep_dims: see _host_shape.
        copy: True (default) an independent copy; False a view of the memory itself, which needs
        arch=qd.cpu (else ValueError); None a view where possible, else a copy."""
        self._check()
        shape = self._host_shape(keep_dims)
        if copy is not True:
            view = self._zero_copy_view()
            if view is not None and (dtype is None or np.dtype(dtype) == view.dtype):
                return view.reshape(shape)
            if copy is False:
                raise ValueError(f"to_numpy(copy=False): {_COPY_FALSE_NEEDS_CPU}" if view is None else
                                 f"to_numpy(copy=False) cannot convert {view.dtype} to {np.dtype(dtype)}")
        out = np.empty(self._storage_shape, dtype=self.dtype.np)
        if out.size:
            self._program.runtime.read(self.handle, 0, out)
        out = np.ascontiguousarray(self._canonical(out)).reshape(shape)
        return out if dtype is None else out.astype(dtype)

    @_scope_checked
    def from_numpy(self, arr):
        """Copies a numpy array (or anything np.asarray takes) of the same shape into this array."""
        self._check()
        arr = host_array(arr, self.dtype, f"{self!r}.from_numpy()")
        if not self._fits(arr.shape):
            raise ValueError(f"from_numpy: shape {arr.shape} does not match {self.full_shape}")
        if arr.size:
            arr = arr.reshape(self.full_shape)
            self._program.runtime.write(self.handle, 0, np.ascontiguousarray(self._stored(arr)).reshape(-1))

    def fill(self, value):
        """Sets every element (every component of vector / matrix elements) to `value`. Inside a
        kernel it compiles to a loop over the elements."""
        ctx = scope.current()
        if ctx is not None:
            return ctx.fill(self, value)
        self._check()
        v = host_array(value, self.dtype, f"{self!r}.fill()")
        nbytes = int(np.prod(self._storage_shape)) * v.itemsize
        word = _repeated_word(v)
        if word is None or nbytes % 4:  # a vector value, an f64 whose halves differ, ...: from the host
            self.from_numpy(np.full(self.full_shape, v))
        elif nbytes:  # set on the device, no host copy of the contents
            self._program.runtime.fill(self.handle, 0, nbytes, word)

    @_scope_checked
    def copy_from(self, other):
        """Copies the contents of another field (or ndarray) of the same shape, converting the dtype."""
        if not isinstance(other, RuntimeArray):
            raise TypeError(f"copy_from: the source must be a qd.field or qd.ndarray, got {type(other).__name__}")
        if tuple(other.full_shape) != tuple(self.full_shape):
            raise ValueError(f"copy_from: the source's shape {other.full_shape} does not match {self.full_shape}")
        self.from_numpy(other.to_numpy())

    # --- torch ------------------------------------------------------------------------------------
    @_scope_checked
    def to_torch(self, device=None, *, keep_dims=False, copy=True):
        """A torch tensor of the contents (needs torch). On arch=qd.cpu, copy=False / None share the
        memory (through DLPack); device= moves the tensor."""
        import torch

        if copy is not True:
            view = self._zero_copy_view()
            if view is not None:
                t = torch.from_dlpack(view).reshape(self._host_shape(keep_dims))
                return t if device is None else t.to(device)
            if copy is False:
                raise ValueError(f"to_torch(copy=False): {_COPY_FALSE_NEEDS_CPU}")
        t = torch.from_numpy(self.to_numpy(keep_dims=keep_dims))
        return t if device is None else t.to(device)

    @_scope_checked
    def from_torch(self, tensor):
        """Copies a torch tensor (any device) of the same shape into this array."""
        self.from_numpy(tensor.detach().cpu().contiguous().numpy())

    # --- DLPack -----------------------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (np.from_dlpack(x), torch.from_dlpack(x)). On arch=qd.cpu the consumer shares
        this array's memory; on other arches it gets a host copy (copy=False: BufferError)."""
        view = self._zero_copy_view() if copy is not True else None
        if view is None:
            if copy is False:
                raise BufferError(f"__dlpack__(copy=False): {_COPY_FALSE_NEEDS_CPU}")
            view = self.to_numpy()
        kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device)) if v is not None}
        return view.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: what __dlpack__ exports is host memory on every arch

    fill._qd_builtin = True


def external_array(value, kernel_name, param_name):
    """A kernel's ndarray argument given as a DLPack array other than numpy (a torch CPU tensor, ...):
    a numpy view of its memory, so the kernel reads and writes the array itself."""
    if isinstance(value, RuntimeArray):
        raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param_name}' expects an ndarray, got a "
                                 f"qd.field; pass fields through qd.template() parameters")
    try:
        return np.from_dlpack(value)
    except Exception as e:  # a device tensor, or a dtype numpy lacks
        raise QuadrantsTypeError(f"kernel '{kernel_name}': argument '{param_name}': cannot read this "
                                 f"{type(value).__name__} as host memory through DLPack ({e}); pass a CPU array "
                                 f"or a qd.ndarray") from None
