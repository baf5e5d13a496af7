"""parser=docling: the models are checked in artifacts_path before anything else (one line
naming each missing model and the folder it should be in, on any box), then the package
(one line: how to install it in a venv of its own). The conversion runs where Docling and
its models are (a GPU box)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bench.config.build import build
from bench.errors import ConfigError
from bench.parsing.docling_io import LAYOUT_REPO, TABLE_REPO, VLM_REPO, missing_models, repo_folder

TARGET = "bench.parsing.docling_io.DoclingParser"


def _model(root: Path, repo: str) -> None:
    folder = root / repo_folder(repo)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")


def test_missing_models_wants_a_non_empty_folder_per_repo(tmp_path: Path) -> None:
    assert missing_models(tmp_path, (LAYOUT_REPO, TABLE_REPO)) == [LAYOUT_REPO, TABLE_REPO]
    (tmp_path / repo_folder(LAYOUT_REPO)).mkdir()  # an empty folder is not a model
    _model(tmp_path, TABLE_REPO)
    assert missing_models(tmp_path, (LAYOUT_REPO, TABLE_REPO)) == [LAYOUT_REPO]
    assert repo_folder(LAYOUT_REPO) == "docling-project--docling-layout-heron"


@pytest.mark.parametrize(("options", "missing"), [
    ({}, [LAYOUT_REPO, TABLE_REPO]),
    ({"tables": False}, [LAYOUT_REPO]),
    ({"pipeline": "vlm"}, [VLM_REPO]),
])
def test_a_missing_model_is_one_line_naming_it(tmp_path: Path, options: dict[str, object],
                                               missing: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": TARGET, "artifacts_path": str(tmp_path), **options}, "parser")
    msg = str(err.value)
    assert err.value.key == "parser.artifacts_path" and "\n" not in msg
    for repo in missing:
        assert repo in msg and str(tmp_path / repo_folder(repo)) in msg
    assert all(r not in msg for r in {LAYOUT_REPO, TABLE_REPO, VLM_REPO} - set(missing))


@pytest.mark.parametrize(("key", "value"), [("pipeline", "hi_res"), ("device", "tpu")])
def test_bad_option_names_its_key(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        build({"_target_": TARGET, "artifacts_path": str(tmp_path), key: value}, "parser")
    assert err.value.key == f"parser.{key}"


@pytest.mark.skipif(importlib.util.find_spec("docling") is not None,
                    reason="docling is installed")
def test_models_present_but_no_docling_says_how_to_install(tmp_path: Path) -> None:
    from bench.parsing.docling_io import DoclingMissing

    _model(tmp_path, LAYOUT_REPO)
    _model(tmp_path, TABLE_REPO)
    with pytest.raises(DoclingMissing) as err:
        build({"_target_": TARGET, "artifacts_path": str(tmp_path)}, "parser")
    msg = str(err.value)
    assert "\n" not in msg and "pip install" in msg and "docling" in msg
