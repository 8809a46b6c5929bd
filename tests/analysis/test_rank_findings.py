"""What a job's report concludes, on hand-built ranks: devices compared as each rank's own, one consequence with
its fix, a process that compiled nothing, the first collective where the ranks part (from records in torch's
Flight Recorder format), the script's thread in a dump of every thread, two jobs compared rank by rank, and the
job's HTML page."""

from __future__ import annotations

import collections
import pickle
import sysconfig

import pytest
from clihelp import pt2doctor

from pt2doctor.analysis.ranks import job_of
from pt2doctor.model import SCHEMA, CompileId, ExitInfo, Session
from pt2doctor.model.collectives import CollectiveCall, RankCollectives
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.job import ProcessSession
from pt2doctor.model.session import Compile, GraphBreak


def _rank(n: int, *compiles: Compile, breaks: tuple[GraphBreak, ...] = (),
          calls: tuple[CollectiveCall, ...] | None = None) -> ProcessSession:
    session = Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), exit=ExitInfo(code=0),
                      compiles=compiles, graph_breaks=breaks)
    return ProcessSession(f"rank {n}", n, None, session,
                          collectives=RankCollectives(calls) if calls is not None else None)


def _graph(*inputs: str, collectives: tuple[str, ...] = (), frame: int = 0, ops: int = 4) -> Compile:
    return Compile(CompileId(frame, 0), "f", "train.py", 3 + frame, ops, 1.0, "ok", start_s=100.0 + frame,
                   inputs=inputs, collectives=collectives)


def test_each_rank_on_its_own_gpu_is_no_divergence_and_a_tensor_on_another_gpu_still_is():
    same = job_of((_rank(0, _graph("L_x_: f32[1024][1]cuda:0", "L_w_: f32[8][1]cuda:0")),
                   _rank(1, _graph("L_x_: f32[1024][1]cuda:1", "L_w_: f32[8][1]cuda:1"))))
    assert same.divergence == ()
    shape = job_of((_rank(0, _graph("L_x_: f32[8][1]cuda:0")), _rank(1, _graph("L_x_: f32[7][1]cuda:1"))))
    (inputs,) = shape.divergence[0].comparison.changes
    assert (inputs.before, inputs.after) == ("L_x_: f32[8][1]cuda:own", "L_x_: f32[7][1]cuda:own")
    # rank 1's own device is cuda:1 (most of its inputs); one input left on cuda:0 is not its own
    stray = job_of((_rank(0, _graph("L_x_: f32[8][1]cuda:0", "L_y_: f32[8][1]cuda:0"),
                          _graph("L_z_: f32[2][1]cuda:0", frame=1)),
                    _rank(1, _graph("L_x_: f32[8][1]cuda:1", "L_y_: f32[8][1]cuda:0"),
                          _graph("L_z_: f32[2][1]cuda:1", frame=1))))
    (inputs,) = stray.divergence[0].comparison.changes
    assert inputs.after == "L_x_: f32[8][1]cuda:own, L_y_: f32[8][1]cuda:0"


def test_the_conclusion_is_the_most_likely_consequence_and_its_fix_and_the_rest_go_to_the_html_report():
    from pt2doctor.report.ranks import render_job

    job = job_of((_rank(0, _graph("L_x_: f32[8][1]cpu", collectives=("all_reduce",))),
                  _rank(1, _graph("L_x_: f32[7][1]cpu", collectives=("all_reduce", "all_reduce")))))
    (d,) = job.divergence
    assert d.consequence.startswith("the ranks' collectives no longer pair up")
    assert "no rank-dependent branch around a collective" in d.fix
    assert len(d.more) == 1 and "tensors of other sizes" in d.more[0]
    (conclusion,) = [line for line in render_job(job).splitlines() if "=>" in line]
    assert conclusion.count("a hang") == 1 and "Fix:" in conclusion and len(conclusion) < 400
    assert "1 less likely consequence(s) in the HTML report" in render_job(job)


