"""The fix depends on what changed: value types, torch's hints, global state, values carried across a break.

Hand-built sessions use guard text exactly as torch 2.13 wrote it in real runs; the last tests run a real
script (`scripts/recompile_values.py`, backend="eager")."""

from __future__ import annotations

import json

from pt2doctor.analysis.recompiles import (
    Cause,
    cause_of,
    entry_failures,
    find_recompiles,
    fix_for,
    primary_failure,
    recompile_chains,
)
from pt2doctor.analysis.whatif import Trial, judge, propose_trials
from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.model import SCHEMA, CompileId, ExitInfo, GraphBreak, LimitHit, Recompile, Session

HINT = (" (HINT: torch.compile considers integer attributes of the nn.Module to be static. If you are observing "
        "recompilation, you might want to make this integer dynamic using "
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this integer into a tensor.)")


def _session(**kw) -> Session:
    return Session(schema=SCHEMA, torch_version="2.13.0", command=(), exit=ExitInfo(code=0), **kw)


def _recompile(cid: str, *raws: str, function: str = "forward", file: str = "/t/m.py") -> Recompile:
    return Recompile(function, file, 1, CompileId.parse(cid), raws[0], tuple(parse_guard_failure(r) for r in raws))


def _calls(entry: str, value: int) -> str:
    return f"{entry}: self.calls == {value}     # self.calls += 1  # mp/t/m.py:11 in forward{HINT}"


def _module_int_session() -> Session:
    return _session(recompiles=(_recompile("0/1", _calls("0/0", 0)),
                                _recompile("0/2", _calls("0/1", 1), _calls("0/0", 0))),
                    limit_hits=(LimitHit("forward", "/t/m.py", 1, CompileId(0, 3), "recompile_limit", "hit"),))


def test_module_int_attribute_gets_torchs_hint_and_the_source_torch_spells() -> None:
    chain = recompile_chains(_module_int_session())[0]
    cause = chain.steps[0].cause
    assert (chain.steps[0].cause_words == "Python int `self.calls` changed 0 -> 1"
            and cause_of(cause) is Cause.MODULE_INT)
    fix = fix_for(cause, chain)
    assert "allow_unspec_int_on_nn_module = True" in fix and "\"L['self'].calls\"" in fix and "dynamic=True" not in fix
    assert cause.hint is not None and cause.hint.startswith("torch.compile considers integer attributes")


def test_module_int_trials_skip_dynamic_true_and_try_torchs_hint() -> None:
    trials = {t.name: t for t in propose_trials(_module_int_session())}
    assert set(trials) == {"mark_dynamic", "allow_unspec_int_on_nn_module"}
    assert json.loads(trials["mark_dynamic"].overrides) == {"mark_dynamic": ["L['self'].calls"]}
    assert json.loads(trials["allow_unspec_int_on_nn_module"].overrides) == \
        {"dynamo_config": {"allow_unspec_int_on_nn_module": True}}


def test_trial_verdict_spells_recompiles_and_limit_hits_apart() -> None:
    trial = Trial("mark_dynamic", "c", "{}", "recompiles", "b")
    result = judge(trial, _module_int_session(), _session(), True)
    assert result.why == "recompiles 2 -> 0, limit hits 1 -> 0"


def _fix(raw: str) -> str:
    return fix_for(parse_guard_failure(raw))


def test_string_bool_and_float_values_get_advice_by_type() -> None:
    mode = _fix("1/0: self.mode == 'a'       # if self.mode == \"a\":  # mp/t/r.py:27 in forward")
    assert "mode or config flag" in mode and "torch.tensor" not in mode and "dynamic int" not in mode
    training = _fix("0/0: self._modules['model']._modules['layers']._modules['0']._modules['self_attn'].training == "
                    "True  # dropout=0.0 if not self.training else p,  # t/llama.py:263 in forward")
    assert "model.eval()" in training and "normal" in training
    temperature = _fix("0/0: temperature == 1.0     # return logits / temperature  # mp/t/r.py:14 in scaled_logits")
    assert "specialize_float = False" in temperature and "dynamic int" not in temperature


def test_a_none_set_on_the_first_call_is_set_before_compiling() -> None:
    session = _session(recompiles=(_recompile(
        "0/1", "0/0: self.config.problem_type is None    # if self.config.problem_type is None:  # t/bert.py:1110 in "
               "forward"),))
    chain = recompile_chains(session)[0]
    assert "set it before the first compiled call" in fix_for(chain.steps[0].cause, chain)


def test_dtype_fix_casts_to_the_compiled_dtype() -> None:
    fix = _fix("0/3: tensor 'kwargs['input_ids']' dtype mismatch. expected Long, actual Int")
    assert "input_ids.to(torch.int64)" in fix and ".float()" not in fix


def test_zero_one_specialization_suggests_mark_unbacked_and_tries_it() -> None:
    raw = ("0/1: 2 <= kwargs['input_ids'].size()[1]  # recordable_keys = {  # t/output_capturing.py:332 in wrapper "
           "(user code shown is first use of this value--the guard itself is not due user code but due to 0/1 "
           "specialization in the framework; to avoid specialization try "
           "torch._dynamo.decorators.mark_unbacked(tensor, dim))")
    assert "torch._dynamo.decorators.mark_unbacked(input_ids, 1)" in _fix(raw)
    trials = {t.name: t for t in propose_trials(_session(recompiles=(_recompile("0/2", raw),)))}
    assert json.loads(trials["mark_unbacked"].overrides) == {"mark_unbacked": ["L['kwargs']['input_ids']:1"]}


