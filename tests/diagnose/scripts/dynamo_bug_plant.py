"""A planted Dynamo bug: importing this module breaks Dynamo's tracing of the builtin `max`.

`dynamo_internal.py` imports it; a frame recording of that script references this module, so
replaying the recording imports it again and meets the same bug (as a real Dynamo bug would be met
by the same torch)."""
import torch._dynamo.variables.builtin as _builtin

_original = _builtin.BuiltinVariable.call_function


def _broken(self, tx, args, kwargs):
    if self.fn is max:
        raise KeyError("planted Dynamo internal error while tracing max()")
    return _original(self, tx, args, kwargs)


_builtin.BuiltinVariable.call_function = _broken


def scale(x):
    return x * 2
