"""Programs that run the user's script under variants and judge the runs: `pt2doctor accuracy`
(`accuracy`, with `accuracy_minify`), the advisor's what-if trials (`whatif`) and `run --cold` (`cold`).

Contract: this layer may call model, capture, analysis and reduce; only the CLI and the public API
import it.
"""
