# %% [markdown]
# # 11 · export doctor: the diagnosis workflow as a tool
#
# **What you will learn**
# - the workflow of the previous lessons as one command you can run on your own model and in an export CI job:
#   classify the error and find the line, fix, re-export, compare with eager on inputs that cover **both sides**
#   of every branch and **every bound** of every `Dim`, then check delegation and the memory plan;
# - how to read its report (verdict first, then the evidence) and what its exit statuses mean to CI;
# - the checks that catch lesson 08's regressions (`--min-delegated`, `--max-arena-bytes`), `--strict`, and the
#   outputs a CI system ingests (`--json`, `--junit`, a bundled program a device can verify);
# - the doctor on a model we did not write: BERT, with a dynamic sequence length;
# - what a parity check cannot see.
#
# Terms from lesson 00's glossary used here: input contract, `Dim`, guard, partitioner, delegate, memory plan.
#
# The doctor is `python -m helpers.doctor` (the package `helpers/doctor/`). It calls the library functions you
# have used by hand: `torch.export` → lowering and loading the `.pte` → `probe_inputs` → `compare` → delegation
# (with the partitioner's own reasons) and `planned_memory_bytes()`. Everything below runs the real exporter and
# the real ExecuTorch runtime.

# %%
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.export import Dim

import helpers
from helpers import doctor, exercises, interview, models, questions, zoo
from helpers.display import show_source
from helpers.lessons import doctor as lesson

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# `ShapeBranch` (lessons 01 and 07) normalises its input over time, but only when there is more than one frame:

# %%
show_source(models.ShapeBranch)

# %% [markdown]
# We export it with a dynamic number of frames, 1 to 32, and do the usual smoke test: the example through the
# `.pte`, next to eager PyTorch.

# %%
model = models.ShapeBranch()
frames = Dim("frames", min=1, max=32)
x = torch.randn(2, 8, 4)
art = helpers.lower(model, (x,), dynamic_shapes={"x": {1: frames}})
(out,) = art.run(x)
print("eager:", helpers.fmt(model(x)))
print(".pte: ", helpers.fmt(out))

# %% [markdown]
# Identical. The doctor runs the whole workflow on the same
# model, the same example and the same `Dim`. Predict its verdict:

# %%
questions.ask("11.smoke_vs_doctor")

# %%
report = doctor.examine(model, (x,), {"x": {1: frames}}, target="ShapeBranch, frames ∈ [1, 32]")
print(doctor.to_text(report))

# %% [markdown]
# Read it top-down, the way you would read a CI log:
#
# - **verdict** first, with the exit status: `1` means the model (or a check) failed. Here one probe *inside* the
#   contract gives another answer than eager: `frames = 1`, the `Dim`'s own minimum.
# - **stages**: export, lowering and loading passed; the comparison did not.
# - **contract**: what the `.pte` promises to accept, `frames∈[1,32]`. One frame is a legal input.
# - **parity**, grouped by what matters: failures inside the contract; inputs outside it that the runtime ran
#   anyway (a device would too); inputs outside it refused, by the runtime or on the host (counted apart).
#   Under it, **where each diverging probe first leaves eager**: its input run through every stage. Here the
#   exported program (`ExportedProgram.module()`, before any ExecuTorch code) already disagrees, so the export
#   itself recorded something else than eager computes; had only the delegated `.pte` disagreed, the model would
#   not be the cause.
# - **delegation** and **memory**: how much of the graph XNNPACK took, each declined operator with the
#   partitioner's own reason, and the arena the memory plan reserved for the largest allowed input.
#
# ## Why it happens
#
# Export traced `forward()` once with a *symbolic* number of frames. To evaluate `x.shape[1] > 1` it leaned on
# the assumption it makes for every dynamic size (lesson 07): not 0, not 1. So the comparison came out `True`,
# the normalising branch was recorded with **no guard**, and the recorded range still starts at 1. One sample
# (8 frames) cannot show it; the doctor's probes visit every `Dim` at its min, middle and max and one step
# beyond each, plus values of both signs, zeros and extremes:

# %%
probes = helpers.probe_inputs((x,), {"x": {1: frames}}, contract=art.input_contract())
print(", ".join(p.label for p in probes))

