"""Fitting a mass-spring chain by gradient descent through its simulation (reverse-mode autodiff).

    python3 examples/mass_spring_fit.py [--arch cpu|vulkan|...] [--iters N]

A chain of N masses hangs from a fixed point under gravity, neighbours joined by springs of
stiffness k[s]. The chain starts at rest, horizontal, and swings down for STEPS time steps. The
tip's end position was observed for stiffnesses TRUE_K; starting from a uniform guess we look for
stiffnesses that bring the tip there: the loss is the squared distance,
its gradient with respect to every k[s] comes from `qd.ad.Tape` (the adjoints of the STEPS step
kernels, run backwards), and Adam on log k follows it. Every step writes new
time slices x[t + 1], v[t + 1], so no kernel overwrites what it read (the global data access rule).
tests/python/test_examples.py checks the gradient against finite differences and that the fit
converges.
"""
import argparse

import numpy as np

import quadrants as qd

N = 6  # masses; mass 0 is pinned
STEPS = 60
DT = 0.01
REST = 0.2
GRAVITY = (0.0, -9.8)
DAMPING = 0.995
TRUE_K = (300.0, 800.0, 150.0, 500.0, 250.0)


class Chain:
    def __init__(self):
        vec2 = qd.math.vec2
        self.x = vec2.field(shape=(STEPS + 1, N), needs_grad=True)
        self.v = vec2.field(shape=(STEPS + 1, N), needs_grad=True)
        self.log_k = qd.field(qd.f32, shape=N - 1, needs_grad=True)
        self.loss = qd.field(qd.f32, shape=(), needs_grad=True)
        x, v, log_k, loss = self.x, self.v, self.log_k, self.loss

        @qd.func
        def spring_force(t: qd.i32, i: qd.i32, j: qd.i32, s: qd.i32):
            d = x[t, j] - x[t, i]
            length = d.norm(1e-6)
            return qd.exp(log_k[s]) * (length - REST) * d / length

        @qd.kernel
        def step(t: qd.i32):
            for i in range(N):
                if i > 0:
                    f = qd.math.vec2(GRAVITY[0], GRAVITY[1])
                    f += spring_force(t, i, i - 1, i - 1)
                    if i < N - 1:
                        f += spring_force(t, i, i + 1, i)
                    v[t + 1, i] = (v[t, i] + DT * f) * DAMPING
                    x[t + 1, i] = x[t, i] + DT * v[t + 1, i]
                else:
                    v[t + 1, i] = v[t, i]
                    x[t + 1, i] = x[t, i]

        @qd.kernel
        def tip_loss(tx: qd.f32, ty: qd.f32):
            d = x[STEPS, N - 1] - qd.math.vec2(tx, ty)
            loss[None] = d.dot(d)

        self.step, self.tip_loss = step, tip_loss

    def reset(self):
        x0 = np.zeros((STEPS + 1, N, 2), np.float32)
        x0[0, :, 0] = REST * np.arange(N)
        self.x.from_numpy(x0)
        self.v.fill(0)

    def forward(self, target):
        self.reset()
        for t in range(STEPS):
            self.step(t)
        self.tip_loss(*target)
        return self.loss[None]

    def tip(self):
        return tuple(float(c) for c in self.x.to_numpy()[STEPS, N - 1])

    def gradient(self, target):
        """The loss and d loss / d log_k, by the tape."""
        with qd.ad.Tape(loss=self.loss):
            self.forward(target)
        return self.loss[None], self.log_k.grad.to_numpy()


def observed_tip(chain):
    """Where the tip ends for TRUE_K."""
    chain.log_k.from_numpy(np.log(np.array(TRUE_K, np.float32)))
    chain.forward((0.0, 0.0))
    return chain.tip()


def fit(chain, target, iters, lr=0.1, log=print):
    """Adam on log k (the loss is badly scaled along different stiffnesses)."""
    log_k = np.full(N - 1, np.log(400.0))
    m, v, losses = np.zeros(N - 1), np.zeros(N - 1), []
    for it in range(1, iters + 1):
        chain.log_k.from_numpy(log_k.astype(np.float32))
        loss, g = chain.gradient(target)
        losses.append(loss)
        if log and (it % 10 == 1 or it == iters):
            log(f"iter {it:3d}  loss {loss:.7f}  |grad| {np.linalg.norm(g):.4f}")
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        log_k -= lr * (m / (1 - 0.9 ** it)) / (np.sqrt(v / (1 - 0.999 ** it)) + 1e-8)
    return losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="cpu")
    ap.add_argument("--iters", type=int, default=60)
    a = ap.parse_args()
    qd.init(arch=getattr(qd, a.arch))
    chain = Chain()
    target = observed_tip(chain)
    losses = fit(chain, target, a.iters)
    tip = chain.tip()
    print(f"loss {losses[0]:.5f} -> {losses[-1]:.7f}; tip at ({tip[0]:.3f}, {tip[1]:.3f}), target "
          f"({target[0]:.3f}, {target[1]:.3f}); stiffness {np.round(np.exp(chain.log_k.to_numpy()), 1)}")


if __name__ == "__main__":
    main()
