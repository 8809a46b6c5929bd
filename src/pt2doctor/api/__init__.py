"""The public in-process Python API: `explain`, `watch`, `CompileProfiler` (exported lazily by
`pt2doctor/__init__.py`, with `minify` from `reduce.api`).

Contract: this layer may call capture, analysis, reduce and the renderers of report; nothing but
the CLI imports it.
"""
