"""The Flight Recorder's settings under the names the installed torch reads (issue #40: every rank of every job
printed torch's warning that `TORCH_NCCL_TRACE_BUFFER_SIZE`, which pt2doctor set, is deprecated)."""

from __future__ import annotations

from pt2doctor.capture.torch_compat import flight_recorder_dump_env, flight_recorder_env


def test_a_torch_that_reads_the_new_names_gets_only_them():
    for version in ("2.11.0+cu130", "2.13.0+cpu", "2.14.1", "2.8.0"):
        env = flight_recorder_env(version)
        assert env["TORCH_FR_BUFFER_SIZE"] == "2000" and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in env
        assert flight_recorder_dump_env(version) == ("TORCH_FR_DUMP_TEMP_FILE",)


def test_an_older_torch_gets_the_old_names_too():
    env = flight_recorder_env("2.7.1")
    assert env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == env["TORCH_FR_BUFFER_SIZE"] == "2000"
    assert "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" in flight_recorder_dump_env("2.7.1")
