# %% [markdown]
# # 07 · Declaring dimensions dynamic
#
# **What you will learn**
# - how `dynamic_shapes` names the axes allowed to vary, each with a `Dim` (a name and a range), and that one `Dim`
#   on two inputs says their axes are **equal**;
# - **0/1 specialization**: while tracing, export assumes every dynamic size is at least 2, and what that does to a
#   `min=1`, to `Dim.AUTO` and to a size-1 example;
# - what the `.pte` really checks at run time (rank, dtype, a maximum size), what it does not, and the host-side
#   check that covers the rest; what happens to a `Dim` without `max`;
# - the guards export adds when `forward()` does arithmetic on a dynamic size, how to answer them with a derived
#   `Dim`, and what that can drop.
#
# **Terms** (from [lesson 00](00_start_here.ipynb)): `Dim`, guard, specialization, input contract, memory plan /
# arena, delegate, portable kernels. From lesson 06: `MethodMeta`, `TensorInfo`. New here, defined where they first
# appear: *0/1 specialization*, *capacity*, *host check*, *derived `Dim`*.

# %%
import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import exercises, interview, models, questions
from helpers.display import show_source
from helpers.lessons import shapes

_ = torch.manual_seed(0)
g = torch.Generator().manual_seed(0)  # every random input below comes from this generator

# %% [markdown]
# ## The model under study
#
# `ShapeBranch` normalises a clip over time, but only when the clip has more than one frame (the standard deviation
# of a single frame is not defined). The decision reads a **shape**:

# %%
show_source(models.ShapeBranch)

# %% [markdown]
# Normalising needs at least two frames, so the author declares the frames axis dynamic with
# `Dim("frames", min=2, max=16)`. Clips of 2 to 16 frames work on the device.

# %%
clip_model = models.ShapeBranch()
clip = torch.randn(1, 8, 4, generator=g)  # the example: 8 frames of 4 features
frames = Dim("frames", min=2, max=16)
clip_art = helpers.lower(clip_model, (clip,), dynamic_shapes={"x": {1: frames}})
clip_art.input_contract()

# %% [markdown]
# **Predict.** Then a one-frame clip arrives, and the app hands it straight to the runtime.

# %%
questions.ask("07.one_frame")

# %% [markdown]
# ## The trap, live

# %%
one_frame = torch.randn(1, 1, 4, generator=g)
print("eager:", helpers.fmt(clip_model(one_frame)))
print(".pte: ", helpers.fmt(clip_art.run_raw(one_frame)[0]))

# %% [markdown]
# No error, no warning: the device ran a shape the export excluded and returned NaN. The `min=2` you declared is
# **not checked by the runtime**. Eager PyTorch skipped the normalisation for one frame; the `.pte` holds only the
# normalising branch, and the standard deviation of one value is NaN.
#
# Two questions follow: why is only one branch in the graph, and why did nothing refuse the clip? First, how
# `dynamic_shapes` is written.

# %% [markdown]
# ## Declaring dimensions: names, ranges, equal axes
#
# `dynamic_shapes` maps each input, by its `forward()` parameter name, to the axes allowed to vary. `TokenPool`
# takes token ids and a mask; both have a sequence axis:

# %%
show_source(models.TokenPool)

