"""Capture: the only code that runs the user's program or touches torch internals.

- this package: the parent side: run a script in a child interpreter (`runner`), read back what the
  child left (`process_meta`, `report_inputs`), the run lock, the bytecode cache, process groups;
- `trace/`: reading `TORCH_TRACE` logs into model values (`trace_reader` -> `events` ->
  `session_builder`, with `parse_text` for the text inside events);
- `child/`: what runs inside the user's process (`python -m pt2doctor.capture.child`, the bootstrap,
  and the hooks it installs: recorders, the accuracy probe, overrides);
- `torch_compat/`: every private torch API, with the versions it was checked on.
"""
