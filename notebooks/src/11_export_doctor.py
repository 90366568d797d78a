# %% [markdown]
# # 11 · export doctor: the diagnosis workflow as a tool
#
# **What you will learn**
# - the workflow of the previous lessons as one command you can run on your own model and put in
#   an export CI job: read the error and classify it, find the offending line, fix, re-export, compare
#   with eager on inputs that exercise **both sides** of every branch and **every bound** of every `Dim`,
#   then check how much of the graph the delegate still takes and how big the memory plan is;
# - how to read its report: verdict first, then the evidence (probes inside vs outside the input
#   contract, delegated coverage, arena bytes);
# - what exit codes 0 / 1 / 2 mean to CI, and what the doctor cannot see.
#
# The doctor is `helpers/doctor.py`. It calls the same library functions you have used by hand:
# `diagnose_export` → `lower` → `probe_inputs` → `compare` → `delegation()` and `planned_memory_bytes()`
# → `input_contract()`. Everything below runs the real exporter and the real ExecuTorch runtime.

# %%
import subprocess
import sys

import torch
from torch import nn
from torch.export import Dim

import helpers
from helpers import doctor, models
from helpers.display import check_prediction
from helpers.lessons import doctor as lesson
from helpers.plots import delegation_bars
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# `ShapeBranch` normalises its input over time, but only when there is more than one frame:
# `if x.shape[1] > 1`. We export it with a dynamic number of frames, 1 to 32, and do the usual smoke
# test: the example through the `.pte`, next to eager PyTorch.

# %%
model = models.ShapeBranch()
frames = Dim("frames", min=1, max=32)
x = torch.randn(2, 8, 4)
art = helpers.lower(model, (x,), dynamic_shapes={"x": {1: frames}})
(out,) = art.run(x)
print("eager:", helpers.fmt(model(x)))
print(".pte: ", helpers.fmt(out))

# %% [markdown]
# Identical. A CI job that checks one sample ships this program. Now ask the doctor, which runs the
# whole workflow on the same model, the same example and the same `Dim`:

# %%
report = doctor.examine(model, (x,), {"x": {1: frames}}, target="ShapeBranch, frames ∈ [1, 32]")
print(report.to_text())

# %% [markdown]
# Read it top-down, the way you would read a CI log:
#
# - **verdict** first: `FAIL (exit 1)`, because one probe *inside* the contract gives another answer
#   than eager: `frames = 1`, the `Dim`'s own minimum. The `.pte` returns NaN there; eager does not.
# - **contract**: what the `.pte` promises to accept, `frames∈[1,32]`. One frame is a legal input.
# - **parity**, grouped by what matters: failures inside the contract, inputs outside it that the
#   runtime ran anyway (a device would too), and inputs outside it that were refused (expected).
# - **delegation** and **memory**: how much of the graph XNNPACK took, and the arena the memory plan
#   reserved for the largest allowed input.

# %% [markdown]
# ## Why it happens
#
# Export traced `forward()` once, with a *symbolic* number of frames. To evaluate `x.shape[1] > 1` it
# leaned on the assumption it makes for every dynamic size: not 0, not 1. So the comparison came out
# `True`, the normalising branch was recorded, and **no guard** was kept, while the recorded range
# still starts at 1. The graph has no `if` left in it: mean, std and divide always run.

# %%
print(art.graph())

# %% [markdown]
# With one frame, the standard deviation over a single value is NaN, so the device divides by NaN.
# ExecuTorch does not re-check anything about `min` either. A single sample (8 frames) cannot show
# this; the doctor's probes can, because `probe_inputs` visits every `Dim` at its min, middle and max
# and one step beyond each, plus values of both signs, zeros and extremes:

# %%
probes = helpers.probe_inputs((x,), {"x": {1: frames}}, contract=art.input_contract())
print(", ".join(p.label for p in probes))

# %% [markdown]
# ## The fixes: the workflow, step by step
#
# ### Step 1 · read the error, classify it, find the line
#
# A model that does not export is the *good* case: you learn it on the build machine. The doctor reads
# the error the way lesson 02 taught: which **kind** (a data-dependent guard, a constraint on a dynamic
# size, an unsupported operator), at which **stage** (export, lowering, loading) and, where torch says,
# the **line** in `forward()`. Here are the broken models of the collection, each examined with the same
# command-line arguments you would type:

# %%
gallery = lesson.gallery_reports()
for name, r in gallery.items():
    d = r.diagnosis
    if not d.ok:
        print(f"{name:<40} {d.kind:<21} {d.stage:<7} {d.source_line or d.operator or d.summary}")

# %% [markdown]
# Each kind has its own fix. The full report of one of them says which, and carries the source location:

# %%
print(gallery["ScaleOrShift · if on a tensor's value"].to_text())

