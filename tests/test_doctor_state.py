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
