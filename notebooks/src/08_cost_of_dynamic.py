# %% [markdown]
# # 08 · What dynamic costs
#
# **What you will learn**
# - that a partitioner may **decline** an operator once a size is symbolic: that part of the graph falls back to
#   the portable kernels; the model still runs, and nothing tells you unless you read the delegation report;
# - how to find out why, in the partitioner's own words, and how to move a declined operator out of the way;
# - what the memory plan is sized for, and what it costs a small input;
# - how to measure latency static vs dynamic with the runtime, and how to read it with its spread.
#
# **Terms** (from [lesson 00](00_start_here.ipynb)): partitioner, delegate, XNNPACK, portable kernels, memory plan /
# arena, `Dim`. From lesson 07: capacity, host check. (Guard errors during export, the third cost, were lesson 07.)

# %%
import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import exercises, interview, models, plots, questions
from helpers.display import show_source
from helpers.lessons import shapes

_ = torch.manual_seed(0)

# %% [markdown]
# ## The model under study
#
# `TinySegmenter` is a per-pixel head: two strided convolutions, a bilinear upsample ×4 back to the frame's size, a
# 1×1 convolution that gives two classes per pixel:

# %%
show_source(shapes.TinySegmenter)

# %% [markdown]
# The team exported it at 64×64, then made height and width dynamic (32 to 128) "so any camera works". Same model,
# same weights:

# %%
model = shapes.TinySegmenter()
frame = shapes.camera_frame(64, 64)
static = helpers.lower(model, (frame,))
dynamic_shapes = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
dynamic = helpers.lower(model, (frame,), dynamic_shapes=dynamic_shapes)
print(static.delegation().summary())

# %% [markdown]
# **Predict.** The static program is entirely on XNNPACK. What about the dynamic one?

# %%
questions.ask("08.segmenter_delegation")

# %% [markdown]
# ## The trap, live

# %%
print(dynamic.delegation().summary())
dynamic.delegation()

# %% [markdown]
# The upsample runs on a portable kernel, between two delegated pieces: the graph is split into two XNNPACK calls.
# Parity is not the problem (it matches eager, below). What changed is where the work runs, and nothing fails to tell
# you; what that costs in time is measured further down.

# %% [markdown]
# ## Why it happens: the partitioner declines what it cannot prove
#
# The XNNPACK partitioner checks every node against a rule for its operator. When a rule says no, the partitioner
# does not fail: it leaves the node to the portable kernels and records why. The reasons, in its own words:

# %%
for op, why in shapes.declined_reasons(dynamic).items():
    print(f"{op}: {'; '.join(why)}")

# %% [markdown]
# XNNPACK's bilinear resize needs its output size when the delegate is built; with a symbolic height and width, the
# output size is symbolic. In ExecuTorch 1.5.1 the XNNPACK rules that look at dynamic sizes are few: this upsample
# (dynamic output size), a reshape (`view`) to a shape with a symbolic size, a slice whose input or output has a
# symbolic size, and a max-pool with `ceil_mode` on a dynamic shape. One check shared by every rule also declines a
# node with an argument that is not a tensor, such as a size computed at run time (lesson 07's `HalfDiff`, below).
# Any other operator is judged the same way for static and dynamic sizes.
#
# Delegated coverage side by side (graph nodes, from each program's delegation report):

# %%
variants = {"static 64×64": static, "dynamic 32..128": dynamic}
table = pd.DataFrame([{
    "variant": name, "delegated nodes": art.delegation().delegated_nodes,
    "portable nodes": art.delegation().portable_nodes, "delegated subgraphs": art.delegation().delegated_subgraphs,
    "coverage": f"{art.delegation().coverage:.0%}", "portable ops": ", ".join(art.delegation().portable_ops()) or "—",
    "arena bytes": art.planned_memory_bytes()} for name, art in variants.items()])
table

