"""Runs of the program share a GPU only as far as its memory holds: the first alone until its peak is known,
then as many as fit; nothing waits without a GPU or for a program that used none. The peak itself is measured
by the child at exit (gpu-marked: a real CUDA run)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pt2doctor.capture.child.torch_env import gpu_memory
from pt2doctor.diagnose.gpu_share import GpuShare
from pt2doctor.model import SCHEMA, ExitInfo, Session
from pt2doctor.model.session import Environment, Extras

GIB = 2**30


def _run(peak_gib: float | None, *, signal: int | None = None, gpu_used: bool | None = None) -> Session:
    env = Environment(torch="2.13", gpu_peak_bytes=int(peak_gib * GIB) if peak_gib else None,
                      gpu_total_bytes=80 * GIB if (peak_gib if gpu_used is None else gpu_used) else None)
    return Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), environment=env,
                   exit=ExitInfo(code=None if signal else 1, signal=signal), extras=Extras(torch_imported=True))


def _most_at_once(share: GpuShare, runs: int) -> int:
    """Start `runs` threads that each hold a slot for a moment; how many held one at the same time."""
    lock, now, most = threading.Lock(), [0], [0]

    def one() -> None:
        with share.slot():
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            time.sleep(0.05)
            with lock:
                now[0] -= 1

    threads = [threading.Thread(target=one) for _ in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return most[0]


def test_the_first_run_goes_alone_then_as_many_as_the_gpus_memory_holds():
    share = GpuShare(gpu_visible=True, jobs=4)
    assert _most_at_once(share, 3) == 1  # the peak is not known yet
    share.learn(_run(None, signal=6))  # a run that died before saying teaches nothing...
    assert share.limit == 1
    share.learn(_run(None, gpu_used=True))  # ...nor one that used the GPU without the caching allocator...
    assert share.limit == 1
    share.learn(_run(30))  # ...one that said: 30 GiB of 80 -> two fit in 90% of it
    assert share.limit == 2 and _most_at_once(share, 4) == 2
    said = share.said()
    assert said is not None and "30.0 GiB of the GPU's 80.0 GiB" in said and "2 at a time" in said
    share.learn(_run(10))  # the peak is the largest seen
    assert share.limit == 2


def test_work_holding_the_whole_share_waits_for_the_runs_and_holds_back_new_ones():
    """The program reducer runs the program in processes of its own: a run queued earlier that is still
    running would share the GPU with them, and a run queued meanwhile must wait until they are done."""
    share = GpuShare(gpu_visible=True, jobs=2)
    share.learn(_run(50))  # one run at a time
    events: list[str] = []
    running = threading.Event()

    def run(name: str, hold: float) -> None:
        with share.slot():
            events.append(f"{name} starts")
            running.set()
            time.sleep(hold)
            events.append(f"{name} ends")

    earlier = threading.Thread(target=run, args=("earlier run", 0.2))
    earlier.start()
    running.wait()
    with share.whole():
        events.append("reduction starts")
        later = threading.Thread(target=run, args=("later run", 0.0))
        later.start()
        time.sleep(0.1)
        events.append("reduction ends")
    earlier.join()
    later.join()
    assert events == ["earlier run starts", "earlier run ends", "reduction starts", "reduction ends",
                      "later run starts", "later run ends"]
    free = GpuShare(gpu_visible=False, jobs=2)
    with free.whole(), free.slot():  # nothing to share: nothing waits
        pass


def test_nothing_waits_without_a_gpu_or_for_a_program_that_used_none():
    assert _most_at_once(GpuShare(gpu_visible=False, jobs=3), 3) == 3
    share = GpuShare(gpu_visible=True, jobs=3)
    share.learn(_run(None))  # it ended by itself, imported torch, held no GPU memory
    assert share.limit is None and share.said() is None and _most_at_once(share, 3) == 3
    small = GpuShare(gpu_visible=True, jobs=2)
    small.learn(_run(1))
    assert small.limit == 2 and small.said() is None  # every job fits: nothing to say


def _lost_context(*_: object) -> None:
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_a_run_whose_kernel_faulted_still_says_how_much_room_it_needs():
    """After a kernel fault the device answers no query (the context is lost) but the allocator's counts and the
    device's size are the host's: the peak is the allocator's most plus the most a process holds beside it, so the
    repeat of a crash and a workaround's run need not go one at a time. (A stand-in for torch.cuda: a fault cannot
    be made without a GPU; the gpu-marked test below makes one.)"""
    cuda = SimpleNamespace(is_initialized=lambda: True, device_count=lambda: 1,
                           max_memory_reserved=lambda device: 3 * GIB, memory_reserved=lambda device: 3 * GIB,
                           mem_get_info=_lost_context, current_device=lambda: 0,
                           get_device_properties=lambda device: SimpleNamespace(total_memory=80 * GIB))
    peak, total = gpu_memory(SimpleNamespace(cuda=cuda))
    assert (peak, total) == (5 * GIB, 80 * GIB)
    share = GpuShare(gpu_visible=True, jobs=3)
    share.learn(_run(peak / GIB))
    assert share.limit == 3


@pytest.mark.gpu
def test_a_cuda_run_whose_kernel_faulted_records_its_peak(tmp_path: Path):
    from pt2doctor.capture.runner import RunOptions, run_script

    script = tmp_path / "faults.py"
    script.write_text("import torch\nx = torch.zeros(4, device='cuda')\n"
                      "torch.compile(lambda t, i: t[i], backend='inductor')(x, torch.tensor([99], device='cuda'))\n"
                      "torch.cuda.synchronize()\n")
    env = run_script(RunOptions(script=script, out_dir=tmp_path / "run", timeout_s=300, echo=False)).environment
    assert env.gpu_total_bytes and env.gpu_peak_bytes and env.gpu_peak_bytes < env.gpu_total_bytes


@pytest.mark.gpu
def test_a_cuda_run_records_its_peak_and_the_devices_memory(tmp_path: Path):
    from pt2doctor.capture.runner import RunOptions, run_script

    script = tmp_path / "holds.py"
    script.write_text("import torch\nx = torch.empty(512 * 2**20, dtype=torch.uint8, device='cuda')\ndel x\n"
                      "torch.compile(lambda t: t + 1, backend='eager')(torch.ones(4, device='cuda'))\n")
    env = run_script(RunOptions(script=script, out_dir=tmp_path / "run", timeout_s=300, echo=False)).environment
    assert env.gpu_total_bytes and env.gpu_peak_bytes
    assert 512 * 2**20 <= env.gpu_peak_bytes < env.gpu_total_bytes, (env.gpu_peak_bytes, env.gpu_total_bytes,
                                                                      sys.version)


@pytest.mark.slow
@pytest.mark.gpu
def test_a_program_holding_most_of_the_gpu_is_diagnosed_one_run_at_a_time(diagnosed):
    run, d = diagnosed(Path(__file__).parent / "scripts" / "gpu_holds_most_memory.py")
    assert d["category"] == "backend_failure", run.stderr[-2000:]
    assert not [a["label"] for a in d["attempts"] if "OutOfMemoryError" in (a.get("error") or "")]
    assert any("shared the GPU 1 at a time" in note for note in d["notes"]), d["notes"]


@pytest.mark.slow
@pytest.mark.gpu
def test_a_reduced_program_holding_most_of_the_gpu_is_verified_one_run_at_a_time(diagnosed):
    """The program reducer's verification (fresh interpreters, side by side where they fit) and its regression
    test's share the GPU as the diagnosis's runs do."""
    run, d = diagnosed(Path(__file__).parent / "scripts" / "gpu_dynamo_holds_most_memory.py",
                       options=("--program-budget", "60"))
    assert d["category"] == "dynamo_internal" and d["program"] is not None, d["notes"]
    assert d["program"]["verified"] and d["repro_verified"], d["notes"]
    assert d["program"]["verify_runs"]["failed"] == d["program"]["verify_runs"]["runs"]
    assert any("shared the GPU 1 at a time" in note for note in d["notes"]), d["notes"]
