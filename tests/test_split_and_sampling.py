import json
import random
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mstar.split import facility
from mstar.split.embed import Embedder, HashingEmbedder
from mstar.split import Split, make_split, rotating_batch
from mstar.split.facility import facility_location
from mstar.split.kmeans import kmeans_static_set
from mstar.strategies.failures import efraimidis_spirakis
from mstar.strategies.selection import softmax_probabilities, softmax_sample
from mstar.tasks import Episode, QueryItem, Task, load_task


# ----------------------------------------------------------------------------- softmax

def test_softmax_probabilities_formula_and_stability():
    s, tau = [0.1, 0.3, 0.2], 0.15
    w = np.exp(np.array(s) / tau)
    assert np.allclose(softmax_probabilities(s, tau), w / w.sum())
    p = softmax_probabilities([1000.0, 1001.0], 1.0)            # would overflow unshifted
    assert np.all(np.isfinite(p)) and p[1] == pytest.approx(1 / (1 + np.exp(-1)))


@pytest.mark.parametrize("rng", [random.Random(0), np.random.default_rng(0)])
def test_softmax_sample_frequencies(rng):
    scores, tau, draws = [0.1, 0.3, 0.2, 0.25], 0.15, 20_000
    counts = Counter(softmax_sample(scores, tau, rng) for _ in range(draws))
    for i, p in enumerate(softmax_probabilities(scores, tau)):
        assert abs(counts[i] / draws - p) < 0.02


def test_softmax_small_tau_picks_the_max():
    rng = random.Random(1)
    assert {softmax_sample([0.2, 0.9, 0.5], 1e-6, rng) for _ in range(500)} == {1}
    # Ties at the top share the mass; the rest never appear.
    assert {softmax_sample([0.5, 0.1, 0.5], 1e-6, rng) for _ in range(500)} == {0, 2}


def test_softmax_rejects_bad_input():
    for scores, tau in [([], 0.1), ([0.1], 0.0), ([0.1], -1.0), ([0.1], float("nan")), ([float("nan")], 0.1)]:
        with pytest.raises(ValueError):
            softmax_sample(scores, tau, random.Random(0))


def test_softmax_deterministic_under_seed():
    a = [softmax_sample([0.1, 0.2, 0.3], 0.15, r) for r in [random.Random(7)] for _ in range(50)]
    b = [softmax_sample([0.1, 0.2, 0.3], 0.15, r) for r in [random.Random(7)] for _ in range(50)]
    assert a == b


# ----------------------------------------------------------------------------- Efraimidis-Spirakis

def test_es_first_pick_is_proportional_to_weight():
    rng, draws = random.Random(3), 20_000
    w = [10.0, 1.0, 1.0, 1.0, 1.0]
    counts = Counter(efraimidis_spirakis(w, 1, rng)[0] for _ in range(draws))
    assert abs(counts[0] / draws - 10 / 14) < 0.02
    assert abs(counts[3] / draws - 1 / 14) < 0.01


def test_es_favours_heavy_items_and_never_repeats():
    rng = random.Random(5)
    w = [0.9, 0.05, 0.8, 0.1, 0.02, 0.7]
    seen = Counter()
    for _ in range(2000):
        pick = efraimidis_spirakis(w, 3, rng)
        assert len(pick) == 3 == len(set(pick))
        seen.update(pick)
    assert min(seen[0], seen[2], seen[5]) > max(seen[1], seen[3], seen[4])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 5), max_size=12), st.integers(0, 15), st.integers(0, 10**6))
def test_es_zero_weights_excluded_or_last(weights, k, seed):
    positive = [i for i, w in enumerate(weights) if w > 0]
    pick = efraimidis_spirakis(weights, k, random.Random(seed))
    assert len(pick) == len(set(pick)) == min(k, len(positive)) and set(pick) <= set(positive)
    full = efraimidis_spirakis(weights, k, random.Random(seed), include_zero=True)
    assert len(full) == len(set(full)) == min(k, len(weights))
    n_pos = min(k, len(positive))
    assert full[:n_pos] == pick and all(weights[i] == 0 for i in full[n_pos:])


def test_es_rejects_bad_weights():
    for w, k in [([1.0, -0.1], 1), ([float("nan")], 1), ([1.0], -1), ([[1.0]], 1)]:
        with pytest.raises(ValueError):
            efraimidis_spirakis(w, k, random.Random(0))


# ----------------------------------------------------------------------------- k-means static set

def _blobs(n_blobs=5, per=20, dim=8, seed=0):
    g = np.random.default_rng(seed)
    centres = g.normal(size=(n_blobs, dim)) * 20
    x = np.concatenate([c + g.normal(size=(per, dim)) for c in centres])
    labels = np.repeat(np.arange(n_blobs), per)
    order = g.permutation(len(x))
    return x[order], labels[order]


