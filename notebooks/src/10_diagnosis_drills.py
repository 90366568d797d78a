# %% [markdown]
# # 10 · Diagnosis drills (capstone)
#
# **What you will learn**
# - the diagnosis sequence for *"the model works in Python but rejects our camera frames"*: inspect the input
#   signature, reproduce by loading the `.pte` through the runtime bindings with the device's real shape, choose
#   deliberately (normalize / bounded `Dim` / buckets), and re-check parity and delegation afterwards;
# - `torch.export.draft_export`: every export issue of a model in one report, beside reading one error at a time;
# - to diagnose broken models from both tracks from what the user saw, each answer checked by the real tools;
# - a probe set and an export CI test that catch these bugs before release, and what such a test does not cover;
# - after lesson 18, come back for the last part: six field reports on the traps of lessons 13–18, with three more
#   answers.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb) and lessons 06–09 (`MethodMeta`,
# capacity, host check, bucket). New here: a **drill** is a field report (the symptom, the code, the export call)
# that you diagnose before the tools do.

# %%
import re
import tempfile
from pathlib import Path

import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import course, exercises, interview, models, plots, questions
from helpers.display import show_source
from helpers.lessons import shapes

drills = course.lesson(10)  # this lesson's drills and tools: helpers/lessons/10_diagnosis_drills.py

_ = torch.manual_seed(0)
pd.set_option("display.max_colwidth", 80)

# %% [markdown]
# The last section replays three drills through an export CI test; each replay builds its program from scratch with
# the stock compiler, as a CI job does. Two of them start now, in a process of their own, as a CI runner runs jobs
# side by side; their results wait for you there:

# %%
ci_test = Path("../tests/test_export_ci_example.py")
ci_replays = drills.start_ci_replays(ci_test)
print(f"{len(ci_replays.names)} replays of {ci_test.name} started in the background")

# %% [markdown]
# ## The trap, live: "works in Python, rejects our camera frames"
#
# The app ships a `.pte` of `TinyVision` (lesson 06) produced by a notebook with a 64×64 example. The app team reports
# that every camera frame is refused. In Python the model is fine:

# %%
show_source(models.TinyVision)

# %%
model, shipped, _ = shapes.vision_program()  # helpers.lower(TinyVision(), (64×64 example,))
device_frame = shapes.camera_frame(48, 64)  # the shape the device really sends, taken from the app's log
print("eager on the device's frame:", helpers.fmt(model(device_frame)))

workdir = tempfile.TemporaryDirectory()
pte_path = shipped.save(Path(workdir.name) / "classifier.pte")  # the file that is on the phone

# %% [markdown]
# The shipped program, on the same frame, as the app calls it:

# %%
err = helpers.show_error(shipped.run_raw, device_frame)

# %% [markdown]
# The runtime's words in that line ("Attempted to resize a static tensor…", error 0x10) are what the app's log
# shows, for every frame the camera sends. The steps below are what to do with them.
#
# ### Step 1: inspect the input signature, from the file

# %%
print(shapes.read_signature(pte_path)["forward"])

# %% [markdown]
# `sizes=[1, 3, 64, 64]`: the export's example resolution, and the largest shape the input may have (`MethodMeta`
# does not say whether an axis may vary; step 2 shows this one does not). The camera delivers 48×64. That is
# nearly always the whole story.
#
# ### Step 2: reproduce with the runtime bindings and the device's shape
#
# Load the file with `executorch.runtime` (no exportlab code in between) and run the device's frame:

# %%
show_source(drills.run_on_device)

# %%
outputs, log = drills.run_on_device(pte_path, (device_frame,))
print("outputs:", outputs)
print("runtime log:", *log, sep="\n  ")

# %% [markdown]
# Reproduced on the build machine: same file, same runtime, same refusal. And the same file accepts a 64×64 frame:
# the model is not broken, the contract is.

# %%
outputs, log = drills.run_on_device(pte_path, (shapes.camera_frame(64, 64),))
print(helpers.fmt(outputs[0]), log)

# %% [markdown]
# ### Step 3: choose deliberately
#
# Three options, each built for real: letterbox on the host into the existing static export; re-export with bounded
# height and width `Dim`s; or buckets, one static method per resolution the fleet's cameras deliver (48×64 and
# 64×64). For each: does every device frame run and match eager on what the app passes, and what does it cost?

