import random
from collections import Counter

import pytest

from mongobench.driver.queries import sample_distinct


@pytest.mark.parametrize("lo, hi, n", [(0, 100_000, 100), (5, 205, 100), (5, 105, 100), (7, 8, 1)])
def test_sample_distinct_gives_n_distinct_values_in_range(lo, hi, n):
    rng = random.Random(3)
    for _ in range(50):
        got = sample_distinct(rng, lo, hi, n)
        assert len(got) == len(set(got)) == n
        assert all(lo <= v < hi for v in got)


def test_sample_distinct_is_uniform_and_seeded():
    rng = random.Random(4)
    counts = Counter(v for _ in range(4000) for v in sample_distinct(rng, 0, 40, 5))
    # 20,000 draws over 40 values: 500 expected each; 5 sigma is about 110
    assert set(counts) == set(range(40)) and max(abs(c - 500) for c in counts.values()) < 110
    assert sample_distinct(random.Random(9), 0, 10**6, 100) == sample_distinct(
        random.Random(9), 0, 10**6, 100
    )