# %% [markdown]
# ## The fixes: the workflow, step by step
#
# ### Step 1 · read the error, classify it, find the line
#
# A model that does not export is the *good* case: you learn it on the build machine. The doctor reads the error
# the way lesson 02 taught: which **kind** (a data-dependent guard, a constraint on a dynamic size, an unsupported
# operator), at which **stage** (export, lowering, loading) and, where torch says, the **line**. The broken models
# of the collection, each examined with the command-line arguments you would type:

# %%
gallery = lesson.gallery_reports()
for name, r in gallery.items():
    d = r.diagnosis
    if not d.ok:
        print(f"{name:<40} {d.kind:<21} {d.stage:<7} {d.source_line or d.operator or d.summary}")

# %% [markdown]
# Each kind has its own fix; the full report of one of them says which, with the source location:

# %%
print(doctor.to_text(gallery["ScaleOrShift · if on a tensor's value"]))

# %% [markdown]
# ### Step 2 · semantic or incidental?
#
# `ScaleOrShift` picks one of two layers from the data: that decision **is** the model (semantic): keep it as
# `torch.cond`, as `torch.where`, or hoist it into the app. `AssertsFinite` has a debug check; that branch is
# **incidental**, so the fix keeps it out of the export path (a constructor flag, `--arg check=False`):

# %%
show_source(lesson.AssertsFinite)

# %%
for name in ("AssertsFinite · debug check in forward()", "AssertsFinite · check=False (fixed)",
             "ScaleOrShiftCond · torch.cond (fixed)", "ScaleOrShiftWhere · torch.where (fixed)"):
    print(f"{name:<42} {gallery[name].verdict.upper():<5} {gallery[name].headline}")

# %% [markdown]
# ### Step 3 · re-export and diff against eager on both sides of the original branch
#
# A fixed export is a claim, and one input does not prove it. Count which side of `x.sum() > 0` each probe inside
# the contract took, for the `torch.where` fix:

# %%
where_report = gallery["ScaleOrShiftWhere · torch.where (fixed)"]
sides = {"x.sum() > 0": 0, "x.sum() <= 0": 0}
for row, probe in zip(where_report.parity.rows, where_report.probes):
    if row.within_contract:
        sides["x.sum() > 0" if float(probe.args[0].sum()) > 0 else "x.sum() <= 0"] += 1
print(sides, "→ all match eager:", where_report.parity.ok_within_contract)

# %% [markdown]
# ### Step 4 · check how much of the graph still lands on the delegate
#
# Both fixes are correct; they do not put the same share of the graph on the delegate. The report lists each
# operator left on portable kernels with the reason, in the partitioner's own words where it gave one:

# %%
for name in ("ScaleOrShiftCond · torch.cond (fixed)", "ScaleOrShiftWhere · torch.where (fixed)"):
    print(f"{name}: {gallery[name].delegation.summary()}")
    for op, why in gallery[name].delegation.reasons().items():
        print(f"    {op}: {'; '.join(why)}")

# %% [markdown]
# ### Step 5 · for a size trap, fix the contract, then guard it on the host
#
# Back to `ShapeBranch`. One frame cannot be normalised over time, so the honest contract starts at 2. The doctor
# now passes, and still reports that the device would run one frame (and return NaN): the runtime does not check
# `min`.

# %%
fixed = gallery["ShapeBranch · frames ∈ [2, 32] (fixed)"]
print(doctor.to_text(fixed).split("\n4. delegation")[0])

# %% [markdown]
# So the app checks inputs before the device does. `PteArtifact.run` is that host-side check:

# %%
fixed_art = fixed.diagnosis.artifact
err = helpers.show_error(fixed_art.run, torch.randn(2, 1, 4))

# %% [markdown]
# ## The command, for your CI
#
# Everything above is also a shell command. Exit status **0**: pass. **1**: the model does not export, lower or
# load, a probe inside the contract does not match, or a check you asked for failed. **2**: bad arguments (one
# line on stderr). **3**: the doctor itself failed (an internal error, never reported as the model's; rerun with
# `--traceback`). The report goes to stdout, progress to stderr.

