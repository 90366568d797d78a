"""The doctor on a model with state (a buffer its program writes and keeps between calls, as a KV cache is):
each probe starts from the model's initial state on both sides, the report says so, and a starting value the
``.pte`` does not carry is caught. Also ``"strict": True`` in a spec, which ``transformers``' static-cache
wrapper (lesson 13's language model) needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers import Probe, compare
from helpers.doctor import main
from helpers.doctor.examine import examine, written_buffers
from helpers.doctor.spec import SpecError, flatten_spec

SPECS = Path(__file__).resolve().parent / "doctor_specs.py"


def _spec(name: str) -> dict:
    import doctor_specs

    return getattr(doctor_specs, name)()


def _run(tmp_path: Path, capsys, name: str) -> tuple[int, str, dict]:
    code = main(["--spec", f"{SPECS}:{name}", "--json", str(tmp_path / "d.json"), "--quiet"])
    return code, capsys.readouterr().out, json.loads((tmp_path / "d.json").read_text())


def test_a_counter_starting_at_zero_passes_and_the_report_names_its_state(tmp_path, capsys):
    code, out, data = _run(tmp_path, capsys, "counter")
    assert code == 0, out
    assert data["stateful_buffers"] == ["model.calls"]
    assert "state: the program writes 1 buffer(s) that it keeps between calls" in out
    assert "each probe started from their initial values" in out
    assert data["counts"]["inside"] == 12 and data["counts"]["failures"] == 0


def test_a_starting_value_the_pte_does_not_carry_diverges_from_the_first_call(tmp_path, capsys):
    """ExecuTorch serializes only the shape and dtype of a buffer the graph writes: the .pte's count starts at 0
    (this runtime's zeros), eager's at 1, so the first call gives x · 1 on the device and x · 2 in eager."""
    code, out, data = _run(tmp_path, capsys, "counter_from_one")
    assert code == 1
    diverging = [p["label"] for p in data["probes"] if p["within_contract"] and p["status"] == "diverge"]
    assert "example" in diverging and len(diverging) == 11  # all but the zeros, which no count changes
    assert "InitializedMutableBufferPass" in data["next_steps"][0]
    assert "locate" not in [s["name"] for s in data["stages"]]  # the locator would carry state from stage to stage
    spec = flatten_spec(_spec("counter_from_one"))
    report = examine(spec.model, spec.example_args, spec.dynamic_shapes)
    x = torch.ones(2, 4)
    assert report.diagnosis.artifact.reloaded().run_raw(x)[0].tolist() == (x * 1).tolist()
    assert flatten_spec(_spec("counter_from_one")).model(x)[0].tolist() == (x * 2).tolist()


def test_the_pass_the_report_names_makes_the_pte_start_from_the_initial_value():
    from doctor_specs import Counter
    from executorch.exir import ExecutorchBackendConfig, to_edge
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    from helpers._runtime import load_program

    x = torch.ones(2, 4)
    for passes, want in (([], x * 1), ([InitializedMutableBufferPass(["calls"])], x * 2)):
        program = to_edge(torch.export.export(Counter(1.0), (x,))).to_executorch(ExecutorchBackendConfig(passes=passes))
        assert load_program(program.buffer).load_method("forward")([x])[0].tolist() == want.tolist(), passes


def test_without_a_fresh_state_an_input_the_runtime_refused_shifts_every_later_comparison():
    """What the fresh state per probe prevents: eager counts a call the runtime refused (batch 9, past the memory
    plan), and from then on the two sides disagree on inputs that are fine."""
    spec = flatten_spec(_spec("counter"))
    report = examine(spec.model, spec.example_args, spec.dynamic_shapes)
    artifact = report.diagnosis.artifact
    x = spec.example_args[0]
    probes = [Probe("batch 9 (outside)", (torch.randn(9, 4),)), Probe("example", (x,)), Probe("again", (x,))]
    carried = compare(flatten_spec(_spec("counter")).model, artifact.reloaded(), probes)
    assert [r.status for r in carried.rows] == ["rejected", "diverge", "diverge"]
    fresh = compare(flatten_spec(_spec("counter")).model, artifact, probes, fresh_state=True)
    assert [r.status for r in fresh.rows] == ["rejected", "match", "match"]


def test_lesson_13s_decode_step_writes_its_cache_buffers():
    """torch 2.13 leaves the static cache's writes (index_copy_ on the buffers) in the exported graph with an empty
    buffers_to_mutate: the doctor finds them from the graph."""
    from helpers import course
    from helpers.lowering import export_methods

    lm = course.lesson(13)
    _, exported = export_methods({"forward": (lm.DecodeStep(lm.tiny_llama()), lm.step_example())}, strict=True)
    program = exported["forward"]
    assert not program.graph_signature.buffers_to_mutate
    names = written_buffers(program)
    layers = lm.CONFIG["num_hidden_layers"]
    assert sorted(names) == sorted(f"cached.{kind}_{i}" for kind in ("key_cache", "value_cache", "cumulative_length")
                                 for i in range(layers)), names


def test_strict_in_a_spec():
    spec = {**_spec("counter"), "strict": True}
    assert flatten_spec(spec).strict and not flatten_spec(_spec("counter")).strict
    with pytest.raises(SpecError, match="'strict' is 'yes'; expected True or False"):
        flatten_spec({**_spec("counter"), "strict": "yes"})


def test_calls_in_a_row_pass_a_cache_written_at_the_position_it_is_given(tmp_path, capsys):
    code, out, data = _run(tmp_path, capsys, "slot_cache")
    assert code == 0, out
    assert data["stateful_buffers"] == ["model.slots"]
    sequence = data["sequence"]
    assert len(sequence) >= 2 and {c["status"] for c in sequence} == {"match"}
    labels = [p["label"] for p in data["probes"] if p["within_contract"] and p["status"] == "match"]
    assert [c["label"] for c in sequence] == labels  # the matching probes, in their order
    assert "every call matches eager" in out
    assert {"name": "state across calls", "passed": True} == {
        k: v for k, v in next(c for c in data["checks"] if c["name"] == "state across calls").items()
        if k in ("name", "passed")}


def test_a_position_counted_in_a_python_attribute_matches_call_by_call_and_fails_calls_in_a_row(tmp_path, capsys):
    """Lesson 13's AppStep in miniature: from the initial state every probe matches (eager and the .pte both write
    the slot the counter held at export), so only calls one after another show that the .pte never moves on."""
    code, out, data = _run(tmp_path, capsys, "counting_slot_cache")
    assert code == 1, out
    assert data["counts"]["failures"] == 0  # one call at a time, nothing to see
    statuses = [c["status"] for c in data["sequence"]]
    assert statuses[0] == "match" and statuses[1] == "diverge", statuses
    check = next(c for c in data["checks"] if c["name"] == "state across calls")
    assert not check["passed"] and "call 2 of" in check["message"]
    assert "calls in a row differ from call 2" in data["headline"]
    assert "Python attribute" in data["next_steps"][0]
    assert "✗ then the" in out and "call 2 (" in out


def test_a_model_without_state_has_no_calls_in_a_row(tmp_path, capsys):
    code, out, data = _run(tmp_path, capsys, "tracker")
    assert data["sequence"] is None
    assert "state across calls" not in [c["name"] for c in data["checks"]]


def test_with_one_token_id_calls_in_a_row_cannot_see_the_counter_and_a_value_range_for_the_tokens_can(tmp_path,
                                                                                                      capsys):
    """Lesson 13's AppStep in the doctor: the example feeds token 1 at position 0, integer probes stay inside the
    example's values, so every call writes the same vector and the counter changes nothing the output shows."""
    code, out, data = _run(tmp_path, capsys, "counting_token_cache")
    assert code == 0, out
    assert {p["label"]: p["shapes"] for p in data["probes"]}  # probes ran
    assert {c["status"] for c in data["sequence"]} == {"match"}
    assert data["options"]["value_ranges"] == {}

    code = main(["--spec", f"{SPECS}:counting_token_cache", "--value-range", "token=0:15", "--value-range",
                 "position=0:15", "--json", str(tmp_path / "ranged.json"), "--quiet"])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "ranged.json").read_text())
    assert code == 1, out
    assert data["options"]["value_ranges"] == {"token": [0, 15], "position": [0, 15]}
    assert "values: token from 0 to 15, position from 0 to 15" in out
    assert data["counts"]["failures"] == 0  # each call from the initial state still matches
    assert [c["status"] for c in data["sequence"]][:2] == ["match", "diverge"]