def test_kmeans_picks_one_per_blob():
    x, labels = _blobs()
    for seed in range(5):
        picked = kmeans_static_set(x, 5, np.random.default_rng(seed))
        assert sorted(labels[picked].tolist()) == [0, 1, 2, 3, 4]
        assert picked == sorted(picked)


def test_kmeans_edges_and_determinism():
    x, _ = _blobs()
    assert kmeans_static_set(x, 500, random.Random(0)) == list(range(len(x)))
    assert kmeans_static_set(x, 0, random.Random(0)) == []
    a = kmeans_static_set(x, 7, np.random.default_rng(42))
    assert a == kmeans_static_set(x, 7, np.random.default_rng(42))
    assert a == kmeans_static_set(x, 7, 42)                      # an int seed works too
    # All points identical: clusters collapse, yet n distinct indices come back.
    same = kmeans_static_set(np.ones((10, 3)), 3, random.Random(0))
    assert len(same) == len(set(same)) == 3
    with pytest.raises(ValueError):
        kmeans_static_set(np.ones(5), 2, random.Random(0))


def test_cluster_sums_are_the_sparse_product_bit_for_bit():
    # The centre update once was a scipy.sparse one-hot product; the numpy sums that replaced it
    # (no scipy in the engine: ~13 MB for a whole run) must give the very same float32 centres,
    # so that every split -- and so every lineage for a seed -- stays what it was.
    from scipy.sparse import csr_matrix

    from mstar.split.kmeans import _cluster_sums

    g = np.random.default_rng(3)
    for n, d, k in ((191, 384, 25), (4000, 64, 300), (50, 8, 80)):   # the last: many empty clusters
        x = (g.standard_normal((n, d)) * 37).astype(np.float32)
        labels = g.integers(0, k, n)
        counts = np.bincount(labels, minlength=k)
        sparse = np.asarray(csr_matrix((np.ones(n, dtype=np.float32), (labels, np.arange(n))), shape=(k, n)) @ x)
        assert np.array_equal(_cluster_sums(x, labels, counts), sparse)


