# %% [markdown]
# # 10 · Diagnosis drills (capstone)
#
# **What you will learn**
# - the diagnosis sequence for *"the model works in Python but rejects our camera frames"*: inspect the input
#   signature, reproduce by loading the `.pte` through the runtime bindings with the device's real shape, choose
#   deliberately (normalize / bounded `Dim` / buckets), and re-check delegation afterwards;
# - to diagnose broken models from both tracks — control flow and shapes — from their symptoms, each answer
#   checked against what the real tools report;
# - a parity test you can copy into your export CI job.

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

import helpers
from helpers import models, plots
from helpers.lessons import drills, shapes
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
g = torch.Generator().manual_seed(0)  # every random input below comes from this generator
pd.set_option("display.max_colwidth", 80)

# %% [markdown]
# ## The trap, live: "works in Python, rejects our camera frames"
#
# The `.pte` the app ships was produced by a notebook with a 64×64 example. The app team reports that every
# frame is refused. In Python, the model is fine:

# %%
model, shipped, _ = shapes.vision_program()
device_frame = shapes.camera_frame(48, 64)  # the shape the device really sends, taken from the app's log
print("eager on the device's frame:", helpers.fmt(model(device_frame)))

workdir = tempfile.TemporaryDirectory()
pte_path = shipped.save(Path(workdir.name) / "classifier.pte")  # the file that is on the phone

# %% [markdown]
# ### Step 1 — inspect the input signature (from the file)

# %%
print(shapes.read_signature(pte_path)["forward"])

# %% [markdown]
# `sizes=[1, 3, 64, 64]`, static: the export's example resolution. The camera delivers 48×64. That is nearly
# always the whole story.
#
# ### Step 2 — reproduce with the runtime bindings and the device's shape
#
# Load the file with `executorch.runtime` — no exportlab code in between — and run the device's frame:

# %%
outputs, log = drills.run_on_device(pte_path, (device_frame,))
print("outputs:", outputs)
print("runtime log:", *log, sep="\n  ")

# %% [markdown]
# Reproduced on the build machine: same file, same runtime, same refusal. (And the same file accepts a 64×64
# frame — the model is not broken; the contract is.)

# %%
outputs, log = drills.run_on_device(pte_path, (shapes.camera_frame(64, 64),))
print(helpers.fmt(outputs[0]), log)

# %% [markdown]
# ### Step 3 — choose deliberately
#
# Three options, each built for real: letterbox on the host into the existing static export; re-export with
# bounded height/width `Dim`s; or buckets — one static method per resolution the fleet's cameras deliver
# (48×64 and 64×64). For each: does every device frame run and match eager on what the app passes, and what does
# it cost?

# %%
options = drills.camera_options()
frames = [shapes.camera_frame(h, w) for h, w in drills.CAMERA_SIZES]
choice = pd.DataFrame(drills.compare_options(options, frames))
choice

# %% [markdown]
# ### Step 4 — re-check delegation afterwards
#
# All three keep this classifier fully on XNNPACK; the bounded `Dim` quadruples the arena (it is planned for
# 128×128), buckets add a method. For a model with an upsample, step 4 is where the bounded `Dim` would have
# shown its cost (lesson 08):

# %%
reports = {name.split(" (")[0]: art.delegation(art.methods[-1]) for name, (art, _) in options.items()}
_, segmenter_dynamic, _, _ = shapes.segmenter_program(max_side=128)
reports["segmenter, bounded Dims"] = segmenter_dynamic.delegation()
plots.delegation_bars(reports, title="Delegation after the fix")

# %% [markdown]
# **Decision.** For a classifier whose input the app resizes anyway: normalize on the host — static, fully
# delegated, smallest arena, one method. Choose a bounded `Dim` only if the model must see native resolution and
# the delegation report stays clean; choose buckets when a few sizes cover the fleet.

# %% [markdown]
# ## Why drills
#
# Each field report below comes with the model that was shipped (how it was exported), the eager model the team
# trusts, and the input the device sends. Decide what is wrong from the report — then check: `drills.check` runs
# the workflow of both tracks on the real tools (export → lowering → loading, the device's input on the raw
# runtime, a varied probe set against eager, the delegation report) and compares its finding with yours.
#
# The possible answers:

# %%
for answer in drills.ANSWERS:
    print("-", answer)
print()
for i, drill in enumerate(drills.DRILLS, 1):
    print(f"{i}. [{drill.track}] {drill.name}: {drill.report}")

# %% [markdown]
# ## Exercises: the drills
#
# Record your answers (one of the strings above) — replace these with your own reading before running the checks:

# %%
my_answers = {
    "camera": "input outside the export contract",
    "sign_router": "data-dependent control flow",
    "one_frame": "silent specialization",
    "flag": "silent specialization",
    "batch_gate": "guard on a dynamic dimension",
    "steps": "input outside the export contract",
    "median": "unsupported operator",
    "any_size": "partial delegation",
    "loop": "data-dependent control flow",
    "bounded_camera": "healthy",
}
by_name = {d.name: d for d in drills.DRILLS}

# %% [markdown]
# **Drill 1 — camera.** (You just did it.)

# %%
finding = drills.check(by_name["camera"], my_answers["camera"])

# %% [markdown]
# **Drill 2 — sign_router.** The export job fails; the model routes by the sign of its input.

# %%
finding = drills.check(by_name["sign_router"], my_answers["sign_router"])

