from mstar.pool import Pool, PoolEntry


def _pool():
    p = Pool()
    p.add(PoolEntry("seed_a", None, 0, "A", 0.30, "seed: a"))
    p.add(PoolEntry("seed_b", None, 0, "B", 0.40, "seed: b"))
    p.add(PoolEntry("iter_001", "seed_b", 1, "B1", 0.35, "smaller chunks"))
    p.add(PoolEntry("iter_002", "seed_b", 2, "B2", 0.45, "date on every chunk"))
    p.add(PoolEntry("iter_003", "iter_002", 3, "B3", 0.45, "top-k 8"))
    return p


def test_best_prefers_higher_score_then_earlier_entry():
    assert _pool().best().program_id == "iter_002"


def test_ancestors_and_children():
    p = _pool()
    assert [e.program_id for e in p.ancestors("iter_003")] == ["seed_b", "iter_002", "iter_003"]
    assert [e.program_id for e in p.children("seed_b")] == ["iter_001", "iter_002"]


def test_lineage_lines_mark_regressions_with_deltas():
    lines = _pool().lineage_lines("seed_b")
    assert lines[0].startswith("- [current] seed_b")
    regress = [l for l in lines if "smaller chunks" in l][0]
    assert "\u0394 -0.050" in regress and "REGRESSION" in regress
    gain = [l for l in lines if "date on every chunk" in l][0]
    assert "\u0394 +0.050" in gain and "REGRESSION" not in gain


def test_duplicate_ids_are_refused():
    p = _pool()
    try:
        p.add(PoolEntry("seed_a", None, 0, "X", 0.1))
    except ValueError as exc:
        assert "seed_a" in str(exc)
    else:
        raise AssertionError("duplicate id accepted")
