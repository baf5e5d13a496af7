"""A token-overlap filter over retrieved passages: the defence the seed tests poisoning with.

Passages of one result list whose token sets overlap by Jaccard >= ``threshold`` (after
NFKC case folding; ``bench.data.splits.near_duplicates``, the near-duplicate finder the query
splits use) form a suspicious cluster; every member is removed. Repeated (monomorphic)
poison is caught by construction; lexically diverse (polymorphic) poison is what it misses,
which is the point of measuring both.
"""

from __future__ import annotations

from collections.abc import Mapping

from bench.data.splits import near_duplicates


def flagged(passages: Mapping[str, str], threshold: float) -> set[str]:
    """The ids of ``passages`` (id -> text) in a near-duplicate pair at ``threshold``."""
    out: set[str] = set()
    for a, b, _ in near_duplicates(passages, threshold):
        out.update((a, b))
    return out
