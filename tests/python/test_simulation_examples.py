"""The simulation examples (examples/mpm2d.py, pbf2d.py, nbody.py, fem2d.py) against straightforward
numpy implementations of the same steps, written here in float64, on every available arch; and a
physical invariant of each.

The examples compute in float32 and accumulate with atomics in an order that differs from numpy's
(and from run to run), so states are compared with tolerances: each is about 100x the largest
difference observed on cpu and vulkan, and far below the change the steps make (a wrong sign, index
or weight anywhere fails them by orders of magnitude).
"""
import importlib.util
import os

import numpy as np
import pytest

import quadrants as qd
from test_utils import test


def load_example(name):
    """examples/NAME.py as a module (test_examples.py uses it too)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mpm2d = load_example("mpm2d")
nbody = load_example("nbody")
fem2d = load_example("fem2d")
pbf2d = load_example("pbf2d")


def _skip_without_f64(arch):
    if arch == qd.metal or (arch == qd.vulkan and not qd.vulkan_caps()["shader_float64"]):
        pytest.skip(f"{arch.name}: this device has no f64")


def _close(name, got, want, atol):
    """assert |got - want| <= atol everywhere, with a message naming the worst element."""
    err = np.abs(np.asarray(got, np.float64) - want)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert err.max() <= atol, (f"{name}: max |error| {err.max():.3e} > {atol:.1e} at {worst}: "
                               f"{got[worst]} vs {want[worst]}")


# --- MPM ----------------------------------------------------------------------------------------

def mpm_reference(x, v, C, J, steps):
    """examples/mpm2d.py's step in numpy float64: p2g with np.add.at, grid update, g2p."""
    m = mpm2d
    G, DX, DT = m.N_GRID, m.DX, m.DT
    x, v, C, J = (a.astype(np.float64) for a in (x, v, C, J))
    for _ in range(steps):
        Xp = x / DX
        base = (Xp - 0.5).astype(np.int64)
        fx = Xp - base
        w = [0.5 * (1.5 - fx) ** 2, 0.75 - (fx - 1.0) ** 2, 0.5 * (fx - 0.5) ** 2]
        stress = -DT * 4.0 * m.E * m.P_VOL * (J - 1.0) / DX**2
        affine = stress[:, None, None] * np.eye(2) + m.P_MASS * C
        grid_v = np.zeros((G, G, 2))
        grid_m = np.zeros((G, G))
        for i in range(3):
            for j in range(3):
                dpos = (np.array([i, j]) - fx) * DX
                weight = w[i][:, 0] * w[j][:, 1]
                node = (base[:, 0] + i, base[:, 1] + j)
                momentum = m.P_MASS * v + np.einsum("pab,pb->pa", affine, dpos)
                np.add.at(grid_v, node, weight[:, None] * momentum)
                np.add.at(grid_m, node, weight * m.P_MASS)
        has_mass = grid_m > 0
        grid_v[has_mass] /= grid_m[has_mass][:, None]
        grid_v[..., 1] -= DT * m.GRAVITY
        i, j = np.meshgrid(np.arange(G), np.arange(G), indexing="ij")
        gx, gy = grid_v[..., 0], grid_v[..., 1]
        gx[((i < m.BOUND) & (gx < 0)) | ((i > G - m.BOUND) & (gx > 0))] = 0.0
        gy[((j < m.BOUND) & (gy < 0)) | ((j > G - m.BOUND) & (gy > 0))] = 0.0
        new_v = np.zeros_like(v)
        new_C = np.zeros_like(C)
        for i in range(3):
            for j in range(3):
                dpos = (np.array([i, j]) - fx) * DX
                weight = w[i][:, 0] * w[j][:, 1]
                g_v = grid_v[base[:, 0] + i, base[:, 1] + j]
                new_v += weight[:, None] * g_v
                new_C += 4.0 * weight[:, None, None] * np.einsum("pa,pb->pab", g_v, dpos) / DX**2
        v = new_v
        x = x + DT * v
        J = J * (1.0 + DT * np.trace(new_C, axis1=1, axis2=2))
        C = new_C
    return x, v, C, J, grid_v, grid_m


