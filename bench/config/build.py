"""Validate a `_target_` config node against its class signature, then instantiate it.

Why not ``hydra.utils.instantiate``: it reports a wrong option as a TypeError deep inside the
constructor call. Here an unknown option, a wrong type or a missing value becomes one
``ConfigError`` naming the dotted config key, which the entry point prints as one line.
Constructors validate VALUES and raise ``OptionError(option, message)``; this module turns it
into ``ConfigError("<group>.<option>", message)``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import inspect
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from omegaconf import DictConfig, ListConfig, OmegaConf

from bench.errors import ConfigError

T = TypeVar("T")


class OptionError(ValueError):
    """Raised by a component constructor for an invalid option value."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        self.message = message
        super().__init__(f"{option}: {message}")


def to_container(node: Any) -> Any:
    if isinstance(node, DictConfig | ListConfig):
        return OmegaConf.to_container(node, resolve=True)
    return node


def target_of(node: Any, key: str) -> type | None:
    """The class named by ``node._target_``; None when the stage is disabled (`_target_: null`)."""
    data = to_container(node)
    if not isinstance(data, Mapping) or "_target_" not in data:
        raise ConfigError(key, "must be a mapping with a `_target_` (pick an option of the group)")
    target = data["_target_"]
    if target is None:
        return None
    if not isinstance(target, str):
        raise ConfigError(f"{key}._target_", f"must be a class path, got {target!r}")
    module_name, _, attr = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigError(f"{key}._target_", f"no module {exc.name!r} for {target!r}") from None
        raise  # an import inside that module failed: a bug or a missing package, not config
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise ConfigError(f"{key}._target_", f"{module_name!r} has no class {attr!r}")
    return cls


def build(node: Any, key: str, expected: type[T] | None = None, **runtime: Any) -> T | None:
    """Instantiate the component configured at ``key``.

    ``runtime`` are keyword arguments supplied by the pipeline (e.g. the resolved device),
    not by the user; they are not allowed to appear in the config node.
    Returns None for a disabled stage (``_target_: null``).
    """
    cls = target_of(node, key)
    if cls is None:
        extra = sorted(str(k) for k in to_container(node) if k != "_target_")
        if extra:
            # a disabled stage takes no options: a `+reranker.top_k=5` would do nothing
            raise ConfigError(f"{key}.{extra[0]}", "unknown option: this stage is disabled "
                                                   "(`_target_: null`), pick an option first")
        return None
    data = dict(to_container(node))
    data.pop("_target_")
    params = _parameters(cls)
    for name in runtime:
        if name in data:
            raise ConfigError(f"{key}.{name}", "is set by the pipeline, not by config")
    kwargs: dict[str, Any] = {}
    hints = _type_hints(cls)
    for name, value in data.items():
        if name not in params or name in runtime:
            allowed = ", ".join(sorted(p for p in params if p not in runtime)) or "(none)"
            raise ConfigError(
                f"{key}.{name}", f"unknown option for {cls.__name__}; allowed: {allowed}"
            )
        kwargs[name] = coerce(value, hints.get(name, Any), f"{key}.{name}")
    for name, param in params.items():
        if name in runtime or name in kwargs:
            continue
        if param.default is inspect.Parameter.empty:
            raise ConfigError(f"{key}.{name}", f"is required by {cls.__name__}")
    try:
        obj = cls(**kwargs, **runtime)
    except OptionError as exc:
        raise ConfigError(f"{key}.{exc.option}", exc.message) from None
    if expected is not None and not isinstance(obj, expected):
        raise ConfigError(f"{key}._target_", f"{cls.__name__} is not a {expected.__name__}")
    return typing.cast(T, obj)


def _parameters(cls: type) -> dict[str, inspect.Parameter]:
    sig = inspect.signature(cls)
    return {
        n: p
        for n, p in sig.parameters.items()
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }


def _type_hints(cls: type) -> dict[str, Any]:
    target: Any = cls if dataclasses.is_dataclass(cls) else cls.__init__  # type: ignore[misc]
    try:
        return typing.get_type_hints(target)
    except Exception:
        return {}


_NONE = type(None)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def coerce(value: Any, hint: Any, key: str) -> Any:
    """Check ``value`` against a type hint; ints are accepted for floats. Returns the value."""
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        range_error: ConfigError | None = None
        for arm in get_args(hint):
            try:
                return coerce(value, arm, key)
            except ConfigError as exc:
                # the right type but out of range says more than "expected int or null"
                if not exc.message.startswith("expected"):
                    range_error = range_error or exc
        if range_error is not None:
            raise range_error
        raise ConfigError(key, f"expected {_name(hint)}, got {_short(value)}")
    if origin is Literal:
        if value in get_args(hint):
            return value
        choices = ", ".join(repr(a) for a in get_args(hint))
        raise ConfigError(key, f"must be one of {choices}, got {value!r}")
    if hint is _NONE:
        if value is None:
            return None
        raise ConfigError(key, f"expected null, got {value!r}")
    if origin in (list, tuple, collections.abc.Sequence):
        if not isinstance(value, list | tuple):
            raise ConfigError(key, f"expected a list, got {value!r}")
        args = get_args(hint)
        arm = args[0] if args else Any
        items = [coerce(v, arm, f"{key}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping, got {value!r}")
        args = get_args(hint)
        arm = args[1] if len(args) == 2 else Any
        return {k: coerce(v, arm, f"{key}.{k}") for k, v in value.items()}
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(key, f"expected a boolean, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if not INT64_MIN <= value <= INT64_MAX:
                # numpy (and every kernel) would overflow on it later, after work was done
                raise ConfigError(key, f"integer out of range (must fit in 64 bits), got "
                                       f"{_short(value)}")
            return value
        raise ConfigError(key, f"expected an integer, got {_short(value)}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                out = float(value)
            except OverflowError:
                raise ConfigError(key, f"number out of range, got {_short(value)}") from None
            if math.isnan(out):
                raise ConfigError(key, "expected a number, got nan")
            return out
        raise ConfigError(key, f"expected a number, got {_short(value)}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(key, f"expected a string, got {value!r}")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _name(hint: Any) -> str:
    args = get_args(hint)
    if args:
        return " or ".join(_name(a) for a in args)
    if hint is _NONE:
        return "null"
    return getattr(hint, "__name__", str(hint))
