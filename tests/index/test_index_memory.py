"""The memory math of a faiss index before it is built (bench.index.memory), the refusal when
the build cannot fit, the shard-by-shard and on-disk fills (the same index as one in-memory
add), and the IndexOp writing the math next to the index."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.index.faiss_index import (
    INDEX_FILE,
    LISTS_FILE,
    MEMORY_FILE,
    FaissIndex,
    _faiss,
    serialized_bytes,
)
from bench.index.memory import GIB, estimate, machine_memory_bytes

N, DIM = 6000, 32


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    rng = np.random.default_rng(1)
    centers = rng.standard_normal((30, DIM))
    v = centers[rng.integers(0, 30, N)] + 0.5 * rng.standard_normal((N, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# the factories of conf/index (resolved) and the compressed / graph / transformed kinds
FACTORIES = ["Flat", "SQ8", "PQ8", "IVF64,Flat", "IVF64,PQ8", "IVF64,SQ8", "HNSW16",
             "HNSW16,SQ8", "IVF64_HNSW16,Flat", "OPQ8,IVF64,PQ8"]


@pytest.mark.parametrize("factory", FACTORIES)
def test_estimate_matches_what_faiss_serialises(factory: str, x: np.ndarray) -> None:
    """Resident bytes predicted from the empty index = the built index's serialized size
    within 1 % (the file adds headers; an HNSW graph's upper levels are an expectation)."""
    faiss = _faiss()
    index = faiss.index_factory(DIM, factory, faiss.METRIC_INNER_PRODUCT)
    mem = estimate(faiss, index, n=N, dim=DIM, factory=factory, train_n=N, add_batch=1000)
    _quick_training(faiss, index)
    if not index.is_trained:
        index.train(x)
    index.add(x)
    actual = serialized_bytes(faiss, index)
    assert abs(mem.resident_bytes - actual) <= 0.01 * actual, (mem.resident, actual)
    assert mem.input_bytes == N * DIM * 4


def _quick_training(faiss, index) -> None:  # type: ignore[no-untyped-def]
    """A factory's ``PQ<m>`` (no ``np``) also runs faiss' polysemous training: a simulated
    annealing that only reorders the PQ centroids, ~6-13 s a PQ on one core here against
    ~0.1 s for the k-means itself. Reordered or not, the index serialises to the same bytes
    count, which is all this module checks, so the annealing is switched off; so are all
    but 2 of OPQ's 50 rotation rounds (~5 s here): the rotation is a d x d matrix however
    well it is trained."""
    sub = index
    if isinstance(index, faiss.IndexPreTransform):
        sub = faiss.downcast_index(index.index)
        for i in range(index.chain.size()):
            vt = faiss.downcast_VectorTransform(index.chain.at(i))
            if isinstance(vt, faiss.OPQMatrix):
                vt.niter = 2
    if hasattr(sub, "do_polysemous_training"):
        sub.do_polysemous_training = False


def test_parts_are_the_arithmetic_of_the_structures() -> None:
    faiss = _faiss()
    n, d = 1_000_000, 384
    ivf = faiss.index_factory(d, "IVF4000,PQ48", faiss.METRIC_INNER_PRODUCT)
    mem = estimate(faiss, ivf, n=n, dim=d, factory="IVF4000,PQ48", train_n=100_000,
                   add_batch=262_144)
    assert dict(mem.resident) == {"inverted lists": n * (48 + 8), "centroids": 4000 * d * 4,
                                  "PQ codebook": 256 * d * 4}
    assert dict(mem.build_extra) == {"training sample": 100_000 * d * 4,
                                     "add batch": 262_144 * (d * 4 + 8)}
    on_disk = estimate(faiss, ivf, n=n, dim=d, factory="IVF4000,PQ48", train_n=100_000,
                       add_batch=262_144, on_disk=True)
    assert on_disk.disk_lists == n * (48 + 8)
    assert "inverted lists" not in dict(on_disk.resident)
    assert on_disk.peak_bytes == mem.peak_bytes - n * (48 + 8)
    line = mem.describe()
    assert line.startswith("IVF4000,PQ48 on 1,000,000 x 384: resident ") and "peak" in line
    hnsw = faiss.index_factory(d, "HNSW32", faiss.METRIC_INNER_PRODUCT)
    links = dict(estimate(faiss, hnsw, n=n, dim=d, factory="HNSW32", train_n=1,
                          add_batch=1).resident)["graph links"]
    assert links == int(n * (64 + 32 / 31) * 4)


def test_build_over_the_limit_is_refused_before_training(x: np.ndarray, tmp_path: Path) -> None:
    need = FaissIndex(factory="IVF{nlist},Flat", train_size=2000).memory(N, DIM)
    small = FaissIndex(factory="IVF{nlist},Flat", train_size=2000,
                       memory_limit_gb=need.peak_bytes / 2 / GIB)
    with pytest.raises(OptionError) as err:
        small.build_in(x, tmp_path)
    assert err.value.option == "memory_limit_gb"
    assert "does not fit" in err.value.message and "on_disk=true" in err.value.message
    assert not (tmp_path / MEMORY_FILE).exists()  # refused before anything was written
    # the same build with the lists on disk fits the same limit
    on_disk = FaissIndex(factory="IVF{nlist},Flat", train_size=2000, on_disk=True,
                         add_batch=1000, memory_limit_gb=need.peak_bytes / 2 / GIB)
    _built, info = on_disk.build_in(x, tmp_path)
    assert info.n_vectors == N
    assert (tmp_path / MEMORY_FILE).exists()


def test_default_limit_is_the_machine(x: np.ndarray) -> None:
    assert FaissIndex().memory_limit_bytes() == machine_memory_bytes() > 0


@pytest.mark.parametrize("factory", ["IVF{nlist},Flat", "IVF{nlist},PQ{pq_m}"])
def test_batched_add_builds_the_same_index(factory: str, x: np.ndarray) -> None:
    faiss = _faiss()
    pq = {"pq_m": 8} if "pq_m" in factory else {}
    one, _ = FaissIndex(factory=factory, train_size=2000, add_batch=N, **pq).build(x)
    batched, _ = FaissIndex(factory=factory, train_size=2000, add_batch=700, **pq).build(x)
    assert serialized_bytes(faiss, one._cpu_index) == serialized_bytes(faiss, batched._cpu_index)
    a, b = faiss.serialize_index(one._cpu_index), faiss.serialize_index(batched._cpu_index)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("factory", ["IVF{nlist},Flat", "IVF{nlist},PQ{pq_m}"])
def test_on_disk_index_searches_like_the_in_memory_one(factory: str, x: np.ndarray,
                                                       tmp_path: Path) -> None:
    pq = {"pq_m": 8} if "pq_m" in factory else {}
    mem_index = FaissIndex(factory=factory, train_size=2000, **pq)
    disk_index = FaissIndex(factory=factory, train_size=2000, on_disk=True, add_batch=1500, **pq)
    built_dir = tmp_path / "tmp-build"
    built_dir.mkdir()
    in_memory, _ = mem_index.build(x)
    built, info = disk_index.build_in(x, built_dir)
    built.save(built_dir)
    assert sorted(p.name for p in built_dir.iterdir()) == [INDEX_FILE, LISTS_FILE, MEMORY_FILE]
    # the artifact folder is renamed after the build: the lists are found next to the index
    final = tmp_path / "artifact"
    built_dir.rename(final)
    loaded = disk_index.load(final)
    q = x[::37]
    for params in ({"nprobe": 1}, {"nprobe": 8}, {"nprobe": 64}):
        a, b = in_memory.search(q, 10, params), loaded.search(q, 10, params)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores)
    assert info.index_bytes > (final / LISTS_FILE).stat().st_size > 0


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_an_on_disk_build_leaves_no_shard_file_mapped(x: np.ndarray, tmp_path: Path) -> None:
    # faiss.contrib.ondisk.merge_ondisk disowns the shards' memory-mapped lists and never
    # frees them: every deleted shard file stayed mapped, its disk held (14.4 GiB at 10M
    # vectors) until the process ended. The build frees them once they are merged
    import gc

    built, _ = FaissIndex(factory="IVF{nlist},Flat", train_size=2000, on_disk=True,
                          add_batch=700).build_in(x, tmp_path)
    gc.collect()
    mapped = [line for line in Path("/proc/self/maps").read_text().splitlines()
              if str(tmp_path / "shards") in line]
    assert mapped == [] and not (tmp_path / "shards").exists()
    a = built.search(x[::50], 5, {"nprobe": 8})  # the merged lists still serve
    assert (a.ids >= 0).all()


