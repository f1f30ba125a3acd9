"""A small particle simulation: a @qd.dataclass for particles, qd.math vectors, a @qd.data_oriented
class holding the fields, and atomics accumulating a density grid.

    python3 examples/particles.py [--arch cpu|vulkan|...] [--steps N]

Particles fall under gravity in the unit box, bounce off its walls (losing some speed), and each
step scatters their mass into a GRID x GRID density grid. `reference()` is the same simulation in
numpy; tests/python/test_examples.py checks one against the other.
"""
import argparse

import numpy as np

import quadrants as qd

vec2 = qd.math.vec2
GRID = 16
DT = 0.01
GRAVITY = (0.0, -9.8)
RESTITUTION = 0.8


@qd.dataclass
class Particle:
    x: vec2
    v: vec2
    m: qd.f32

    @qd.func
    def advance(self, dt: qd.f32):
        self.v += vec2(GRAVITY) * dt
        self.x += self.v * dt
        for d in qd.static(range(2)):  # reflect off the walls of [0, 1]
            if self.x[d] < 0.0:
                self.x[d] = -self.x[d]
                self.v[d] = -self.v[d] * RESTITUTION
            if self.x[d] > 1.0:
                self.x[d] = 2.0 - self.x[d]
                self.v[d] = -self.v[d] * RESTITUTION


@qd.data_oriented
class Simulation:
    def __init__(self, n):
        self.n = n
        self.particles = Particle.field(shape=n)
        self.density = qd.field(qd.f32, shape=(GRID, GRID))

    def load(self, x, v, m):
        self.particles.x.from_numpy(x)
        self.particles.v.from_numpy(v)
        self.particles.m.from_numpy(m)

    @qd.func
    def cell(self, x):
        return qd.math.clamp(qd.math.ivec2(x * GRID), 0, GRID - 1)

    @qd.kernel
    def step(self, dt: qd.f32):
        for i in self.particles:
            p = self.particles[i]
            p.advance(dt)
            self.particles[i] = p
        for c in qd.grouped(self.density):
            self.density[c] = 0.0
        for i in self.particles:
            c = self.cell(self.particles[i].x)
            self.density[c] += self.particles[i].m  # atomic: many particles share a cell

    @qd.kernel
    def kinetic_energy(self) -> qd.f32:
        e = 0.0
        for i in self.particles:
            v = self.particles[i].v
            e += 0.5 * self.particles[i].m * v.dot(v)
        return e


def initial_state(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.1, 0.9, (n, 2)).astype(np.float32)
    v = rng.uniform(-1.0, 1.0, (n, 2)).astype(np.float32)
    m = rng.uniform(0.5, 1.5, n).astype(np.float32)
    return x, v, m


def reference(x, v, m, steps, dt=DT):
    """The same simulation in numpy (f32): positions, velocities."""
    x, v = x.copy(), v.copy()
    g = np.array(GRAVITY, np.float32)
    dt = np.float32(dt)
    for _ in range(steps):
        v = v + g * dt
        x = x + v * dt
        low, high = x < 0, x > 1
        x = np.where(low, -x, x)
        v = np.where(low, -v * np.float32(RESTITUTION), v)
        x = np.where(high, np.float32(2) - x, x)
        v = np.where(high, -v * np.float32(RESTITUTION), v)
    return x, v


def density_of(x, m):
    cells = np.clip((x * GRID).astype(np.int32), 0, GRID - 1)
    d = np.zeros((GRID, GRID), np.float64)
    np.add.at(d, (cells[:, 0], cells[:, 1]), m)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("-n", type=int, default=10000)
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    sim = Simulation(args.n)
    x0, v0, m = initial_state(args.n)
    sim.load(x0, v0, m)
    for _ in range(args.steps):
        sim.step(DT)
    x = sim.particles.x.to_numpy()
    rx, _ = reference(x0, v0, m, args.steps)
    print(f"{args.n} particles, {args.steps} steps on {args.arch}: kinetic energy {sim.kinetic_energy():.3f}, "
          f"max |x - numpy| = {np.abs(x - rx).max():.2e}, densest cell {sim.density.to_numpy().max():.2f}")


if __name__ == "__main__":
    main()