# %%
options = drills.camera_options()
frames = [shapes.camera_frame(h, w) for h, w in drills.CAMERA_SIZES]
choice = pd.DataFrame(drills.compare_options(options, frames))
choice

# %% [markdown]
# ### Step 4: re-check delegation afterwards
#
# All three keep this classifier entirely on XNNPACK; the bounded `Dim` plans the arena for 128×128, buckets add a
# method. For a model with an upsample, step 4 is where the bounded `Dim` shows its cost (lesson 08):

# %%
reports = {name.split(" (")[0]: art.delegation(art.methods[-1]) for name, (art, _) in options.items()}
_, segmenter_dynamic, _, _ = shapes.segmenter_program(max_side=128)
reports["segmenter, bounded Dims"] = segmenter_dynamic.delegation()
plots.delegation_bars(reports, title="Delegation after the fix")

# %% [markdown]
# **Decision.** For a classifier whose input the app resizes anyway: normalize on the host (static, entirely
# delegated, the smallest arena, one method). Choose a bounded `Dim` only if the model must see the native resolution
# and the delegation report stays clean; choose buckets when a few sizes cover the fleet.

# %% [markdown]
# ## One error at a time, or every issue at once
#
# `torch.export.export` stops at the first problem it cannot get past. `TwoIssues` has two: a test on the batch size
# (which a dynamic batch cannot answer for every size) and a test on the values:

# %%
show_source(drills.TwoIssues)

# %%
x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
batch = {"x": {0: Dim("batch", min=1, max=16)}}
err = helpers.show_error(torch.export.export, drills.TwoIssues(), (x,), dynamic_shapes=batch, max_lines=2)

# %% [markdown]
# One error: the value test. Fix it, export again, and only then would the batch test's error appear. Export's own
# message suggests the alternative: `torch.export.draft_export` runs the same trace, but where it needs an answer it
# takes the one the example gives, notes the issue, and goes on. Every issue, in one report:

# %%
draft, issues = drills.draft_issues(drills.TwoIssues(), (x,), batch)
pd.DataFrame(issues)

# %% [markdown]
# Both lines of `forward()` are there. (`u0` stands for the value of `x.sum() > 0`, unknown while tracing; the
# third row is the assumption draft export made about it so it could go on.) The draft program is a diagnosis, not
# an artifact: where it needed an answer it took the example's and baked it in. Its ranges and its asserts say so:

# %%
batch_range = next(r for sym, r in draft.range_constraints.items() if not str(sym).startswith("u"))
print(f"batch range in the draft program: [{batch_range.lower}, {batch_range.upper}] (declared: [1, 16])")
asserts = re.findall(r"Runtime assertion failed for expression ([^\"]+) on node", draft.graph_module.code)
print("asserts inserted in the graph:", asserts)
err = helpers.show_error(draft.module(), torch.randn(3, 8, generator=torch.Generator().manual_seed(1)), max_lines=1)

# %% [markdown]
# The batch range shrank to the sizes that take the example's branch, and an assert pins the value test to the
# example's answer. Use the report to fix the model (here `torch.cond` or `torch.where` for the value test, lesson
# 03/04; the batch test hoisted to the app or made arithmetic), then export for real.

# %% [markdown]
# ## Drills
#
# Each drill is a field report: what the user saw, the export call, and the model's code. Decide what is wrong, then
# check: `drills.check` runs the workflow of both tracks on the real tools (export → lowering → loading, the device's
# input on the raw runtime, a varied probe set against eager, the delegation report) and says whether the tools agree
# with you. A wrong answer is reported, never raised. The possible answers, each defined:

# %%
drills.categories()

# %% [markdown]
# Write your answers here (each one of the strings above), then run each drill's check. They start empty.

# %%
my_answers = {
    "sign_router": None,
    "one_frame": None,
    "flag": None,
    "batch_gate": None,
    "steps": None,
    "median": None,
    "any_size": None,
    "loop": None,
    "bounded_camera": None,
    "no_max": None,
}

# %% [markdown]
# ### Drill 1 · sign_router

# %%
drills.brief("sign_router")

# %%
finding = drills.check("sign_router", my_answers["sign_router"])

# %% [markdown]
# ### Drill 2 · one_frame

# %%
drills.brief("one_frame")

# %%
finding = drills.check("one_frame", my_answers["one_frame"])

# %% [markdown]
# ### Drill 3 · flag

# %%
drills.brief("flag")

# %%
finding = drills.check("flag", my_answers["flag"])

# %% [markdown]
# ### Drill 4 · batch_gate