def test_value_ranges_bound_the_generated_integers_and_reach_both_ends():
    from helpers import probe_inputs

    example = (torch.tensor([1]), torch.tensor([0]))
    plain = probe_inputs(example, model=_spec("counting_token_cache")["model"])
    assert {int(p.args[1].flatten()[0]) for p in plain if p.args[1].numel()} == {0}  # the example's own value only
    ranged = probe_inputs(example, model=_spec("counting_token_cache")["model"],
                          value_ranges={"token": (0, 15), "position": (0, 15)})
    tokens = [int(v) for p in ranged for v in p.args[0].flatten()]
    positions = [int(v) for p in ranged for v in p.args[1].flatten()]
    assert min(tokens) == 0 and max(tokens) == 15 and len(set(tokens)) > 3
    assert min(positions) == 0 and max(positions) == 15 and len(set(positions)) > 3
    assert [p.label for p in ranged] == [p.label for p in plain[:9]] + [
        "values: token at its lowest, 0", "values: token at its highest, 15",
        "values: position at its lowest, 0", "values: position at its highest, 15"] + [p.label for p in plain[9:]]
    with pytest.raises(ValueError, match="not an integer input"):
        probe_inputs(example, model=_spec("counting_token_cache")["model"], value_ranges={"slots": (0, 1)})
    with pytest.raises(ValueError, match="low ≤ high"):
        probe_inputs(example, model=_spec("counting_token_cache")["model"], value_ranges={"token": (5, 1)})