def test_on_disk_options_are_checked() -> None:
    with pytest.raises(OptionError) as err:
        FaissIndex(factory="HNSW32", on_disk=True)
    assert err.value.option == "on_disk"
    with pytest.raises(OptionError) as err:
        FaissIndex(factory="IVF{nlist},Flat", on_disk=True, device="cuda")
    assert err.value.option == "on_disk"
    with pytest.raises(OptionError) as err:
        FaissIndex(factory="IVF{nlist},Flat", on_disk=True).build(np.zeros((10, 4), np.float32))
    assert err.value.option == "on_disk"
    for bad in ({"add_batch": 0}, {"memory_limit_gb": 0}, {"num_gpus": 0}):
        with pytest.raises(OptionError) as err:
            FaissIndex(**bad)  # type: ignore[arg-type]
        assert err.value.option == next(iter(bad))
    with pytest.raises(OptionError) as err:
        FaissIndex(num_gpus=2)
    assert err.value.option == "num_gpus" and "device=cuda" in err.value.message


def test_on_disk_is_keyed_and_in_memory_keys_are_unchanged() -> None:
    base = FaissIndex(factory="IVF{nlist},Flat").cache_params(1000)
    assert "on_disk" not in base and "add_batch" not in base and "memory_limit_gb" not in base
    assert FaissIndex(factory="IVF{nlist},Flat", on_disk=True).cache_params(1000) == {
        **base, "on_disk": True}
