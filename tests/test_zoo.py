"""The zoo (helpers.zoo): real architectures at toy size through helpers.lower + helpers.compare, and through
the export doctor with dynamic axes, with the verdict each one must reach.

A genuine pass passes (exit 0). A genuine export problem (ViT's image size, the GRU's sequence length) is
the model's: exit 1, its kind and torch's suggested fix in the report, never an internal error. One
subprocess runs the command on BERT; it starts with the module, so its imports overlap the other tests.
Each model is built, exported and lowered once per module (module-scoped caches); lowered programs come
from the shared cache when it is warm.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers import doctor
from helpers.zoo import ZOO

ROOT = Path(__file__).resolve().parent.parent
# architecture → (entry lowered and compared, entry examined by the doctor with dynamic axes)
ARCHITECTURES = {
    "BERT": ("bert", "bert"),
    "GPT-2": ("gpt2", "gpt2"),
    "ResNet": ("resnet", "resnet"),
    "ViT": ("vit_static", "vit"),
    "ConvNeXt": ("convnext", "convnext"),
    "GRU": ("gru_batch", "gru"),
    "Llama": ("llama", "llama"),
}
SUBPROCESS_ENTRY = "bert"


@pytest.fixture(scope="module", autouse=True)
def command_run(tmp_path_factory):
    """``python -m helpers.doctor helpers.zoo:bert …`` in a subprocess, started before the other tests."""
    tmp = tmp_path_factory.mktemp("zoo")
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": os.environ.get("EXPORTLAB_CACHE_DIR",
                                                                 str(ROOT / ".cache" / "exportlab"))}
    argv = ZOO[SUBPROCESS_ENTRY].argv("--json", str(tmp / "bert.json"), "--junit", str(tmp / "bert.xml"))
    proc = subprocess.Popen([sys.executable, "-m", "helpers.doctor", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield proc, tmp
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


class _Results:
    """Each zoo entry prepared, lowered, compared and examined at most once per module."""

    def __init__(self) -> None:
        self.prepared: dict[str, doctor.Prepared] = {}
        self.lowered: dict[str, tuple[helpers.PteArtifact, helpers.ParityReport]] = {}
        self.reports: dict[str, doctor.DoctorReport] = {}

    def prepare(self, name: str) -> doctor.Prepared:
        if name not in self.prepared:
            self.prepared[name] = ZOO[name].prepared()
        return self.prepared[name]

    def lower_and_compare(self, name: str) -> tuple[helpers.PteArtifact, helpers.ParityReport]:
        if name not in self.lowered:
            p = self.prepare(name)
            art = helpers.lower(p.model, p.example_args, dynamic_shapes=p.dynamic_shapes, strict=p.strict_export)
            probes = helpers.probe_inputs(p.example_args, p.dynamic_shapes, model=p.model,
                                          contract=art.input_contract())
            # each probe from the model's initial state on both sides (the Llama's cache is state the program keeps)
            self.lowered[name] = (art, helpers.compare(p.model, art, probes, fresh_state=True))
        return self.lowered[name]

    def examine(self, name: str) -> doctor.DoctorReport:
        if name not in self.reports:
            p = self.prepare(name)
            self.reports[name] = doctor.examine(p.model, p.example_args, p.dynamic_shapes, target=p.target,
                                                strict_export=p.strict_export, value_ranges=p.value_ranges)
        return self.reports[name]


@pytest.fixture(scope="module")
def zoo_results() -> _Results:
    return _Results()


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_lower_and_compare(zoo_results, architecture):
    name = ARCHITECTURES[architecture][0]
    art, parity = zoo_results.lower_and_compare(name)
    inside = [r for r in parity.rows if r.within_contract]
    assert len(inside) >= 9 and parity.ok_within_contract, parity.table()
    assert art.delegation().delegated_nodes > 0  # XNNPACK took part of every architecture


@pytest.mark.parametrize("architecture", list(ARCHITECTURES))
def test_doctor_with_dynamic_axes(zoo_results, architecture):
    lowered, name = ARCHITECTURES[architecture]
    entry = ZOO[name]
    assert entry.dims or zoo_results.prepare(name).dynamic_shapes, "the doctor is run with dynamic axes"
    report = zoo_results.examine(name)
    text = doctor.to_text(report)
    assert report.internal_error is None and "internal error" not in text
    assert report.verdict == entry.expected, text
    assert report.exit_code == (0 if entry.expected == "pass" else 1)
    if entry.expected == "pass":
        art, _ = zoo_results.lower_and_compare(lowered)
        assert report.diagnosis.artifact.key == art.key  # the very program helpers.lower built
        assert report.parity.ok_within_contract and not report.failing_rows
        return
    d = report.diagnosis
    assert (d.kind, d.stage) == (entry.kind, "export")
    assert d.suggested_fixes == list(entry.torch_suggests)
    for fix in entry.torch_suggests:
        assert f"torch suggests: {fix}" in text
    assert text.splitlines()[1] == "verdict: FAIL (exit 1) — the export failed: constraint violation (stage: export)"


def test_the_fix_torch_suggests_for_vit_passes(zoo_results):
    """ViT: torch suggests height = width = 32; the static entry is that fix, and the doctor passes it."""
    assert ZOO["vit"].torch_suggests == ("height = 32", "width = 32")
    report = zoo_results.examine("vit_static")
    assert report.passed and report.exit_code == 0


def test_the_llama_is_examined_with_its_cache_and_the_values_the_app_sends(zoo_results):
    """The zoo's Llama: the doctor finds the cache buffers the program writes, probes token ids over the vocabulary
    (both ends included) and positions as runs of consecutive slots of the whole cache (the first slot, the last, and
    in between), and calls the matching probes again one after another."""
    from helpers.zoo import CACHE_SLOTS, LAYERS, VOCAB

    report = zoo_results.examine("llama")
    assert report.value_ranges == {"input_ids": (0, VOCAB - 1), "cache_position": (0, CACHE_SLOTS - 1)}
    assert isinstance(report.value_ranges["cache_position"], helpers.PositionRange)
    assert len([b for b in report.stateful if "key_cache" in b or "value_cache" in b]) == 2 * LAYERS, report.stateful
    labels = [p.label for p in report.probes]
    assert f"values: input_ids at its highest, {VOCAB - 1}" in labels
    assert f"values: cache_position up to its highest, {CACHE_SLOTS - 1}" in labels
    runs = [([int(v) for v in p.args[1]], row) for p, row in zip(report.probes, report.parity.rows) if p.args[1].numel()]
    assert all(run == list(range(run[0], run[0] + len(run))) for run, _ in runs), runs
    inside = [run for run, row in runs if row.within_contract]
    assert {run[-1] for run in inside} >= {CACHE_SLOTS - 1} and min(run[0] for run in inside) == 0
    assert all(run[-1] <= CACHE_SLOTS - 1 for run in inside), inside
    assert report.passed, report.headline
    assert report.sequence is not None and len(report.sequence.rows) >= 9
    assert {r.status for r in report.sequence.rows} == {"match"}, report.sequence.table()
    assert ZOO["llama"].command().endswith(f"--positions cache_position=0:{CACHE_SLOTS - 1}")


def test_integer_inputs_take_the_vocabulary_of_the_embedding_that_reads_them(zoo_results):
    from helpers.doctor.cli import _smallest_vocabulary

    bert = zoo_results.prepare("bert")
    sizes = sorted(m.num_embeddings for m in bert.model.modules() if hasattr(m, "num_embeddings"))
    assert sizes == [2, 64, 99]  # token types, positions, words: the smallest would be the wrong bound
    assert _smallest_vocabulary(bert.model) == 2  # what the old rule picked
    ids, mask = bert.example_args
    assert (int(ids.min()), int(ids.max())) == (0, 98)  # every word id, up to the vocabulary's last
    assert set(mask.unique().tolist()) == {0, 1}  # a mask (no embedding reads it) takes 0 and 1
    gpt2 = zoo_results.prepare("gpt2")
    assert sorted(m.num_embeddings for m in gpt2.model.modules() if hasattr(m, "num_embeddings")) == [64, 99]
    assert int(gpt2.example_args[0].max()) == 98
    # an explicit bound still wins
    ids = ZOO["gpt2"].prepared("--int-high", "7").example_args[0]
    assert int(ids.max()) == 6


def test_the_command_on_a_real_model(command_run, zoo_results):
    proc, tmp = command_run
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    assert out.rstrip("\n") == doctor.to_text(zoo_results.examine(SUBPROCESS_ENTRY))  # the command prints what examine finds
    data = json.loads((tmp / "bert.json").read_text())
    assert (data["verdict"], data["exit_status"]) == ("pass", 0)
    assert data["contract"]["signature"] == ("forward(input_ids: int64[1, seq∈[2,64]], "
                                             "attention_mask: int64[1, seq∈[2,64]])")
    assert err and all(line.startswith("[doctor ") for line in err.splitlines()), err  # progress only, no noise

