"""Records and Protocol of the `judge` stage.

A judge returns a ``Verdict`` per answer. Output that fails the judge's schema is retried a
bounded number of times, then recorded with status ``invalid`` — counted in completion
accounting, never dropped and never NaN. ``conf/judge/none.yaml`` disables the stage.

Adding a judge: implement ``Judge`` in a module here, add ``conf/judge/<name>.yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from bench.generation.base import Generation


@dataclass(frozen=True)
class Verdict:
    """``status``: ok | invalid | no_claims. ``scores`` holds named sub-scores in [0, 1]."""

    query_id: str
    status: str
    scores: tuple[tuple[str, float], ...]
    attempts: int
    raw: str


class Judge(Protocol):
    def cache_params(self) -> dict[str, object]: ...

    def judge(
        self, queries: Sequence[str], answers: Sequence[Generation], contexts: Sequence[str]
    ) -> list[Verdict]: ...
