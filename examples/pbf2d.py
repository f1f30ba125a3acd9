"""A 2-D position-based fluid (Macklin & Mueller 2013): a dam of water collapses in a box.

    python3 examples/pbf2d.py [arch] [--steps N] [--f64]

One step:
- predict: gravity, an explicit position update, the walls;
- find_neighbours: particles are counted into a uniform grid of cells of the kernel radius H
  (qd.atomic_add returns each particle's slot in its cell), then every particle lists the
  particles within H in the 3x3 cells around its own;
- ITERATIONS times: the density constraint C_i = max(rho_i / RHO0 - 1, 0) of every particle
  gives its lambda_i = -C_i / (sum_k |grad_k C_i|^2 + EPSILON), then each particle moves by
  dx_i = (1 / RHO0) sum_j (lambda_i + lambda_j + s_corr) grad W(x_i - x_j) (s_corr: the
  artificial pressure that keeps particles from clustering), and the walls are applied;
- update_velocity: v = (x - x_before) / DT.

The fields use the default float type: `qd.init(default_fp=qd.f64)` (--f64) runs it in double
(its only atomics are on integers). The grid and lists have fixed capacities; entries beyond
them are counted in `overflow` (the example and the test check it stays 0).
tests/python/test_simulation_examples.py checks a few steps against a numpy version with
brute-force neighbours, and that the position corrections of the pairs cancel (they conserve
momentum).
"""
import argparse
import math
import time

import numpy as np

import quadrants as qd

H = 1.0  # kernel radius, and the size of a grid cell
SPACING = 0.5  # the particles' rest spacing
WIDTH, HEIGHT = 24.0, 16.0  # the box
GRID = (int(WIDTH / H), int(HEIGHT / H))
MARGIN = 0.25  # particles keep this far from the walls
MAX_PER_CELL = 32
MAX_NEIGHBOURS = 48
DT = 0.01
GRAVITY = (0.0, -9.8)
ITERATIONS = 5
EPSILON = 0.1  # relaxation of the constraint (CFM)
CORR_K, CORR_DQ, CORR_N = 0.001, 0.3, 4  # s_corr = -k (W(r) / W(dq H))^n
POLY6 = 4.0 / (math.pi * H**8)  # W(r) = POLY6 (H^2 - r^2)^3 in 2-D
SPIKY_GRAD = -30.0 / (math.pi * H**5)  # grad W(r) = SPIKY_GRAD (H - r)^2 r / |r| in 2-D


def poly6(r2):
    return POLY6 * (H * H - r2) ** 3 if r2 < H * H else 0.0


def _rest_density():
    """Sum of W over a particle and its neighbours on a square lattice of the rest spacing."""
    k = int(H / SPACING) + 1
    return sum(poly6((i * i + j * j) * SPACING**2) for i in range(-k, k + 1) for j in range(-k, k + 1))


RHO0 = _rest_density()  # the particles' mass is 1
CORR_W = poly6((CORR_DQ * H) ** 2)


@qd.func
def w_poly6(r2):
    w = 0.0
    if r2 < H * H:
        w = POLY6 * (H * H - r2) ** 3
    return w


@qd.func
def grad_spiky(d):
    g = qd.math.vec2(0.0, 0.0)
    r = d.norm()
    if 0 < r < H:  # r = 0 (two particles in one place): no direction, no push
        g = SPIKY_GRAD * (H - r) ** 2 / r * d
    return g


@qd.func
def confine(p):
    return qd.math.clamp(p, qd.math.vec2(MARGIN, MARGIN), qd.math.vec2(WIDTH - MARGIN, HEIGHT - MARGIN))


