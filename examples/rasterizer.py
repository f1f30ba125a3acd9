"""A triangle rasterizer with a depth buffer: every frame the triangles move, then each thread
rasterizes one triangle over its bounding box and keeps the nearest one per pixel with atomic_min.

    python3 examples/rasterizer.py [arch] [--frames N] [-n TRIANGLES] [--size PIXELS]

Vertices are on a subpixel grid (integers in 1/16 pixel), so the edge functions are exact integer
arithmetic and every backend draws exactly the same pixels. A pixel's key packs the triangle's depth
above its index (`depth << 16 | t`): the smallest key is the nearest triangle, ties going to the
lower index, whatever order the threads run in. A second pass turns each pixel's key into its
triangle's colour (background where no triangle covers it). `reference()` is the same frame in
numpy, pixel for pixel; tests/python/test_examples.py compares the two.
"""
import argparse
import time

import numpy as np

import quadrants as qd

SUB = 16  # subpixel steps per pixel
EMPTY = 0x7FFFFFFF  # the key of a pixel no triangle covers
BACKGROUND = (0.1, 0.1, 0.15)


@qd.data_oriented
class Rasterizer:
    def __init__(self, n, size):
        self.n, self.size = n, size
        self.v = qd.Vector.field(2, qd.i32, shape=(n, 3))  # vertex positions, 1/16 pixel
        self.vel = qd.Vector.field(2, qd.i32, shape=n)  # per triangle, 1/16 pixel per frame
        self.depth = qd.field(qd.i32, shape=n)  # 0 .. 32767, nearer is smaller
        self.color = qd.Vector.field(3, qd.f32, shape=n)
        self.key = qd.field(qd.i32, shape=(size, size))
        self.image = qd.Vector.field(3, qd.f32, shape=(size, size))

    def load(self, v, vel, depth, color):
        self.v.from_numpy(v)
        self.vel.from_numpy(vel)
        self.depth.from_numpy(depth)
        self.color.from_numpy(color)

    @qd.kernel
    def move(self):
        """Each triangle moves by its velocity, which flips on an axis where a vertex would leave."""
        hi = self.size * SUB - 1
        for t in self.vel:
            d = self.vel[t]
            for a in qd.static(range(2)):
                out = 0
                for k in qd.static(range(3)):
                    p = self.v[t, k][a] + d[a]
                    if p < 0 or p > hi:
                        out = 1
                if out:
                    d[a] = -d[a]
            self.vel[t] = d
            for k in qd.static(range(3)):
                self.v[t, k] += d

    @qd.kernel
    def clear(self):
        for i, j in self.key:
            self.key[i, j] = EMPTY

    @qd.kernel
    def raster(self):
        for t in self.depth:
            a, b, c = self.v[t, 0], self.v[t, 1], self.v[t, 2]
            area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
            if area < 0:  # counter-clockwise from here on
                b, c = c, b
            if area != 0:
                lo = qd.min(a, qd.min(b, c)) // SUB
                hi = qd.max(a, qd.max(b, c)) // SUB
                key = self.depth[t] << 16 | t
                for px in range(qd.max(lo[0], 0), qd.min(hi[0], self.size - 1) + 1):
                    for py in range(qd.max(lo[1], 0), qd.min(hi[1], self.size - 1) + 1):
                        # the pixel's centre, in subpixels
                        x, y = px * SUB + SUB // 2, py * SUB + SUB // 2
                        w0 = (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0])
                        w1 = (c[0] - b[0]) * (y - b[1]) - (c[1] - b[1]) * (x - b[0])
                        w2 = (a[0] - c[0]) * (y - c[1]) - (a[1] - c[1]) * (x - c[0])
                        if w0 >= 0 and w1 >= 0 and w2 >= 0:
                            qd.atomic_min(self.key[px, py], key)

    @qd.kernel
    def shade(self):
        for i, j in self.key:
            k = self.key[i, j]
            col = qd.Vector(BACKGROUND)
            if k != EMPTY:
                col = self.color[k & 0xFFFF]
            self.image[i, j] = col

    def step(self):
        self.move()
        self.clear()
        self.raster()
        self.shade()


def initial_state(n, size, seed=0):
    rng = np.random.default_rng(seed)
    centre = rng.integers(0, size * SUB, (n, 1, 2))
    radius = size * SUB // 24
    v = np.clip(centre + rng.integers(-radius, radius + 1, (n, 3, 2)), 0, size * SUB - 1).astype(np.int32)
    vel = rng.integers(-SUB, SUB + 1, (n, 2)).astype(np.int32)
    depth = rng.integers(0, 32768, n).astype(np.int32)
    color = rng.random((n, 3), dtype=np.float32)
    return v, vel, depth, color


def reference(v, vel, depth, color, size, frames):
    """The frames in numpy: (vertices, velocities, keys, image) after them."""
    v, vel = v.astype(np.int64), vel.astype(np.int64)
    hi = size * SUB - 1
    for _ in range(frames):
        p = v + vel[:, None, :]
        out = ((p < 0) | (p > hi)).any(axis=1)
        vel = np.where(out, -vel, vel)
        v = v + vel[:, None, :]
        key = np.full((size, size), EMPTY, np.int64)
        for t in range(len(v)):
            a, b, c = v[t]
            area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
            if area == 0:
                continue
            if area < 0:
                b, c = c, b
            lo = np.maximum(np.minimum(a, np.minimum(b, c)) // SUB, 0)
            up = np.minimum(np.maximum(a, np.maximum(b, c)) // SUB, size - 1)
            px, py = np.meshgrid(np.arange(lo[0], up[0] + 1), np.arange(lo[1], up[1] + 1), indexing="ij")
            x, y = px * SUB + SUB // 2, py * SUB + SUB // 2
            w0 = (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0])
            w1 = (c[0] - b[0]) * (y - b[1]) - (c[1] - b[1]) * (x - b[0])
            w2 = (a[0] - c[0]) * (y - c[1]) - (a[1] - c[1]) * (x - c[0])
            inside = (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
            k = int(depth[t]) << 16 | t
            region = key[lo[0]:up[0] + 1, lo[1]:up[1] + 1]
            region[inside] = np.minimum(region[inside], k)
    covered = key != EMPTY
    image = np.where(covered[..., None], color[np.where(covered, key & 0xFFFF, 0)], np.float32(BACKGROUND))
    return v.astype(np.int32), vel.astype(np.int32), key.astype(np.int32), image.astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("arch", nargs="?", default="cpu")
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=256)
    args = parser.parse_args()
    qd.init(arch=getattr(qd, args.arch))
    r = Rasterizer(args.n, args.size)
    state = initial_state(args.n, args.size)
    r.load(*state)
    r.step()
    qd.sync()
    t = time.perf_counter()
    for _ in range(args.frames):
        r.step()
    qd.sync()
    ms = (time.perf_counter() - t) / args.frames * 1e3
    covered = float((r.key.to_numpy() != EMPTY).mean())
    print(f"{args.arch}: {args.n} triangles, {args.size}x{args.size}: {ms:.3f} ms per frame, "
          f"{covered:.0%} of the pixels covered")
    _, _, key, image = reference(*state, args.size, args.frames + 1)
    assert np.array_equal(r.key.to_numpy(), key) and np.array_equal(r.image.to_numpy(), image)
    print("the same pixels as numpy")


if __name__ == "__main__":
    main()
