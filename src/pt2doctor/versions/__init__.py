"""A repro under other torch releases: which one fixes it, which one broke it (`pt2doctor versions`,
`diagnose --versions`). `search.search_versions` runs the search; the environments are `torch_envs`',
the order and the conclusions `analysis.versions`'."""
