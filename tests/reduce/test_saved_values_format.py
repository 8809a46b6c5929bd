"""One format of saved input values (`capture.input_values`): what the recorder keeps in the user's process
loads where the minifier and its repro read, and a repro's inputs the minifier saves load as a
recording's do. Real tensors, no compile."""

from __future__ import annotations

from pathlib import Path

import torch

from pt2doctor.capture.input_values import load_values, save_values
from pt2doctor.model.minify import TensorSpec
from pt2doctor.reduce.repro_templates import SAVED_INPUT
from pt2doctor.reduce.saved_values import FILE_NAME, save_repro_inputs


def _repro_reads(folder: Path, name: str) -> torch.Tensor:
    """What a repro beside `folder/repro_inputs.pt` reads for the entry `name`: its own `saved_input`."""
    scope = {"torch": torch, "__file__": str(folder / "repro.py")}
    exec(SAVED_INPUT, scope)
    return scope["saved_input"](name, "cpu")


def test_values_the_recorder_kept_load_in_the_minifier_and_in_a_repro(tmp_path: Path) -> None:
    x, index = torch.randn(3), torch.tensor([2, 0, 1])
    kept = tmp_path / FILE_NAME  # the recorder's own file, given a repro's name: the format is the same
    assert save_values([x, index], kept, budget=1 << 20, indices_only=True) == {1: "arg1"}  # as the recorder does
    loaded = load_values(kept)  # as reduce.fx_load reads a recording
    assert loaded.keys() == {1} and torch.equal(loaded[1], index)
    assert torch.equal(_repro_reads(tmp_path, "arg1"), index)


def test_a_repros_inputs_load_as_a_recordings(tmp_path: Path) -> None:
    x, index = torch.randn(2, 3), torch.tensor([1, 0])
    specs = [TensorSpec((2, 3), (3, 1)), TensorSpec((2,), (1,), "int64")]
    named = save_repro_inputs([x, index], specs, tmp_path)  # as reduce.api and reduce.fx_load do
    assert [s.saved for s in named] == ["arg0", "arg1"]
    loaded = load_values(tmp_path / FILE_NAME)
    assert torch.equal(loaded[0], x) and torch.equal(loaded[1], index)
    assert torch.equal(_repro_reads(tmp_path, "arg0"), x)


def test_views_of_one_storage_are_saved_as_that_storage_beside_the_inputs(tmp_path: Path) -> None:
    base = torch.arange(6.0)
    a, b, alone = base[:4], base[2:], torch.tensor([7, 8])
    specs = [TensorSpec((4,), (1,), storage=0), TensorSpec((4,), (1,), offset=2, storage=0),
             TensorSpec((2,), (1,), "int64")]
    named = save_repro_inputs([a, b, alone], specs, tmp_path)
    assert [s.saved for s in named] == ["storage0", "storage0", "arg2"]
    assert torch.equal(_repro_reads(tmp_path, "storage0"), base)
    assert load_values(tmp_path / FILE_NAME).keys() == {2}  # a storage is no one input's value


def test_nothing_to_save_writes_no_file(tmp_path: Path) -> None:
    assert save_values([torch.randn(2)], tmp_path / "x.pt", indices_only=True) == {}
    assert not (tmp_path / "x.pt").exists()