def _ddp_break(frame: int) -> GraphBreak:
    return GraphBreak("Unsupported: call_method UserDefinedObjectVariable(_DDPSink) apply",
                      "/x/torch/nn/parallel/distributed.py", 1640, "_pre_forward", 1,
                      compile_ids=(CompileId(frame, 0),))


def test_a_process_whose_frames_produce_no_graph_says_nothing_was_compiled_and_why():
    from pt2doctor.analysis.verdict import verdict_for

    empty = [Compile(CompileId(f, 0), "forward", "train.py", 10 + f, 0, 0.1, "ok") for f in range(4)]
    rank = _rank(0, *empty, breaks=(_ddp_break(0),))
    headline = verdict_for(rank.session).headline
    assert headline.startswith("OK, but nothing was compiled: 4 frame(s) reached Dynamo and produced 0 graphs")
    assert "DistributedDataParallel's forward graph-breaks" in headline and "distributed.py:1640" in headline
    job = job_of((rank, _rank(1, *empty, breaks=(_ddp_break(0),))))
    from pt2doctor.report.ranks import render_job

    assert "Every process: nothing was compiled: 4 frame(s)" in render_job(job)
    # far less than it ran: three of four frames without a graph
    little = _rank(0, _graph("L_x_: f32[8][1]cpu"), *empty[1:], breaks=(_ddp_break(1),))
    assert verdict_for(little.session).headline.startswith("OK, but little was compiled: 3 of 4 frame(s)")
    assert verdict_for(_rank(0, _graph("L_x_: f32[8][1]cpu")).session).headline.startswith("OK: compiled 1 graph")


def _call(seq: int, op: str = "all_reduce", size: int = 1024, line: int = 10,
          state: str = "completed") -> CollectiveCall:
    return CollectiveCall(seq, "0", op, ((size,),), ("Float",), state, SourceLoc("/job/train.py", line, "<module>"))  # type: ignore[arg-type]


def test_the_first_collective_where_the_ranks_part_names_each_ranks_op_sizes_and_line():
    from pt2doctor.report.ranks import render_job

    # rank 0 calls all_reduce once more than rank 1, then both call a barrier
    job = job_of((_rank(0, calls=(_call(1), _call(2), _call(3, state="started"))),
                  _rank(1, calls=(_call(1), _call(2), _call(3, "barrier", 0, line=12, state="started")))))
    parting = job.parting
    assert parting is not None and parting.seq == 3
    assert [(r.label, r.call.op if r.call else None) for r in parting.calls] == [("rank 0", "all_reduce"),
                                                                                  ("rank 1", "barrier")]
    assert "pairs these different collectives anyway" in parting.detail and "no rank-dependent branch" in parting.fix
    # what differs, said (issue 40, point 4): not only that a rank issued more or fewer before
    assert "(rank 0: all_reduce of Float[1024]; rank 1: barrier of Float[0])" in parting.detail
    text = render_job(job)
    assert "The ranks part at collective #3:" in text
    assert "rank 0: all_reduce (Float [1024]) at /job/train.py:10 [started]" in text
    assert "rank 1: barrier (Float [0]) at /job/train.py:12 [started]" in text
    # a rank that issued fewer: nothing at that number, and its last call
    fewer = job_of((_rank(0, calls=(_call(1), _call(2))),
                    _rank(1, calls=(_call(1), _call(2), _call(3, state="scheduled")))))
    assert fewer.parting is not None and fewer.parting.seq == 3 and fewer.parting.calls[0].call is None
    assert fewer.parting.calls[0].last == _call(2) and "issued no collective at this number" in fewer.parting.detail
    sizes = job_of((_rank(0, calls=(_call(1, size=4),)), _rank(1, calls=(_call(1, size=5),))))
    assert sizes.parting is not None and "tensors of other sizes" in sizes.parting.detail
    assert job_of((_rank(0, calls=(_call(1), _call(2))), _rank(1, calls=(_call(1), _call(2))))).parting is None