# %%
plots.delegation_bars({name: art.delegation() for name, art in variants.items()},
                      title="TinySegmenter: where the graph runs")

# %% [markdown]
# Does a dynamic size always cost delegation? **Predict** for the classifier of lesson 06 (`TinyVision`:
# convolutions, relu, a mean over height and width, a linear head), with the same dynamic height and width:

# %%
questions.ask("08.classifier_portable")

# %%
vision_model = models.TinyVision()
vision_static = helpers.lower(vision_model, (frame,))
vision_dynamic = helpers.lower(vision_model, (frame,), dynamic_shapes=dynamic_shapes)
print(vision_static.delegation().summary())
print(vision_dynamic.delegation().summary())

# %% [markdown]
# So a dynamic size is not always a delegation loss: it depends on the operators. You find out by looking, per
# model.
#
# ### A size computed at run time
#
# Lesson 07's `HalfDiff` returns the first half of each row minus the second half; with torch's derived `Dim`
# (`T = 2 * half`) it exports and matches eager. Its static and dynamic programs, side by side:

# %%
rows = torch.randn(2, 32, generator=torch.Generator().manual_seed(7))
half_static = helpers.lower(shapes.HalfDiff(), (rows,))
half_art = helpers.lower(shapes.HalfDiff(), (rows,), dynamic_shapes={"x": {1: 2 * Dim("half", min=1, max=32)}})
print("static: ", half_static.delegation().summary())
print("dynamic:", half_art.delegation().summary())
for op, why in shapes.declined_reasons(half_art).items():
    print(f"  on portable kernels: {op} — {'; '.join(why)}")

# %% [markdown]
# The static program is entirely on XNNPACK. With the derived `Dim`, the two slices fell back to the portable
# kernels (and the size arithmetic, reading T and halving it, now happens at run time, as integer operations of the
# runtime). XNNPACK's slice rule gave its own reason, "invalid dtype": its first check looks at every argument of the
# node and declines any that is not a tensor, and the slice's end is the symbolic integer T // 2. The model still
# runs, with that part on the portable kernels: nothing tells you unless you read the report.
#
# Moving the size arithmetic to the host avoids it: the app splits each row in two and passes two inputs that share
# one `Dim`, so the model does no size arithmetic at all.

# %%
class HalvesDiff(torch.nn.Module):
    """HalfDiff with the split done by the host: two inputs of equal length (one shared Dim)."""

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        return first - second


halves = Dim("half", min=1, max=32)
halves_art = helpers.lower(HalvesDiff(), (rows[:, :16].contiguous(), rows[:, 16:].contiguous()),
                           dynamic_shapes={"first": {1: halves}, "second": {1: halves}})


def split_on_host(row_batch):
    half_len = row_batch.shape[1] // 2
    return row_batch[:, :half_len].contiguous(), row_batch[:, half_len:].contiguous()


lengths = [torch.randn(2, t, generator=torch.Generator().manual_seed(t)) for t in (2, 4, 10, 64)]
host_ok = all(torch.allclose(halves_art.run(*split_on_host(r))[0], shapes.HalfDiff()(r), atol=1e-5) for r in lengths)
print(halves_art.input_contract())
print(halves_art.delegation().summary(), "· matches HalfDiff on T = 2, 4, 10, 64:", host_ok)

# %% [markdown]
# The host's split also keeps the row lesson 07's derived `Dim` had to drop: T = 2 is `half = 1`, inside this
# contract, and the whole program stays on XNNPACK.

# %% [markdown]
# ## Memory planning against the maximum
#
# The arena is planned for the **largest** input the contract allows. **Predict** what raising the segmenter's
# `max` from 128 to 256 changes:

# %%
questions.ask("08.raise_max")

# %% [markdown]
# Re-export the segmenter with a growing `max` (each point is a real export and lowering; results are cached):

