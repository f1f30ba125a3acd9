"""An n-body step: all pairs, softened (Plummer) gravity, leapfrog (kick-drift-kick) integration.

    python3 examples/nbody.py [arch] [--steps N] [-n N] [--f64]

Every body sums the pull of all the others in its own thread (no atomics: each thread writes only
its own acceleration); the inner loop over j runs serially in that thread. The fields use the
default float type, so `qd.init(default_fp=qd.f64)` (--f64) runs the same kernels in double.
tests/python/test_simulation_examples.py checks a few steps against numpy and that the total
momentum stays where it was.
"""
import argparse
import time

import numpy as np

import quadrants as qd

G = 1.0
SOFTENING = 0.05  # Plummer softening length: the force of a pair is G m_i m_j d / (|d|^2 + eps^2)^(3/2)
DT = 1e-3


@qd.data_oriented
class NBody:
    def __init__(self, n):
        self.n = n
        self.x = qd.Vector.field(3, float, shape=n)  # `float`: the default float type
        self.v = qd.Vector.field(3, float, shape=n)
        self.a = qd.Vector.field(3, float, shape=n)
        self.m = qd.field(float, shape=n)

    def load(self, x, v, m):
        self.x.from_numpy(x)
        self.v.from_numpy(v)
        self.m.from_numpy(m)
        self.compute_acceleration()

    @qd.kernel
    def compute_acceleration(self):
        for i in self.x:  # parallel over bodies
            xi = self.x[i]
            acc = qd.Vector.zero(float, 3)
            for j in range(self.n):  # serial in each thread; j == i adds exactly zero (d = 0)
                d = self.x[j] - xi
                r2 = d.dot(d) + SOFTENING**2
                acc += self.m[j] * d / (r2 * qd.sqrt(r2))
            self.a[i] = G * acc

    @qd.kernel
    def kick_drift(self, dt: float):
        for i in self.x:
            self.v[i] += 0.5 * dt * self.a[i]
            self.x[i] += dt * self.v[i]

    @qd.kernel
    def kick(self, dt: float):
        for i in self.v:
            self.v[i] += 0.5 * dt * self.a[i]

    def step(self, dt=DT):
        self.kick_drift(dt)
        self.compute_acceleration()
        self.kick(dt)

    @qd.kernel
    def energy(self) -> qd.f64:
        """Kinetic plus potential energy (each pair once), summed in f64.

        (`-> float` would be fixed when this class is defined, at import, before any qd.init: f32
        even under qd.init(default_fp=qd.f64). Parameters annotated `float` follow qd.init.)"""
        e: qd.f64 = 0.0
        for i in self.x:
            e += 0.5 * self.m[i] * self.v[i].dot(self.v[i])
            for j in range(i + 1, self.n):
                d = self.x[j] - self.x[i]
                e -= G * self.m[i] * self.m[j] / qd.sqrt(d.dot(d) + SOFTENING**2)
        return e


def initial_state(n, seed=0, dtype=np.float32):
    """A rotating ball of bodies of random masses (total 1) with some random motion on top."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    x *= (rng.uniform(0, 1, n) ** (1 / 3) / np.linalg.norm(x, axis=1))[:, None]  # uniform in the unit ball
    m = rng.uniform(0.5, 1.5, n)
    m /= m.sum()
    v = 0.5 * np.cross([0.0, 0.0, 1.0], x) + rng.normal(scale=0.1, size=(n, 3))
    return x.astype(dtype), v.astype(dtype), m.astype(dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", nargs="?", default="cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("-n", type=int, default=512)
    ap.add_argument("--f64", action="store_true")
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch), default_fp=qd.f64 if args.f64 else qd.f32)
    sim = NBody(args.n)
    x0, v0, m = initial_state(args.n, dtype=np.float64 if args.f64 else np.float32)
    sim.load(x0, v0, m)
    e0 = sim.energy()
    p0 = (m[:, None] * v0).sum(axis=0, dtype=np.float64)
    sim.step()  # compiles
    t = time.perf_counter()
    for _ in range(args.steps - 1):
        sim.step()
    elapsed = time.perf_counter() - t
    x, v = sim.x.to_numpy(), sim.v.to_numpy()
    p = (m[:, None] * v).sum(axis=0, dtype=np.float64)
    e = sim.energy()
    radius = np.linalg.norm(x - (m[:, None] * x).sum(axis=0) / m.sum(), axis=1)
    print(f"{args.n} bodies, {args.steps} steps on {args.arch} ({'f64' if args.f64 else 'f32'}) in {elapsed:.2f} s "
          f"({args.n**2 * (args.steps - 1) / elapsed / 1e9:.2f} G pair interactions/s): energy {e0:.6f} -> {e:.6f} "
          f"(drift {abs(e / e0 - 1):.1e}), |momentum change| {np.linalg.norm(p - p0):.1e} of {np.linalg.norm(p0):.1e}, "
          f"median radius {np.median(radius):.3f}")


if __name__ == "__main__":
    main()
