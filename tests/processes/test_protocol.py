"""The worker pool's messages (`processes.protocol`): typed values that arrive whole however the bytes are cut,
and a worker that died unanswered answered for."""

from __future__ import annotations

from pt2doctor.processes.protocol import Answer, MessageReader, Quit, Ready, RunJob, StartFailed, encode, ended


def test_messages_decode_as_their_types_whatever_the_reads_cut():
    sent = [Ready(), RunJob(3, "print('é')\n" * 50, 4.5, "/x/repro.py"), Answer(3, "failed", "ValueError: boom"),
            StartFailed("ImportError: no torch"), Quit()]
    stream = b"".join(encode(m) for m in sent)
    reader, got = MessageReader(), []
    for i in range(0, len(stream), 7):  # a pipe hands over whatever it has: here 7 bytes at a time
        got += reader.feed(stream[i:i + 7])
    assert got == sent and reader.buffer == b""


def test_a_worker_that_ended_without_answering_is_answered_for():
    assert ended(5, -9) == Answer(5, "signal", "9")
    assert ended(5, 3) == Answer(5, "error", "exit status 3")