def test_common_guard_failures_get_an_honest_fix() -> None:
    assert "one graph per grad mode is expected" in _fix("0/0: GLOBAL_STATE changed: grad_mode ")
    assert "torch.autocast" in _fix("0/0: GLOBAL_STATE changed: autocast(cpu)_enabled ")
    assert "set it once" in _fix("0/0: GLOBAL_STATE changed: deterministic_algorithms ")
    frozen = ("0/0: tensor 'self._modules['e']._parameters['weight']' requires_grad mismatch. expected "
              "requires_grad=1. Guard failed on a parameter, consider using x = False.")
    assert "frozen or unfrozen" in _fix(frozen)
    assert "one graph for each" in _fix("0/1: expected type of 'kwargs['past_key_values'].layers[0].keys' to be a "
                                        "tensor type, ' but found <class 'NoneType'>")
    assert "one kind of callable" in _fix("0/0: CodeGuardAccessor: Not a function on act.__code__")
    shared = _fix("0/0: ___check_obj_id(func.__code__, 93916077290016), type=<class 'code'>  # output = func(self, "
                  "*args, **kwargs)  # t/generic.py:943 in wrapper")
    assert "share its cache and one recompile limit" in shared and "recompile_limit" in shared


def test_the_cause_is_what_no_entry_was_compiled_for_not_the_first_failure() -> None:
    params = ("0/0: tensor 'self._modules['model']._modules['norm']._parameters['weight']' dtype mismatch. expected "
              "Float, actual BFloat16. Guard failed on a parameter, consider using x = False.")
    r = _recompile("0/3", "0/2: GLOBAL_STATE changed: deterministic_algorithms ",
                   "0/1: GLOBAL_STATE changed: autocast(cpu)_enabled ", params)
    assert primary_failure(r, (r,)).subject == "self.model.norm.weight"
    both = _recompile("0/2", "0/1: GLOBAL_STATE changed: autocast(cpu)_enabled deterministic_algorithms ",
                      "0/0: GLOBAL_STATE changed: deterministic_algorithms ")
    assert primary_failure(both, (both,)).subject == "deterministic_algorithms"


def test_entries_are_labelled_and_identical_failures_merged() -> None:
    r = _recompile("0/2", "0/1: GLOBAL_STATE changed: grad_mode ", "0/0: GLOBAL_STATE changed: grad_mode ")
    (line,) = entry_failures(r)
    assert line.startswith("entries 0/1, 0/0: ")


def test_a_value_carried_across_a_break_is_named_by_the_break() -> None:
    resumed = "torch_dynamo_resume_in_forward_at_17"
    gb = GraphBreak(reason="r", file="/t/mylayers.py", line=17, function="forward", count=1,
                    code="t0 = time.perf_counter()   # timing")
    session = _session(graph_breaks=(gb,), recompiles=(_recompile(
        "2/1", "2/0: ___stack0 == 28967.2915295     # warnings.warn(\"slow path\")  "
               f"# mp/t/mylayers.py:19 in {resumed}",
        function=resumed, file="/t/mylayers.py"),))
    chain = recompile_chains(session)[0]
    cause, words = chain.steps[0].cause, chain.steps[0].cause_words
    assert "graph break at mylayers.py:17 (`t0 = time.perf_counter()`)" in words and "___" not in words
    assert (cause.source.line, cause.source.code) == (17, "t0 = time.perf_counter()")
    fix = fix_for(cause, chain)
    assert "___" not in fix and "mylayers.py:17" in fix and "specialize_float" in fix
    assert all("___" not in t.overrides for t in propose_trials(session))


def test_real_script_causes_and_fixes(value_session: Session) -> None:
    causes = {cause_of(s.cause) for c in recompile_chains(value_session) for s in c.steps if s.cause is not None}
    assert {Cause.MODULE_INT, Cause.FLAG, Cause.FLOAT, Cause.CARRIED_VALUE, Cause.GRAD_MODE} <= causes
    for finding in find_recompiles(value_session):
        assert not any("___" in fix or "HINT" in fix for fix in finding.fix), finding.fix
        assert not any("___stack" in e or "(HINT" in e for e in finding.evidence), finding.evidence
    trials = {t.name for t in propose_trials(value_session)}
    assert {"mark_dynamic", "allow_unspec_int_on_nn_module", "specialize_float"} <= trials


def test_a_size_change_in_code_resumed_after_a_break_names_what_the_user_can_change() -> None:
    session = _session(recompiles=(_recompile("1/1", "1/0: tensor 'y' size mismatch at index 0. expected 4, actual 5",
                                              function="torch_dynamo_resume_in_f_at_5"),))
    chain = recompile_chains(session)[0]
    fix = chain.steps[0].fix
    assert fix is not None and "local of `f`" in fix and "graph break at m.py:5" in fix
    assert "mark_dynamic(y, 0)" not in fix
