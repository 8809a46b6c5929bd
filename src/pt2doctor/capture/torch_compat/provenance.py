"""Where an FX node came from in the user's program: the provenance torch keeps in `node.meta`.

Checked on torch 2.13.0. Dynamo sets, on every node it traces, `source_fn_stack` (the user-level
calls, innermost last: `[("margin_ranking_loss", F.margin_ranking_loss)]`), `nn_module_stack`
({key: (path, type)}, innermost last) and `stack_trace` (the traceback text of the traced user code).
AOTAutograd traces the joint graph under `fx_traceback.preserve_node_meta()`, so every aten node a
decomposition produces keeps its Dynamo node's meta and adds `original_aten` (the op being
decomposed at the outermost level) and `seq_nr`; a backward node gets the forward's as
`fwd_source_fn_stack` / `fwd_nn_module_stack` (`torch/fx/traceback.py`, `_copy_fwd_metadata_to_bw_nodes`
in `torch/_functorch/_aot_autograd/graph_capture_wrappers.py`). Inductor's joint-graph and post-grad
pattern replacements copy meta onto the nodes they create (`torch/_inductor/pattern_matcher.py`,
`preserve_node_meta`), so an after-AOT node's provenance still names the user's call. A node that a
pass created from nothing (the partitioner's recomputed masks) may have none: its fields stay empty.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from pt2doctor.model.minify import NodeOrigin

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)\s*$')


def node_origin(node: Any, is_user_file: Callable[[str], bool]) -> NodeOrigin:
    """The provenance of an FX call node; its source line is the innermost frame of `stack_trace`
    in a file `is_user_file` accepts (a frame of torch's own inlined code is not the user's line)."""
    from pt2doctor.capture.torch_compat.record import qualified_name

    meta = node.meta
    stack = meta.get("source_fn_stack") or meta.get("fwd_source_fn_stack") or ()
    call = _callable_name(stack[-1][1], stack[-1][0]) if stack else ""
    aten = meta.get("original_aten")
    op = qualified_name(node.target)
    aten_name = qualified_name(aten) if aten is not None else ""
    modules = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
    module = _module_path(list(modules.values())[-1]) if modules else ""
    file, line, code = _user_frame(meta.get("stack_trace") or "", is_user_file)
    return NodeOrigin(op=op, call=call, aten=aten_name if aten_name != op else "", file=file, line=line, code=code,
                      module=module)


def _callable_name(target: Any, name: str) -> str:
    """`torch.nn.functional.margin_ranking_loss`, `operator.mul`, `torch.nn.modules.linear.Linear`."""
    from pt2doctor.capture.torch_compat.record import qualified_name

    try:
        qualified = qualified_name(target)
    except Exception:  # a callable FX cannot name (a local function): the name Dynamo gave it
        return str(name)
    return qualified.removeprefix("_")  # `_operator.mul` is `operator.mul` to the user


def _module_path(entry: Any) -> str:
    """`L['self'].sub`, `G['gn']` -> `self.sub`, `gn`: the attribute path of the module the node ran under."""
    from pt2doctor.capture.trace.guard_text import pretty_source

    return pretty_source(str(entry[0] if isinstance(entry, tuple) else entry))


@functools.lru_cache(maxsize=256)  # the nodes of one user line share one stack trace: parsed once
def _user_frame(stack_trace: str, is_user_file: Callable[[str], bool]) -> tuple[str, int, str]:
    lines = stack_trace.splitlines()
    found = ("", 0, "")
    for i, text in enumerate(lines):
        match = _FRAME.match(text)
        if match and is_user_file(match["file"]):
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
            found = (match["file"], int(match["line"]), code)
    return found
