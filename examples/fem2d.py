"""An explicit FEM step for corotated linear elasticity on a triangle mesh: a cantilever beam,
clamped at its left end, sags under gravity.

    python3 examples/fem2d.py [arch] [--steps N]

Per triangle, the deformation gradient is F = Ds @ B, where Ds holds the current edge vectors and
B = Dm^-1 the inverse of the rest ones (Matrix.inverse(), computed once; the rest area from
Matrix.determinant()). qd.polar_decompose(F) = (R, S) gives the element's rotation R, and the
corotated first Piola-Kirchhoff stress is

    P = 2 mu (F - R) + lambda tr(R^T F - I) R,

which is linear elasticity measured in the element's rotated frame: a rigid rotation makes no
stress. The nodal forces -W P B^T are scattered with atomic adds (nodes are shared by up to six
triangles), then symplectic Euler moves the free nodes.

tests/python/test_simulation_examples.py checks a few steps against numpy (np.linalg.svd for the
polar decomposition), that the rest state stays exactly at rest and a rotated one at rest too,
and that the internal forces conserve momentum. The beam settles at about 3/4 of the sag of
Euler-Bernoulli beam theory: linear triangles are too stiff in bending (shear locking).
"""
import argparse
import time

import numpy as np

import quadrants as qd

SPACING = 1.0 / 16  # the rest mesh lies on a grid of dyadic numbers: Dm, B and F = I are exact
ORIGIN = (0.25, 0.5)
YOUNG, POISSON = 1000.0, 0.3
MU = YOUNG / (2 * (1 + POISSON))
LAMBDA = YOUNG * POISSON / ((1 + POISSON) * (1 - 2 * POISSON))
DENSITY = 1.0
DT = 2e-4
DAMPING = 4.0  # velocities decay as exp(-DAMPING t)
GRAVITY = (0.0, -9.8)


def beam_mesh(nx, ny):
    """Nodes of an nx x ny grid (row-major by column: node i * ny + j) and two counter-clockwise
    triangles per cell."""
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    nodes = np.stack([ORIGIN[0] + i * SPACING, ORIGIN[1] + j * SPACING], axis=-1).reshape(-1, 2)
    tris = []
    for a in range(nx - 1):
        for b in range(ny - 1):
            n00, n10, n11, n01 = a * ny + b, (a + 1) * ny + b, (a + 1) * ny + b + 1, a * ny + b + 1
            tris += [(n00, n10, n11), (n00, n11, n01)]
    return nodes.astype(np.float32), np.array(tris, np.int32)


@qd.data_oriented
class FEM:
    def __init__(self, rest, tris, fixed, gravity=GRAVITY, damping=DAMPING):
        """rest: (n, 2) rest positions; tris: (t, 3) node indices, counter-clockwise; fixed: (n,)
        1 for clamped nodes; gravity and damping are compile-time constants of the kernels."""
        self.n, self.t = len(rest), len(tris)
        self.gravity, self.damping = tuple(gravity), float(damping)
        self.x = qd.Vector.field(2, qd.f32, shape=self.n)
        self.v = qd.Vector.field(2, qd.f32, shape=self.n)
        self.f = qd.Vector.field(2, qd.f32, shape=self.n)
        self.m = qd.field(qd.f32, shape=self.n)  # lumped mass: a third of each adjacent triangle's
        self.fixed = qd.field(qd.i32, shape=self.n)
        self.tri = qd.Vector.field(3, qd.i32, shape=self.t)
        self.B = qd.Matrix.field(2, 2, qd.f32, shape=self.t)  # inverse rest edge matrix
        self.W = qd.field(qd.f32, shape=self.t)  # rest area
        self.x.from_numpy(rest)
        self.tri.from_numpy(tris)
        self.fixed.from_numpy(fixed.astype(np.int32))
        self.init_rest_shape()

    @qd.func
    def edges(self, e: qd.i32):
        a, b, c = self.tri[e][0], self.tri[e][1], self.tri[e][2]
        return a, b, c, qd.Matrix.cols([self.x[b] - self.x[a], self.x[c] - self.x[a]])

    @qd.kernel
    def init_rest_shape(self):
        for i in self.m:
            self.m[i] = 0.0
        for e in self.tri:
            a, b, c, Dm = self.edges(e)
            self.B[e] = Dm.inverse()
            self.W[e] = 0.5 * abs(Dm.determinant())
            for k in qd.static(range(3)):
                self.m[self.tri[e][k]] += DENSITY * self.W[e] / 3.0  # atomic

    def load(self, x, v):
        self.x.from_numpy(x)
        self.v.from_numpy(v)

    @qd.kernel
    def compute_force(self):
        for i in self.f:
            self.f[i] = qd.math.vec2(0.0, 0.0)
        for e in self.tri:
            a, b, c, Ds = self.edges(e)
            F = Ds @ self.B[e]
            R, S = qd.polar_decompose(F)  # F = R S; R a rotation while the triangle is not inverted
            P = 2.0 * MU * (F - R) + LAMBDA * ((R.transpose() @ F).trace() - 2.0) * R
            H = -self.W[e] * P @ self.B[e].transpose()  # the forces on nodes b and c, as columns
            fb, fc = H[:, 0], H[:, 1]
            self.f[b] += fb  # atomic: up to six triangles share a node
            self.f[c] += fc
            self.f[a] += -(fb + fc)

    @qd.kernel
    def advance(self, dt: qd.f32):
        for i in self.x:
            if self.fixed[i]:
                self.v[i] = qd.math.vec2(0.0, 0.0)
            else:
                v = self.v[i] + dt * (self.f[i] / self.m[i] + qd.math.vec2(self.gravity))
                self.v[i] = v * qd.exp(-self.damping * dt)  # (mypy rejects `-dt`: unary minus on a qd.f32 parameter)
                self.x[i] += dt * self.v[i]

    def step(self, dt=DT):
        self.compute_force()
        self.advance(dt)


def cantilever(nx=17, ny=5, **kwargs):
    """A 1 x 0.25 beam, its left column of nodes clamped."""
    rest, tris = beam_mesh(nx, ny)
    fixed = (np.arange(nx * ny) < ny).astype(np.int32)
    return FEM(rest, tris, fixed, **kwargs), rest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("arch", nargs="?", default="cpu")
    ap.add_argument("--steps", type=int, default=5000)
    args = ap.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    nx, ny = 17, 5
    sim, rest = cantilever(nx, ny)
    sim.step()  # compiles
    t = time.perf_counter()
    for _ in range(args.steps - 1):
        sim.step()
    elapsed = time.perf_counter() - t
    x = sim.x.to_numpy()
    tip = x[-ny:].mean(axis=0) - rest[-ny:].mean(axis=0)
    # Euler-Bernoulli: a clamped beam under its weight q per length sags q L^4 / (8 E I) at the tip.
    length, height = (nx - 1) * SPACING, (ny - 1) * SPACING
    beam = DENSITY * -GRAVITY[1] * height * length**4 / (8 * YOUNG * height**3 / 12)
    print(f"{sim.n} nodes, {sim.t} triangles, {args.steps} steps ({args.steps * DT:.1f} s) on {args.arch} in "
          f"{elapsed:.2f} s: tip displaced by ({tip[0]:+.4f}, {tip[1]:+.4f}) (beam theory: sag {beam:.4f}), "
          f"max speed {np.linalg.norm(sim.v.to_numpy(), axis=1).max():.2e}")


if __name__ == "__main__":
    main()