# %% [markdown]
# ### Step 2 · is the branch semantic or incidental?
#
# `ScaleOrShift` picks one of two layers from the data: that decision **is** the model (semantic). Keep
# it, as `torch.cond` (both branches in the graph, the predicate evaluated at run time) or as
# `torch.where` (both sides computed, one selected), or hoist it into the app as two methods.
#
# `AssertsFinite` has a debug check, `if not torch.isfinite(x).all(): raise`. That branch is
# **incidental**: it is not part of what the model computes, so the fix is to keep it out of the export
# path (here a constructor flag, `--arg check=False`), not to turn it into a `torch.cond`.

# %%
for name in ("AssertsFinite · debug check in forward()", "AssertsFinite · check=False (fixed)",
             "ScaleOrShiftCond · torch.cond (fixed)", "ScaleOrShiftWhere · torch.where (fixed)"):
    print(f"{name:<42} {gallery[name].verdict.upper():<5} {gallery[name].headline}")

# %% [markdown]
# ### Step 3 · re-export and diff against eager on both sides of the original branch
#
# A fixed export is a claim, and one input does not prove it. The doctor's probes for the `torch.where`
# fix take the branch both ways: count which side of `x.sum() > 0` each probe inside the contract took.

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
# Both fixes are correct; they are not equally fast. XNNPACK does not lower anything inside a
# `torch.cond` branch, so the `cond` version runs entirely on portable kernels. The report measures it,
# because a delegation regression is invisible otherwise:

# %%
delegation_bars({"torch.cond fix": gallery["ScaleOrShiftCond · torch.cond (fixed)"].delegation,
                 "torch.where fix": gallery["ScaleOrShiftWhere · torch.where (fixed)"].delegation},
                title="ScaleOrShift, fixed two ways")

# %% [markdown]
# ### Step 5 · for a size trap, fix the contract, then guard it on the host
#
# Back to `ShapeBranch`. One frame cannot be normalised over time, so the honest contract starts at 2.
# The doctor now passes, and still reports that the device would run one frame (and return NaN): the
# runtime does not check `min`.

# %%
fixed = gallery["ShapeBranch · frames ∈ [2, 32] (fixed)"]
print(fixed.to_text().split("\n4. delegation")[0])

# %% [markdown]
# So the app checks inputs before the device does. `PteArtifact.run` is that host-side check:

# %%
fixed_art = fixed.diagnosis.artifact
err = helpers.show_error(fixed_art.run, torch.randn(2, 1, 4))

# %% [markdown]
# ### "Works in Python, rejects our camera frames"
#
# The same report answers the shape question of lessons 06–09. `TinyVision` exported at 64×64 passes (it
# is correct for what it accepts), and its "refused" rows are the field bug: every other resolution is
# rejected. The contract line is the diagnosis. Then choose: letterbox on the host and stay static, or
# declare a bounded resolution and pay for it in the arena.

# %%
for name in ("TinyVision · static 64×64", "TinyVision · h, w ∈ [32, 128]"):
    r = gallery[name]
    refused = [row.label for row in r.parity.rows if not row.within_contract and row.status == "rejected"]
    print(f"{name}\n  contract {r.contract.signature()}\n  delegated {r.delegation.coverage:.0%} · "
          f"arena {r.arena_bytes:,} bytes · refused: {', '.join(refused)}")

# %% [markdown]
# ## The command, for your CI
#
# Everything above is also a shell command. It exits with **0** when export succeeds and every probe
# inside the contract matches eager, **1** on a failed export or a divergence, **2** on bad arguments,
# prints the report on stdout and its progress on stderr, and writes an HTML report with `--report`.

# %%
print(lesson.command("ShapeBranch · frames ∈ [1, 32]"))

# %% [markdown]
# Run it for real (a new Python process: the imports take a few seconds), plus one call with a typo in
# `--dim`, which gets one line and exit status 2:

# %%
run = [sys.executable, "-m", "helpers.doctor", *lesson.CASES["ShapeBranch · frames ∈ [1, 32]"].argv]
typo = [sys.executable, "-m", "helpers.doctor", "helpers.models:ShapeBranch", "--example", "2x8x4",
        "--dim", "x:1:frames:1"]
jobs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for cmd in (run, typo)]
(cli_out, cli_err), (typo_out, typo_err) = (job.communicate() for job in jobs)
print(f"exit {jobs[0].returncode}:", "\n".join(cli_out.splitlines()[:2]))
print(f"exit {jobs[1].returncode}:", typo_err.strip().splitlines()[-1])

# %% [markdown]
# The command prints exactly the report the notebook builds from the same arguments:

# %%
assert cli_out.rstrip("\n") == gallery["ShapeBranch · frames ∈ [1, 32]"].to_text()
print("identical:", len(cli_out.splitlines()), "lines")