# %%
drills.brief("batch_gate")

# %%
finding = drills.check("batch_gate", my_answers["batch_gate"])

# %% [markdown]
# ### Drill 5 · steps

# %%
drills.brief("steps")

# %%
finding = drills.check("steps", my_answers["steps"])

# %% [markdown]
# ### Drill 6 · median

# %%
drills.brief("median")

# %%
finding = drills.check("median", my_answers["median"])

# %% [markdown]
# ### Drill 7 · any_size

# %%
drills.brief("any_size")

# %%
finding = drills.check("any_size", my_answers["any_size"])

# %% [markdown]
# ### Drill 8 · loop

# %%
drills.brief("loop")

# %%
finding = drills.check("loop", my_answers["loop"])

# %% [markdown]
# ### Drill 9 · bounded_camera

# %%
drills.brief("bounded_camera")

# %%
finding = drills.check("bounded_camera", my_answers["bounded_camera"])

# %% [markdown]
# ### Drill 10 · no_max

# %%
drills.brief("no_max")

# %%
finding = drills.check("no_max", my_answers["no_max"])

# %% [markdown]
# ### Six field reports on models no lesson shows
#
# The same sequence, on code you have not seen: read each report, decide, then check them all at once.

# %%
drills.field_reports()

# %%
more_answers = {
    "early_exit": None,
    "temperature": None,
    "camera_bytes": None,
    "ceil_pool": None,
    "rank": None,
    "flatten": None,
}
findings = drills.check_all(more_answers)

# %% [markdown]
# ### One more, as a widget
#
# `BatchLoop` (lesson 01: a Python `for` over the batch) was exported with a batch of 3; the device sends a batch of 4.
# Pick the diagnosis, then press *Reveal*:

# %%
questions.ask("10.batch_loop")

# %% [markdown]
# ## ✏️ Exercise 10.probe_set: probes that catch every bug
#
# Three of the drills (`one_frame`, `flag`, `no_max`) and a sign branch baked into a straight program have one thing
# in common: the `.pte` runs and is wrong, or refuses, on some inputs **inside** the contract the app relies on, and
# nothing fails on its own. Only a comparison with eager on the right inputs finds them. Write `probes(example, dims)`:
# the inputs an export CI job feeds to the `.pte` and to eager. `example` is the single input tensor the model was
# exported with; `dims` maps each dynamic axis to the `(min, max)` the app promises (`{}` when every axis is static).
# The check runs your probes inside the contract on four broken programs and two correct ones, with other example
# sizes and bounds at each check: every bug must be caught, and no correct program may raise a false alarm.

# %%
# ✏️ Exercise 10.probe_set — edit this cell, then run the check below.
def probes(example, dims):
    """The inputs an export CI job compares between the .pte and eager PyTorch."""
    return [example]


answer = probes

# %%
grade = exercises.check("10.probe_set", answer)

# %% [markdown]
# ## The fixes, as a CI job
#
# `tests/test_export_ci_example.py` is an export CI test written to be copied into your repository (it needs only
# `torch`, `executorch` and `pytest`). What it checks, in its own words:

# %%
source = ci_test.read_text()
print(source[: source.index("from __future__")].strip())

# %% [markdown]
# The part you edit (here: `TokenPool` with a shared, bounded `Dim`):

# %%
start = source.index("# ===== CONFIG")
print(source[start: source.index("# =====", start + 10)].strip())

# %% [markdown]
# It runs in this collection's test suite; here it is, run from the notebook (same real export and runtime):

# %%
result = drills.run_ci_example(ci_test)
print(result)

# %% [markdown]
# The same test, with its CONFIG replaced by the drills' exports, must fail. Three of them: `one_frame` (the app
# sends 12-frame clips, within the range), `flag` (the reference is the model as the app configures it) and
# `any_size` (no operator may fall back to portable kernels):

# %%
for name, config in drills.CI_REPLAYS.items():
    print(f"----- {name} -----{config}")

# %% [markdown]
# Their outcomes: `one_frame` runs here, in this process; `flag` and `any_size` were started at the top of the
# lesson (if they are still running, this waits for them). To replay a CONFIG of your own:
# `drills.run_ci_example(ci_test, your_config)`.

# %%
replayed = {"one_frame": drills.run_ci_example(ci_test, drills.CI_REPLAYS["one_frame"])}
replayed.update(ci_replays.results())  # flag, any_size
for name, outcome in replayed.items():
    print(f"{name}: exit code {outcome['exit code']}, {outcome.get('failed', 0)} failed:")
    for test in outcome["failed tests"]:
        print(f"    {test}")