# %%
maxes = [64, 96, 128, 192, 256]
by_max = shapes.segmenters_by_max(maxes)
arena = [by_max[m].planned_memory_bytes() for m in maxes]
coverage = [by_max[m].delegation().coverage for m in maxes]
for m, b, c in zip(maxes, arena, coverage):
    print(f"max side {m:>3}: arena {b:>10,} bytes · {c:.0%} delegated")
print(f"static 64×64:   arena {static.planned_memory_bytes():>10,} bytes · "
      f"{static.delegation().coverage:.0%} delegated")

# %%
plots.series(maxes, {"dynamic (height, width ≤ max)": arena,
                     "static 64×64": [static.planned_memory_bytes()] * len(maxes)},
             xlabel="Dim max (pixels per side)", ylabel="planned arena (bytes)",
             title="TinySegmenter: the arena follows the max")

# %%
per_pixel = [b / (m * m) for m, b in zip(maxes, arena)]
print("arena bytes per pixel of max × max:", ", ".join(f"{v:.1f}" for v in per_pixel))
print(f"at max=64 the dynamic arena is {arena[0] / static.planned_memory_bytes():.1f}× the static one at 64×64")

# %% [markdown]
# The arena grows with max × max (the bytes per pixel of max × max, printed above), and delegation does not change with it:
# the partitioner declines by the *kind* of size, symbolic or not, not by how large it may get. Even at `max=64` the
# dynamic arena is larger than the static one at the same size: the activations between the two delegated pieces now
# live in the planned arena, because a portable kernel reads and writes them. The plan of the `max=64` program (as in
# lesson 06, `made by` says which step writes each tensor):

# %%
pd.DataFrame(shapes.memory_plan(by_max[64])).set_index("#")

# %% [markdown]
# The arena is a property of the program, not of the input: a **small** frame holds the worst case too. A 32×32
# frame on the `max=256` program, against a static 32×32 export:

# %%
_, big, _, _ = shapes.segmenter_program(max_side=256)
_, static_32, frame_32, _ = shapes.segmenter_program(size=32)
(out,) = big.run(frame_32)
print(f"output {tuple(out.shape)} from the max=256 program: arena held {big.planned_memory_bytes():,} bytes")
print(f"a static 32×32 export needs:                 {static_32.planned_memory_bytes():,} bytes")
print(f"ratio: {big.planned_memory_bytes() / static_32.planned_memory_bytes():.0f}×")

# %% [markdown]
# That is why the `max` deserves a real number: it sizes the arena your app reserves every time it loads the model
# (on top of what a delegate allocates for itself: lesson 06 measured XNNPACK's packed weights).
#
# ### ✏️ Exercise 08.arena_budget: the whole fleet, within budget
#
# The fleet's cameras deliver 48×64, 96×64 and 64×112 frames (height × width), and the app can give this model's
# memory plan at most 432 KiB (442,368 bytes). Write the `dynamic_shapes` for `TinySegmenter` (example: the 64×64
# frame) so that every fleet frame passes the host check, runs and matches eager, within that budget. The check
# builds your program and reads its arena.

# %%
# ✏️ Exercise 08.arena_budget — edit this cell, then run the check below.
answer = {"x": {2: Dim("height", min=32, max=256), 3: Dim("width", min=32, max=256)}}

# %%
grade = exercises.check("08.arena_budget", answer)

# %% [markdown]
# ## Latency, measured with the runtime
#
# The same 64×64 frame through each program's runtime call alone (`artifact.bare_call()`: the loaded method, as an
# app's `execute()`, with no check of ours around it), on the runtime's own thread pool. One measurement is the
# median of 100 calls after a warm-up; the whole set is measured 5 times, the programs interleaved, so each ratio
# below comes with its spread across rounds. Timings vary between machines and runs: this output is not compared
# in CI, and the sentences are computed from the numbers above them.

