"""What runs inside the user's process: the bootstrap (`__main__`, run as
`python -m pt2doctor.capture.child`) and the hooks it installs (graph and frame recorders, the
accuracy probe, call counter, overrides). Imports nothing: it runs before the user's script."""
