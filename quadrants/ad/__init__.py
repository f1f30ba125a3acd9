"""qd.ad: automatic differentiation in Python scope (docs/autodiff.md).

The compiler makes a kernel's adjoint (kernel.grad) and its dual (what runs inside FwdMode); this
module records and replays them: Tape runs the adjoints of the kernels called in it in reverse
order, FwdMode runs the duals of the kernels called in it, and grad_replaced / grad_for /
no_grad put a hand-written gradient in place of the compiled one."""
import functools
import warnings

import numpy as np

from quadrants._lib import runtime
from quadrants.memory.field import Field, placed_fields
from quadrants.memory.ndarray import Ndarray
from quadrants.memory.tensor import Tensor
from quadrants.types.enums import AutodiffMode, SNodeGradType


def clear_all_gradients(gradient_type=SNodeGradType.ADJOINT):
    """Zeroes the placed gradient (gradient_type=ADJOINT) or tangent (DUAL) of every field of the
    current qd.init."""
    kind = "dual" if gradient_type == SNodeGradType.DUAL else "grad"
    for f in placed_fields():
        c = f._placed_companion(kind)
        if c is not None:
            c.fill(0)


def _bare(x):
    return x._unwrap() if isinstance(x, Tensor) else x


def _recording(prog):
    return getattr(prog, "autodiff", None)


class Tape:
    """with qd.ad.Tape(loss=loss): records the kernels called in the block; on leaving it, seeds
    loss.grad with 1 and runs their adjoints in reverse order. clear_gradients: zero every field's
    gradient on entering (a field loss; the loss itself is zeroed). With loss=None nothing runs on
    leaving: call tape.grad(). validation (with qd.init(debug=True)): the recorded kernels check
    the global data access rule as they run: an element one of them read must not be written by
    it or a later one (the adjoints would read the new value; QuadrantsAssertionError naming the field).
    grad_check: fields whose gradients are compared with finite differences after the pass."""

    kind = "reverse"

    def __init__(self, loss=None, clear_gradients=True, validation=False, grad_check=None):
        self.loss = _bare(loss)
        self.clear_gradients = clear_gradients
        self.validation = validation
        self.grad_check = grad_check
        self.calls, self._kwargs, self.modes = [], [], []  # calls: (function, args), as the reference has them
        self.entered = False
        self.gradient_evaluated = False
        self._prog = None
        if validation and not runtime.config().debug:
            warnings.warn("Debug mode is disabled, autodiff valid check will not work. Please specify "
                          "`qd.init(debug=True)` to enable the check.", Warning, stacklevel=2)

    def __enter__(self):
        assert not self.entered, "Tape can be entered only once."
        self.entered = True
        loss = self.loss
        if isinstance(loss, Field):
            if loss.shape is None or len(loss.shape) != 0 or loss.element_shape:
                raise RuntimeError("The loss of `Tape` must be a 0-D field, i.e. scalar")
            if loss._placed_companion("grad") is None:
                raise RuntimeError("Gradients of loss are not allocated, please use qd.field(..., needs_grad=True) "
                                   "for all fields that are required by autodiff.")
            if self.clear_gradients:
                clear_all_gradients()
            loss.fill(0)
        elif isinstance(loss, Ndarray):
            if int(np.prod(loss.full_shape)) != 1:
                raise RuntimeError("The loss of `Tape` must be an ndarray with only one element")
            if loss.grad is None:
                raise RuntimeError("Gradients of loss are not allocated, please set needs_grad=True for all "
                                   "ndarrays that are required by autodiff.")
            loss.fill(0)
        elif loss is not None:
            raise TypeError(f"The loss of `Tape` must be a field or an ndarray, got {type(loss).__name__}")
        self._prog = runtime.program()
        if _recording(self._prog) is not None:
            raise RuntimeError("qd.ad.Tape cannot be nested in another Tape or FwdMode")
        if self.validation:  # what the tape's kernels read is recorded from here on
            for f in placed_fields():
                c = f._placed_companion("checkbit")
                if c is not None:
                    c.fill(0)
        self._prog.autodiff = self
        return self

    def __exit__(self, exc_type, value, tb):
        self._prog.autodiff = None
        try:
            if exc_type is None and self.loss is not None:
                self.grad()
        finally:
            for (func, _), mode in zip(self.calls, self.modes):
                if mode is not None:
                    func.autodiff_mode = mode

    def insert(self, func, args, kwargs=None):
        mode = getattr(func, "autodiff_mode", None)
        self.modes.append(mode)
        if self.validation and mode is not None and runtime.config().debug:
            func.autodiff_mode = AutodiffMode.VALIDATION  # its calls check the global data access rule
        self.calls.append((func, args))
        self._kwargs.append(kwargs or {})

    def grad(self):
        assert self.entered, "Before evaluating gradients the tape must be entered."
        assert not self.gradient_evaluated, "Gradients of this tape have been evaluated."
        if self.loss is not None:
            self.loss.grad.fill(1.0)
        for (func, args), kwargs in zip(reversed(self.calls), reversed(self._kwargs)):
            func.grad(*args, **kwargs)
        self.gradient_evaluated = True
        if self.grad_check:
            for x in self.grad_check:
                _check_grad(self, _bare(x))


