"""Where the corpus pass of the embedding stage runs (``conf/embedding``).

``embedding=local`` (the default): in this process, ``embedder.encode`` as before; with
``embedding.shard_rows=N`` in shards with done markers, as below, encoded here one after the
other (a resumable pass without Ray).

``embedding=ray``: the documents are cut into shards of ``shard_rows`` rows and encoded by
``workers`` Ray actors (Ray Data ``map_batches`` over a callable class: each actor builds the
embedder once from the run's ``embedder`` config, then encodes one shard per call), on this
machine (a local Ray started for the pass) or on a cluster (``address``). The vectors are the
single pass's, bit for bit, so the engine is not part of the artifact's key:

- an embedder whose vectors do not depend on their batch (``ShardableEmbedder.shard_order``
  is None: the static table lookup) gets contiguous row ranges;
- one that batches by length (ONNX, sentence-transformers) gets shards cut from ITS length
  order in whole batches (``shard_rows`` rounded up to a multiple of its ``batch_size``): a
  worker's ``encode`` of a shard, given in that order, forms exactly the batches the single
  pass forms (its stable sort keeps an already sorted shard as it is), so every model call
  sees the same padded inputs.

``tests/embedding/test_engine.py`` checks ``np.array_equal`` against the single pass for the
static and the ONNX encoder. An embedder that cannot promise this (a remote server) is refused
at config time.

Resume: each shard is written to ``<shards_dir>/<pass key>/part-NNNNN.npy`` (atomic rename),
then ``part-NNNNN.json`` (its statistics: the done marker). The pass key hashes the embedder's
cache parameters, the shard layout and every text, so a rerun of the same pass after a crash
(``kill -9`` of the run, a worker that died) encodes only the shards without a done marker;
a shard whose attempt started and never finished is counted as redone
(``EmbeddingStats.shards_redone``), a shard finished by an earlier run as reused. Ray restarts
a worker that died (at most ``max_retries`` times) and retries its shard. The vectors are
assembled into the artifact in row order and the shard folder is removed.

Multi-machine: every worker writes its shards into ``shards_dir``, so on a cluster it must be a
folder all nodes see (NFS, a shared volume), as ``cache_dir`` already must be for sweeps; the
driver reads them back to assemble the memmap.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from bench.cache.space import require_free, same_disk
from bench.cache.store import canonical_json
from bench.config.build import OptionError
from bench.embedding.base import Embedder, EmbeddingEngine, EmbeddingStats, ShardableEmbedder
from bench.errors import BenchError, ConfigError, MissingDependencyError

log = logging.getLogger("bench")

__all__ = ["ConfigRecipe", "EmbedderRecipe", "EmbeddingEngine", "LocalEngine", "RayEngine"]

#: default shards per pass folder are this many rows (rounded up to whole batches)
SHARD_ROWS = 8192


@runtime_checkable
class EmbedderRecipe(Protocol):
    """How a worker process builds the run's embedder (it cannot be pickled once loaded)."""

    def make(self) -> Embedder: ...


@dataclass(frozen=True)
class ConfigRecipe:
    """The embedder built from its config node (as JSON) on ``device``, as the run built it."""

    config_json: str
    device: str

    def make(self) -> Embedder:
        from bench.config.build import build

        emb = build(json.loads(self.config_json), "embedder", device=self.device)
        assert emb is not None, "the embedding stage is required"
        return emb  # type: ignore[no-any-return]


@dataclass(frozen=True, kw_only=True)
class LocalEngine:
    """The corpus pass in this process.

    shard_rows: null (the default) encodes the corpus in one call, as always; N cuts it into
    shards of N rows (rounded up to whole batches for a length-batched embedder), each written
    to ``shards_dir`` with its done marker as it finishes, so a run killed mid-pass (``kill
    -9``, a full disk, an out-of-memory kill) encodes only the unfinished shards when it is run
    again. The vectors are the single call's bit for bit (module docstring), so neither option
    is part of the key. It costs the shards' disk (the vectors' size) until they are assembled.
    """

    shard_rows: int | None = None
    shards_dir: str = ".cache/bench/embed_shards"
    embedder: EmbedderRecipe | None = None

    def __post_init__(self) -> None:
        if self.shard_rows is not None and self.shard_rows < 1:
            raise OptionError("shard_rows", f"must be >= 1 or null, got {self.shard_rows}")

    @property
    def label(self) -> str:
        return "local" if self.shard_rows is None else "local, resumable shards"

    def check(self, embedder: Embedder) -> None:
        if self.shard_rows is not None:
            require_shardable(embedder, "embedding.shard_rows")

    def encode_documents(self, embedder: Embedder, texts: Sequence[str], *,
                         out: np.ndarray) -> EmbeddingStats:
        if self.shard_rows is None:
            return embedder.encode(texts, kind="document", out=out)
        self.check(embedder)
        assert isinstance(embedder, ShardableEmbedder)

        def run(plan: ShardPlan, todo: Sequence[int], folder: Path) -> None:
            for s in todo:
                encode_shard(embedder, folder, s, [texts[int(i)] for i in plan.rows[s]])

        return sharded_pass(embedder, texts, out=out, shard_rows=self.shard_rows,
                            shards_dir=self.shards_dir, label=self.label, workers=1,
                            owner="embedding=local", run=run)


