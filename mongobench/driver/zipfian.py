"""YCSB's zipfian key distribution (read_update's keys)."""

from __future__ import annotations


class Zipfian:
    """YCSB's zipfian rank generator (Gray et al.), scrambled so hot keys scatter.

    zeta(n) is summed exactly up to 10^5 terms and by its integral beyond, so
    setting up 100 million keys takes milliseconds.
    """

    EXACT = 100_000

    def __init__(self, n: int, theta: float = 0.99):
        self.n, self.theta = n, theta
        m = min(n, self.EXACT)
        z = sum(1.0 / i**theta for i in range(1, m + 1))
        if n > m:
            z += (n ** (1 - theta) - m ** (1 - theta)) / (1 - theta)
        self.zetan = z
        self.half = 1 + 0.5**theta
        self.alpha = 1.0 / (1.0 - theta)
        self.eta = (1 - (2.0 / n) ** (1 - theta)) / (1 - self.half / z) if n > 2 else 1.0

    def rank(self, u: float) -> int:
        uz = u * self.zetan
        if uz < 1.0:
            return 0
        if uz < self.half:
            return 1 % self.n
        return min(self.n - 1, int(self.n * (self.eta * u - self.eta + 1) ** self.alpha))

    def key(self, u: float) -> int:
        # Fibonacci hashing scatters hot ranks over the key space like YCSB's
        # FNV scramble, at one multiplication instead of a Python byte loop; the
        # high bits of the 64-bit product pick the key (n need not be coprime).
        return (((self.rank(u) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) * self.n) >> 64

    def sampler(self, rand):
        """`lambda: self.key(rand())` as one closure over locals: the pipelined
        driver's per-operation path, where method calls and attribute look-ups count."""
        n, zetan, half, alpha, eta = self.n, self.zetan, self.half, self.alpha, self.eta
        one, last = 1 % n, n - 1

        def next_key():
            u = rand()
            uz = u * zetan
            if uz < 1.0:
                r = 0
            elif uz < half:
                r = one
            else:
                r = int(n * (eta * u - eta + 1) ** alpha)
                if r > last:
                    r = last
            return (((r * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF) * n) >> 64

        return next_key