@test()
def test_mpm2d_matches_numpy_and_conserves_mass():
    n, steps = 400, 5
    sim = mpm2d.MPM(n)
    x0, v0 = mpm2d.initial_state(n, seed=1)
    sim.load(x0, v0)
    C0 = np.zeros((n, 2, 2), np.float32)
    J0 = np.ones(n, np.float32)
    total_mass = n * mpm2d.P_MASS
    for s in range(steps):
        v_before = sim.v.to_numpy().astype(np.float64)
        sim.p2g()
        # The grid holds the particles' mass: the 9 weights of each particle sum to 1, up to f32
        # rounding of the weights and of ~20 atomic adds per node (observed 2e-8 relative).
        assert np.isclose(sim.grid_m.to_numpy().sum(dtype=np.float64), total_mass, rtol=1e-6, atol=0)
        # ...and their momentum: APIC's affine term scatters none (sum_i w_i (x_i - x_p) = 0).
        # Observed 1e-9 of a total of 0.1.
        momentum = sim.grid_v.to_numpy().sum(axis=(0, 1), dtype=np.float64)
        assert np.allclose(momentum, mpm2d.P_MASS * v_before.sum(axis=0), rtol=1e-6, atol=1e-8), s
        sim.grid_update()
        sim.g2p()
    x, v, C, J, grid_v, grid_m = mpm_reference(x0, v0, C0, J0, steps)
    assert np.isclose(grid_m.sum(), total_mass, rtol=1e-12)
    # Observed after 5 steps (cpu and vulkan): x 1.2e-7 (its f32 rounding: x ~ 0.8), v 6e-7 (v ~ 1),
    # J 3e-7; C 3e-5 (C ~ 1, a difference of node velocities over DX); grid_v 2.6e-6 and grid_m 1.1e-9
    # (a node holds up to 1.8e-3): the weights have a gradient ~1/DX = 32 in x.
    _close("x", sim.x.to_numpy(), x, 1e-6)
    _close("v", sim.v.to_numpy(), v, 1e-5)
    _close("C", sim.C.to_numpy(), C, 5e-4)
    _close("J", sim.J.to_numpy(), J, 3e-6)
    _close("grid_m", sim.grid_m.to_numpy(), grid_m, 1e-8)
    _close("grid_v", sim.grid_v.to_numpy(), grid_v, 3e-5)
    # the steps did something
    assert np.abs(v - v0).max() > 1e-3 and np.abs(C).max() > 0.1 and np.abs(J - 1).max() > 1e-5


# --- n-body -------------------------------------------------------------------------------------

def nbody_reference(x, v, m, steps, dt=nbody.DT):
    """examples/nbody.py's leapfrog step in numpy float64, all pairs at once."""
    x, v, m = (a.astype(np.float64) for a in (x, v, m))

    def acceleration(x):
        d = x[None, :, :] - x[:, None, :]  # d[i, j] = x_j - x_i
        r2 = (d**2).sum(axis=-1) + nbody.SOFTENING**2
        return nbody.G * (m[None, :, None] * d / (r2 * np.sqrt(r2))[..., None]).sum(axis=1)

    a = acceleration(x)
    for _ in range(steps):
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = acceleration(x)
        v = v + 0.5 * dt * a
    return x, v, a


def _nbody_check(np_dtype, atol_x, atol_v, atol_a):
    n, steps = 256, 10
    sim = nbody.NBody(n)
    x0, v0, m = nbody.initial_state(n, seed=2, dtype=np_dtype)
    sim.load(x0, v0, m)
    assert sim.x.to_numpy().dtype == np_dtype  # the fields have the default float type
    m64 = m.astype(np.float64)[:, None]
    p0, e0 = (m64 * v0).sum(axis=0), sim.energy()
    impulse = 0.0  # sum over steps of dt * sum_i m_i |a_i|: the scale of what the forces moved
    for _ in range(steps):
        sim.step()
        impulse += nbody.DT * (m64[:, 0] * np.linalg.norm(sim.a.to_numpy(), axis=1)).sum()
    x, v, a = nbody_reference(x0, v0, m, steps)
    _close("x", sim.x.to_numpy(), x, atol_x)
    _close("v", sim.v.to_numpy(), v, atol_v)
    _close("a", sim.a.to_numpy(), a, atol_a)
    assert np.abs(v - v0).max() > 1e-2  # the steps did something (atol_v is far below)
    for _ in range(90):
        sim.step()
        impulse += nbody.DT * (m64[:, 0] * np.linalg.norm(sim.a.to_numpy(), axis=1)).sum()
    # The pair forces cancel (d_ij = -d_ji): the total momentum stays, up to the rounding of the
    # accelerations and velocities, a few eps of sum m|v| + impulse (observed: 1e-9 of 0.42 in f32,
    # 3e-17 in f64; the wrong mass in the force, m_i for m_j, moves it by 2e-3).
    v = sim.v.to_numpy()
    dp = np.linalg.norm((m64 * v).sum(axis=0) - p0)
    eps = np.finfo(np_dtype).eps
    assert dp <= 8 * eps * ((m64[:, 0] * np.linalg.norm(v, axis=1)).sum() + impulse), (dp, impulse)
    # Leapfrog keeps the energy to O(dt^2): observed 5e-8 relative.
    assert abs(sim.energy() / e0 - 1) < 1e-6