def require_shardable(embedder: Embedder, key: str) -> None:
    """A config error unless ``embedder``'s pass can be split bit for bit."""
    if not isinstance(embedder, ShardableEmbedder):
        raise ConfigError(key, f"{type(embedder).__name__} cannot be split into "
                          "shards with the single pass's vectors (embedding=ray and "
                          "embedding.shard_rows take the in-process embedders: static, onnx, "
                          "sentence-transformers); use embedding=local without shard_rows")


def sharded_pass(embedder: Embedder, texts: Sequence[str], *, out: np.ndarray,
                 shard_rows: int, shards_dir: str, label: str, workers: int, owner: str,
                 run: Callable[[ShardPlan, Sequence[int], Path], None]) -> EmbeddingStats:
    """The corpus pass as shards in ``shards_dir``: the shards without a done marker are
    encoded by ``run`` (in this process, or over workers), then every shard is copied into
    ``out`` in row order and the folder removed (module docstring)."""
    assert isinstance(embedder, ShardableEmbedder)
    plan = ShardPlan.of(embedder, texts, shard_rows=shard_rows)
    folder = Path(shards_dir) / pass_key(embedder, texts, plan)
    folder.mkdir(parents=True, exist_ok=True)
    dim = embedder.dim
    todo = [s for s, rows in enumerate(plan.rows)
            if shard_done(folder, s, len(rows), dim) is None]
    reused = len(plan.rows) - len(todo)
    _check_disk(folder, sum(len(plan.rows[s]) for s in todo) * dim * 4, out, owner)
    t0 = time.perf_counter()
    if todo:
        log.info("embed_docs: %d of %d shards to encode over %s (%d done by an earlier run)",
                 len(todo), len(plan.rows), label, reused)
        run(plan, todo, folder)
    wall = time.perf_counter() - t0
    done: list[dict[str, Any]] = []
    for s, rows in enumerate(plan.rows):
        stats = shard_done(folder, s, len(rows), dim)
        if stats is None:
            raise BenchError(f"embedding shard {s} of {folder} is missing after the pass")
        out[rows] = np.load(folder / f"part-{s:05d}.npy")
        done.append(stats)
    redone = sum(1 for d in done if int(d.get("attempts", 1)) > 1)
    result = EmbeddingStats(
        n_texts=len(texts), n_tokens=int(sum(d["n_tokens"] for d in done)), wall_s=wall,
        n_truncated=int(sum(d["n_truncated"] for d in done)),
        n_truncated_tokens=_sum(done, "n_truncated_tokens"),
        max_tokens=done[0].get("max_tokens") if done else None,
        workers=workers, shards=len(plan.rows), shards_reused=reused, shards_redone=redone)
    _remove(folder)
    return result


def _check_disk(folder: Path, need: int, out: np.ndarray, owner: str) -> None:
    """The shards still to write must fit ``shards_dir``, and with them the artifact's vectors
    when both are on one file system (a memmap's pages take their bytes as they are written,
    so the sparse artifact still counts as free space now)."""
    if isinstance(out, np.memmap) and out.filename and same_disk(Path(out.filename), folder):
        need += out.nbytes
    require_free(folder, need, f"{owner}'s shards ({need / 2**20:,.1f} MiB of vectors "
                               "before they are assembled)",
                 key="embedding.shards_dir")


