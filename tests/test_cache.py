"""The cache of lowered programs is sound: a stored program is served only when a fresh export would
lower to the same program.

The key is computed from the exported program (graphs, recorded shapes, signature, ranges, weights,
constants), so every way a ``forward()`` can depend on Python state is covered by construction. These
tests change that state in each of those ways between two calls and check that the second program
follows eager PyTorch (and that an unchanged model is a cache hit, without the compiler).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch
from torch import nn
from torch.export import Dim

import helpers
from helpers import lowering
from helpers import models as M
from helpers.lowering import export_methods, forget_in_memory


def key_of(model, args, dynamic=None, backend="xnnpack") -> str:
    normalised, exported = export_methods({"forward": (model, args, dynamic)})
    return lowering._key(normalised, exported, backend, lowering.ProgramOptions())


def fresh_output(model, args):
    """Lower (cache or not) and run: what the library would show a learner."""
    (out,) = helpers.lower(model, args, backend="portable").run(*args)
    return out


def follows_eager(model, args) -> bool:
    with torch.no_grad():
        return torch.allclose(fresh_output(model, args), model(*args), atol=1e-5)


X = torch.arange(8, dtype=torch.float32).reshape(2, 4) / 8


# ----- the key ------------------------------------------------------------------------------------
def test_key_ignores_example_values_but_not_shapes_backend_bounds_names_or_scalars():
    model = M.ConfigBranch()
    base = key_of(model, (torch.randn(2, 4),))
    assert base == key_of(model, (torch.randn(2, 4),))  # values of a static example do not matter
    assert base != key_of(model, (torch.randn(3, 4),))
    assert base != key_of(model, (torch.randn(2, 4),), backend="portable")
    batch8, batch16 = Dim("batch", min=1, max=8), Dim("batch", min=1, max=16)
    assert key_of(model, (X,), {"x": {0: batch8}}) != key_of(model, (X,), {"x": {0: batch16}})
    # The user's Dim name is recorded in the input contract beside the program: part of the key.
    assert key_of(model, (X,), {"x": {0: batch8}}) != key_of(model, (X,), {"x": {0: Dim("rows", min=1, max=8)}})
    scalar = M.ScalarRepeat()
    assert key_of(scalar, (torch.ones(1, 4), 2)) != key_of(scalar, (torch.ones(1, 4), 3))


def test_an_axis_without_a_max_is_planned_from_the_example_so_its_size_is_in_the_key():
    """Memory planning gives a Dim without a max the example's size: two examples, two programs (the same
    graph and ranges; only the example differs). Found when lesson 07's exercise was served a 6-frame plan."""
    model = M.ConfigBranch()
    rows = {"x": {0: Dim("rows", min=1)}}
    small, large = torch.randn(3, 4), torch.randn(5, 4)
    assert key_of(model, (small,), rows) != key_of(model, (large,), rows)
    assert key_of(model, (small,), rows) == key_of(model, (torch.randn(3, 4),), rows)
    bounded = {"x": {0: Dim("rows", min=1, max=8)}}  # planned for the max whatever the example: one program
    assert key_of(model, (small,), bounded) == key_of(model, (large,), bounded)
    planned = [helpers.lower(model, (x,), dynamic_shapes=rows, backend="portable").runtime_input_shapes()[0]
               for x in (small, large)]
    assert planned == [(3, 4), (5, 4)]


@pytest.mark.parametrize("make_pair", [
    lambda: (M.ConfigBranch(seed=1), M.ConfigBranch(seed=2)),                       # weights
    lambda: (M.ConfigBranch(use_residual=True), M.ConfigBranch(use_residual=False)),  # a plain attribute
    lambda: (M.ScaleOrShiftCond(), M.ScaleOrShiftWhere()),                            # code, same weights
])
def test_key_follows_state_and_code(make_pair):
    a, b = make_pair()
    assert key_of(a, (X,)) != key_of(b, (X,))