@test()
def test_nbody_matches_numpy_and_conserves_momentum_f32():
    # Observed after 10 steps (cpu and vulkan): x 2.2e-7 (x ~ 1), v 2.3e-7 (v ~ 0.7), a 1.4e-6 (a ~ 2):
    # f32 rounding; the steps change v by 2e-2.
    _nbody_check(np.float32, 2e-6, 2e-6, 2e-5)


@test(default_fp=qd.f64)
def test_nbody_matches_numpy_and_conserves_momentum_f64(req_arch):
    _skip_without_f64(req_arch)
    # The kernels sum the pairs in numpy's order (j ascending), so the two agree to the last bit
    # here; the tolerance allows a different order or FMA contraction elsewhere.
    _nbody_check(np.float64, 1e-13, 1e-13, 1e-12)


# --- FEM ----------------------------------------------------------------------------------------

def fem_reference(rest, tris, fixed, x, v, steps, gravity, damping, dt=fem2d.DT):
    """examples/fem2d.py's step in numpy float64; the polar decomposition from np.linalg.svd."""
    rest, x, v = (a.astype(np.float64) for a in (rest, x, v))
    a, b, c = tris.T

    def edges(p):
        return np.stack([p[b] - p[a], p[c] - p[a]], axis=-1)  # columns: the two edge vectors

    Dm = edges(rest)
    B = np.linalg.inv(Dm)
    W = 0.5 * np.abs(np.linalg.det(Dm))
    m = np.zeros(len(rest))
    for k in range(3):
        np.add.at(m, tris[:, k], fem2d.DENSITY * W / 3)
    for _ in range(steps):
        F = edges(x) @ B
        U, _, Vt = np.linalg.svd(F)
        R = U @ Vt
        assert (np.linalg.det(R) > 0).all()  # no triangle inverted: R is F's rotation
        RtF = np.trace(np.swapaxes(R, 1, 2) @ F, axis1=1, axis2=2)
        P = 2 * fem2d.MU * (F - R) + fem2d.LAMBDA * (RtF - 2)[:, None, None] * R
        H = -W[:, None, None] * P @ np.swapaxes(B, 1, 2)
        f = np.zeros_like(x)
        np.add.at(f, b, H[:, :, 0])
        np.add.at(f, c, H[:, :, 1])
        np.add.at(f, a, -(H[:, :, 0] + H[:, :, 1]))
        v_free = (v + dt * (f / m[:, None] + np.array(gravity))) * np.exp(-dt * damping)
        v = np.where(fixed[:, None] != 0, 0.0, v_free)
        x = np.where(fixed[:, None] != 0, x, x + dt * v)
    return x, v, f, m


def _fem_perturbed(rest, fixed, seed):
    """The rest mesh with the free nodes displaced by up to 0.2 SPACING, moving at up to 0.5."""
    rng = np.random.default_rng(seed)
    free = (fixed == 0)[:, None]
    x = rest + free * rng.uniform(-0.2, 0.2, rest.shape) * fem2d.SPACING
    v = free * rng.uniform(-0.5, 0.5, rest.shape)
    return x.astype(np.float32), v.astype(np.float32)


@test()
def test_fem2d_matches_numpy():
    nx, ny, steps = 9, 4, 5
    rest, tris = fem2d.beam_mesh(nx, ny)
    fixed = (np.arange(nx * ny) < ny).astype(np.int32)  # the left column clamped
    sim = fem2d.FEM(rest, tris, fixed)
    x0, v0 = _fem_perturbed(rest, fixed, seed=0)
    sim.load(x0, v0)
    for _ in range(steps):
        sim.step()
    x, v, f, m = fem_reference(rest, tris, fixed, x0, v0, steps, fem2d.GRAVITY, fem2d.DAMPING)
    # Observed (cpu and vulkan): m 4e-11 of 4e-3; x 8e-8 (x ~ 0.75: its rounding); f 3.7e-4 of
    # forces up to 30 and v 5e-5 of velocities up to 16 (strains up to ~0.4; a position's rounding,
    # 6e-8, is 1e-6 of an edge, SPACING = 0.0625: F carries ~1e-6 relative error).
    _close("m", sim.m.to_numpy(), m, 1e-9)
    _close("x", sim.x.to_numpy(), x, 1e-6)
    _close("v", sim.v.to_numpy(), v, 1e-3)
    _close("f", sim.f.to_numpy(), f, 1e-2)
    assert np.abs(v - v0).max() > 1.0 and np.array_equal(sim.x.to_numpy()[fixed == 1], rest[fixed == 1])