def test_positions_are_one_run_of_consecutive_values_inside_their_range():
    """A PositionRange range: each probe's positions run on from a start (a prompt's slots), inside the range wherever the
    probe's length allows, from its low end and up to its high end among them; a plain range draws them one by one."""
    from helpers import PositionRange, probe_inputs

    spec = _spec("first_slot_prompt")
    model, example, dynamic = spec["model"], spec["args"], spec["dynamic_shapes"]
    probes = probe_inputs(example, dynamic, model=model, value_ranges={"positions": PositionRange(0, 15)})
    runs = {p.label: [int(v) for v in p.args[1]] for p in probes if p.args[1].numel()}
    assert all(run == list(range(run[0], run[0] + len(run))) for run in runs.values()), runs
    assert all(run[-1] <= 15 for label, run in runs.items() if "outside" not in label), runs
    assert runs["values: positions from its lowest, 0"] == [0, 1, 2, 3]
    assert runs["values: positions up to its highest, 15"] == [12, 13, 14, 15]
    assert runs["n = 16 (max)"] == list(range(16)) and runs["n = 17 (max+1, outside)"] == list(range(17))
    assert len({run[0] for label, run in runs.items() if len(run) == 4}) > 3  # random starts, not one start
    plain = probe_inputs(example, dynamic, model=model, value_ranges={"positions": (0, 15)})
    assert any(len(p.args[1]) > 1 and p.args[1].tolist() != list(range(int(p.args[1][0]), int(p.args[1][0]) + len(p.args[1])))
               for p in plain)


def test_positions_that_run_on_from_a_start_pass_a_cache_that_writes_from_the_first_position(tmp_path, capsys):
    """transformers' static-cache wrapper in miniature: a prompt goes to the slots from its first position on. Values
    drawn one by one ask it for slots past the cache, and eager fails inside the contract; as --positions they are
    the runs an app sends, and the doctor passes it."""
    ranges = ["--value-range", "tokens=0:63"]
    code = main(["--spec", f"{SPECS}:first_slot_prompt", "--backend", "portable", *ranges, "--value-range",
                 "positions=0:15", "--json", str(tmp_path / "drawn.json"), "--quiet"])
    out = capsys.readouterr().out
    drawn = json.loads((tmp_path / "drawn.json").read_text())
    assert code == 1, out
    assert drawn["counts"]["failures"] > 0 and drawn["options"]["positions"] == []
    failing = [p for p in drawn["probes"] if p["within_contract"] and p["status"] != "match"]
    assert failing and all(p["status"] == "eager_error" and "out of bounds" in p["message"] for p in failing), failing
    assert "--positions NAME=LOW:HIGH" in " ".join(drawn["next_steps"])

    code = main(["--spec", f"{SPECS}:first_slot_prompt", "--backend", "portable", *ranges, "--positions",
                 "positions=0:15", "--json", str(tmp_path / "runs.json"), "--quiet"])
    out = capsys.readouterr().out
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert code == 0, out
    assert runs["options"]["value_ranges"] == {"tokens": [0, 63], "positions": [0, 15]}
    assert runs["options"]["positions"] == ["positions"]
    assert "values: tokens from 0 to 63, positions consecutive from 0 to 15" in out
    assert {c["status"] for c in runs["sequence"]} == {"match"}


def _prefill_decode_run(tmp_path: Path, capsys, name: str) -> tuple[int, str, dict]:
    code = main(["--spec", f"{SPECS}:{name}", "--backend", "portable", "--json", str(tmp_path / "p.json"), "--quiet"])
    return code, capsys.readouterr().out, json.loads((tmp_path / "p.json").read_text())


def _matching(method: dict) -> list[str]:
    return [f"{method['method']}: {p['label']}" for p in method["probes"]
            if p["within_contract"] and p["status"] == "match"]


def test_prefill_and_decode_sharing_one_cache_are_called_one_after_another_and_match(tmp_path, capsys):
    """A program spec with "share_mutable_buffers": True: the doctor builds it so, and calls prefill's matching probes
    then decode's on one loaded program, as an app prefills and then decodes."""
    code, out, data = _prefill_decode_run(tmp_path, capsys, "prefill_decode")
    assert code == 0, out
    prefill, decode = data["methods"]
    assert prefill["across_methods"] == decode["across_methods"]
    across = prefill["across_methods"]
    assert across["methods"] == ["prefill", "decode"] and across["share_mutable_buffers"] is True
    assert [c["label"] for c in across["calls"]] == _matching(prefill) + _matching(decode)
    assert {c["status"] for c in across["calls"]} == {"match"}
    check = next(c for c in decode["checks"] if c["name"] == "state across methods")
    assert check["passed"] and "prefill then decode, one after another on one loaded program" in check["message"]
    assert "✓ prefill then decode one after another" in out