# %% [markdown]
# **Drill 3 — one_frame.** Clips of 2–16 frames are fine; a one-frame clip returns garbage.

# %%
finding = drills.check(by_name["one_frame"], my_answers["one_frame"])

# %% [markdown]
# **Drill 4 — flag.** `use_residual` was turned off in Python; the phone still gives the old answers.

# %%
finding = drills.check(by_name["flag"], my_answers["flag"])

# %% [markdown]
# **Drill 5 — batch_gate.** Export with a batch `Dim` of 1..16 fails with a message about constraints.

# %%
finding = drills.check(by_name["batch_gate"], my_answers["batch_gate"])

# %% [markdown]
# **Drill 6 — steps.** The app passes `steps=5`; the notebook used 3.

# %%
finding = drills.check(by_name["steps"], my_answers["steps"])

# %% [markdown]
# **Drill 7 — median.** Export succeeds; lowering fails.

# %%
finding = drills.check(by_name["median"], my_answers["median"])

# %% [markdown]
# **Drill 8 — any_size.** Height and width made dynamic "so any frame works"; now 4× slower on device.

# %%
finding = drills.check(by_name["any_size"], my_answers["any_size"])

# %% [markdown]
# **Drill 9 — loop.** A refinement loop will not export.

# %%
finding = drills.check(by_name["loop"], my_answers["loop"])

# %% [markdown]
# **Drill 10 — bounded_camera.** The reviewer asks whether the re-exported classifier is safe to ship.

# %%
finding = drills.check(by_name["bounded_camera"], my_answers["bounded_camera"])

# %% [markdown]
# **Predict, then reveal (widget).** One more: `BatchLoop` (a `for` over the batch) exported with a batch of 3; the
# device sends a batch of 4. Which answer do the tools give?

# %%
loop_drill = drills.Drill(
    "batch_loop", "A per-item loop exported with batch 3; the device sends 4 items.",
    lambda: (models.BatchLoop(), (torch.randn(3, 4, generator=g),), None), lambda: (torch.randn(4, 4, generator=g),),
    track="control flow")
loop_finding = drills.investigate(loop_drill)  # computed now, so the widget only reveals it


def reveal_loop():
    return loop_finding.answer, loop_finding.evidence[-1]


quiz = PredictThenReveal("BatchLoop exported at batch 3, fed batch 4?", list(drills.ANSWERS), reveal_loop)
quiz

# %%
quiz.answer("input outside the export contract")
print(quiz.actual)

# %% [markdown]
# ## The fixes, as a CI job: a copyable parity test
#
# Every drill above would have been caught before release by one test: lower the model you ship, probe every
# bound's edge, assert parity inside the contract and refusal outside it. `tests/test_export_ci_example.py` is that
# test, written to be copied into your repository (it needs only `torch`, `executorch` and `pytest`). Its header:

# %%
ci_test = Path("../tests/test_export_ci_example.py")
source = ci_test.read_text()
print(source[: source.index("from __future__")].strip())

# %% [markdown]
# The part you edit:

# %%
print(source[source.index("# ===== CONFIG"): source.index("# =====", source.index("# ===== CONFIG") + 10)].strip())

# %% [markdown]
# It runs in this collection's test suite; here it is, run from the notebook (same real export and runtime):

# %%
result = drills.run_ci_example(ci_test)
helpers.set_progress(None)  # the test suite's setup turned progress lines off; turn them back on
print(result)

# %% [markdown]
# ## Parity check of the capstone's fix

# %%
static_art, prepare = options["normalize on the host (letterbox → 64×64)"]
fixed_probes = [helpers.Probe(f"camera {h}×{w}", (prepare(shapes.camera_frame(h, w))[0],))
                for h, w in [(48, 64), (64, 64), (36, 64), (64, 48), (120, 160), (32, 32)]]
fixed_probes += helpers.probe_inputs((shapes.camera_frame(64, 64),))
fixed_report = helpers.compare(model, static_art, fixed_probes)
assert fixed_report.ok_within_contract, fixed_report
assert choice["all device frames match eager"].all(), choice
assert all(drills.investigate(by_name[n]).answer == a for n, a in my_answers.items())
assert result == {"exit code": 0, "passed": result.get("passed", 0)} and result["passed"] > 0
print(fixed_report.summary())
workdir.cleanup()

# %% [markdown]
# ## Takeaways
# - "Works in Python, rejects our camera frames" is nearly always an example-resolution export fed the device's native
#   resolution. Confirm with the `.pte`'s `MethodMeta`; reproduce by loading the file with the runtime bindings and the
#   device's real shape; then choose — normalize, bounded `Dim`, or buckets — and re-check delegation.
# - Read a failure by stage: export error (data-dependent → control flow; constraint → size arithmetic; unsupported
#   operator), load/run refusal (contract), or silence (parity over varied inputs, every bound's edge).
# - Put a parity test in the export CI job: inside the contract it must match eager; outside, something must refuse.
#
# ## Interview answer
# *"The model works in Python but rejects our camera frames — what do you do?"* — It's nearly always this: exported at
# the notebook's example resolution, fed the device's native resolution. I'd confirm it by inspecting the exported
# program's input signature, reproduce it in Python by loading the `.pte` through the runtime bindings with the
# device's actual shape, then choose deliberately — normalize on the host, declare a bounded dynamic dimension, or
# ship buckets — and re-check how much of the graph still lands on the delegate afterwards. And I'd add a parity test
# over every bound's edge to the export CI, so the next one is caught before it ships.