# ----- Python state a forward() can read, changed between two calls --------------------------------
def _module_global_model():
    cfg = types.ModuleType("exportlab_test_cfg")
    cfg.TABLE = (2.0, 2.0)
    sys.modules[cfg.__name__] = cfg
    namespace: dict = {}
    exec(textwrap.dedent("""
        import torch
        import exportlab_test_cfg as cfg

        class ReadsTable(torch.nn.Module):
            def forward(self, x):
                return x * cfg.TABLE[1]
    """), namespace)
    return namespace["ReadsTable"](), cfg


def test_a_value_read_through_an_imported_module():
    model, cfg = _module_global_model()
    assert follows_eager(model, (X,))
    cfg.TABLE = (2.0, 7.0)  # another module's global, as a config file would change it
    assert follows_eager(model, (X,))


def test_globals_of_any_type():
    namespace: dict = {"SETTINGS": {"gain": 2.0}, "OFFSETS": torch.tensor([1.0, 2.0, 3.0, 4.0])}
    exec(textwrap.dedent("""
        import torch

        class ReadsGlobals(torch.nn.Module):
            def forward(self, x):
                return x * SETTINGS["gain"] + OFFSETS
    """), namespace)
    model = namespace["ReadsGlobals"]()
    assert follows_eager(model, (X,))
    namespace["SETTINGS"]["gain"] = 5.0  # a dict mutated in place
    assert follows_eager(model, (X,))
    namespace["OFFSETS"].mul_(-1)  # a global tensor edited in place
    assert follows_eager(model, (X,))


def test_a_closure():
    def make(scale):
        def scaled(x):
            return x * scale[0]
        return scaled

    scale = [3.0]

    class UsesClosure(nn.Module):
        def __init__(self):
            super().__init__()
            self.fn = make(scale)

        def forward(self, x):
            return self.fn(x) + 1

    model = UsesClosure()
    assert follows_eager(model, (X,))
    scale[0] = -4.0  # the closed-over list changes; the function object does not
    assert follows_eager(model, (X,))


def test_default_arguments_including_a_random_tensor():
    class OptionalInput(nn.Module):  # ExportDB's example: a tensor default, drawn once at definition
        def forward(self, x, y=torch.randn(2, 4)):  # noqa: B008 - the point: a default drawn once
            return x + y

    model = OptionalInput()
    assert follows_eager(model, (X,))
    OptionalInput.forward.__defaults__ = (torch.randn(2, 4),)
    assert follows_eager(model, (X,))


def test_a_class_from_any_namespace():
    class Scaled(nn.Module):
        factor = 2.0

        def forward(self, x):
            return x * self.factor

    Scaled.__module__ = "torch.nn.modules.not_really_torch"  # the old fingerprint skipped "torch.*" classes
    model = Scaled()
    assert follows_eager(model, (X,))
    Scaled.factor = 9.0
    assert follows_eager(model, (X,))


def test_a_model_edited_in_place_between_calls():
    model = M.ConfigBranch(seed=41)
    assert follows_eager(model, (X,))
    with torch.no_grad():
        model.proj.weight.add_(0.5)  # weights edited in place
    assert follows_eager(model, (X,))
    model.use_residual = not model.use_residual  # a flag flipped
    assert follows_eager(model, (X,))
    model.proj = nn.Linear(4, 4)  # a submodule replaced
    assert follows_eager(model, (X,))


def test_deep_and_cyclic_configs_do_not_recurse():
    class Config:
        pass

    config = Config()
    config.self = config  # a cycle
    deep: list = []
    node = deep
    for _ in range(5000):  # deeper than Python's recursion limit
        node.append([])
        node = node[0]
    config.deep = deep

    class Configured(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = config
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x)

    model = Configured().eval()
    assert follows_eager(model, (X,))


