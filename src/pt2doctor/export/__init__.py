"""torch.export and AOTInductor: one package, with the pipeline's layers inside it.

Each sub-package is the export side of the layer it is named after, and keeps that layer's rules
(tests/test_architecture.py): it imports what its layer may import, the export side of those layers, and
its own layer; the torch-free values stay in `model/export.py` and `model/export_draft.py`, where every
layer reads them, and the private torch APIs in `capture/torch_compat/export.py`.

- `capture/` runs inside the script's process: `observer` wraps torch.export's entry points and records
  each step (`export.jsonl`), `checks` judges exported programs against their source, `draft` runs
  draft_export beside each export call, `record` keeps what a repro needs, `imports` installs them
  when torch.export is first imported.
- `analysis/` is pure: `fixes` writes the source changes (edits of the script's text) that fix a tracing
  failure, `issues` turns draft_export's reports into issues, each with its proposed fix (`explain`).
- `diagnose/` is `diagnose`'s export branch: `steps` (the entry point, after the reproduction), `verdict`
  (the failure's kind and category), `verify` (the one fix verifier: changes tried on copies of the
  script), `repro` and `minify` (an AOTInductor failure's repro and its minimal graph).
- `report/` formats: `advice` (explain's issues and fixes), `issue` (the issue draft's export lines).
"""
