"""pt2doctor.processes: every child process pt2doctor starts, and how it talks to them.

- `group`: process groups (a child and everything it starts, Inductor's compile workers included, die
  together), exit codes.
- `fresh`: a file run the way a user runs it, `python FILE` in a fresh interpreter (`run_file`), and
  the one judge of "fails the same way": the failure signature (`verify`).
- `program_run`: another program (another torch release's interpreter, pip) run in its own process group,
  its output kept in files, with a timeout and a watch that may stop it (`versions`).
- `protocol`: the typed messages between the worker pool and its workers, length-prefixed msgpack.
- `dispatch`, `forks`, `servers`, `zygote`, `pool`, `workers`: the warm worker pool that runs
  candidate scripts for the reducers (forks of a warm zygote, or warm servers where forking is unsafe).
"""