# ----- hits, and what a hit costs ---------------------------------------------------------------
def test_a_hit_exports_again_but_never_lowers_again(monkeypatch):
    model = M.ConfigBranch(seed=11)
    first = helpers.lower(model, (X,))
    assert helpers.lower(model, (X,)) is first  # in memory
    forget_in_memory()

    def no_build(*args, **kwargs):
        raise AssertionError("a cache hit must not lower again")

    monkeypatch.setattr(lowering, "_build", no_build)
    again = helpers.lower(model, (X,))  # from disk
    assert again.key == first.key and again is not first
    torch.testing.assert_close(again.run(X)[0], first.run(X)[0])


# ----- a lowering that fails, fails again without the compiler --------------------------------------
def _median_center():
    from helpers.lessons.control_flow import MedianCenter

    return MedianCenter(), (torch.ones(3, 4),)


def test_a_failed_lowering_is_replayed_from_the_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("EXPORTLAB_CACHE_DIR", str(tmp_path))
    model, args = _median_center()
    with pytest.raises(Exception) as first:
        helpers.lower(model, args)
    recorded = list(tmp_path.glob("*.failed.json"))
    assert len(recorded) == 1 and "not in Core ATen opset" in json.loads(recorded[0].read_text())["message"]
    assert "Traceback" in json.loads(recorded[0].read_text())["traceback"]

    def no_build(*args, **kwargs):
        raise AssertionError("a recorded failure must not lower again")

    monkeypatch.setattr(lowering, "_build", no_build)
    with pytest.raises(Exception) as again:
        helpers.lower(model, args)
    assert type(again.value) is type(first.value) and str(again.value) == str(first.value)
    assert lowering.stage_of(again.value) == "lower"
    assert any("replayed from the cache" in note for note in again.value.__notes__)
    from helpers.diagnose import diagnose_exception

    assert diagnose_exception(again.value, "lower").summary == diagnose_exception(first.value, "lower").summary


def test_a_load_refused_for_a_missing_kernel_is_replayed(monkeypatch, tmp_path):
    from helpers.lessons.control_flow import SortValues

    monkeypatch.setenv("EXPORTLAB_CACHE_DIR", str(tmp_path))
    args = (torch.arange(5.0),)
    with pytest.raises(helpers.RuntimeRejectedError) as first:
        helpers.lower(SortValues(), args, backend="portable")
    assert lowering._OPERATOR_MISSING.search(first.value.error)  # OperatorMissing: no kernel for aten.sort here
    monkeypatch.setattr(lowering, "_build", lambda *a, **k: (_ for _ in ()).throw(AssertionError("built again")))
    with pytest.raises(helpers.RuntimeRejectedError) as again:
        helpers.lower(SortValues(), args, backend="portable")
    assert str(again.value) == str(first.value) and again.value.reason == first.value.reason
    assert lowering.stage_of(again.value) == "load" and again.value.log == first.value.log


class _TwoArguments(RuntimeError):
    def __init__(self, what: str, why: str):
        super().__init__(f"{what}: {why}")


@pytest.mark.parametrize("raised, stage", [
    (_TwoArguments("a", "b"), "lower"),  # cannot be raised again from its message alone
    (MemoryError("out of memory"), "lower"),  # about the machine, not the program
    (RuntimeError("a kernel this runtime lacks"), "load"),  # a load error other than the runtime's refusal
    (helpers.RuntimeRejectedError("forward", "load_method failed with error 0x21", []), "load"),  # out of memory
    (RuntimeError("a bug in the library"), None),  # no stage: the library's own failure
])
def test_failures_that_are_not_recorded(monkeypatch, tmp_path, raised, stage):
    monkeypatch.setenv("EXPORTLAB_CACHE_DIR", str(tmp_path))

    def failing_build(*args, **kwargs):
        if stage is not None:
            setattr(raised, lowering._STAGE_ATTRIBUTE, stage)
        raise raised

    monkeypatch.setattr(lowering, "_build", failing_build)
    with pytest.raises(type(raised)):
        helpers.lower(M.ConfigBranch(seed=12), (X,))
    assert not list(tmp_path.glob("*.failed.json"))