# %% [markdown]
# What the test catches, and what it does not, drill by drill:
#
# - an export or lowering that fails (`sign_router`, `batch_gate`, `loop`, `median`): the test cannot even build its
#   program; the job fails with torch's or ExecuTorch's error;
# - an input the device sends outside the contract (the camera, `no_max`): listed in `DEVICE_INPUTS`, it fails the
#   contract check or the runtime refuses it; a `Dim` without `max` also fails the planned-maximum test;
# - a wrong answer at a bound's edge (`one_frame`): the inside probes at min, above;
# - a flag set differently in the app (`flag`): only if `REFERENCE` is the model as the app configures it, above;
# - an operator falling back to portable kernels (`any_size`): the delegation test, above;
# - a Python scalar baked in (`steps`): **not covered as written**; the test builds tensor inputs only. List the values
#   the app passes and export one method per value, or make the scalar a tensor (lesson 05).
#
# A test only catches what its CONFIG states: the device's real shapes, the app's real configuration, the operators
# you accept on portable kernels.

# %% [markdown]
# ## After lesson 18: six field reports on lessons 13–18
#
# Come back here once you have done lessons 13 to 18. Their traps need three more answers, each defined before the
# reports:

# %%
drills.categories(drills.LATER_ANSWERS)

# %% [markdown]
# The previous seven still apply. Read each report, pick one of the ten answers for it, then check them all at once:

# %%
drills.field_reports(drills.LATER_REPORTS)

# %%
later_answers = {
    "positions": None,
    "refine": None,
    "recorded_batches": None,
    "photo_scores": None,
    "dead_sensor": None,
    "next_word": None,
}
later_findings = drills.check_all(later_answers)

# %% [markdown]
# ## Takeaways
# - "Works in Python, rejects our camera frames" is nearly always an example-resolution export fed the device's native
#   resolution. Confirm with the `.pte`'s `MethodMeta`; reproduce by loading the file with the runtime bindings and the
#   device's real shape; then choose (normalize, bounded `Dim`, or buckets) and re-check parity and delegation.
# - Read a failure by stage: an export error (a value test → control flow; a guard → size arithmetic; an operator), a
#   lowering error, a refusal at run time (the contract), or silence (parity over varied inputs, every bound's edge).
#   `draft_export` lists every export issue at once; its program is a diagnosis, not an artifact. After the build,
#   three more: a size read from data that nothing bounds, a module exported in training mode, a delegate that
#   computes some values differently (the portable-only program tells it from a specialization).
# - Put a parity test in the export CI job, configured with the device's shapes and the app's configuration: inside
#   the contract it must match eager; outside, the host check must refuse; delegation must not regress.
#
# ## Interview questions
#
# Answer each aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("10.camera_diagnosis")

# %%
interview.ask("10.export_ci")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
helpers.set_progress(False)  # the checks below load cached programs: no progress lines
static_art, prepare = options["normalize on the host (letterbox → 64×64)"]
fixed_probes = [helpers.Probe(f"camera {h}×{w}", (prepare(shapes.camera_frame(h, w))[0],))
                for h, w in [(48, 64), (64, 64), (36, 64), (64, 48), (120, 160), (32, 32)]]
fixed_probes += helpers.probe_inputs((shapes.camera_frame(64, 64),))
fixed_report = helpers.compare(model, static_art, fixed_probes)
assert fixed_report.ok_within_contract, fixed_report.table()
assert choice["all device frames match eager"].all(), choice
assert {i["line"] for i in issues} == {"if x.shape[0] > 4:", "if x.sum() > 0:"}, issues
assert result["exit code"] == 0 and result["passed"] > 0 and not result["failed tests"], result
assert all(outcome["exit code"] == 1 for outcome in replayed.values()), replayed
assert any("frames=1" in t for t in replayed["one_frame"]["failed tests"])
assert any("parity" in t or "device" in t for t in replayed["flag"]["failed tests"])
assert replayed["any_size"]["failed tests"] == ["test_only_the_expected_operators_run_on_portable_kernels"]
assert questions.get("10.batch_loop").actual()[0] == "input outside the export contract"
helpers.set_progress(None)
print(fixed_report.summary())
print(f"the CI test passes on its CONFIG and fails on {', '.join(replayed)}")
workdir.cleanup()