# %%
print(lesson.command("ShapeBranch · frames ∈ [1, 32]"))

# %% [markdown]
# Run it for real (a new Python process: the imports take a few seconds), with a JSON and a JUnit report, plus one
# call with a typo in `--dim`, which gets one line and exit status 2:

# %%
workdir = Path(tempfile.mkdtemp(prefix="doctor-"))
run = [sys.executable, "-m", "helpers.doctor", *lesson.CASES["ShapeBranch · frames ∈ [1, 32]"].argv, "--quiet",
       "--json", str(workdir / "doctor.json"), "--junit", str(workdir / "doctor.xml")]
typo = [sys.executable, "-m", "helpers.doctor", "helpers.models:ShapeBranch", "--example", "2x8x4",
        "--dim", "x:1:frames:1"]
jobs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for cmd in (run, typo)]
(cli_out, cli_err), (typo_out, typo_err) = (job.communicate() for job in jobs)
print(f"exit {jobs[0].returncode}:", "\n".join(cli_out.splitlines()[:2]))
print(f"exit {jobs[1].returncode}:", typo_err.strip().splitlines()[-1])

# %% [markdown]
# The JSON carries the same verdict, every probe and every check, in a stable schema a CI system can read:

# %%
doc = json.loads((workdir / "doctor.json").read_text())
print({k: doc[k] for k in ("schema_version", "verdict", "exit_status")})
print("stages:", ", ".join(f"{s['name']} {s['status']}" for s in doc["stages"]))
print("counts:", doc["counts"])
print("first failing probe:", next(p for p in doc["probes"] if p["failure"])["label"])

# %% [markdown]
# and the JUnit file has one test case per probe, the failures being the probes inside the contract that did not
# match (a CI system shows them like failed unit tests):

# %%
xml = (workdir / "doctor.xml").read_text()
suite = next(line.strip() for line in xml.splitlines() if line.strip().startswith("<testsuite "))
print(re.sub(r' time="[^"]*"', "", suite))  # (the time it took is in the file too)
print(f"{xml.count('<testcase')} test cases, {xml.count('<failure')} failure(s)")

# %% [markdown]
# ### Gates beyond parity
#
# Lesson 08's segmenter, with its height and width dynamic. `--min-delegated 100` sets the share of operators that
# must run on XNNPACK: all of them. Predict the verdict:

# %%
questions.ask("11.segmenter_min_delegated")

# %%
segmenter = lesson.report_for(["helpers.lessons.shapes:TinySegmenter", "--example", "1x3x64x64",
                               "--dim", "x:2:height:32:128", "--dim", "x:3:width:32:128",
                               "--min-delegated", "100", "--max-arena-bytes", "300000"])
for check in segmenter.checks:
    print(f"{'✓' if check.passed else '✗'} {check.name}: {check.message}")

# %% [markdown]
# `--max-arena-bytes` gates the memory plan the same way (lesson 08: the arena grows with the `Dim`'s max), and
# `--strict` also fails a `Dim` without a max (ExecuTorch then plans for the example's size, so a longer input is
# rejected in production) and inputs outside the contract that the runtime runs silently.
#
# ### A program a device can verify
#
# `--bundle FILE.bpte` writes an ExecuTorch *BundledProgram*: the exact program examined, with the probes inside
# the contract and eager's outputs as expectations. The device (or the Python bindings) runs each test case and
# compares. The doctor loads the bundle back and verifies every case before it reports:

# %%
bundled = lesson.report_for(["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                             "--dim", "ids:1:seq:2:64", "--dim", "mask:1:seq:2:64",
                             "--bundle", str(workdir / "token_pool.bpte")])
print(f"{bundled.verdict}: {len(bundled.bundle.verified)} test cases verified in the runtime, "
      f"{len(bundled.bundle.failed)} failed, {bundled.bundle.nbytes:,} bytes")

# %% [markdown]
# ## Your own model: a real text model, with a dynamic sequence length
#
# `helpers.zoo` builds well-known architectures from small configs (random weights, nothing downloaded). BERT's
# encoder takes token ids and an attention mask of the same length; a text app sends anything from a couple of
# tokens to 64. The command, then the doctor on it:

