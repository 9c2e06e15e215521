"""Every invariant of the Atlas model (DESIGN.md "Atlas model"), checked on the tables."""

import itertools

import numpy as np
import pytest

from hologram.core import atlas as A


def edges():
    return {frozenset((c, n)) for c in range(A.NUM_CLASSES) for n in A.NEIGHBORS[c]}


def test_96_classes_256_edges():
    assert len(A.NEIGHBORS) == 96
    assert len(edges()) == 256


def test_degrees_64_of_5_and_32_of_6():
    degs = [A.degree(c) for c in range(96)]
    assert degs.count(5) == 64 and degs.count(6) == 32


def test_graph_is_simple_and_undirected():
    for c in range(96):
        assert c not in A.NEIGHBORS[c]
        assert len(set(A.NEIGHBORS[c])) == len(A.NEIGHBORS[c])
        assert list(A.NEIGHBORS[c]) == sorted(A.NEIGHBORS[c])
        for n in A.NEIGHBORS[c]:
            assert c in A.NEIGHBORS[n]


def test_mirror_is_fixed_point_free_involution_never_adjacent():
    pairs = set()
    for c in range(96):
        m = A.mirror(c)
        assert m != c and A.mirror(m) == c
        assert m not in A.NEIGHBORS[c]
        pairs.add(frozenset((c, m)))
    assert len(pairs) == 48


def test_mirror_is_a_graph_automorphism():
    for a, b in itertools.combinations(range(96), 2):
        assert (b in A.NEIGHBORS[a]) == (A.mirror(b) in A.NEIGHBORS[A.mirror(a)])


def test_two_unity_positions():
    assert sorted(A.UNITY) == [0, 48]
    assert sum(A.is_unity(c) for c in range(96)) == 2


def test_byte_to_class_formula():
    for b in range(256):
        bit = [(b >> i) & 1 for i in range(8)]
        h2 = (bit[7] << 1) | bit[6]
        l = (bit[3] << 2) | (bit[2] << 1) | bit[1]
        d = {(0, 0): 0, (1, 0): 1, (0, 1): 2, (1, 1): 0}[(bit[4], bit[5])]
        assert A.byte_class(b) == 24 * h2 + 8 * d + l
    assert sorted(set(A.BYTE_CLASS)) == list(range(96))
    assert A.byte_class(0x1FF) == A.byte_class(0xFF)  # only the low 8 bits count


def test_bound_map_layout():
    assert A.bound_map(0, 0, 0) == 0
    assert A.bound_map(1, 0, 0) == 12288
    assert A.bound_map(95, 47, 255) == 96 * 48 * 256 - 1
    seen = {A.bound_map(c, p, b) for c in (0, 1, 95) for p in (0, 47) for b in (0, 255)}
    assert len(seen) == 12


@pytest.mark.parametrize("bad", [-1, 96, 1000, -(2**63)])
def test_out_of_range_classes_are_total(bad):
    assert A.mirror(bad) == -1
    assert A.degree(bad) == 0
    assert A.neighbor(bad, 0) == -1
    assert A.is_unity(bad) is False


def test_neighbor_index_range():
    for c in range(96):
        assert [A.neighbor(c, k) for k in range(A.degree(c))] == list(A.NEIGHBORS[c])
        assert A.neighbor(c, A.degree(c)) == -1 and A.neighbor(c, -1) == -1


def test_tables_agree_with_functions():
    assert np.array_equal(A.MIRROR_TABLE, [A.mirror(c) for c in range(96)])
    assert np.array_equal(A.DEGREE_TABLE, [A.degree(c) for c in range(96)])
    assert np.array_equal(A.BYTE_CLASS_TABLE, [A.byte_class(b) for b in range(256)])
    for c in range(96):
        assert list(A.NEIGHBOR_TABLE[c][: A.degree(c)]) == list(A.NEIGHBORS[c])
