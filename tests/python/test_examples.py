"""examples/particles.py (a dataclass, qd.math vectors, a data-oriented class, atomics into a density
grid), mass_spring_fit.py (autodiff) and rasterizer.py (atomic_min depth buffer) against numpy, on
every available arch."""

import numpy as np

from test_simulation_examples import load_example
from test_utils import test

particles = load_example("particles")
mass_spring_fit = load_example("mass_spring_fit")
rasterizer = load_example("rasterizer")


@test()
def test_particles_example_matches_numpy():
    n, steps = 2000, 60
    sim = particles.Simulation(n)
    x0, v0, m = particles.initial_state(n, seed=3)
    sim.load(x0, v0, m)
    for _ in range(steps):
        sim.step(particles.DT)
    x, v = sim.particles.x.to_numpy(), sim.particles.v.to_numpy()
    rx, rv = particles.reference(x0, v0, m, steps)
    assert np.allclose(x, rx, atol=1e-5) and np.allclose(v, rv, atol=1e-4)
    assert ((0 <= x) & (x <= 1)).all() and np.array_equal(sim.particles.m.to_numpy(), m)
    assert (np.abs(v - v0) > 0).any()  # something happened: they fell and bounced
    density = sim.density.to_numpy()
    assert np.allclose(density, particles.density_of(x, m), rtol=1e-5, atol=1e-3)
    assert np.isclose(density.sum(), m.sum(), rtol=1e-5)
    assert np.isclose(sim.kinetic_energy(), 0.5 * (m * (rv ** 2).sum(axis=1)).sum(), rtol=1e-4)


@test()
def test_mass_spring_fit_gradient_and_convergence():
    """examples/mass_spring_fit.py: the tape's gradient of the tip loss through 60 step kernels
    against central differences, and the fit bringing the loss down by far."""
    M = mass_spring_fit
    chain = M.Chain()
    target = M.observed_tip(chain)
    log_k = np.log(np.full(M.N - 1, 400.0, np.float32))
    chain.log_k.from_numpy(log_k)
    loss, g = chain.gradient(target)
    numeric = []
    for s in range(M.N - 1):
        vals = []
        for sign in (1, -1):
            k2 = log_k.copy()
            k2[s] += sign * 1e-2
            chain.log_k.from_numpy(k2)
            vals.append(chain.forward(target))
        numeric.append((vals[0] - vals[1]) / 2e-2)
    np.testing.assert_allclose(g, numeric, rtol=2e-2, atol=1e-4)
    losses = M.fit(chain, target, 60, log=None)
    assert losses[0] > 0.01 and min(losses) < losses[0] * 1e-3


@test()
def test_rasterizer_example_draws_the_same_pixels_as_numpy():
    """examples/rasterizer.py: after 4 frames (moving, bouncing triangles, some degenerate or
    clockwise, overlapping at equal depths), every pixel's key (nearest depth, then lowest index)
    and colour exactly as numpy draws them."""
    n, size, frames = 300, 64, 4
    r = rasterizer.Rasterizer(n, size)
    state = list(rasterizer.initial_state(n, size, seed=5))
    state[2][1::7] = state[2][0]  # ties in depth: the lower index wins
    state[0][3] = state[0][3, 0]  # a degenerate triangle draws nothing
    r.load(*state)
    for _ in range(frames):
        r.step()
    v, vel, key, image = rasterizer.reference(*state, size, frames)
    np.testing.assert_array_equal(r.v.to_numpy(), v)
    np.testing.assert_array_equal(r.vel.to_numpy(), vel)
    np.testing.assert_array_equal(r.key.to_numpy(), key)
    np.testing.assert_array_equal(r.image.to_numpy(), image)
    covered = key != rasterizer.EMPTY
    assert 0.1 < covered.mean() < 1 and not (key & 0xFFFF == 3)[covered].any()
