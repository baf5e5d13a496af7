"""FaissIndex: every index yaml builds from Hydra, recall vs exact over the sweep, nlist
templates and their cache key, save/load, option errors (small random vectors, CPU)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from bench.config.build import OptionError, build
from bench.errors import ConfigError
from bench.index.base import SearchResult
from bench.index.exact import ann_recall_at_k, exact_topk
from bench.index.faiss_index import INDEX_FILE, FaissIndex

N, DIM, N_Q, K = 2000, 32, 200, 10


def _norm(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, SearchResult]:
    """Clustered unit vectors (embeddings are clustered; uniform random ones are IVF's worst
    case) and queries drawn from the same clusters, with their exact top-k."""
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((40, DIM))
    x = _norm(centers[rng.integers(0, 40, N)] + 0.6 * rng.standard_normal((N, DIM)))
    q = _norm(centers[rng.integers(0, 40, N_Q)] + 0.6 * rng.standard_normal((N_Q, DIM)))
    return x, q, exact_topk(x, q, K)


# option -> (extra overrides for 32-d vectors, min recall at the last sweep point)
YAMLS = {
    "hnsw": ([], 0.99),
    "ivf_flat": ([], 0.99),
    # PQ8 on 32-d codes 4 dims per byte: lossy by design; recall is on exact rescored scores
    "ivf_pq": (["index.pq_m=8"], 0.6),
}


@pytest.mark.parametrize("option", sorted(YAMLS))
def test_yaml_builds_and_recall_rises_with_the_knob(option: str, data, compose_cfg) -> None:
    x, q, exact = data
    overrides, floor = YAMLS[option]
    index = build(compose_cfg([f"index={option}", *overrides]).index, "index", device="cpu")
    assert isinstance(index, FaissIndex) and not index.exact
    built, info = index.build(x)
    assert (info.n_vectors, info.dim) == (N, DIM) and info.index_bytes > 0
    sweep = index.query_params()
    assert len(sweep) >= 5
    recalls = [
        float(ann_recall_at_k(built.search(q, K, qp), exact, K, vectors=x, queries=q).mean())
        for qp in sweep
    ]
    assert recalls[-1] >= floor, recalls
    # monotone up to search noise: a larger ef/nprobe never loses more than 1 point of recall
    assert all(b >= a - 0.01 for a, b in itertools.pairwise(recalls)), recalls
    assert recalls[-1] >= recalls[0]


def test_auto_nlist_is_factor_sqrt_n_clamped_by_training_points() -> None:
    ivf = FaissIndex(factory="IVF{nlist},Flat")
    assert ivf.resolve_nlist(1_000_000) == 100_000 // 39  # 4*1000 = 4000 > 2564 (train_size)
    assert FaissIndex(factory="IVF{nlist},Flat", train_size=1_000_000).resolve_nlist(
        1_000_000) == 4 * 1000
    assert FaissIndex(factory="IVF{nlist},Flat", nlist_factor=16, train_size=10**7).resolve_nlist(
        1_000_000) == 16 * 1000
    assert ivf.resolve_nlist(400_000) == round(4 * 400_000**0.5)  # 2530 <= 2564: unclamped
    assert ivf.resolve_nlist(N) == N // 39  # round(4*sqrt(2000)) = 179 > 51
    assert ivf.resolve_nlist(10) == 1  # 10 // 39 = 0 -> at least one list
    assert FaissIndex(factory="IVF{nlist},Flat", nlist=7).resolve_nlist(10**6) == 7
    assert FaissIndex(factory="HNSW32").resolve_nlist(N) is None


def test_cache_params_hold_the_resolved_nlist(data, tmp_path: Path) -> None:
    import faiss

    x, _, _ = data
    ivf = FaissIndex(factory="IVF{nlist},PQ{pq_m}", pq_m=8)
    params = ivf.cache_params(n_vectors=N)
    assert params["nlist"] == N // 39 and params["pq_m"] == 8
    assert ivf.cache_params()["nlist"] == "auto" and ivf.cache_params()["nlist_factor"] == 4.0
    assert FaissIndex(factory="IVF{nlist},Flat", nlist=64).cache_params()["nlist"] == 64
    assert ivf.resolved_factory(N, DIM) == f"IVF{N // 39},PQ8"
    # the key and the artifact agree
    built, _ = FaissIndex(factory="IVF{nlist},Flat").build(x)
    built.save(tmp_path)
    assert faiss.extract_index_ivf(faiss.read_index(str(tmp_path / "index.faiss"))).nlist == (
        FaissIndex(factory="IVF{nlist},Flat").cache_params(n_vectors=N)["nlist"])
    # a plain factory keeps the keys it always had (existing cache entries stay valid)
    assert set(FaissIndex(factory="Flat").cache_params()) == {
        "factory", "hnsw_ef_construction", "train_size", "seed", "metric"}


@pytest.mark.parametrize(("factory", "ef_construction", "knob"), [
    ("HNSW16", 40, {"ef_search": 32}),
    ("IVF{nlist},Flat", None, {"nprobe": 4}),
])
def test_save_load_round_trip_gives_identical_results(
    factory: str, ef_construction: int | None, knob: dict[str, int], data, tmp_path: Path
) -> None:
    x, q, _ = data
    index = FaissIndex(factory=factory, hnsw_ef_construction=ef_construction,
                       query_params=[knob])
    built, _ = index.build(x)
    before = built.search(q, K, knob)
    built.save(tmp_path)
    after = index.load(tmp_path).search(q, K, knob)
    np.testing.assert_array_equal(before.ids, after.ids)
    np.testing.assert_array_equal(before.scores, after.scores)


def test_search_is_stateless_across_the_sweep(data) -> None:
    x, q, _ = data
    built, _ = FaissIndex(factory="IVF{nlist},Flat").build(x)
    fresh = built.search(q, K, {})
    built.search(q, K, {"nprobe": 32})
    np.testing.assert_array_equal(built.search(q, K, {}).ids, fresh.ids)  # back to nprobe 1
    assert built.knobs == {"nprobe": 1}


def test_pq_m_must_divide_dim(data, compose_cfg) -> None:
    x, _, _ = data
    index = build(compose_cfg(["index=ivf_pq"]).index, "index", FaissIndex, device="cpu")
    assert index is not None and index.pq_m == 48
    with pytest.raises(OptionError) as err:
        index.build(x)  # 32 % 48 != 0
    assert err.value.option == "pq_m" and "divide the vector dim 32" in err.value.message


@pytest.mark.parametrize(("kwargs", "option"), [
    ({"factory": "IVF{nlists},Flat"}, "factory"),
    ({"factory": "IVF{},Flat"}, "factory"),
    ({"factory": "IVF{nlist,Flat"}, "factory"),
    ({"factory": "IVF{nlist:d},Flat"}, "factory"),
    ({"factory": "IVF{nlist},PQ{pq_m}"}, "pq_m"),  # pq_m missing
    ({"factory": "IVF64,Flat", "nlist": 64}, "nlist"),  # no {nlist} to fill
    ({"factory": "IVF{nlist},Flat", "pq_m": 8}, "pq_m"),
    ({"factory": "IVF{nlist},Flat", "nlist": 0}, "nlist"),
    ({"factory": "IVF{nlist},Flat", "nlist_factor": 3.0}, "nlist_factor"),
    ({"factory": "IVF{nlist},Flat", "nlist_factor": 17.0}, "nlist_factor"),
    ({"factory": "HNSW32", "device": "cuda"}, "factory"),  # faiss has no GPU HNSW
    ({"factory": "PCA16,HNSW32", "device": "cuda"}, "factory"),
])
def test_bad_options_raise_option_error(kwargs: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as err:
        FaissIndex(**kwargs)  # type: ignore[arg-type]
    assert err.value.option == option


def test_hnsw_quantizer_inside_ivf_is_allowed_on_cuda() -> None:
    FaissIndex(factory="IVF{nlist}_HNSW32,Flat", device="cuda")  # GPU IVF, CPU-only part is ok


def test_hnsw_on_cuda_is_a_config_error(compose_cfg) -> None:
    with pytest.raises(ConfigError) as err:
        build(compose_cfg(["index=hnsw"]).index, "index", device="cuda")
    assert err.value.key == "index.factory" and "CAGRA" in err.value.message


def test_build_time_factory_errors_name_the_option(data) -> None:
    x, _, _ = data
    with pytest.raises(OptionError) as err:
        FaissIndex(factory="IVF{nlist},Flat", query_params=[{"ef_search": 16}]).build(x)
    assert err.value.option == "query_params[0].ef_search"
    with pytest.raises(OptionError) as err:
        FaissIndex(factory="Nonsense42").build(x)
    assert err.value.option == "factory"
    with pytest.raises(OptionError) as err:  # 2000 training points for 4096 centroids
        FaissIndex(factory="IVF{nlist},Flat", nlist=4096).build(x)
    assert err.value.option == "factory" and "2000 vectors" in err.value.message


@pytest.mark.parametrize("factory", ["Flat", "IVF4,Flat", "HNSW8"])
def test_streamed_index_size_equals_the_serialised_size(factory: str) -> None:
    import faiss

    from bench.index.faiss_index import serialized_bytes

    x = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    index = faiss.index_factory(16, factory, faiss.METRIC_INNER_PRODUCT)
    index.train(x)
    index.add(x)
    assert serialized_bytes(faiss, index) == faiss.serialize_index(index).nbytes


@pytest.mark.parametrize("index", ["flat", "hnsw", "ivf_flat", "torch_flat"])
def test_empty_query_params_is_a_config_error(index: str, compose_cfg) -> None:
    # issue 18: index.query_params=[] ran silently with the defaults
    with pytest.raises(ConfigError) as err:
        build(compose_cfg([f"index={index}", "index.query_params=[]"]).index, "index",
              device="cpu")
    assert err.value.key == "index.query_params" and "[{}]" in err.value.message


def test_omitted_query_params_is_the_default_setting() -> None:
    assert FaissIndex(factory="HNSW32").query_params() == [{}]


def test_hnsw_default_builds_with_the_seeds_ef_construction(data, tmp_path: Path) -> None:
    import faiss
    from omegaconf import OmegaConf

    conf = Path(__file__).resolve().parents[2] / "conf"
    index = build(OmegaConf.load(conf / "index" / "hnsw.yaml"), "index")
    assert 100 <= index.cache_params()["hnsw_ef_construction"] <= 200  # the seeds' range
    built, _ = index.build(data[0])
    built.save(tmp_path)  # the graph as written, read back with faiss itself
    saved = faiss.read_index(str(tmp_path / INDEX_FILE))
    assert faiss.downcast_index(saved).hnsw.efConstruction == 200
    # the build sweep enumerates M and efConstruction, the seeds' range included
    sweep = OmegaConf.load(conf / "experiment" / "hnsw_build_sweep.yaml").hydra.sweeper.params
    assert sweep["index.factory"].split(",") == ["HNSW16", "HNSW32", "HNSW64"]
    assert {100, 200} <= {int(v) for v in str(sweep["index.hnsw_ef_construction"]).split(",")}
