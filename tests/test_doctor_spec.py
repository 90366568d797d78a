"""``export-doctor --spec MODULE:FUNCTION``: a model and its inputs as ``torch.export.export`` takes them (issue 20 §2).

The spec functions are in ``tests/doctor_specs.py``: keyword, nested and dict inputs with shared Dims (``tracker``),
lesson 07's chunked time axis with a derived Dim and with a plain one (``chunk_mean_derived`` / ``_plain``),
``Dim.AUTO`` (``auto``), and programs of several methods (``buckets``, ``buckets_and_a_chunked_method``). First what the flattening does (names, order, shared Dims, and the exported graph equal to
``torch.export.export(model, args, kwargs, ...)`` of the spec itself), then every wrong spec as one line and exit
status 2, then the doctor's whole pipeline on each spec through ``main()``.
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from torch.utils import _pytree as pytree

from helpers.doctor import UsageError, main, prepare
from helpers.doctor.spec import flatten_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "tests" / "doctor_specs.py"
sys.path.insert(0, str(SPECS.parent))
import doctor_specs  # noqa: E402


def test_a_spec_is_flattened_in_exports_order_with_the_inputs_names():
    spec = doctor_specs.tracker()
    flat = flatten_spec(doctor_specs.tracker())
    assert flat.names == ["x", "state_0", "state_1", "mask"]
    assert [n for n in flat.model.forward.__code__.co_varnames[1:5]] == flat.names
    # one Dim object per name, as the spec shares them
    ds = flat.dynamic_shapes
    assert ds["x"][0] is ds["state_0"][0] is ds["state_1"][0] is ds["mask"][0]
    assert ds["x"][1] is ds["mask"][1] and ds["x"][1].__name__ == "steps"
    # the flat model runs the user's model on the rebuilt structure; outputs are the tensors in pytree order
    eager = spec["model"](*spec["args"], **spec["kwargs"])
    expected = pytree.tree_leaves(eager)
    got = flat.model(*flat.example_args)
    assert len(got) == len(expected) == 3
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_the_flat_model_exports_the_graph_the_spec_exports():
    spec = doctor_specs.tracker()
    direct = torch.export.export(spec["model"], spec["args"], spec["kwargs"], dynamic_shapes=spec["dynamic_shapes"])
    flat = flatten_spec(doctor_specs.tracker())
    via = torch.export.export(flat.model, flat.example_args, dynamic_shapes=flat.dynamic_shapes)

    def described(ep):
        ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
        inputs = [re.sub(r"s\d+", "s", str(tuple(n.meta["val"].shape))) for n in ep.graph.nodes
                  if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
        ranges = sorted((str(r.lower), str(r.upper)) for r in ep.range_constraints.values())
        return ops, inputs, ranges, ep.graph_signature.user_inputs

    assert described(via) == described(direct)
    assert described(via)[1] == ["(s, s, 4)", "(s, 4)", "(s, 4)", "(s, s, 1)"]


BAD_SPECS = '''
import torch
from torch.export import Dim

class Two(torch.nn.Module):
    def forward(self, x, y):
        return x + y

def good():
    return {"model": Two(), "args": (torch.ones(2, 3), torch.ones(2, 3))}

def a_list():
    return [Two(), (torch.ones(2),)]

def unknown_key():
    return {"model": Two(), "args": (torch.ones(2),), "inputs": ()}

def no_args():
    return {"model": Two()}

def not_a_module():
    return {"model": "Two", "args": (torch.ones(2),)}

def args_an_int():
    return {"model": Two(), "args": 3}

def wrong_kwarg():
    return {"model": Two(), "args": (torch.ones(2),), "kwargs": {"z": torch.ones(2)}}

def mismatched_shapes():
    return {"model": Two(), "args": (torch.ones(2, 3), torch.ones(2, 3)), "dynamic_shapes": ({0: Dim("b")},)}

def a_tensors_shape_wrong():
    return {"model": Two(), "args": (torch.ones(2, 3), torch.ones(2, 3)),
            "dynamic_shapes": {"x": {0: Dim("b")}, "y": ({0: Dim("b")}, None)}}

def two_bounds_one_name():
    return {"model": Two(), "args": (torch.ones(2, 3), torch.ones(2, 3)),
            "dynamic_shapes": {"x": {0: Dim("b", max=8)}, "y": {0: Dim("b", max=9)}}}

def raises():
    raise RuntimeError("boom")

def eager_fails():
    return {"model": Two(), "args": (torch.ones(2, 3), torch.ones(4, 5))}

def program_with_extra_key():
    return {"methods": {"forward": good()}, "model": Two()}

def program_without_methods():
    return {"methods": {}}

def program_share_not_bool():
    return {"methods": {"forward": good()}, "share_mutable_buffers": "yes"}

def program_bad_method_name():
    return {"methods": {"not a name": good()}}

def program_bad_method():
    return {"methods": {"ok": good(), "broken": {"model": Two()}}}

def program_eager_fails():
    return {"methods": {"ok": good(), "broken": eager_fails()}}

def same_tensor_twice():
    t = torch.ones(2, 3)
    return {"model": Two(), "args": (t, t)}

NOT_A_FUNCTION = 3
'''

USAGE_CASES = {
    "neither": ([], "give the model: MODULE_OR_FILE:FACTORY with --example (and --dim), or --spec"),
    "spec and example": (["--spec", "bad_specs:good", "--example", "2x3"], "drop --example"),
    "spec and factory": (["bad_specs:Two", "--spec", "bad_specs:good"], "drop a MODULE:FACTORY"),
    "spec and dim": (["--spec", "bad_specs:good", "--dim", "x:0:b:1:4"], "drop --dim"),
    "no colon": (["--spec", "bad_specs.good"], "expected MODULE_OR_FILE:FUNCTION"),
    "no such function": (["--spec", "bad_specs:nope"], "'bad_specs' has no attribute 'nope'"),
    "no such module": (["--spec", "no_such_specs:good"], "no module named 'no_such_specs'"),
    "not a function": (["--spec", "bad_specs:NOT_A_FUNCTION"], "a int, not a function returning a spec dict"),
    "a class": (["--spec", "bad_specs:Two"], "not a function returning a spec dict"),
    "a list": (["--spec", "bad_specs:a_list"], "returned a list; expected a dict with keys model, args, kwargs"),
    "unknown key": (["--spec", "bad_specs:unknown_key"], "unknown key(s) 'inputs'"),
    "no args": (["--spec", "bad_specs:no_args"], "no 'args'"),
    "not a module": (["--spec", "bad_specs:not_a_module"], "'model' is a str, not a torch.nn.Module"),
    "args an int": (["--spec", "bad_specs:args_an_int"], "'args' is a int; expected a tuple"),
    "wrong kwarg": (["--spec", "bad_specs:wrong_kwarg"], "args and kwargs do not fit forward()"),
    "mismatched dynamic_shapes": (["--spec", "bad_specs:mismatched_shapes"],
                                  "dynamic_shapes does not match the inputs: Detected mismatch between the structure "
                                  "of `inputs` and `dynamic_shapes`"),
    "a tensor's dynamic shape wrong": (["--spec", "bad_specs:a_tensors_shape_wrong"],
                                       "dynamic_shapes does not match the inputs:"),
    "two bounds for one Dim name": (["--spec", "bad_specs:two_bounds_one_name"],
                                    "dynamic_shapes does not match the inputs: Found different definitions"),
    "function raises": (["--spec", "bad_specs:raises"], "calling it failed: RuntimeError: boom (bad_specs.py:"),
    "eager fails": (["--spec", "bad_specs:eager_fails"], "the model does not run on the spec's inputs in eager"),
    "program with another key": (["--spec", "bad_specs:program_with_extra_key"],
                                 "a program spec has only 'methods' and 'share_mutable_buffers'; found also 'model'"),
    "share_mutable_buffers not a bool": (["--spec", "bad_specs:program_share_not_bool"],
                                         "'share_mutable_buffers' is 'yes'; expected True or False"),
    "program without methods": (["--spec", "bad_specs:program_without_methods"],
                                "'methods' must be a non-empty dict"),
    "method name": (["--spec", "bad_specs:program_bad_method_name"], "method name 'not a name' is not a Python"),
    "a method's spec": (["--spec", "bad_specs:program_bad_method"], "method 'broken': no 'args'"),
    "a method eager cannot run": (["--spec", "bad_specs:program_eager_fails"],
                                  "method 'broken': the model does not run on the spec's inputs"),
    "program and --bundle": (["--spec", "bad_specs:program_eager_fails", "--bundle", "x.bpte"],
                             "has several methods; --bundle examine(s) one method"),
    "same tensor twice": (["--spec", "bad_specs:same_tensor_twice"], "one tensor object appears twice"),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_a_wrong_spec_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    (tmp_path / "bad_specs.py").write_text(BAD_SPECS)
    monkeypatch.chdir(tmp_path)  # MODULE is imported from the current folder, like the user's own code
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bad_specs", raising=False)
    argv, expected = USAGE_CASES[case]
    with pytest.raises(UsageError) as caught:
        prepare(argv)
    assert expected in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)
    assert main([*argv, "--quiet"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("export doctor: error: ") and err.count("\n") == 1, err


def test_the_good_spec_of_that_module_is_accepted(tmp_path, monkeypatch):
    # the control for the cases above: the same module, the same folder
    (tmp_path / "bad_specs.py").write_text(BAD_SPECS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "bad_specs", raising=False)
    prepared = prepare(["--spec", "bad_specs:good"])
    assert prepared.target == "bad_specs:good" and len(prepared.example_args) == 2


def _doctor(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, dict]:
    out_json = tmp_path / f"{name}.json"
    code = main(["--spec", f"{SPECS}:{name}", "--json", str(out_json), "--quiet", *extra])
    out, _ = capsys.readouterr()
    return code, out, json.loads(out_json.read_text())


def test_keyword_nested_inputs_and_shared_dims_are_examined(tmp_path, capsys):
    code, out, report = _doctor("tracker", tmp_path, capsys)
    assert code == 0, out
    assert report["inputs"] == ("x: float32[batch∈[1,8] (example 3), steps∈[2,16] (example 5), 4], "
                                "state_0: float32[batch∈[1,8] (example 3), 4], "
                                "state_1: float32[batch∈[1,8] (example 3), 4], "
                                "mask: float32[batch∈[1,8] (example 3), steps∈[2,16] (example 5), 1]")
    labels = [p["label"] for p in report["probes"]]
    # the shared batch moves all four inputs together; steps moves x and mask
    assert {"batch = 1 (min)", "batch = 8 (max)", "steps = 2 (min)", "steps = 16 (max)"} <= set(labels), labels
    assert report["counts"]["failures"] == 0 and report["counts"]["inside"] >= 13
    assert [i["name"] for i in report["contract"]["inputs"]] == ["x", "state_0", "state_1", "mask"]


def test_lesson_07s_derived_dim_is_checked(tmp_path, capsys):
    code, out, report = _doctor("chunk_mean_derived", tmp_path, capsys)
    assert code == 0, out
    axis = report["contract"]["inputs"][0]["axes"][1]
    assert "4*chunk" in json.dumps(axis), axis
    outside = [p for p in report["probes"] if not p["within_contract"]]
    assert outside and not any(p["failure"] for p in outside)


def test_the_plain_dim_on_a_chunked_axis_fails_with_torchs_derived_fix(tmp_path, capsys):
    code, out, report = _doctor("chunk_mean_plain", tmp_path, capsys)
    assert code == 1, out
    assert report["diagnosis"]["kind"] == "constraint_violation"
    assert any("4*" in fix for fix in report["diagnosis"]["suggested_fixes"]), report["diagnosis"]


def test_dim_auto_is_examined_as_export_narrowed_it(tmp_path, capsys):
    code, out, report = _doctor("auto", tmp_path, capsys)
    assert code == 0, out
    assert report["inputs"] == "x: float32[Dim.AUTO (example 4), Dim.AUTO (example 6)]"
    axes = report["contract"]["inputs"][0]["axes"]
    assert "dim" in axes[0] and axes[1].get("size") == 6, axes  # batch dynamic, the Linear's 6 features static
    assert report["counts"]["failures"] == 0


def test_a_program_of_bucket_methods_is_lowered_once_and_each_method_examined(tmp_path, capsys):
    junit = tmp_path / "buckets.xml"
    code, out, program = _doctor("buckets", tmp_path, capsys, "--junit", str(junit))
    assert code == 0, out
    assert out.rstrip().splitlines()[-1].endswith("2 methods: short PASS, long PASS → PASS (exit 0)")
    assert (program["verdict"], program["exit_status"]) == ("pass", 0)
    short, long = program["methods"]
    assert (short["method"], long["method"]) == ("short", "long")
    assert short["contract"]["signature"] == "short(x: float32[1, 8, 4])"
    assert long["contract"]["signature"] == "long(x: float32[1, 32, 4])"
    # one program: both methods report the same .pte, each its own arena
    assert short["memory"]["pte_bytes"] == long["memory"]["pte_bytes"]
    assert short["memory"]["arena_bytes"] < long["memory"]["arena_bytes"]
    assert all(r["counts"]["failures"] == 0 and r["counts"]["inside"] >= 9 for r in program["methods"])
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == [f"export doctor: {SPECS}:buckets · method short",
                                               f"export doctor: {SPECS}:buckets · method long"]


def test_a_method_that_does_not_export_fails_the_program(tmp_path, capsys):
    code, out, program = _doctor("buckets_and_a_chunked_method", tmp_path, capsys)
    assert code == 1, out
    short, chunks = program["methods"]
    assert chunks["verdict"] == "fail" and chunks["diagnosis"]["kind"] == "constraint_violation"
    assert [s["status"] for s in chunks["stages"] if s["name"] == "export"] == ["failed"]
    lower = next(s for s in short["stages"] if s["name"] == "lower")
    assert lower == {"name": "lower", "status": "skipped", "seconds": None,
                     "message": "not lowered: method chunks of the program did not export"}
    assert short["verdict"] == "fail"  # nothing was lowered, so nothing about this method passed
    assert out.rstrip().splitlines()[-1].endswith("2 methods: short FAIL, chunks FAIL → FAIL (exit 1)")


def test_a_shapes_collection_declares_the_same_dims():
    from torch.export import Dim, ShapesCollection

    spec = doctor_specs.tracker()
    x, (h, c) = spec["args"]
    mask = spec["kwargs"]["mask"]
    batch, steps = Dim("batch", min=1, max=8), Dim("steps", min=2, max=16)
    collection = ShapesCollection()
    collection[x], collection[mask] = {0: batch, 1: steps}, {0: batch, 1: steps}
    collection[h], collection[c] = {0: batch}, {0: batch}
    spec["dynamic_shapes"] = collection
    by_collection = flatten_spec(spec).dynamic_shapes
    by_dict = flatten_spec(doctor_specs.tracker()).dynamic_shapes

    def described(shapes):
        return {name: {axis: (d.__name__, d.min, d.max) for axis, d in axes.items()} for name, axes in shapes.items()}

    assert described(by_collection) == described(by_dict)
    assert by_collection["x"][0] is by_collection["state_1"][0]


def test_a_loaded_pt2s_module_is_examined_as_exported(tmp_path, monkeypatch, capsys):
    """The deployment side has the training job's .pt2, not its model class: a --spec that loads it and returns
    ExportedProgram.module() (whose eval() torch 2.13 refuses) is examined, its dict input flattened as exported."""
    from torch.export import Dim

    from helpers import course

    inputs = course.lesson(16)
    batch = inputs.loader_batch()
    rows = Dim("rows", min=1, max=8)
    spec = {"batch": {"noise": {0: rows}, "signal": {0: rows}}}
    torch.export.save(torch.export.export(inputs.Denoise(), (batch,), dynamic_shapes=spec), tmp_path / "denoise.pt2")
    torch.save(batch, tmp_path / "batch.pt")
    (tmp_path / "deploy.py").write_text(
        "import torch\nfrom torch.export import Dim\n\n\ndef spec():\n"
        "    rows = Dim('rows', min=1, max=8)\n"
        "    return {'model': torch.export.load('denoise.pt2').module(), 'args': (torch.load('batch.pt'),),\n"
        "            'dynamic_shapes': {'batch': {'noise': {0: rows}, 'signal': {0: rows}}}}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotImplementedError):
        torch.export.load("denoise.pt2").module().eval()
    code = main(["--spec", "deploy.py:spec", "--json", str(tmp_path / "d.json"), "--quiet"])
    out, _ = capsys.readouterr()
    report = json.loads((tmp_path / "d.json").read_text())
    assert code == 0, out
    assert report["verdict"] == "pass" and "batch_noise" in out and "batch_signal" in out, out[:2000]
