"""bench.cost.prices: the seed's cost sum, per component and per query, and what is unpriced."""

from __future__ import annotations

import numpy as np
import pytest

from bench.config.build import OptionError
from bench.cost.prices import Prices, component_of, cost_summary, query_costs

#: two queries of a reranked, generated config: ms per latency stage
STAGE_MS = {"embed_query": np.array([3.0, 5.0]), "retrieve": np.array([1.0, 1.0]),
            "fold": np.array([0.5, 0.5]), "filters": np.array([0.5, 0.5]),
            "rerank": np.array([40.0, 60.0]), "rerank_cut": np.array([0.0, 0.0]),
            "context": np.array([2.0, 2.0]), "generate": np.array([900.0, 1800.0])}
TOKENS = (np.array([1000, 3000]), np.array([40, 80]))


def test_stages_map_to_components() -> None:
    assert [component_of(s) for s in STAGE_MS] == [
        "embedding", "retrieval", "retrieval", "retrieval", "rerank", "rerank", "retrieval",
        "generation"]


def test_the_cost_is_the_sum_of_its_parts_per_query() -> None:
    prices = Prices(price_per_hour=3.6, prompt_price_per_mtok=0.15, output_price_per_mtok=0.6,
                    storage_price_per_gb_month=0.25, queries_per_month=1e6)
    c = query_costs(prices, query_ids=["q1", "q2"], stage_ms=STAGE_MS, tokens=TOKENS,
                    index_bytes=2_000_000_000, has_index=True)
    per_ms = 3.6 / 3.6e6  # 1e-6 per ms of the worker
    assert c.unpriced == ()
    assert list(c.components) == ["embedding", "retrieval", "rerank", "generation", "storage"]
    np.testing.assert_allclose(c.components["embedding"], [3.0 * per_ms, 5.0 * per_ms])
    # search + fold + filters + context assembly
    np.testing.assert_allclose(c.components["retrieval"], [4.0 * per_ms, 4.0 * per_ms])
    np.testing.assert_allclose(c.components["rerank"], [40.0 * per_ms, 60.0 * per_ms])
    np.testing.assert_allclose(c.components["generation"],
                               [(1000 * 0.15 + 40 * 0.6) / 1e6, (3000 * 0.15 + 80 * 0.6) / 1e6])
    # 2 GB x 0.25 per GB-month / 1e6 queries a month, the same for every query
    np.testing.assert_allclose(c.components["storage"], [0.5 / 1e6, 0.5 / 1e6])
    np.testing.assert_allclose(c.total, [sum(float(v[i]) for v in c.components.values())
                                         for i in range(2)])
    s = cost_summary("g", "dense>gen", c)
    assert [r[0] for r in s.rows] == [*c.components, "total"]
    _, mean, p50, p99 = s.rows[-1]
    assert mean == pytest.approx(float(c.total.mean()))
    assert p50 == pytest.approx(float(np.percentile(c.total, 50)))
    assert p99 == pytest.approx(float(np.percentile(c.total, 99)))


def test_generation_by_time_and_what_is_not_priced() -> None:
    c = query_costs(Prices(generation_price_per_hour=36.0), query_ids=["q1", "q2"],
                    stage_ms=STAGE_MS, tokens=TOKENS, index_bytes=None, has_index=True)
    np.testing.assert_allclose(c.components["generation"], [900 * 1e-5, 1800 * 1e-5])
    assert c.unpriced == ("embedding (no price_per_hour)", "retrieval (no price_per_hour)",
                          "rerank (no price_per_hour)",
                          "index storage (no storage_price_per_gb_month)")
    # a retrieval-only lexical config: no generation, no vector index to store
    c = query_costs(Prices(price_per_hour=1.0), query_ids=["q1"],
                    stage_ms={"lexical": np.array([2.0])}, tokens=None, index_bytes=None,
                    has_index=False)
    assert list(c.components) == ["retrieval"] and c.unpriced == ()
    c = query_costs(Prices(price_per_hour=1.0), query_ids=["q1"],
                    stage_ms={"retrieve": np.array([2.0]), "generate": np.array([9.0])},
                    tokens=(np.array([5]), np.array([5])), index_bytes=10, has_index=False)
    assert c.unpriced == ("generation (no token prices or generation_price_per_hour)",)


@pytest.mark.parametrize(("kw", "option"), [
    ({"price_per_hour": -1.0}, "price_per_hour"),
    ({"price_unit": "tpu_hour"}, "price_unit"),
    ({"prompt_price_per_mtok": 1.0, "output_price_per_mtok": 1.0,
      "generation_price_per_hour": 1.0}, "generation_price_per_hour"),
    ({"prompt_price_per_mtok": 1.0}, "output_price_per_mtok"),
    ({"storage_price_per_gb_month": 0.1}, "queries_per_month"),
    ({"storage_price_per_gb_month": 0.1, "queries_per_month": 0.0}, "queries_per_month"),
    ({"price_per_hour": float("nan")}, "price_per_hour"),
])
def test_bad_prices_name_the_option(kw: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as exc:
        Prices(**kw)  # type: ignore[arg-type]
    assert exc.value.option == option