def test_a_hung_job_whose_ranks_left_no_record_says_so_instead_of_finding_no_parting():
    from pt2doctor.report.html_job import render_job_html
    from pt2doctor.report.ranks import render_job

    stopped = ExitInfo(code=None, timed_out=True)
    hung = job_of((_rank(0), _rank(1)), exit=stopped)  # neither rank's record was written before it was stopped
    assert hung.parting is None and hung.unrecorded == ("rank 0", "rank 1")
    words = "rank 0, rank 1 left no record of the collectives it issued (stopped at the timeout before it was written)"
    assert words in render_job(hung) and words in render_job_html(hung)
    # a job that ended by itself and recorded nothing issued no collective to record: nothing to say
    assert job_of((_rank(0), _rank(1))).unrecorded == ()
    one_left = job_of((_rank(0, calls=(_call(1),)), _rank(1)))
    assert one_left.unrecorded == ("rank 1",) and "it died before writing it" in render_job(one_left)


def test_a_rank_at_the_timeout_names_the_collective_it_had_not_completed():
    from pt2doctor.analysis.ranks import job_of as analyse
    from pt2doctor.model.session import Category, Failure

    stopped = ExitInfo(code=None, timed_out=True)
    where = SourceLoc("/job/train.py", 20, "<module>", "torch.cuda.synchronize()")
    timeout = Failure(Category.UNCLASSIFIED, "Timeout", "stopped", "/job/train.py", 20, origin="timeout",
                      user_frames=(where,), traceback='File "/job/train.py", line 20 in <module>\n')
    session = Session(schema=SCHEMA, torch_version="2.13", command=("train.py",), exit=stopped, failures=(timeout,))
    waiting = ProcessSession("rank 1", 1, None, session,
                             collectives=RankCollectives((_call(1), _call(2, state="scheduled"))))
    (at,) = analyse((waiting,), exit=stopped).at_timeout
    assert at.state == "user code" and at.where == where and at.pending == _call(2, state="scheduled")


def test_a_flight_recorder_dump_becomes_calls_with_the_users_line_and_a_dump_naming_a_class_is_refused(tmp_path):
    from pt2doctor.capture.collectives import NCCL_DUMP_PREFIX, calls_of, read_rank
    from pt2doctor.capture.process_meta import RunPaths

    script = str(tmp_path / "train.py")
    torch_file = f"{sysconfig.get_paths()['purelib']}/torch/distributed/distributed_c10d.py"
    entry = {"collective_seq_id": 3, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce", "is_p2p": False,
             "process_group": ("0", "default_pg"), "input_sizes": [[1024]], "input_dtypes": ["Float"],
             "state": "scheduled",
             "frames": [{"name": "all_reduce", "filename": torch_file, "line": 2900},
                        {"name": "forward", "filename": "<eval_with_key>.3", "line": 7},
                        {"name": "step", "filename": script, "line": 11},  # the compiled function, at its first line
                        {"name": "<module>", "filename": script, "line": 21}]}
    p2p = {**entry, "is_p2p": True, "profiling_name": "nccl:send"}
    (call,) = calls_of({"version": "2.10", "entries": [entry, p2p, {"bad": 1}]})
    assert (call.seq, call.group, call.op, call.input_sizes, call.state) == (3, "0", "all_reduce", ((1024,),),
                                                                             "scheduled")
    assert call.where == SourceLoc(script, 21, "<module>") and call.compiled and call.graph == "step (train.py:11)"
    (done,) = calls_of({"entries": [{**entry, "retired": True}]})  # finished: gloo's entries stay `scheduled`
    assert done.state == "completed"
    rank = RunPaths(tmp_path / "rank-1")
    rank.root.mkdir()
    (rank.root / f"{NCCL_DUMP_PREFIX}1").write_bytes(pickle.dumps({"entries": [entry]}))
    record = read_rank(rank)
    assert record is not None and record.calls == (call,) and "NCCL watchdog" in record.source
    planted = pickle.dumps({"entries": [collections.OrderedDict()]})  # names a class: code a reader would run
    (rank.root / f"{NCCL_DUMP_PREFIX}1").write_bytes(planted)
    assert read_rank(rank) is None


