"""In-process Python APIs: `explain`, `watch`, `CompileProfiler`, and the what-if runner.

Contract: this layer may call capture and analysis (like the CLI does); nothing below imports it.
"""