# %%
bert = zoo.ZOO["bert"]
print(bert.command())
prepared = bert.prepared()
bert_report = doctor.examine(prepared.model, prepared.example_args, prepared.dynamic_shapes, target="BERT (zoo)")
print(f"verdict: {bert_report.verdict} — {bert_report.headline}")
print(f"contract: {bert_report.contract.signature()}")
print(f"parity: {bert_report.parity.summary()}")
print(f"delegation: {bert_report.delegation.summary()}")
for reason, ops in lesson.declined_by_reason(bert_report.delegation).items():
    print(f"  {reason}: {', '.join(ops)}")

# %% [markdown]
# A pass, on a model we did not write: every probe inside the contract matches, and the two inputs share one
# `Dim` (`seq`). "Pass" is about parity only: no delegation threshold was asked for, so 37 % of the nodes on
# XNNPACK, in 19 separate delegate calls with portable kernels between them, does not fail it (`--min-delegated`
# would). The delegation lines say why the rest stays on portable kernels: operators XNNPACK has no rule for, and
# "invalid dtype", the partitioner's own words for a check on each node's arguments that declines integer tensors
# and any argument that is not a tensor at all. Which of those declines does the dynamic axis cause? The same
# BERT exported with its 16 tokens fixed:

# %%
bert_static = helpers.lower(prepared.model, prepared.example_args)
print("static: ", bert_static.delegation().summary())
print("dynamic:", bert_report.delegation.summary())
changed = {op: (bert_static.delegation().by_op()[op], counts) for op, counts in bert_report.delegation.by_op().items()
           if bert_static.delegation().by_op().get(op) != counts}
for op, (static_counts, dynamic_counts) in changed.items():
    print(f"  {op}: (delegated, portable) static {static_counts} → dynamic {dynamic_counts}")

# %% [markdown]
# One operator makes the difference: `view_copy`. With a dynamic sequence its target shape holds the symbolic
# length, an argument that is not a tensor, so XNNPACK declines every reshape, and the delegated graph breaks into
# more, smaller pieces. That is the delegation the dynamic axis costs here. The other "invalid dtype" operators
# (`slice_copy`, `unsqueeze_copy`, the dtype conversion) are declined in the static export too: their inputs are
# integer tensors (token positions and the attention mask).
#
# Not every architecture passes. The zoo's recurrent tagger, a `torch.nn.GRU` over frames, with a dynamic number of
# frames:

# %%
gru_entry = zoo.ZOO["gru"]
show_source(zoo.RecurrentTagger)

# %%
gru_prepared = gru_entry.prepared()
gru_report = doctor.examine(gru_prepared.model, gru_prepared.example_args, gru_prepared.dynamic_shapes,
                            target="GRU tagger (zoo)")
print(doctor.to_text(gru_report).split("next steps:")[0].strip())

# %% [markdown]
# The model's problem, reported as the model's, with torch's own suggested fix: a fixed number of frames. The
# GRU's loop over time is unrolled while export traces it, so the length is specialized.
#
# ### ✏️ Exercise 11.gru_step: stream it
#
# A fixed length does not suit a streaming app, which receives one frame at a time anyway. Export **one step**
# of the recurrence, `step(x_t, h) -> (y_t, h_next)`, and let the app loop, carrying the hidden state from call
# to call. This is the app's loop (the check uses it):

# %%
from helpers import course

stream = course.lesson(11).stream  # this lesson's own code: helpers/lessons/11_export_doctor.py
show_source(stream)

# %% [markdown]
# Write the step model in the cell below (same layers as `RecurrentTagger`: subclass it and change `forward()`).
# The check exports and lowers your step, runs the app's loop over its `.pte` for sequences of 1 to 40 frames, and
# compares with the whole-sequence model in eager mode.

# %%
# ✏️ Exercise 11.gru_step — edit this cell, then run the check below.
from helpers.zoo import RecurrentTagger


class TaggerStep(RecurrentTagger):
    def forward(self, x_t, h):
        # x_t: one frame [batch, 8]; h: the state before it [1, batch, 16] → (y_t [batch, 3], the next state)
        out, _ = self.rnn(x_t.unsqueeze(1))
        return self.head(out[:, 0]), h