@qd.data_oriented
class PBF:
    def __init__(self, n):
        self.n = n
        self.x = qd.Vector.field(2, float, shape=n)
        self.x_before = qd.Vector.field(2, float, shape=n)
        self.v = qd.Vector.field(2, float, shape=n)
        self.lam = qd.field(float, shape=n)
        self.dx = qd.Vector.field(2, float, shape=n)
        self.cell_count = qd.field(qd.i32, shape=GRID)
        self.cell_particles = qd.field(qd.i32, shape=GRID + (MAX_PER_CELL,))
        self.neighbour_count = qd.field(qd.i32, shape=n)
        self.neighbours = qd.field(qd.i32, shape=(n, MAX_NEIGHBOURS))
        self.overflow = qd.field(qd.i32, shape=())  # grid or list entries that did not fit

    def load(self, x, v):
        self.x.from_numpy(x)
        self.v.from_numpy(v)
        self.overflow[None] = 0

    @qd.func
    def cell(self, p):
        return qd.math.clamp(qd.cast(qd.floor(p / H), qd.i32), qd.math.ivec2(0, 0),
                             qd.math.ivec2(GRID[0] - 1, GRID[1] - 1))

    @qd.kernel
    def predict(self):
        for i in self.x:
            self.x_before[i] = self.x[i]
            self.v[i] += DT * qd.math.vec2(GRAVITY)
            self.x[i] = confine(self.x[i] + DT * self.v[i])

    @qd.kernel
    def find_neighbours(self):
        for c in qd.grouped(self.cell_count):
            self.cell_count[c] = 0
        for i in self.x:
            c = self.cell(self.x[i])
            slot = qd.atomic_add(self.cell_count[c], 1)  # the old count: this particle's slot
            if slot < MAX_PER_CELL:
                self.cell_particles[c[0], c[1], slot] = i
            else:
                self.overflow[None] += 1
        for i in self.x:
            xi = self.x[i]
            c = self.cell(xi)
            k = 0
            for cx in range(qd.max(c[0] - 1, 0), qd.min(c[0] + 2, GRID[0])):
                for cy in range(qd.max(c[1] - 1, 0), qd.min(c[1] + 2, GRID[1])):
                    for s in range(qd.min(self.cell_count[cx, cy], MAX_PER_CELL)):
                        j = self.cell_particles[cx, cy, s]
                        if j != i and (xi - self.x[j]).norm_sqr() < H * H:
                            if k < MAX_NEIGHBOURS:
                                self.neighbours[i, k] = j
                                k += 1
                            else:
                                self.overflow[None] += 1
            self.neighbour_count[i] = k

    @qd.kernel
    def compute_lambda(self):
        for i in self.x:
            xi = self.x[i]
            rho = w_poly6(0.0)  # the particle itself
            grad_i = qd.math.vec2(0.0, 0.0)  # grad of C_i by x_i
            sum_grad2 = 0.0
            for k in range(self.neighbour_count[i]):
                d = xi - self.x[self.neighbours[i, k]]
                rho += w_poly6(d.norm_sqr())
                grad_j = grad_spiky(d) / RHO0  # minus the grad of C_i by x_j
                grad_i += grad_j
                sum_grad2 += grad_j.dot(grad_j)
            C = qd.max(rho / RHO0 - 1.0, 0.0)  # only compression pushes particles apart
            self.lam[i] = -C / (sum_grad2 + grad_i.dot(grad_i) + EPSILON)

    @qd.kernel
    def compute_delta(self):
        for i in self.x:
            xi = self.x[i]
            delta = qd.math.vec2(0.0, 0.0)
            for k in range(self.neighbour_count[i]):
                j = self.neighbours[i, k]
                d = xi - self.x[j]
                s_corr = -CORR_K * (w_poly6(d.norm_sqr()) / CORR_W) ** CORR_N
                delta += (self.lam[i] + self.lam[j] + s_corr) * grad_spiky(d)
            self.dx[i] = delta / RHO0

    @qd.kernel
    def apply_delta(self):
        for i in self.x:
            self.x[i] = confine(self.x[i] + self.dx[i])

    @qd.kernel
    def update_velocity(self):
        for i in self.x:
            self.v[i] = (self.x[i] - self.x_before[i]) / DT

    def step(self):
        self.predict()
        self.find_neighbours()
        for _ in range(ITERATIONS):
            self.compute_lambda()
            self.compute_delta()
            self.apply_delta()
        self.update_velocity()


def initial_state(nx=20, ny=20, seed=0):
    """A block of nx x ny particles at the rest spacing in the lower left corner of the box, jittered."""
    rng = np.random.default_rng(seed)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    x = np.stack([MARGIN + 0.5 + i * SPACING, MARGIN + j * SPACING], axis=-1).reshape(-1, 2)
    x += rng.uniform(-0.01, 0.01, x.shape)
    return x.astype(np.float32), np.zeros_like(x, np.float32)


def density_ratio(x):
    """rho_i / RHO0 of every particle (numpy, brute force)."""
    r2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1)
    return np.where(r2 < H * H, POLY6 * (H * H - r2) ** 3, 0.0).sum(axis=1) / RHO0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", nargs="?", default="cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--f64", action="store_true")
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch), default_fp=qd.f64 if args.f64 else qd.f32)
    x0, v0 = initial_state()
    sim = PBF(len(x0))
    sim.load(x0, v0)
    sim.step()  # compiles
    t = time.perf_counter()
    for _ in range(args.steps - 1):
        sim.step()
    elapsed = time.perf_counter() - t
    x, v = sim.x.to_numpy(), sim.v.to_numpy()
    rho = density_ratio(x.astype(np.float64))
    precision = "f64" if args.f64 else "f32"
    print(f"{sim.n} particles, {args.steps} steps ({args.steps * DT:.1f} s) on {args.arch} ({precision}) in "
          f"{elapsed:.2f} s: front at x = {x[:, 0].max():.2f}, top at y = {x[:, 1].max():.2f}, mean speed "
          f"{np.linalg.norm(v, axis=1).mean():.2f}, density / rest: median {np.median(rho):.3f}, max {rho.max():.3f}; "
          f"neighbours per particle {sim.neighbour_count.to_numpy().mean():.1f}, overflow {sim.overflow[None]}")


if __name__ == "__main__":
    main()