@dataclass(frozen=True)
class ShardPlan:
    """The rows of each shard, in the order its worker must see them."""

    rows: tuple[np.ndarray, ...]
    ordered: bool  # cut from the embedder's length order (else contiguous row ranges)
    shard_rows: int

    @classmethod
    def of(cls, embedder: ShardableEmbedder, texts: Sequence[str], *,
           shard_rows: int) -> ShardPlan:
        order = embedder.shard_order(texts, kind="document")
        n = len(texts)
        if order is None:
            return cls(tuple(np.arange(s, min(s + shard_rows, n), dtype=np.int64)
                             for s in range(0, n, shard_rows)), False, shard_rows)
        # whole batches per shard: the worker's batches are then the single pass's batches
        bs = embedder.batch_size
        rows = -(-shard_rows // bs) * bs
        order = np.asarray(order, dtype=np.int64)
        return cls(tuple(order[s : s + rows] for s in range(0, n, rows)), True, rows)


def pass_key(embedder: Embedder, texts: Sequence[str], plan: ShardPlan) -> str:
    """The content key of one sharded pass: what a rerun must match to reuse its shards."""
    h = hashlib.sha256(canonical_json({
        "embedder": embedder.cache_params(), "kind": "document", "n": len(texts),
        "shard_rows": plan.shard_rows, "ordered": plan.ordered}).encode())
    for t in texts:
        h.update(b"\x00" + t.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _atomic(path: Path, write: Callable[[Any], None], mode: str = "wb") -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, mode) as fh:
            write(fh)
        os.replace(tmp, path)  # a crash leaves no half-written shard
    finally:
        if tmp.exists():
            tmp.unlink()


def shard_done(folder: Path, shard: int, n_rows: int, dim: int) -> dict[str, Any] | None:
    """The done marker's statistics of a finished shard (None: not finished, or damaged)."""
    try:
        stats = json.loads((folder / f"part-{shard:05d}.json").read_text())
        vecs = np.load(folder / f"part-{shard:05d}.npy", mmap_mode="r")
    except (OSError, ValueError):
        return None
    ok = vecs.shape == (n_rows, dim) and vecs.dtype == np.float32 and isinstance(stats, dict)
    return stats if ok else None


def encode_shard(embedder: Embedder, folder: Path, shard: int, texts: Sequence[str]) -> None:
    """One worker call: encode a shard and write it (vectors, then the done marker). The
    attempt is recorded first, so an attempt that dies is seen by the next one."""
    (folder / f"part-{shard:05d}.try-{os.getpid()}-{uuid.uuid4().hex[:6]}").touch()
    attempts = len(list(folder.glob(f"part-{shard:05d}.try-*")))
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    stats = embedder.encode(texts, kind="document", out=out)
    _atomic(folder / f"part-{shard:05d}.npy", lambda fh: np.save(fh, out, allow_pickle=False))
    done = {**stats.__dict__, "attempts": attempts, "pid": os.getpid()}
    _atomic(folder / f"part-{shard:05d}.json", lambda fh: fh.write(json.dumps(done)), "w")


class _ShardWorker:
    """A Ray Data actor: builds the embedder once, then encodes one shard per batch row."""

    def __init__(self, recipe: EmbedderRecipe, folder: str, pass_id: str = "") -> None:
        self.embedder = recipe.make()
        self.folder = Path(folder)
        if pass_id:
            # a handle to this actor for the driver, which kills the pool when the pass fails
            # (Ray Data only lets go of it, and an actor let go of may live on: _kill_pool)
            import ray

            me = ray.get_runtime_context().current_actor
            (self.folder / f"actor-{pass_id}-{uuid.uuid4().hex}.pkl").write_bytes(
                ray.cloudpickle.dumps(me))

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for shard, texts in zip(batch["shard"], batch["texts"], strict=True):
            encode_shard(self.embedder, self.folder, int(shard), [str(t) for t in texts])
        return {"shard": np.asarray(batch["shard"], dtype=np.int64),
                "pid": np.full(len(batch["shard"]), os.getpid(), dtype=np.int64)}


def _sum(done: Sequence[dict[str, Any]], key: str) -> int | None:
    vals = [d.get(key) for d in done]
    return None if any(v is None for v in vals) else int(sum(vals))  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class RayEngine:
    """The corpus pass over ``workers`` Ray actors (module docstring).

    workers: actors (one per GPU on a GPU box: ``gpus_per_worker: 1``); shard_rows: rows per
    shard (rounded up to whole batches for a length-batched embedder); address: a running Ray
    cluster (null: a local Ray for the pass, ``workers * cpus_per_worker`` CPUs);
    max_retries: restarts of a worker that died (its shard is redone each time);
    start_timeout_s: how long the pass waits for its actors to start before it fails (a
    cluster that cannot place them: too few CPUs or GPUs);
    shards_dir: where the shards wait until the pass is assembled (shared by all nodes on a
    cluster). None of these changes the vectors.
    """

    workers: int = 2
    shard_rows: int = SHARD_ROWS
    address: str | None = None
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_retries: int = 3
    shards_dir: str = ".cache/bench/embed_shards"
    start_timeout_s: float = 300.0
    embedder: EmbedderRecipe | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise OptionError("workers", f"must be >= 1, got {self.workers}")
        if self.shard_rows < 1:
            raise OptionError("shard_rows", f"must be >= 1, got {self.shard_rows}")
        if self.cpus_per_worker <= 0:
            raise OptionError("cpus_per_worker", f"must be > 0, got {self.cpus_per_worker}")
        if self.gpus_per_worker < 0:
            raise OptionError("gpus_per_worker", f"must be >= 0, got {self.gpus_per_worker}")
        if self.max_retries < 0:
            raise OptionError("max_retries", f"must be >= 0, got {self.max_retries}")
        if self.start_timeout_s < 1:
            raise OptionError("start_timeout_s", f"must be >= 1, got {self.start_timeout_s}")
        try:
            import ray.data  # noqa: F401
        except ImportError:
            raise MissingDependencyError("ray", "cluster", "embedding=ray") from None

    @property
    def label(self) -> str:
        return f"ray, {self.workers} workers"

    def check(self, embedder: Embedder) -> None:
        """A config error unless ``embedder``'s pass can be split bit for bit."""
        require_shardable(embedder, "embedding")

    def encode_documents(self, embedder: Embedder, texts: Sequence[str], *,
                         out: np.ndarray) -> EmbeddingStats:
        self.check(embedder)
        assert isinstance(embedder, ShardableEmbedder)
        if self.embedder is None:
            raise ValueError("RayEngine needs the embedder's recipe (the pipeline gives it)")
        return sharded_pass(
            embedder, texts, out=out, shard_rows=self.shard_rows, shards_dir=self.shards_dir,
            label=self.label, workers=self.workers, owner="embedding=ray",
            run=lambda plan, todo, folder: self._run(plan, todo, texts, folder, embedder.dim))

    def _run(self, plan: ShardPlan, todo: Sequence[int], texts: Sequence[str],
             folder: Path, dim: int) -> None:
        import pyarrow as pa
        import ray
        import ray.data

        started_here = not ray.is_initialized()
        if started_here:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            if self.address:
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, int(np.ceil(self.workers * self.cpus_per_worker))),
                         num_gpus=int(np.ceil(self.workers * self.gpus_per_worker)),
                         include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
        try:
            cpus_before = ray.available_resources().get("CPU", 0.0)
            pass_id = uuid.uuid4().hex[:12]
            ctx = ray.data.DataContext.get_current()
            ctx.enable_progress_bars = False
            # Ray Data waits for the pool's actors without limit by default: a cluster that
            # cannot place them (too few CPUs or GPUs) would hang the run instead of failing it
            ctx.wait_for_min_actors_s = int(self.start_timeout_s)
            # one block per shard, one shard per call: a worker that dies loses one shard
            blocks = [pa.table({"shard": [s],
                                "texts": [[texts[int(i)] for i in plan.rows[s]]]})
                      for s in todo]
            ds = ray.data.from_arrow(blocks).map_batches(
                _ShardWorker, batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=self.workers),
                num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker or None,
                fn_constructor_args=(self.embedder, str(folder), pass_id),
                max_restarts=self.max_retries, max_task_retries=self.max_retries)
            failure = None
            try:
                ds.materialize()
            except Exception as exc:  # a worker raised, or died past its retries
                failure = " ".join(str(exc).split())[:300]
            del ds
            if failure is not None:
                # Ray Data frees a failed pass's actor pool only when its executor is
                # collected, and the exception's frames hold it in a reference cycle: on a Ray
                # that outlives the pass (address=, or one the caller started) the pool kept
                # every CPU, and the next pass in this process waited forever for one. The
                # executor's thread may still hold it at the first collection: collect until
                # the pool's CPUs are back (bounded: a shared cluster's others may use them)
                _kill_pool(folder, pass_id)
                _release(cpus_before)
                finished = sum(1 for s in todo
                               if shard_done(folder, s, len(plan.rows[s]), dim) is not None)
                raise BenchError(
                    f"embedding=ray: the pass failed ({failure}); {finished} finished shards "
                    f"are kept in {folder}: a rerun encodes only the others")
        finally:
            if started_here:
                ray.shutdown()


def _kill_pool(folder: Path, pass_id: str) -> None:
    """Kill the actors of pass ``pass_id`` from the handles they left in ``folder`` (an actor
    still finishing a task when Ray Data let go of it kept its CPU for minutes on a loaded
    box), and remove the handle files."""
    import ray

    for p in sorted(folder.glob(f"actor-{pass_id}-*.pkl")):
        try:
            ray.kill(ray.cloudpickle.loads(p.read_bytes()), no_restart=True)
        except Exception as exc:  # already gone with its restarts, or its node is
            log.debug("embedding=ray: %s not killed: %s", p.name, exc)
        p.unlink(missing_ok=True)


def _release(cpus_before: float, wait_s: float = 30.0) -> None:
    """Collect garbage until Ray has ``cpus_before`` CPUs free again, or ``wait_s`` passed."""
    import ray

    deadline = time.monotonic() + wait_s
    while True:
        gc.collect()
        if ray.available_resources().get("CPU", 0.0) >= cpus_before \
                or time.monotonic() > deadline:
            return
        time.sleep(0.2)


def _remove(folder: Path) -> None:
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