def _check_grad(tape, x, eps=1e-4, rtol=1e-2):
    """Compares x.grad with a central difference of the loss along a random direction."""
    if not isinstance(x, Field) or not isinstance(tape.loss, Field):
        return
    rng = np.random.default_rng(0)
    base = x.to_numpy().astype(np.float64)
    direction = rng.standard_normal(base.shape)
    analytic = float(np.sum(x.grad.to_numpy().astype(np.float64) * direction))
    fields = [f for f in placed_fields()]
    saved = {f: f.to_numpy() for f in fields}

    def loss_at(t):
        for f in fields:
            f.from_numpy(saved[f])
        x.from_numpy((base + t * direction).astype(x.dtype.np))
        tape.loss[None] = 0
        prev, tape._prog.autodiff = tape._prog.autodiff, None
        try:
            for (func, args), kwargs in zip(tape.calls, tape._kwargs):
                func(*args, **kwargs)
        finally:
            tape._prog.autodiff = prev
        return float(tape.loss[None])

    numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
    for f in fields:
        f.from_numpy(saved[f])
    if not np.isclose(analytic, numeric, rtol=rtol, atol=1e-4):
        raise AssertionError(f"gradient check of {x.name}: the adjoint gives {analytic}, a central difference "
                             f"gives {numeric}")


def _taped_as_one(func):
    """func, recorded by a Tape as one call (whose .grad the tape runs); the kernels it calls are not
    recorded one by one."""

    @functools.wraps(func)
    def decorated(*args, **kwargs):
        prog = runtime.program()
        tape = _recording(prog)
        if tape is None or tape.kind != "reverse":
            return func(*args, **kwargs)
        tape.insert(decorated, args, kwargs)
        prog.autodiff = None
        try:
            return func(*args, **kwargs)
        finally:
            prog.autodiff = tape

    return decorated


def grad_replaced(func):
    """Decorates a Python function calling kernels: inside a Tape it is recorded as one call, and
    the tape's reverse pass runs the function registered with @qd.ad.grad_for(func) instead of the
    adjoints of the kernels it calls."""

    decorated = _taped_as_one(func)

    decorated.grad = None
    decorated._qd_grad_replaced = True
    return decorated


def grad_for(primal):
    """@qd.ad.grad_for(forward): the decorated function is the gradient of `forward` (which must be
    decorated with @qd.ad.grad_replaced)."""

    def decorator(func):
        if not getattr(primal, "_qd_grad_replaced", False):
            raise RuntimeError(f"Primal function `{primal.__name__}` must be decorated by qd.ad.grad_replaced")
        if primal.grad is not None:
            raise RuntimeError(f"Primal function `{primal.__name__}` has already been registered a gradient "
                               f"`{primal.grad.__name__}`")

        @functools.wraps(func)
        def decorated(*args, **kwargs):
            return func(*args, **kwargs)

        primal.grad = decorated
        return decorated

    return decorator


def no_grad(func):
    """A kernel (or function) whose reverse pass does nothing: func.grad(...) returns at once."""

    decorated = _taped_as_one(func)

    def placeholder(*args, **kwargs):
        return None

    decorated.grad = placeholder
    return decorated


class FwdMode:
    """with qd.ad.FwdMode(loss=y, param=x, seed=[...]): kernels called in the block run their dual
    versions, carrying the tangent `seed` of x (x.dual) to every output's .dual (a Jacobian-vector
    product). param: a scalar field with a placed .dual; seed: its flattened tangent (default [1.0]
    for a 0-D param)."""

    kind = "forward"

    def __init__(self, loss, param, seed=None, clear_gradients=True):
        self.loss = [_bare(x) for x in loss] if isinstance(loss, (list, tuple)) else _bare(loss)
        self.param = _bare(param)
        self.seed = seed
        self.clear_gradients = clear_gradients
        self._prog = None

    def __enter__(self):
        p = self.param
        if not isinstance(p, Field) or p.element_shape:
            raise RuntimeError(f"FwdMode: param must be a scalar field, got {type(p).__name__}")
        if p._placed_companion("dual") is None:
            raise RuntimeError(f"FwdMode: {p.name}.dual is not allocated: use needs_dual=True or qd.root.lazy_dual()")
        size = int(np.prod(p.shape)) if p.shape else 1
        seed = self.seed
        if seed is None:
            if size != 1:
                raise RuntimeError(f"FwdMode: param has {size} elements: give a seed of that many values")
            seed = [1.0]
        seed = np.asarray(seed, dtype=np.float64).reshape(-1)
        if seed.size != size:
            raise RuntimeError(f"FwdMode: the seed has {seed.size} values, param {p.name} has {size} elements")
        self._prog = runtime.program()
        if _recording(self._prog) is not None:
            raise RuntimeError("qd.ad.FwdMode cannot be nested in another FwdMode or Tape")
        if self.clear_gradients:
            clear_all_gradients(SNodeGradType.DUAL)
        p.dual.from_numpy(seed.reshape(p.shape).astype(p.dtype.np))
        self._prog.autodiff = self
        return self

    def __exit__(self, exc_type, value, tb):
        self._prog.autodiff = None
        self.param.dual.fill(0)  # the seed is cleared; the outputs' .dual stay

    def insert(self, func, args, kwargs=None):  # kernels run their dual versions instead (Kernel.__call__)
        pass


__all__ = ["FwdMode", "SNodeGradType", "Tape", "clear_all_gradients", "grad_for", "grad_replaced", "no_grad"]