@test()
def test_fem2d_rest_state_stays_at_rest():
    nx, ny = 9, 4
    rest, tris = fem2d.beam_mesh(nx, ny)
    sim = fem2d.FEM(rest, tris, np.zeros(nx * ny, np.int32), gravity=(0.0, 0.0))
    # At the rest shape, on its grid of dyadic numbers, F = Ds @ Dm^-1 is exactly I,
    # polar_decompose(I) exactly (I, I), and so the stress, forces and velocities exactly 0.
    sim.load(rest, np.zeros_like(rest))
    for _ in range(100):
        sim.step()
    assert np.array_equal(sim.x.to_numpy(), rest) and not sim.v.to_numpy().any() and not sim.f.to_numpy().any()
    # Rotated rigidly by 30 degrees it is at rest too (corotated elasticity measures F in R's frame),
    # up to the rounding of the rotated positions: observed forces 2.3e-4, velocities 1.6e-4 and
    # displacements 1.8e-7 after 200 steps. Linear elasticity, P(F - I), would push with forces ~10.
    theta = np.pi / 6
    rotation = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    centre = rest.mean(axis=0)
    rotated = ((rest - centre) @ rotation.T + centre).astype(np.float32)
    sim.load(rotated, np.zeros_like(rest))
    for _ in range(200):
        sim.step()
    _close("rotated f", sim.f.to_numpy(), np.zeros_like(rest), 3e-3)
    _close("rotated v", sim.v.to_numpy(), np.zeros_like(rest), 2e-3)
    _close("rotated x", sim.x.to_numpy(), rotated, 2e-6)


@test()
def test_fem2d_internal_forces_conserve_momentum():
    nx, ny = 9, 4
    rest, tris = fem2d.beam_mesh(nx, ny)
    free = np.zeros(nx * ny, np.int32)
    sim = fem2d.FEM(rest, tris, free, gravity=(0.0, 0.0), damping=0.0)
    x0, v0 = _fem_perturbed(rest, free, seed=1)
    sim.load(x0, v0)
    m = sim.m.to_numpy().astype(np.float64)[:, None]
    p0 = (m * v0).sum(axis=0)
    impulse = 0.0
    for _ in range(100):
        sim.step()
        impulse += fem2d.DT * np.abs(sim.f.to_numpy()).sum()
    # Each triangle's three forces sum to zero: the momentum stays, to the rounding of the forces
    # and velocities. Observed 1.4e-8, against eps (sum m|v| + impulse) = 2.3e-6 and an impulse of 18.
    v = sim.v.to_numpy()
    dp = np.abs((m * v).sum(axis=0) - p0).max()
    assert dp <= np.finfo(np.float32).eps * ((m * np.abs(v)).sum() + impulse), (dp, impulse)
    assert np.abs(v - v0).max() > 1.0


# --- PBF ----------------------------------------------------------------------------------------

def pbf_reference(x, v, steps):
    """examples/pbf2d.py's step in numpy float64, with brute-force neighbours (all pairs within H
    at the predicted positions, as the example's grid finds them)."""
    m = pbf2d
    lo, hi = np.array([m.MARGIN, m.MARGIN]), np.array([m.WIDTH - m.MARGIN, m.HEIGHT - m.MARGIN])
    x, v = x.astype(np.float64), v.astype(np.float64)
    H2 = m.H * m.H
    for _ in range(steps):
        x_before = x
        v = v + m.DT * np.array(m.GRAVITY)
        x = np.clip(x + m.DT * v, lo, hi)
        r2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(axis=-1)
        neighbours = (r2 < H2) & ~np.eye(len(x), dtype=bool)
        for _ in range(m.ITERATIONS):
            d = x[:, None, :] - x[None, :, :]  # d[i, j] = x_i - x_j
            r2 = (d**2).sum(axis=-1)
            r = np.sqrt(r2)
            W = np.where(neighbours & (r2 < H2), m.POLY6 * (H2 - r2) ** 3, 0.0)
            near = neighbours & (r > 0) & (r < m.H)
            grad = np.where(near, m.SPIKY_GRAD * (m.H - r) ** 2 / np.where(near, r, 1.0), 0.0)[..., None] * d
            rho = m.POLY6 * H2**3 + W.sum(axis=1)
            C = np.maximum(rho / m.RHO0 - 1.0, 0.0)
            g = grad / m.RHO0
            lam = -C / ((g**2).sum(axis=(1, 2)) + (g.sum(axis=1) ** 2).sum(axis=-1) + m.EPSILON)
            s_corr = np.where(neighbours, -m.CORR_K * (W / m.CORR_W) ** m.CORR_N, 0.0)
            dx = ((lam[:, None] + lam[None, :] + s_corr)[..., None] * grad).sum(axis=1) / m.RHO0
            x = np.clip(x + dx, lo, hi)
        v = (x - x_before) / m.DT
    return x, v, lam, dx, neighbours