# %% [markdown]
# ## Try it: the report as a widget
#
# Pick a model. Every report was computed above from cached programs, so switching is instant. The
# probes table is colour-coded: green matches, red diverges inside the contract, orange is refused inside
# it, purple ran outside the contract anyway, grey was refused outside it (as it should be).

# %%
explorer, interactions = lesson.widget_demo()
explorer

# %% [markdown]
# ### Your own model
#
# Define a model in the cell below, pick an example and `dynamic_shapes`, and add its report to the
# widget. As given, it zeroes a batch of one (`if x.shape[0] == 1`); change the `if`, the `Dim`, or
# the operators, then run the cell again.

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
mine

# %% [markdown]
# The same `if x.shape[0] == 1` trap as `ShapeBranch`: export assumed the batch is not 1, recorded
# the other branch, and the doctor's probe at `batch = 1 (min)` catches it.

# %%
print(explorer.set(model="MyModel (defined in this notebook)").headline)

# %% [markdown]
# ## Exercises
#
# **1 · Predict.** `ConfigBranch(use_residual=True)` bakes its flag into the graph (lesson 01). Does the
# doctor catch that?

# %%
config_report = lesson.report_for(["helpers.models:ConfigBranch", "--example", "2x4"])  # computed before you click


def reveal_config_branch():
    return config_report.verdict, (
        "The doctor compares the .pte with the model you hand it, and that model has the same flag baked in. If "
        "the app flips use_residual later, the .pte will not follow: export one method per setting, or make the "
        "flag a tensor input.")


PredictThenReveal("the doctor on ConfigBranch(use_residual=True), --example 2x4: pass or fail?",
                  ["pass", "fail"], reveal_config_branch)

# %% [markdown]
# **2 · Predict, then check.** `BatchLoop` loops `for i in range(x.shape[0])`. With `--dim` on the batch,
# export failed (step 1). Without `--dim`, with `--example 3x4`: what is the doctor's verdict? Set
# `my_prediction` to `"pass"` or `"fail"`, then run the next cell.

# %%
my_prediction = "fail"

# %%
batch_loop = lesson.report_for(["helpers.models:BatchLoop", "--example", "3x4"])
_ = check_prediction(my_prediction, batch_loop.verdict,
                 "The loop was unrolled three times and the batch made static: correct for batch 3, and every "
                 "other batch is refused, outside the contract. Pass, but read the refused rows: if the app "
                 "sends other batches, that is the bug.")

# %% [markdown]
# **3 · On your own model.** Put a factory in a file and run the command from a terminal in the repo:
#
# ```bash
# python -m helpers.doctor path/to/my_model.py:build --example 1x3x224x224 --report doctor.html; echo $?
# ```
#
# Then add `--dim x:2:h:112:448 --dim x:3:w:112:448` and compare delegated coverage and arena bytes.

# %% [markdown]
# ## Takeaways
#
# - The workflow is mechanical enough to automate: classify the export error and locate it; after a fix,
#   compare with eager on probes that cover both sides of every branch and every bound; measure delegation
#   and the arena. `python -m helpers.doctor` does all of it and exits 0 / 1 / 2 for CI.
# - Fail CI on what is inside the contract; *read* what is outside it. Refused inputs are the device
#   doing its job; inputs the device runs silently (below a `Dim`'s min, within the arena) need a host-side
#   check.
# - A passing doctor compares against the model you give it: flags baked into both sides, and decisions
#   the app will take later, are yours to export separately.
# - Delegated coverage and arena bytes are part of the verdict you read: a correct fix can still move the
#   graph off the accelerator.
#
# ## Interview answer
#
# *"The model works in Python but not on the device. What do you do?"* First read the error and classify
# it: a data-dependent guard, a guard on a dynamic dimension, an unsupported operator, or a runtime
# contract rejection. Find the offending line or the input signature. Decide whether the branch is
# semantic (torch.cond, torch.where, or two exported methods chosen by the app) or incidental (delete it
# from the export path), or whether the shape should be normalised on the host, bounded, or bucketed.
# Re-export, then diff against eager on inputs that exercise both sides of the original branch and the
# edges of every dynamic range, not one sample, and re-check how much of the graph still lands on the
# delegate. I put exactly that in the export CI job, so the next regression fails the build rather than
# the phone.

# %% [markdown]
# ## Check: every fixed model matches eager on its probe set

# %%
for name, r in lesson.gallery_reports().items():
    if "(fixed)" in name:
        assert r.passed and r.parity.ok_within_contract, r
        assert sum(row.within_contract for row in r.parity.rows) >= 9, r
assert not report.passed and fixed.passed and not mine.passed
print("fixed models: parity inside the contract on every probe")