# %%
token_model = models.TokenPool()
ids = torch.randint(0, 32, (1, 16), generator=g)
mask = torch.ones(1, 16)
seq = Dim("seq", min=1, max=64)
token_art = helpers.lower(token_model, (ids, mask), dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
token_art.input_contract()

# %% [markdown]
# Using the **same** `Dim` object for `ids` and `mask` says "these axes always have the same length". Give them
# separate `Dim`s and export finds that `forward()` multiplies them elementwise, which only works when they are
# equal; it refuses, and suggests the fix:

# %%
d = helpers.diagnose_export(token_model, (ids, mask), {"ids": {1: Dim("ids_len", min=1, max=64)},
                                                        "mask": {1: Dim("mask_len", min=1, max=64)}}, lower=False)
print(next(line.strip() for line in d.message.splitlines() if "must always be equal" in line))
print("torch suggests:", d.suggested_fixes)

# %% [markdown]
# ## Why only one branch: 0/1 specialization
#
# While tracing, export gives every dynamic size a symbol and a range. It does not start from the range you
# declare: it starts from **[2, ∞]** and intersects it with yours. Sizes 0 and 1 are special in PyTorch (a size-1
# axis broadcasts, a size-0 tensor is empty), so export assumes a dynamic size is neither, and *specializes* an
# axis whose example is 0 or 1. That is **0/1 specialization**. Four places it shows:
#
# **1. A `min=1` is traced as 2.** Declare `min=1, max=8` for an axis whose example has 16 tokens, and the error
# quotes the range export really used (`TokenPool` again, example of 16 tokens):

# %%
err = helpers.show_error(torch.export.export, token_model, (ids, mask),
                         dynamic_shapes={"ids": {1: Dim("seq", min=1, max=8)}, "mask": {1: Dim("seq", min=1, max=8)}})

# %% [markdown]
# **2. `Dim.AUTO` and `Dim.DYNAMIC` start at 2.** They are hints, not ranges: export infers the range, and the
# lower bound it records is its default, 2.

# %%
for name, hint in (("Dim.AUTO", Dim.AUTO), ("Dim.DYNAMIC", Dim.DYNAMIC)):
    ep = torch.export.export(clip_model, (clip,), dynamic_shapes={"x": {1: hint}})
    print(f"{name}: frames traced in", [f"[{r.lower}, {r.upper}]" for r in ep.range_constraints.values()])

# %% [markdown]
# **3. A size-1 example specializes.** With a one-frame example, a named `Dim` is an error (export could only trace
# the size 1), and `Dim.AUTO` quietly makes the axis static:

# %%
err = helpers.show_error(torch.export.export, clip_model, (one_frame,),
                         dynamic_shapes={"x": {1: Dim("frames", min=1, max=16)}}, max_lines=3)
ep = torch.export.export(clip_model, (one_frame,), dynamic_shapes={"x": {1: Dim.AUTO}})
print("Dim.AUTO with a one-frame example:", "no dynamic size at all" if not ep.range_constraints else "dynamic")

# %% [markdown]
# **4. The one-frame trap.** Export traced `ShapeBranch` with frames in [2, 16], so `x.shape[1] > 1` was simply
# *true*: no guard, no branch, nothing recorded about it. Had the author declared `min=1`, the contract would say
# `[1, 16]` (for a plain `Dim`, export keeps your declared min) while the graph still holds only the ≥ 2 branch: a one-frame clip would
# then be *inside* the contract and wrong. With `min=2` it is outside the contract, which is honest; but something
# must refuse it, and the runtime does not. That is the second question.

# %% [markdown]
# ## What the `.pte` really checks
#
# ExecuTorch **strips export's runtime assertions** (the guards `exported.module()` checks in Python). For an input
# with a dynamic axis, the `.pte` keeps its rank, its dtype and one **maximum shape**: the size the memory plan
# reserved, its *capacity*. Here is the signature stored in the file for `TinyVision` (lesson 06) re-exported with
# bounded height and width:

# %%
vision_model = models.TinyVision()
frame_64 = shapes.camera_frame(64, 64)
hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
bounded = helpers.lower(vision_model, (frame_64,), dynamic_shapes=hw)
print(shapes.read_signature(bounded)["forward"])
print(bounded.input_contract())

# %% [markdown]
# `sizes=[1, 3, 128, 128]` is what the device knows about this input. **Predict** what the runtime does with a
# 1×3×100×150 frame (width 150 is above the declared `max`):

# %%
questions.ask("07.wide_frame")

# %% [markdown]
# Five frames straight to the runtime, each compared with eager PyTorch:

# %%
for shape in [(1, 3, 48, 64), (1, 3, 100, 150), (1, 3, 16, 16), (1, 3, 200, 200), (2, 3, 64, 64)]:
    row = helpers.check_one(vision_model, bounded, (torch.rand(*shape, generator=g),))
    print(f"{str(shape):<16} {row.describe()}")
    if row.status == "rejected":
        print(f"{'':<17}runtime: {row.runtime_message.split('. Error')[0]}")

# %% [markdown]
# The device knows rank 4 and room for 1·3·128·128 = 49,152 values, and checks nothing else about the sizes.
# 100×150 (45,000 values) and 16×16 are outside the declared ranges and run anyway ("silently accepted"). 200×200
# (120,000 values) needs more room than the plan holds: the runtime's input check refuses it. A batch of 2 (a
# *static* axis changed) fits in the room and passes that check; the XNNPACK delegate then fails while propagating
# the new shape, mid-execution. So on a device, nothing enforces a `Dim`'s `min`, the static axes of a dynamic
# input, or a `max` as long as the input still fits the capacity: each input outside the contract either runs or
# fails somewhere you did not choose.
#
# `run_raw`, the device's path in these lessons, skips the host check. It refuses only the inputs that would reach the
# XNNPACK delegate with sizes that contradict each other (a zero-size tensor, a broken tie between axes that share a
# `Dim`, a static axis changed on one of several inputs): undefined behaviour in ExecuTorch 1.5.1, explained in
# `run_raw`'s docstring. Reports call those *refused on the host*, apart from what the runtime *rejects* itself.
#
# ### The host check
#
# The app must enforce the contract itself, before it calls the model: the **host check**. `art.run` does that here:
# it checks the whole contract (dtypes, static sizes, every `Dim`'s min and max, equal axes) and says what is wrong
# and how to fix it. It refuses the one-frame clip of the trap:

# %%
err = helpers.show_error(clip_art.run, one_frame)

# %%
err = helpers.show_error(bounded.run, shapes.camera_frame(100, 150))

# %% [markdown]
# ## `Dim.AUTO`, `Dim.DYNAMIC`, `Dim.STATIC`, and a `Dim` without `max`
#
# Recent torch versions let you mark an axis with a hint instead of a named range. **Predict** first: `TokenPool`
# exported with `Dim.AUTO` on its sequence axis and a 16-token example. A 40-token request arrives:

# %%
questions.ask("07.auto_tokens")

# %% [markdown]
# What each spec records for the frames axis of `ShapeBranch` (example: 8 frames). `planned` is the capacity the
# memory plan reserved for that axis: the most the device will accept.

# %%
modes = shapes.dim_modes(clip_model, (clip,), "x", 1, {
    "Dim.AUTO": Dim.AUTO,
    "Dim.DYNAMIC": Dim.DYNAMIC,
    "Dim.STATIC": Dim.STATIC,
    "Dim('frames')  (no bounds)": Dim("frames"),
    "Dim('frames', min=2, max=16)": Dim("frames", min=2, max=16),
})
pd.DataFrame(modes)[["spec", "recorded", "range", "planned"]]

# %% [markdown]
# Without a `max` (`AUTO`, `DYNAMIC`, or a bare `Dim('frames')`), export records `∞`, and ExecuTorch cannot plan
# memory for infinity. It does **not** plan a conservative worst case: it plans the axis at the **example's size**.
# The "dynamic" program holds 8 frames at most, and the first longer clip in production is rejected:

# %%
auto_art = helpers.lower(clip_model, (clip,), dynamic_shapes={"x": {1: Dim.AUTO}})
print(auto_art.input_contract(), "· planned:", auto_art.runtime_input_shapes())
err = helpers.show_error(auto_art.run_raw, torch.randn(1, 12, 4, generator=g))

# %% [markdown]
# One more `Dim.AUTO` case to predict. `BatchLoop` loops over `range(x.shape[0])`, which needs a
# Python int while tracing (lesson 01). **Predict** what export does with `Dim.AUTO` on its batch:

# %%
show_source(models.BatchLoop)

# %%
questions.ask("07.auto_loop")

# %%
loop_modes = shapes.dim_modes(models.BatchLoop(), (torch.randn(3, 4, generator=g),), "x", 0, {
    "Dim.AUTO": Dim.AUTO, "Dim.DYNAMIC": Dim.DYNAMIC, "Dim('batch', max=8)": Dim("batch", max=8)})
for row in loop_modes:
    print(f"{row['spec']:<20} {row['recorded']:<13} {row.get('signature', row['note'][:100])}")

# %% [markdown]
# With `AUTO` the contract reads `x: float32[3, 4]`: the batch is the constant 3, and nothing said so. `DYNAMIC` or
# a named `Dim` turn the same fact into an export error. The input contract is where you see it: read it after every
# export that uses `AUTO`.
#
# For an artifact you ship, write the contract yourself: a **named** `Dim` with an explicit `min` and `max`. The
# name shows up in errors and in the contract; the `max` sizes the arena (lesson 08) and turns an out-of-memory on a
# phone into a decision made at export time.

# %% [markdown]
# ### ✏️ Exercise 07.bound_dim: a range for the app's clips that the graph really supports
#
# Another app records clips of **4 to 24 frames**. Write the `dynamic_shapes` for `ShapeBranch` (example: 8 frames)
# so that every clip it records passes the host check, runs and matches eager; a one-frame clip is **outside** the
# contract (so `run` refuses it instead of the device running it); and the memory plan holds the longest clip, not
# more. The check exports, lowers and runs your program, and compares it with `ShapeBranch` in eager mode.

# %%
# ✏️ Exercise 07.bound_dim — edit this cell, then run the check below.
answer = {"x": {1: Dim("frames", min=1, max=16)}}

# %%
grade = exercises.check("07.bound_dim", answer)

# %% [markdown]
# ## Guards on dynamic dimensions
#
# When `forward()` does arithmetic on a dynamic size, export must know the arithmetic holds for **every** size in the
# range. If it does not, export adds a guard and refuses, suggesting a constraint. `ChunkMean` views each row of
# `x` (shape B × T) as 4 chunks and averages each one:

# %%
show_source(shapes.ChunkMean)

# %%
x = torch.randn(2, 32, generator=g)
d = helpers.diagnose_export(shapes.ChunkMean(), (x,), {"x": {1: Dim("T", min=8, max=64)}}, lower=False)
print(d.message.strip().splitlines()[1].strip())
print("torch suggests:", " | ".join(d.suggested_fixes))

# %% [markdown]
# The view needs `T` to be a multiple of 4 (the guard says `2T % 8 == 0`). Torch suggests a **derived `Dim`**: a
# root `Dim` (`_T`, the length of one chunk) and `T = 4 * _T`, so only multiples of 4 are in the contract. Lengths that
# are not a multiple of 4 are then outside it, and the host check refuses them: eager `ChunkMean` cannot take them
# either (its view fails).
#
# ### ✏️ Exercise 07.derived_dim: adopt the suggestion
#
# Write the `dynamic_shapes` for `ChunkMean` (example: T = 32) so that every T that is a multiple of 4 from 8 to 64
# exports, passes the host check, runs and matches eager, T = 30 is refused on the host, and the memory plan holds
# T = 64, not more. The check also re-checks **delegation** against the static export (a symbolic size can move an
# operator off XNNPACK: lesson 08): a fix is done only when that is re-checked too.

# %%
# ✏️ Exercise 07.derived_dim — edit this cell, then run the check below.
answer = {"x": {1: Dim("T", min=8, max=64)}}

# %%
grade = exercises.check("07.derived_dim", answer)

# %% [markdown]
# ### A derived `Dim` can drop a valid size
#
# `HalfDiff` returns the first half of each row minus the second half. The halves only line up when T is even:

# %%
show_source(shapes.HalfDiff)

# %%
d = helpers.diagnose_export(shapes.HalfDiff(), (x,), {"x": {1: Dim("T", min=2, max=64)}}, lower=False)
print("torch suggests:", " | ".join(d.suggested_fixes))
half = Dim("half", min=1, max=32)
half_art = helpers.lower(shapes.HalfDiff(), (x,), dynamic_shapes={"x": {1: 2 * half}})
half_report = helpers.compare(shapes.HalfDiff(), half_art, [torch.randn(2, t, generator=g) for t in (4, 10, 64)])
print(half_art.input_contract(), "·", "T = 4, 10, 64:", half_report.summary())

# %% [markdown]
# The contract says `2*half ∈ [4, 64]`, not `[2, 64]`: export traces the root `half` like any dynamic size, so 0/1
# specialization starts it at 2, whatever min you declared for it. Following torch's suggestion to the letter has
# dropped T = 2, a row `HalfDiff` handles in eager (one value minus the other): such a row is now outside the
# contract, and no error or warning said so. The host check refuses it.
#
# Each guard message is a place where the model reasons about sizes. Read it as a question ("is this really true
# for every length you declared?") and answer it with a tighter or derived `Dim`, or by moving the size arithmetic
# to the host; then re-check parity, and delegation: what this derived `Dim` costs `HalfDiff` on XNNPACK, and how
# the host avoids it, is lesson 08.

# %% [markdown]
# ## Parity: inside the contract it matches; outside, something refuses
#
# The token model with its shared, bounded `Dim`: every bound's edge (1 and 64), the middle, values of every kind,
# and probes just outside (65 tokens, 0 tokens, a broken tie, static axes nudged). The report groups identical
# outcomes:

# %%
probes = helpers.probe_inputs((ids, mask), {"ids": {1: seq}, "mask": {1: seq}})
report = helpers.compare(token_model, token_art, probes)
print(report)

# %%
counts = report.counts()
outside = [r for r in report if not r.within_contract]
print(f"inside the contract: {sum(r.within_contract for r in report)} probes, all {'match' if report.ok_within_contract else 'NOT matching'}")
print(f"outside: {len(outside)} probes — {counts['rejected']} rejected by the runtime, {counts['refused']} refused on "
      f"the host by run_raw (undefined behaviour), {counts['eager_error']} failing in eager already, "
      f"{len(report.silently_accepted())} run without complaint")
print("the host check (run) refuses every one of them:",
      all(token_art.input_contract().violations(p.args) for p, r in zip(probes, report) if not r.within_contract))

# %% [markdown]
# ## Takeaways
#
# **The one to keep:** a `Dim` is a contract that only your host enforces. Declare the range the graph really
# supports, bound it, check it before the runtime, and probe every edge and one step beyond.
#
# In detail:
# - `dynamic_shapes={"input": {axis: Dim("name", min=…, max=…)}}`: the name documents the axis, the range is the
#   contract. One `Dim` object on two inputs says the axes are equal.
# - Export traces a dynamic size as ≥ 2 (0/1 specialization): a `min=1` is traced as 2, `AUTO`/`DYNAMIC` start at 2,
#   a size-1 example specializes, and a branch on `size > 1` keeps only one side. Declare the range the graph
#   really supports.
# - On the device, the runtime checks rank, dtype and capacity (the maximum shape in the `.pte`). Below `min`, a
#   static axis changed, or above `max` but within the capacity: nothing is sure to refuse it (it runs, or fails
#   mid-execution). Check the contract on the host (`art.run` shows how), and probe every bound's edge and one step
#   beyond.
# - `Dim.AUTO` is for exploring: it can come out static without an error (read the contract), and without a `max`,
#   ExecuTorch plans the axis at the **example's** size. Ship a named, bounded `Dim`.
# - A guard error marks size arithmetic in `forward()`: adopt the suggested derived `Dim`, or move the arithmetic
#   to the host; then re-check parity **and** delegation (lesson 08).
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("07.declare_dynamic")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
helpers.set_progress(False)  # the checks below load cached programs: no progress lines
assert report.ok_within_contract, report.table()
assert all(token_art.input_contract().violations(p.args) for p, r in zip(probes, report) if not r.within_contract)
assert {r.status for r in outside} <= {"rejected", "refused", "eager_error"}, report.table()
clip_report = helpers.compare(clip_model, clip_art, helpers.probe_inputs((clip,), {"x": {1: frames}}))
assert clip_report.ok_within_contract and clip_art.input_contract().violations((one_frame,)), clip_report.table()
assert torch.isnan(clip_art.run_raw(one_frame)[0]).all()  # the trap: the runtime runs it
assert auto_art.runtime_input_shapes() == [(1, 8, 4)]  # AUTO without max: planned at the example's size
assert loop_modes[0]["recorded"] == "static 3"
assert half_report.ok
try:  # "eager ChunkMean cannot take them either"
    shapes.ChunkMean()(torch.randn(2, 30))
    raise AssertionError("eager ChunkMean took T = 30")
except RuntimeError as exc:
    assert "invalid for input of size" in str(exc)
two = torch.randn(2, 2, generator=g)  # T = 2: valid for HalfDiff in eager, dropped by the derived Dim
assert half_art.input_contract().violations((two,)) and shapes.HalfDiff()(two).shape == (2, 1)
expected = {"07.one_frame": "diverge", "07.wide_frame": "runs it", "07.auto_tokens": "rejects it",
            "07.auto_loop": "a static batch, silently"}
assert {q: questions.get(q).actual()[0] for q in expected} == expected
helpers.set_progress(None)
print(f"token model: {report.summary()}")
print(f"clip model (Dim 2..16): {shapes.inside_summary(clip_report)}; one frame outside the contract")
