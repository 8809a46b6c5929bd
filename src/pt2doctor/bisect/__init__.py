"""Stage and pass bisection: name the Inductor pass or lowering at fault on a minimal repro.

`driver` (`bisect_repro`, `PendingBisection`) runs `child` (`python -m pt2doctor.bisect.child`) in a
fresh interpreter; the job and the answer are `model.diagnosis` records.
"""