def test_a_split_in_a_fresh_process_imports_no_scipy():
    import subprocess
    import sys

    code = ("import sys, numpy as np; from mstar.split.kmeans import kmeans_static_set; "
            "x = np.random.default_rng(0).standard_normal((300, 16)); "
            "print(kmeans_static_set(x, 25, 0)[:3], 'scipy' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert said.split()[-1] == "False"


# ----------------------------------------------------------------------------- facility location

def _naive_greedy(v, e, m):
    """Textbook greedy on F(S) = Σ_v max_{e∈S} sim(v, e); lowest index wins ties."""
    sims = v @ e.T
    chosen, best = [], None
    for _ in range(m):
        values = []
        for j in range(len(e)):
            if j in chosen:
                values.append(-np.inf)
                continue
            col = sims[:, j] if best is None else np.maximum(best, sims[:, j])
            values.append(col.sum())
        j = int(np.argmax(values))
        chosen.append(j)
        best = sims[:, j].copy() if best is None else np.maximum(best, sims[:, j])
    return chosen


def _objective(v, e, chosen):
    return (v @ e[chosen].T).max(axis=1).sum()


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_facility_location_equals_naive_greedy():
    g = np.random.default_rng(0)
    for trial in range(25):
        n, nv, d = int(g.integers(3, 50)), int(g.integers(1, 30)), int(g.integers(2, 12))
        e, v = g.normal(size=(n, d)), g.normal(size=(nv, d))
        if trial % 2:
            e, v = _unit(e), _unit(v)
        m = int(g.integers(1, n))
        lazy = facility_location(v, e, m)
        naive = _naive_greedy(v, e, m)
        assert lazy == naive
        assert _objective(v, e, lazy) == pytest.approx(_objective(v, e, naive))


def test_facility_location_with_duplicates():
    g = np.random.default_rng(1)
    base = _unit(g.normal(size=(6, 5)))
    e = np.concatenate([base, base, base[:3]])                # every episode at least twice
    v = _unit(g.normal(size=(20, 5)))
    for m in (1, 4, 6, 9, 14):
        lazy = facility_location(v, e, m)
        assert lazy == _naive_greedy(v, e, m)
        assert len(set(lazy)) == m
    # Once every distinct episode is in, copies add nothing: the first 6 picks are distinct points.
    first6 = facility_location(v, e, 6)
    assert len({tuple(np.round(e[i], 9)) for i in first6}) == 6


def test_matrix_greedy_matches_a_plain_greedy_on_float32_with_duplicates():
    # Mid-sized, float32, 5 % duplicated episodes: the incremental gains must not drift into
    # different picks (ties, including the all-zero gains after full coverage, go to the lowest index).
    g = np.random.default_rng(7)
    centres = _unit(g.normal(size=(40, 24)))
    e = _unit(centres[g.integers(40, size=1500)] + 0.1 * g.normal(size=(1500, 24))).astype(np.float32)
    e[g.choice(1500, 75, replace=False)] = e[g.choice(1500, 75, replace=False)]
    v = _unit(centres[g.integers(40, size=200)] + 0.1 * g.normal(size=(200, 24))).astype(np.float32)
    sims = v @ e.T
    cover, plain = np.full(len(v), sims.min(), dtype=np.float32), []
    for _ in range(60):
        gains = np.maximum(sims - cover[:, None], 0).sum(axis=0, dtype=np.float64)
        gains[plain] = -1.0
        plain.append(int(gains.argmax()))
        cover = np.maximum(cover, sims[:, plain[-1]])
    assert facility_location(v, e, 60) == plain


def test_facility_location_edges():
    e, v = np.eye(4), np.eye(4)[:2]
    assert facility_location(v, e, 0) == []
    assert facility_location(v, e, 4) == [0, 1, 2, 3]
    assert facility_location(v, e, 9) == [0, 1, 2, 3]
    assert facility_location(np.zeros((0, 4)), e, 2) == [0, 1]
    with pytest.raises(ValueError, match="dimension mismatch"):
        facility_location(np.ones((2, 3)), e, 2)
    with pytest.raises(ValueError, match="NaN"):
        facility_location(np.full((2, 4), np.nan), e, 2)


def test_facility_location_covers_clusters():
    x, labels = _blobs(n_blobs=6, per=30, dim=16, seed=3)
    x = _unit(x)
    picked = facility_location(x[::3], x, 6)                 # queries drawn from the same blobs
    assert sorted(labels[picked].tolist()) == list(range(6))


def test_neighbor_mode_is_exact_greedy_on_the_clipped_objective():
    g = np.random.default_rng(2)
    for trial in range(15):
        n, nv, d = int(g.integers(6, 60)), int(g.integers(1, 25)), int(g.integers(2, 10))
        e, v = _unit(g.normal(size=(n, d))), _unit(g.normal(size=(nv, d)))
        k, m = int(g.integers(1, n - 2)), int(g.integers(1, n))
        sims = v @ e.T
        theta = np.sort(sims, axis=1)[:, -(k + 1)]            # each row's (k+1)-th best
        clipped = np.maximum(sims, theta[:, None])
        cover, expected = theta.copy(), []
        for _ in range(m):
            gains = np.maximum(clipped - cover[:, None], 0).sum(axis=0)
            gains[expected] = -1
            j = int(np.argmax(gains))
            expected.append(j)
            cover = np.maximum(cover, clipped[:, j])
        assert facility_location(v, e, m, neighbors=k) == expected


def test_auto_mode_switches_to_neighbors_on_large_inputs(monkeypatch):
    g = np.random.default_rng(4)
    e, v = _unit(g.normal(size=(400, 8)).astype(np.float32)), _unit(g.normal(size=(50, 8)).astype(np.float32))
    assert facility_location(v, e, 10) == facility_location(v, e, 10, neighbors=None)   # small: exact
    monkeypatch.setattr(facility, "EXACT_LIMIT", 1000)
    monkeypatch.setattr(facility, "AUTO_NEIGHBORS", 7)
    assert facility_location(v, e, 10) == facility_location(v, e, 10, neighbors=7)


def test_neighbor_mode_scales():
    # A scaled-down version of the 100k × 10k benchmark; must stay well inside a test budget.
    g = np.random.default_rng(5)
    e = _unit(g.normal(size=(30_000, 64)).astype(np.float32))
    v = _unit(g.normal(size=(2_000, 64)).astype(np.float32))
    t0 = time.perf_counter()
    picked = facility_location(v, e, 300)                     # N·V = 6e7 > EXACT_LIMIT -> k-NN mode
    assert time.perf_counter() - t0 < 20
    assert len(picked) == len(set(picked)) == 300
    # Better coverage than a random subset of the same size.
    rand = g.choice(len(e), 300, replace=False)
    assert _objective(v, e, picked) > _objective(v, e, rand)


# ----------------------------------------------------------------------------- rotating batch

def test_rotating_batch_is_deterministic_and_excludes():
    pool = list(range(10, 60))
    a = rotating_batch(pool, 5, iteration=3, seed=0)
    assert a == rotating_batch(list(reversed(pool)), 5, iteration=3, seed=0)   # pool order irrelevant
    assert len(a) == len(set(a)) == 5 and set(a) <= set(pool)
    batches = {tuple(rotating_batch(pool, 5, i, 0)) for i in range(20)}
    assert len(batches) > 15                                  # iterations differ
    assert rotating_batch(pool, 5, 3, 1) != a                 # seeds differ
    excluded = set(range(10, 50))
    b = rotating_batch(pool, 5, 3, 0, exclude=excluded)
    assert set(b) <= set(range(50, 60))
    assert sorted(rotating_batch([1, 2, 3], 10, 0, 0)) == [1, 2, 3]
    assert rotating_batch([], 5, 0, 0) == []
    with pytest.raises(ValueError):
        rotating_batch(pool, -1, 0, 0)


# ----------------------------------------------------------------------------- embedder + split

def test_hashing_embedder():
    emb = HashingEmbedder(dim=256)
    assert isinstance(emb, Embedder)
    x = emb.embed(["Tom ran the Ridgeback Trail half marathon", "The half marathon on the Ridgeback trail",
                   "Lena adopted an orange tabby cat", ""])
    assert x.shape == (4, 256) and x.dtype == np.float32
    assert np.allclose(np.linalg.norm(x[:3], axis=1), 1.0, atol=1e-5) and not x[3].any()
    assert x[0] @ x[1] > 0.5 > x[0] @ x[2]
    assert np.array_equal(x, HashingEmbedder(dim=256).embed(["Tom ran the Ridgeback Trail half marathon",
                                                              "The half marathon on the Ridgeback trail",
                                                              "Lena adopted an orange tabby cat", ""]))
    assert emb.embed([]).shape == (0, 256)
    with pytest.raises(TypeError):
        emb.embed("one string")


@pytest.fixture(scope="module")
def sample():
    return load_task("sample")


def test_make_split_on_the_sample_task(sample):
    split = make_split(sample, None, seed=0)
    n_val = len(sample.validation)
    assert len(split.static) == 25 and len(set(split.static)) == 25
    assert set(split.static).isdisjoint(split.rotating_pool)
    assert sorted(split.static + split.rotating_pool) == list(range(n_val))
    assert split.train_episodes == list(range(len(sample.episodes)))      # 5 × 25 >= 20 episodes
    assert split.static_ids == [sample.validation[i].id for i in split.static]
    for it in range(5):
        batch = split.rotating(it)
        assert len(batch) == 5 and set(batch) <= set(split.rotating_pool)
    again = make_split(sample, HashingEmbedder(), seed=0)
    assert again.to_dict() == split.to_dict()
    assert json.loads(json.dumps(split.to_dict()))["config"]["static_size"] == 25


def test_make_split_selects_relevant_episodes():
    # Budget smaller than the episode pool: facility location must run, and should prefer
    # sessions that validation questions are about (their evidence sessions). The small
    # hand-written task: its sessions are topical, the generated task's are all alike.
    from mstar.tasks.sample import bundled_sample_path
    sample = load_task("sample", bundled_sample_path())
    split = make_split(sample, None, static_size=4, train_ratio=2, seed=3)
    assert len(split.train_episodes) == 8 and split.train_episodes == sorted(set(split.train_episodes))
    def coverage(ids):   # share of validation questions with at least one evidence session kept
        return np.mean([any(ev in ids for ev in q.meta["evidence"]) for q in sample.validation])

    all_ids = [e.id for e in sample.episodes]
    rng = random.Random(0)
    random_coverage = np.mean([coverage(set(rng.sample(all_ids, 8))) for _ in range(500)])
    assert coverage({all_ids[i] for i in split.train_episodes}) > random_coverage + 0.03
    only_static = make_split(sample, None, static_size=4, train_ratio=2, seed=3, cover="static")
    assert len(only_static.train_episodes) == 8
    assert make_split(sample, None, static_size=4, train_ratio=0).train_episodes == list(range(20))


class _FakeEmbedder:
    """A stand-in neural embedder: the seam only needs embed(texts) -> unit rows."""

    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        x = np.array([[len(t) % 7 + 1.0, t.count("a") + 1.0, 1.0] for t in texts], dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_make_split_uses_the_given_embedder_and_handles_tiny_tasks():
    eps = tuple(Episode(f"e{i}", f"text {i} " + "a" * i) for i in range(30))
    val = tuple(QueryItem(f"q{i}", "a" * (i + 1) + "?", "x") for i in range(4))
    task = Task("tiny", eps, val, ())
    fake = _FakeEmbedder()
    split = make_split(task, fake, static_size=25, train_ratio=2, seed=1)
    assert fake.calls == 2                                    # questions, then episodes
    assert split.static == [0, 1, 2, 3] and split.rotating_pool == []
    assert len(split.train_episodes) == 8
    assert set(split.rotating(0)) <= set(split.static)      # empty pool falls back to the static set
    assert isinstance(split, Split)
    with pytest.raises(ValueError, match="cover"):
        make_split(task, fake, cover="everything")