def _pbf_state(seed):
    """The example's block of fluid, thrown about: random velocities up to 3 (0.03 H a step), so
    that the density constraints act from the first step."""
    x, v = pbf2d.initial_state(20, 20, seed=seed)
    v = np.random.default_rng(seed).uniform(-3.0, 3.0, x.shape).astype(np.float32)
    return x, v


def _pbf_check(np_dtype, atol_x, atol_v, atol_lam, atol_dx):
    steps = 5
    x0, v0 = (a.astype(np_dtype) for a in _pbf_state(seed=3))
    sim = pbf2d.PBF(len(x0))
    sim.load(x0, v0)
    for _ in range(steps):
        sim.step()
    x, v, lam, dx, _ = pbf_reference(x0, v0, steps)
    _close("x", sim.x.to_numpy(), x, atol_x)
    _close("v", sim.v.to_numpy(), v, atol_v)
    _close("lambda", sim.lam.to_numpy(), lam, atol_lam)
    _close("dx", sim.dx.to_numpy(), dx, atol_dx)
    assert np.abs(v - v0).max() > 1.0 and (lam < -1e-4).sum() > 20  # constraints acted
    # The grid search finds exactly the pairs within H: brute force at the same predicted positions
    # (pairs within f32 rounding of the radius, |r^2 - H^2| < 1e-5, may go either way).
    sim.predict()
    sim.find_neighbours()
    assert sim.overflow[None] == 0
    xp = sim.x.to_numpy().astype(np.float64)
    r2 = ((xp[:, None, :] - xp[None, :, :]) ** 2).sum(axis=-1)
    want = (r2 < pbf2d.H**2) & ~np.eye(len(xp), dtype=bool)
    count, lists = sim.neighbour_count.to_numpy(), sim.neighbours.to_numpy()
    got = np.zeros_like(want)
    for i in range(len(xp)):
        got[i, lists[i, :count[i]]] = True
    assert count.sum() == got.sum()  # no particle listed twice
    assert not (got != want)[np.abs(r2 - pbf2d.H**2) > 1e-5].any()
    assert want.sum() > 3 * len(xp)
    # The pair corrections cancel: (lambda_i + lambda_j + s_corr_ij) is symmetric and grad W
    # antisymmetric, so sum_i dx_i = 0 (momentum is conserved) up to the rounding of the sums:
    # observed 0.03-0.05 eps sum_i |dx_i| in f32 and f64 (lambda_i + lambda_i for lambda_i + lambda_j
    # gives 3e5 of it in f32).
    sim.compute_lambda()
    sim.compute_delta()
    d = sim.dx.to_numpy().astype(np.float64)
    assert np.abs(d).max() > 1e-4
    assert np.abs(d.sum(axis=0)).max() <= np.finfo(np_dtype).eps * np.abs(d).sum(), d.sum(axis=0)


@test()
def test_pbf2d_matches_numpy_f32():
    # Observed after 5 steps (cpu and vulkan): x 2e-5 (x up to 10: f32's ulp there is 1e-6, and
    # each step adds 6 rounded corrections), v = (x - x_before) / DT 5e-4 (the rounding of x over
    # DT = 0.01), lambda 5e-7 and dx 4e-7 (C = rho / RHO0 - 1 ~ 1e-3 cancels: rho's rounding is
    # 1e-4 of it). Errors grow linearly with the steps (rounding, no instability).
    _pbf_check(np.float32, 2e-4, 5e-3, 5e-6, 5e-6)


@test(default_fp=qd.f64)
def test_pbf2d_matches_numpy_f64(req_arch):
    _skip_without_f64(req_arch)
    # Observed: x 1.3e-14, v 3.6e-13, lambda 6e-16, dx 5e-16.
    _pbf_check(np.float64, 1e-12, 1e-11, 1e-13, 1e-13)
