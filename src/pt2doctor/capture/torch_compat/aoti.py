"""Private torch APIs for minifying an AOTInductor failure from its exported program (`reduce.aoti_minify`).
See the package contract in `torch_compat/__init__.py`.

Checked on torch 2.13.0 (CPU): an `ExportedProgram`'s `graph_module` takes one placeholder per entry of
`graph_signature.input_specs`, in order: parameters and buffers (`state_dict`, or `constants` for a
non-persistent buffer), lifted constants (`constants`), then the user's inputs, flattened by the
program's `call_spec.in_spec` (`torch.fx._pytree.tree_flatten_spec`, what `ExportedProgram.__call__` uses).
"""

from __future__ import annotations

from typing import Any


def program_inputs(exported_program: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The value of each placeholder of `exported_program.graph_module`, for a call with (args, kwargs)."""
    from torch.export.graph_signature import InputKind
    from torch.fx._pytree import tree_flatten_spec

    user = iter(tree_flatten_spec((args, kwargs), exported_program.call_spec.in_spec))
    state, constants = exported_program.state_dict, exported_program.constants
    values = []
    for spec in exported_program.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            values.append(next(user))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            values.append(state[spec.target] if spec.target in state else constants[spec.target])
        elif spec.kind is InputKind.CONSTANT_TENSOR:
            values.append(constants[spec.target])
        else:  # a token or a script object: no value a repro could make
            raise NotImplementedError(f"an exported program with a {spec.kind.name} input")
    return values


def example_call(exported_program: Any) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The (args, kwargs) the program was exported with, when it kept them (`ExportedProgram.example_inputs`)."""
    example = getattr(exported_program, "example_inputs", None)
    return None if example is None else (tuple(example[0]), dict(example[1]))