# %% tags=["nbval-ignore-output"]
print(f"the runtime's thread pool: {helpers.runtime_threads()} threads (torch.set_num_threads does not set it)")
portable = helpers.lower(model, (frame,), backend="portable")
rounds = shapes.latency_rounds({
    "segmenter static": (static, (frame,)),
    "segmenter dynamic": (dynamic, (frame,)),
    "segmenter portable only": (portable, (frame,)),
    "classifier static": (vision_static, (frame,)),
    "classifier dynamic": (vision_dynamic, (frame,)),
}, rounds=5, repeat=100)
for name, ms in rounds.items():
    print(f"{name:<24} median {sorted(ms)[len(ms) // 2]:7.3f} ms (rounds: {min(ms):.3f} to {max(ms):.3f})")
print()
print(shapes.ratio_sentence("segmenter, dynamic / static", rounds["segmenter dynamic"], rounds["segmenter static"]))
print(shapes.ratio_sentence("classifier, dynamic / static", rounds["classifier dynamic"], rounds["classifier static"]))
print(shapes.ratio_sentence("segmenter, portable only / XNNPACK static", rounds["segmenter portable only"],
                            rounds["segmenter static"]))

# %% tags=["nbval-ignore-output"]
median = {name: sorted(ms)[len(ms) // 2] for name, ms in rounds.items()}
plots.grouped_bars(["segmenter", "classifier"],
                   {"static": [median["segmenter static"], median["classifier static"]],
                    "dynamic": [median["segmenter dynamic"], median["classifier dynamic"]]},
                   ylabel="median ms per call", title="Same frame, static vs dynamic program", fmt="{:.3f}")

# %% [markdown]
# How to read it: a difference counts only when every round agrees, which is what the sentences test. A dynamic
# shape by itself costs little per call: the runtime resizes each dynamic input to the shape it receives, and the
# XNNPACK delegate propagates the input shapes through its graph before every run, static program or not (its
# prepare step calls `xnn_reshape_runtime` on each call). What costs is what the partitioner declined: a portable
# kernel and a second delegate call on the path of every call. Where everything stayed delegated, the two programs
# run the same operators. Do not conclude "dynamic is slow" or "dynamic
# is free" from one model: measure coverage, then latency, per model, on the device you ship to.

# %% [markdown]
# ## The fixes, each re-checked
#
# **1. Keep the path static.** Normalize frames on the host (lesson 09): one static program, fully delegated, the
# smallest arena.
#
# **2. Buckets.** If the fleet has a few frame sizes, ship one static method per size (lesson 09). Each bucket is a
# static program, so it is delegated like the static export; for this model, entirely:

# %%
fleet = [(48, 64), (64, 64), (96, 96)]
buckets = helpers.lower_methods({f"frame_{h}x{w}": (model, (shapes.camera_frame(h, w),)) for h, w in fleet})
for h, w in fleet:
    method = f"frame_{h}x{w}"
    row = helpers.check_one(model, buckets, (shapes.camera_frame(h, w, seed=1),), method=method)
    print(f"{method}: {buckets.delegation(method).summary().split(': ', 1)[1]} · arena "
          f"{buckets.planned_memory_bytes(method):,} bytes · parity: {row.status}")

# %% [markdown]
# **3. Move the declined operator out of the dynamic program.** The upsample is the only operator XNNPACK declines.
# `LowResSegmenter` stops before it and returns the classes at a quarter of the resolution; the app upsamples them
# (bilinear ×4, a platform image call). A 1×1 convolution and a bilinear upsample commute (the upsample averages
# with weights that sum to 1), so the pipeline still computes what `TinySegmenter` computes:

# %%
show_source(shapes.LowResSegmenter, shapes.upsample_on_host)

# %%
low_res = helpers.lower(shapes.LowResSegmenter(), (frame,), dynamic_shapes=dynamic_shapes)
print(low_res.delegation().summary())
print(f"arena: {low_res.planned_memory_bytes():,} bytes (TinySegmenter with the same Dims: "
      f"{dynamic.planned_memory_bytes():,})")
pipeline_rows = []
for h, w in [(32, 32), (48, 64), (64, 64), (96, 96), (128, 96), (36, 100)]:
    f = shapes.camera_frame(h, w, seed=2)
    (low,) = low_res.run(f)
    same = torch.allclose(shapes.upsample_on_host(low), model(f), atol=1e-5)
    pipeline_rows.append(same)
    print(f"{h}×{w}: .pte + host upsample {'matches' if same else 'DIFFERS from'} eager TinySegmenter")

# %% [markdown]
# Fully delegated again, a smaller arena (the upsample's full-resolution tensors are no longer in it), and the same
# answers.
#
# **4. If you stay dynamic**, set the tightest honest `max` and re-read the delegation report after every change.

# %% [markdown]
# ## Parity: both programs match eager inside their contracts
#
# Probes: values of every kind at 64×64 and, for the dynamic program, each `Dim` at its min, middle and max and one
# step beyond. (The "extremes" probe feeds ±10⁴, so outputs reach ~10⁴; `compare` scales its tolerance with the
# output's magnitude, so float32 rounding in a different summation order is not taken for a divergence.)

# %%
static_report = helpers.compare(model, static, helpers.probe_inputs((frame,)))
dynamic_report = helpers.compare(model, dynamic, helpers.probe_inputs((frame,), dynamic_shapes))
print("static: ", shapes.inside_summary(static_report))
print("dynamic:", shapes.inside_summary(dynamic_report))
print(dynamic_report)

# %% [markdown]
# ## Takeaways
# - A symbolic size can make the partitioner decline an operator (here `upsample_bilinear2d`: "dynamic output sizes
#   are not supported"). The model still runs, on portable kernels, split into more delegate calls: a regression
#   you only see in `art.delegation()` and its reasons.
# - The memory plan is sized for the `max`: the arena grows with it (here with max × max), and every input, however
#   small, holds the worst case.
# - Latency: measure with the runtime, repeat, and call a difference only when every round agrees; per model.
# - Fixes, each re-checked: normalize on the host, static buckets, or move the declined operator out of the program
#   (here the upsample, to the app).
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("08.cost_of_dynamic")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
helpers.set_progress(False)  # the checks below load cached programs: no progress lines
assert static_report.ok_within_contract and dynamic_report.ok_within_contract, dynamic_report.table()
assert static.delegation().portable_nodes == 0 and dynamic.delegation().portable_ops() == ["aten_upsample_bilinear2d_vec"]
assert shapes.declined_reasons(dynamic) == {"aten_upsample_bilinear2d_vec": ["dynamic output sizes are not supported"]}
assert vision_dynamic.delegation().portable_nodes == 0
assert half_static.delegation().portable_nodes == 0 and half_art.delegation().portable_nodes > 0
assert host_ok and halves_art.delegation().portable_nodes == 0
assert arena == sorted(arena) and len(set(coverage)) == 1  # the arena grows with max; delegation does not change
assert max(per_pixel) / min(per_pixel) < 1.1  # ~ max × max
assert arena[0] > static.planned_memory_bytes()
assert [r["made by"] for r in shapes.memory_plan(by_max[64])] == ["input", "delegate", "upsample_bilinear2d", "delegate"]
assert all(buckets.delegation(m).portable_nodes == 0 for m in buckets.methods)
assert low_res.delegation().portable_nodes == 0 and all(pipeline_rows)
assert low_res.planned_memory_bytes() < dynamic.planned_memory_bytes()
expected = {"08.segmenter_delegation": "all but one operator", "08.classifier_portable": "0",
            "08.raise_max": "only the arena"}
assert {q: questions.get(q).actual()[0] for q in expected} == expected
helpers.set_progress(None)
print("parity inside both contracts; the dynamic program loses the upsample to portable kernels; the arena grows "
      "with max; buckets and the host upsample are fully delegated")
