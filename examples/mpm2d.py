"""A 2-D MLS-MPM step (moving least squares material point method, APIC transfers, a weakly
compressible fluid as in Taichi's mpm88): a block of fluid falls under gravity into a box.

    python3 examples/mpm2d.py [arch] [--steps N]

One step is three kernels:
- p2g: every particle scatters its mass and its APIC momentum to the 3x3 grid nodes around it
  (quadratic B-spline weights) with `+=` on the grid fields, which are atomic adds: many particles
  share a node;
- grid_update: momentum / mass gives the node velocity, gravity is added, and the velocity into
  a wall (the outer BOUND nodes) is zeroed;
- g2p: every particle gathers the new velocity and its affine velocity field C from the same
  nodes, moves, and updates its volume ratio J.

tests/python/test_simulation_examples.py checks a few steps against numpy and that the grid
holds exactly the particles' total mass.
"""
import argparse
import time

import numpy as np

import quadrants as qd

N_GRID = 32
DX = 1.0 / N_GRID
DT = 2e-4
P_RHO = 1.0
P_VOL = (DX * 0.5) ** 2  # four particles per cell
P_MASS = P_VOL * P_RHO
GRAVITY = 9.8
BOUND = 3  # nodes this close to the walls are walls
E = 400.0  # bulk modulus of the fluid


@qd.data_oriented
class MPM:
    def __init__(self, n):
        self.n = n
        self.x = qd.Vector.field(2, qd.f32, shape=n)  # position
        self.v = qd.Vector.field(2, qd.f32, shape=n)  # velocity
        self.C = qd.Matrix.field(2, 2, qd.f32, shape=n)  # affine velocity field (APIC)
        self.J = qd.field(qd.f32, shape=n)  # volume ratio
        self.grid_v = qd.Vector.field(2, qd.f32, shape=(N_GRID, N_GRID))  # momentum, then velocity
        self.grid_m = qd.field(qd.f32, shape=(N_GRID, N_GRID))

    def load(self, x, v):
        self.x.from_numpy(x)
        self.v.from_numpy(v)
        self.C.fill(0)
        self.J.fill(1)

    @qd.func
    def stencil(self, p: qd.i32):
        """The lower-left node of particle p's 3x3 stencil, its offset from it and the weights."""
        Xp = self.x[p] / DX
        base = qd.cast(Xp - 0.5, qd.i32)  # truncation: Xp >= 0.5 inside the box
        fx = Xp - qd.cast(base, qd.f32)
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        return base, fx, w

    @qd.kernel
    def p2g(self):
        for I in qd.grouped(self.grid_m):
            self.grid_v[I] = qd.math.vec2(0.0, 0.0)
            self.grid_m[I] = 0.0
        for p in self.x:
            base, fx, w = self.stencil(p)
            stress = -DT * 4.0 * E * P_VOL * (self.J[p] - 1.0) / DX**2
            affine = qd.Matrix([[stress, 0.0], [0.0, stress]]) + P_MASS * self.C[p]
            for i, j in qd.static(qd.ndrange(3, 3)):
                offset = qd.Vector([i, j])
                dpos = (qd.cast(offset, qd.f32) - fx) * DX
                weight = w[i][0] * w[j][1]
                self.grid_v[base + offset] += weight * (P_MASS * self.v[p] + affine @ dpos)  # atomic
                self.grid_m[base + offset] += weight * P_MASS  # atomic

    @qd.kernel
    def grid_update(self):
        for i, j in self.grid_m:
            if self.grid_m[i, j] > 0:
                self.grid_v[i, j] /= self.grid_m[i, j]
            self.grid_v[i, j][1] -= DT * GRAVITY
            if i < BOUND and self.grid_v[i, j][0] < 0:
                self.grid_v[i, j][0] = 0.0
            if i > N_GRID - BOUND and self.grid_v[i, j][0] > 0:
                self.grid_v[i, j][0] = 0.0
            if j < BOUND and self.grid_v[i, j][1] < 0:
                self.grid_v[i, j][1] = 0.0
            if j > N_GRID - BOUND and self.grid_v[i, j][1] > 0:
                self.grid_v[i, j][1] = 0.0

    @qd.kernel
    def g2p(self):
        for p in self.x:
            base, fx, w = self.stencil(p)
            new_v = qd.math.vec2(0.0, 0.0)
            new_C = qd.math.mat2(0.0)
            for i, j in qd.static(qd.ndrange(3, 3)):
                offset = qd.Vector([i, j])
                dpos = (qd.cast(offset, qd.f32) - fx) * DX
                weight = w[i][0] * w[j][1]
                g_v = self.grid_v[base + offset]
                new_v += weight * g_v
                new_C += 4.0 * weight * g_v.outer_product(dpos) / DX**2
            self.v[p] = new_v
            self.x[p] += DT * new_v
            self.J[p] *= 1.0 + DT * new_C.trace()
            self.C[p] = new_C

    def step(self):
        self.p2g()
        self.grid_update()
        self.g2p()


def initial_state(n, seed=0):
    """n particles in a block at the top left of the box, moving right and down."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, 2)) * 0.3 + np.array([0.2, 0.5])
    v = np.tile(np.array([1.0, -0.5]), (n, 1)) + rng.uniform(-0.1, 0.1, (n, 2))
    return x.astype(np.float32), v.astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", nargs="?", default="cpu")
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    arch, steps = getattr(qd, args.arch), args.steps
    qd.init(arch=arch)
    n = 400
    sim = MPM(n)
    x0, v0 = initial_state(n)
    sim.load(x0, v0)
    sim.step()  # compiles
    t = time.perf_counter()
    for _ in range(steps - 1):
        sim.step()
    elapsed = time.perf_counter() - t
    x, v, J = sim.x.to_numpy(), sim.v.to_numpy(), sim.J.to_numpy()
    mass = sim.grid_m.to_numpy().sum(dtype=np.float64)
    print(f"{n} particles, {steps} steps ({steps * DT:.2f} s) on {arch.name} in {elapsed:.2f} s: "
          f"centre of mass ({x[:, 0].mean():.3f}, {x[:, 1].mean():.3f}), lowest particle {x[:, 1].min():.3f}, "
          f"mean speed {np.linalg.norm(v, axis=1).mean():.3f}, J in [{J.min():.3f}, {J.max():.3f}], "
          f"grid mass {mass:.6e} (particles: {n * P_MASS:.6e})")


if __name__ == "__main__":
    main()
