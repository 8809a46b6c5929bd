from __future__ import annotations

import pytest

from pt2doctor.model import SCHEMA, Category, Compile, CompileId, ExitInfo, Failure, GraphBreak, Session
from pt2doctor.model.serialize import dumps, loads, to_builtins


def test_compile_id_prints_like_torch_and_parses_back():
    assert str(CompileId(0, 1)) == "0/1"
    assert str(CompileId(2, 0, 3)) == "2/0_3"
    assert CompileId.parse("[3/4]") == CompileId(3, 4)
    assert CompileId.parse("0/1_2") == CompileId(0, 1, 2)
    assert sorted([CompileId(1, 0), CompileId(0, 2)]) == [CompileId(0, 2), CompileId(1, 0)]
    with pytest.raises(ValueError):
        CompileId.parse("nope")


def test_a_compile_after_a_dynamo_reset_has_an_id_of_its_own_that_prints_torchs_with_the_generation():
    """Issue #30: torch's `0/0` comes back after `torch._dynamo.reset()`; the generation tells them apart."""
    before, after = CompileId(0, 0), CompileId(0, 0, generation=1)
    assert before != after and len({before, after}) == 2 and sorted([after, CompileId(3, 2)])[0] == CompileId(3, 2)
    assert (str(after), after.torch_text) == ("0/0@1", "0/0")
    assert (CompileId.parse("!1/0/1_2@3") == CompileId(0, 1, 2, 1, 3)
            and str(CompileId.parse("!1/0/1_2@3")) == "!1/0/1_2@3")
    assert CompileId.parse("0/1_2@1").compile == CompileId(0, 1, generation=1)
    assert CompileId(0, 0).frame_key != CompileId(0, 1, generation=1).frame_key


def test_compile_id_is_immutable_and_hashable():
    cid = CompileId(0, 1)
    with pytest.raises(AttributeError):
        cid.frame = 3  # type: ignore[misc]
    assert {cid: 1}[CompileId(0, 1)] == 1


def test_session_round_trips_through_json_with_documented_keys():
    session = Session(
        SCHEMA, "2.13.0", ("train.py", "--x"), ExitInfo(1),
        compiles=(Compile(CompileId(0, 0), "f", "train.py", 3, 2, 0.5, "ok"),),
        graph_breaks=(GraphBreak("print", "train.py", 4, "f", 2, ("move it",)),),
        failures=(Failure(Category.USER_ERROR, "ValueError", "boom", "train.py", 9),),
    )
    data = dumps(session)
    assert loads(data, Session) == session
    doc = to_builtins(session)
    assert doc["schema"] == "pt2doctor.session/2"
    assert doc["compiles"][0]["compile_id"] == "0/0"
    assert doc["exit"] == {"code": 1, "signal": None, "timed_out": False, "interrupted": False}
    for key in ("torch_version", "command", "graph_breaks", "recompiles", "compiles", "failures"):
        assert key in doc
    assert set(doc["graph_breaks"][0]) >= {"reason", "file", "line", "function", "count", "hints"}
    assert set(doc["failures"][0]) >= {"category", "exception", "message", "file", "line"}
    assert doc["failures"][0]["category"] == "user_error"


def test_a_compiled_autograd_compile_id_keeps_its_prefix() -> None:
    from pt2doctor.model import CompileId

    autograd, plain = CompileId.parse("!0/0/0"), CompileId.parse("0/0")
    assert autograd != plain and str(autograd) == "!0/0/0" and CompileId.parse(str(autograd)) == autograd
    assert len({autograd, plain}) == 2 and sorted([autograd, plain]) == [plain, autograd]
    assert CompileId.parse("!1/3/2_1").compile == CompileId.parse("!1/3/2")