def test_the_stack_of_a_dump_at_the_timeout_is_the_scripts_thread_not_a_compile_workers(tmp_path):
    from pt2doctor.capture.process_meta import RunPaths, crash_frames
    from pt2doctor.model.child import MAIN_THREAD_MARK

    paths = RunPaths(tmp_path)
    paths.faulthandler.write_text(
        f"{MAIN_THREAD_MARK}0x00007f0000000001\nTimeout (0:00:44)!\n"
        'Thread 0x00007f0000000002 (most recent call first):\n'
        '  File "/venv/lib/python3.11/site-packages/torch/_inductor/compile_worker/subproc_pool.py", '
        'line 60 in _recv_msg\n'
        '\nThread 0x00007f0000000001 (most recent call first):\n'
        '  File "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 1040 in synchronize\n'
        f'  File "{tmp_path}/train.py", line 20 in <module>\n')
    frames = crash_frames(paths)
    assert [f.function for f in frames] == ["synchronize", "<module>"]


@pytest.fixture()
def saved_jobs(tmp_path):
    from pt2doctor.capture.runner import save

    def saved(name: str, *ranks: ProcessSession):
        (tmp_path / name).mkdir()
        save(job_of(ranks), tmp_path / name / "session.json")
        return tmp_path / name

    before = saved("before", _rank(0, _graph("L_x_: f32[8][1]cpu")), _rank(1, _graph("L_x_: f32[8][1]cpu")))
    after = saved("after", _rank(0, _graph("L_x_: f32[8][1]cpu")),
                  _rank(1, _graph("L_x_: f32[8][1]cpu"), _graph("L_x_: f32[8][1]cpu", frame=1)))
    return before, after


def test_compare_takes_two_jobs_and_says_what_changed_per_rank(saved_jobs, tmp_path):
    before, after = saved_jobs
    itself = pt2doctor("compare", str(before), str(before))
    assert itself.code == 0, itself.stderr
    assert "rank 0: no differences in compilation." in itself.stdout and "rank 1: no differences" in itself.stdout
    changed = pt2doctor("compare", str(before), str(after))
    assert changed.code == 1
    assert "rank 0: no differences in compilation." in changed.stdout
    assert "rank 1:\n  Compiled frames:" in changed.stdout and "f (train.py:4)" in changed.stdout
    as_json = pt2doctor("compare", "--json", str(before), str(after)).doc
    assert [r["label"] for r in as_json["ranks"]] == ["rank 0", "rank 1"]
    (tmp_path / "one").mkdir()
    from pt2doctor.capture.runner import save

    save(_rank(0).session, tmp_path / "one" / "session.json")
    mixed = pt2doctor("compare", str(before), str(tmp_path / "one"))
    assert mixed.code == 64 and "is a job of several ranks" in mixed.stderr


def test_a_jobs_html_page_has_the_ranks_lanes_the_parting_and_every_consequence(tmp_path):
    from pt2doctor.report.html_job import render_job_html

    compiles = (_graph("L_x_: f32[8][1]cpu", collectives=("all_reduce",)),)
    job = job_of((_rank(0, *compiles, calls=(_call(1), _call(2), _call(3))),
                  _rank(1, _graph("L_x_: f32[7][1]cpu", collectives=("all_reduce", "all_reduce")),
                        calls=(_call(1), _call(2), _call(3, "barrier", 0)))))
    page = render_job_html(job)
    assert 'aria-label="compiles of rank 0"' in page and 'aria-label="compiles of rank 1"' in page
    assert "The ranks part at collective #3:" in page and '<tr class="parting"><td>3</td>' in page
    assert "Also possible:" in page and "tensors of other sizes" in page
    assert "<script" not in page