answer = TaggerStep()

# %%
grade = exercises.check("11.gru_step", answer)

# %% [markdown]
# ## Try it: the report as a widget
#
# Pick a model. Every report was computed above from cached programs, so switching is instant. The probes table
# is colour-coded: green matches, red diverges inside the contract, orange is refused inside it, purple ran
# outside the contract anyway, grey was refused outside it (as it should be).

# %%
explorer, interactions = lesson.widget_demo()
explorer

# %% [markdown]
# ### Yours, in a cell
#
# Define a model in the cell below, pick an example and `dynamic_shapes`, and add its report to the widget. As
# given, it zeroes a batch of one (`if x.shape[0] == 1`); change the `if`, the `Dim`, or the operators, then run
# the cell again.

# %%
class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        with models.seeded(0):
            self.proj = nn.Linear(4, 4)

    def forward(self, x):
        y = self.proj(x)
        if x.shape[0] == 1:  # a batch of one is treated differently
            y = y * 0
        return torch.relu(y)


mine = doctor.examine(MyModel().eval(), (torch.randn(4, 4),), {"x": {0: Dim("batch", min=1, max=8)}},
                      target="MyModel")
explorer.add("MyModel (defined in this notebook)", mine)
print(explorer.set(model="MyModel (defined in this notebook)").headline)

# %% [markdown]
# ## What the doctor compares against
#
# Two predictions about models from lesson 01:

# %%
questions.ask("11.config_branch")

# %%
questions.ask("11.batch_loop_static")

# %% [markdown]
# ## Takeaways
#
# - The workflow is mechanical enough to automate: classify the export error and locate it; after a fix, compare
#   with eager on probes that cover both sides of every branch and every bound; measure delegation and the arena.
#   `python -m helpers.doctor` does all of it and exits 0 / 1 / 2 / 3 for CI, with JSON and JUnit reports.
# - Fail CI on what is inside the contract; *read* what is outside it. Refused inputs are the device doing its job;
#   inputs the device runs silently (below a `Dim`'s min, within the arena) need a host-side check (`--strict`
#   fails them).
# - Gate on delegation (`--min-delegated`) and memory (`--max-arena-bytes`): a correct fix can still move the
#   graph off the delegate or grow the arena.
# - A passing doctor compares against the model you give it: flags baked into both sides, and decisions the app
#   will take later, are yours to export separately.
# - Recurrent models specialize their length: ship a step and loop in the app.
#
# ## Interview questions
#
# Answer each aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("11.export_ci")

# %%
interview.ask("11.parity_blind_spots")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the fixed models pass, the command agrees with the notebook, the real models reach their verdicts

# %% tags=["ci-check"] jupyter={"source_hidden": true}
for name, r in lesson.gallery_reports().items():
    if "(fixed)" in name:
        assert r.passed and r.parity.ok_within_contract, r
        assert sum(row.within_contract for row in r.parity.rows) >= 9, r
assert not report.passed and fixed.passed and not mine.passed
assert cli_out.rstrip("\n") == doctor.to_text(gallery["ShapeBranch · frames ∈ [1, 32]"])
assert (jobs[0].returncode, jobs[1].returncode, doc["verdict"], doc["exit_status"]) == (1, 2, "fail", 1)
assert xml.count("<failure") >= 1 and not segmenter.passed and bundled.passed and not bundled.bundle.failed
assert any("upsample" in line for line in segmenter.declined_lines())
assert bert_report.passed and not gru_report.passed and gru_report.diagnosis.suggested_fixes
assert list(changed) == ["aten_view_copy_default"] and changed["aten_view_copy_default"][0][1] == 0  # static: all on XNNPACK
assert changed["aten_view_copy_default"][1][0] == 0  # dynamic: none
assert bert_static.delegation().delegated_subgraphs < bert_report.delegation.delegated_subgraphs
assert round(100 * bert_report.delegation.coverage) == 37 and bert_report.delegation.delegated_subgraphs == 19
print("fixed models pass; CLI = notebook; BERT passes, the GRU's length is specialized")
