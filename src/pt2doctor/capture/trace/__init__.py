"""Reading a `TORCH_TRACE` log into model values: log lines -> typed events (`trace_reader`,
`events`) -> a `Session`'s facts (`session_builder`, `parse_text`); `trace_import` for a trace
directory read as a whole."""