def test_an_unreadable_failure_record_is_deleted_and_the_program_built(monkeypatch, tmp_path):
    monkeypatch.setenv("EXPORTLAB_CACHE_DIR", str(tmp_path))
    model = M.ConfigBranch(seed=13)
    key = key_of(model, (X,))
    (tmp_path / f"{key}.failed.json").write_text("{not json")
    artifact = helpers.lower(model, (X,), backend="xnnpack")
    assert artifact.key == key and not (tmp_path / f"{key}.failed.json").exists()


_PROCESS = r"""
import json, sys
import torch
import helpers
from helpers import lowering

helpers.set_progress(False)
builds = []
real_build = lowering._build
def counting_build(*args, **kwargs):
    builds.append(1)
    return real_build(*args, **kwargs)
lowering._build = counting_build

sys.path.insert(0, sys.argv[1])
import usermodels

x = torch.ones(2, 4)
result, artifacts = {}, {}
for name in sys.argv[2:]:
    model = getattr(usermodels, name)()
    before = len(builds)
    artifact = artifacts[name] = helpers.lower(model, (x,), backend="portable")  # portable: the fastest build
    (out,) = artifact.run(x)
    with torch.no_grad():
        result[name] = {"matches": bool(torch.allclose(out, model(x), atol=1e-5)), "built": len(builds) > before}
# what the lessons read from the serialized program and from the runtime's view of it (the first model's)
from helpers.lessons import shapes
artifact = artifacts[sys.argv[2]]
result["read back"] = {"instructions": [kind for kind, _ in artifact.instructions()],
                       "planned tensors": len(artifact.memory_plan()),
                       "plan columns": list(artifact.memory_plan()[0]),  # a table's column order, too
                       "signature": [list(m.input_tensor_meta(0).sizes())
                                     for m in shapes.read_signature(artifact.pte_bytes).values()]}
result["compiler imported"] = "executorch.exir" in sys.modules
print(json.dumps(result))
"""

_USER_MODELS = """
import torch
import userconfig


class ReadsConfig(torch.nn.Module):
    def forward(self, x):
        return x * userconfig.TABLE[1]


class OptionalInput(torch.nn.Module):
    def forward(self, x, y=torch.randn(2, 4)):  # a new random default in every process
        return x + y
"""


def test_across_processes_an_edited_module_and_a_random_default_are_rebuilt(tmp_path):
    """The two stale-cache bugs of the old fingerprint, as a user meets them: run, edit, run again."""
    (tmp_path / "usermodels.py").write_text(_USER_MODELS)
    config = tmp_path / "userconfig.py"
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": str(tmp_path / "cache")}

    def run(*names):
        done = subprocess.run([sys.executable, "-c", _PROCESS, str(tmp_path), *names], env=env, text=True,
                              capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    config.write_text("TABLE = (2, 2)\n")
    first = run("ReadsConfig", "OptionalInput")
    assert first["ReadsConfig"] == {"matches": True, "built": True}
    assert first["OptionalInput"] == {"matches": True, "built": True}

    config.write_text("TABLE = (2, 7)\n")  # the user edits the config between two runs
    second = run("ReadsConfig", "OptionalInput")
    assert second["ReadsConfig"] == {"matches": True, "built": True}, "a stale program was served"
    assert second["OptionalInput"] == {"matches": True, "built": True}, "the previous process's default was baked"

    third = run("ReadsConfig")  # nothing changed: a hit, loaded and read without importing the compiler
    assert third["read back"] == second["read back"], "the cached entry reads back a different program"
    assert set(third["read back"]["instructions"]) == {"KernelCall"}  # portable kernels only: no delegate, no jump
    assert third["read back"]["signature"] == [[2, 4]]
    assert third["read back"]["planned tensors"] >= 2  # the input and the output
    assert {k: v for k, v in third.items() if k != "read back"} == {
        "ReadsConfig": {"matches": True, "built": False}, "compiler imported": False}