def test_without_shared_buffers_each_method_matches_alone_and_decode_after_prefill_does_not(tmp_path, capsys):
    """ExecuTorch's default plans each method's buffers on its own: prefill writes its place for the cache, decode
    reads its own. One method at a time (from the initial state) nothing differs; prefill then decode differs from
    decode's first call."""
    code, out, data = _prefill_decode_run(tmp_path, capsys, "prefill_decode_separate")
    assert code == 1, out
    prefill, decode = data["methods"]
    assert prefill["counts"]["failures"] == decode["counts"]["failures"] == 0
    assert {c["status"] for c in prefill["sequence"] + decode["sequence"]} == {"match"}  # each method alone, in a row
    calls = prefill["across_methods"]["calls"]
    first = next(k for k, c in enumerate(calls) if c["status"] != "match")
    assert first == len(_matching(prefill)) and calls[first]["label"].startswith("decode: "), calls
    assert prefill["across_methods"]["share_mutable_buffers"] is False
    assert prefill["across_methods"]["shared_by_chance"] is False  # they differ: not a meeting by chance
    assert prefill["across_methods"]["places"] == {"prefill": [[1, 77824]], "decode": [[1, 69632]]}
    assert f"prefill then decode differ from call {first + 1}" in decode["headline"]
    assert "share_mutable_buffers" in decode["next_steps"][0] and "share_memory_arenas" in decode["next_steps"][0]
    assert data["verdict"] == "fail"


def test_methods_that_meet_only_because_the_host_shares_arenas_fail_and_the_plans_say_where(tmp_path, capsys):
    """SlotMean's separate plans put its slots at the same offset of arena 1 in both methods, and this host's runtime
    gives a program's methods one set of arenas: every call across methods matches, and the check still fails (a
    C++ Module without share_memory_arenas gives each method its own). Built with share_mutable_buffers, the slots
    are at one place of an arena of their own in both plans, and it passes."""
    code, out, data = _prefill_decode_run(tmp_path, capsys, "slot_mean")
    assert code == 1, out
    prefill, decode = data["methods"]
    across = prefill["across_methods"]
    assert {c["status"] for c in across["calls"]} == {"match"} and across["shared_by_chance"] is True
    assert across["places"] == {"prefill": [[1, 256]], "decode": [[1, 256]]}, across["places"]
    check = next(c for c in decode["checks"] if c["name"] == "state across methods")
    assert not check["passed"] and "at the same place by chance" in check["message"], check
    assert "share their buffers only by chance" in decode["headline"]
    assert "share_mutable_buffers=True" in decode["next_steps"][0] and "one set of arenas" in decode["next_steps"][0]
    assert "on this host only" in out

    code, out, data = _prefill_decode_run(tmp_path, capsys, "slot_mean_shared")
    assert code == 0, out
    across = data["methods"][0]["across_methods"]
    assert across["shared_by_chance"] is False and across["share_mutable_buffers"] is True
    assert across["places"]["prefill"] == across["places"]["decode"] and across["places"]["decode"][0][0] == 2


def test_methods_that_share_only_a_table_they_read_are_not_called_across(tmp_path, capsys):
    """Two caches of their own and one table of constants both read: nothing one method writes, the other holds, so
    there is no state across methods to check, and no meeting by chance to fail."""
    code, out, data = _prefill_decode_run(tmp_path, capsys, "own_slots_shared_table")
    assert code == 0, out
    assert [m["stateful_buffers"] for m in data["methods"]] == [["model.slots"], ["model.slots"]]  # the spec's wrapper
    assert all(m["across_methods"] is None for m in data["methods"])


def test_methods_with_state_of_their_own_are_not_called_across():
    """Two models, one cache each: what one method writes the other never reads in eager either."""
    import doctor_specs

    from helpers.doctor.examine import examine_methods

    spec = doctor_specs.prefill_decode()["methods"]
    methods = {"prefill": (doctor_specs.PromptCache(), spec["prefill"]["args"], spec["prefill"]["dynamic_shapes"]),
               "decode": (doctor_specs.PromptCache(), spec["decode"]["args"], None)}
    reports = examine_methods(methods, backend="portable")
    assert [r.stateful for r in reports] == [["slots"], ["slots"]]
    assert all(r.across_methods is None for r in reports)
    assert "state across methods" not in {c.name for r in reports for c in r.checks}
