# %% [markdown]
# # 06 · Static shapes are the default
#
# **What you will learn**
# - what `torch.export` records about an input's size when you give it one example: facts, not a type;
# - why that is deliberate: ahead-of-time **memory planning**, a fixed place for every tensor the runtime's
#   instructions pass around, decided before the program ever runs; and what else the process holds;
# - what the ExecuTorch runtime says when an input has another size, rank or dtype, in its own words;
# - how to read the input signature stored **in the `.pte` itself**, through the runtime bindings.
#
# **Terms** (from the table in [lesson 00](00_start_here.ipynb)): export, trace, guard, specialization, input
# contract, memory plan / arena, `.pte`, runtime, delegate, XNNPACK, portable kernels. Two more, used here first:
# **`MethodMeta`** is what the runtime reads from a `.pte` about one method, and **`TensorInfo`** is its record of
# one input or output: sizes, dtype, bytes.
#
# Track 2 is about shapes on the device. This first lesson is the default case: no `dynamic_shapes` at all.

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

import helpers
from helpers import exercises, interview, models, questions
from helpers.display import show_source
from helpers.lessons import shapes
from helpers.lessons.bucketing import letterbox

_ = torch.manual_seed(0)
workdir = tempfile.TemporaryDirectory()  # where this lesson writes .pte files (removed at the end)

# %% [markdown]
# ## The model and its export
#
# A small vision model for camera frames: two strided convolutions, a global average over height and width, a
# linear head. Here it is, whole:

# %%
show_source(models.TinyVision)

# %% [markdown]
# The notebook that exported it used a 64×64 example frame. The app's camera pipeline delivers 48×64 frames (4:3).
# In Python nothing looks wrong: the global average makes eager PyTorch accept any resolution.

# %%
model = models.TinyVision()
frame_64 = shapes.camera_frame(64, 64)  # the notebook's example
artifact = helpers.lower(model, (frame_64,))  # export → XNNPACK → .pte, loaded in the runtime

camera = shapes.camera_frame(48, 64)  # what the device actually hands to forward()
print("eager, 64×64 frame:", helpers.fmt(model(frame_64)))
print("eager, 48×64 frame:", helpers.fmt(model(camera)))

# %% [markdown]
# **Predict.** What does the `.pte` do with the 48×64 frame? Pick an answer, then press *Reveal* (it runs the real
# runtime).

# %%
questions.ask("06.camera_frame")

# %% [markdown]
# ## The trap, live
#
# The same 48×64 frame, through the `.pte` in the ExecuTorch runtime. `run_raw` passes the input to the runtime
# with no check of ours in between: what you see is the runtime's own answer. (On a program with a dynamic axis,
# `run_raw` refuses a few inputs before the runtime, because they are undefined behaviour there; lesson 07 shows
# them. This program has none.)

# %%
err = helpers.show_error(artifact.run_raw, camera)

# %% [markdown]
# That is the line your app's log shows: *Attempted to resize a static tensor. Expected shape (1, 3, 64, 64), but
# received (1, 3, 48, 64)*, then `set_inputs() … failed with error 0x10` (in ExecuTorch's `runtime/core/error.h`,
# 0x10 is `NotSupported`; `InvalidArgument` is 0x12). It is a contract
# violation at the runtime boundary, not a bug in the model. Nothing resizes the frame and nothing recompiles:
# there is no compiler on the phone.

# %% [markdown]
# ## Why it happens
#
# ### 1. Export records sizes as facts
#
# `torch.export` runs `forward()` once with the example. Every `x.shape` read during that run returns a plain
# Python `int`, so arithmetic on sizes is folded into constants. `FrameTokens` reads all four sizes of its input to
# flatten a frame into pixel tokens and add a position ramp:

# %%
show_source(shapes.FrameTokens)

# %%
tokens_model = shapes.FrameTokens()
exported = torch.export.export(tokens_model, (frame_64,))
print(exported.graph_module.code.strip())

# %% [markdown]
# The reshape target is the literal `[1, 3, 4096]`, the ramp is `linspace(0, 1, 4096)`, and the broadcast of a
# `(4096, 1)` ramp against `(1, 4096, 3)` tokens is fixed. This graph is valid for one geometry only.
#
# Export also records **guards** that state those assumptions. The exported program checks them when you call it
# in Python; its `range_constraints` (the ranges of sizes that may vary) are empty:

# %%
print("sizes that may vary:", exported.range_constraints)
err = helpers.show_error(exported.module(), shapes.camera_frame(48, 64))

# %% [markdown]
# ### 2. Static shapes are what make memory planning possible
#
# `to_executorch()` computes, before the program ever runs, how big one arena must be and at which **offset**
# every intermediate tensor lives in it. Tensors whose lifetimes do not overlap share bytes. On the device the
# arena is allocated once, when the method loads, and the runtime's own instructions then run without calling
# `malloc`: what you want in an app with a tight memory budget and an operating system that kills memory hogs.
# (A delegate is another matter: we measure it below.)
#
# The plan can be read back from the serialized program. With the portable kernels only (no delegate), every
# intermediate tensor is in it; `#` numbers the tensors in execution order, and `made by` is the kernel that
# writes each one:

# %%
portable = helpers.lower(model, (frame_64,), backend="portable")
plan = shapes.memory_plan(portable)
pd.DataFrame(plan).set_index("#")

# %%
shapes.plot_memory_plan(plan, "TinyVision at 64×64: every tensor at a fixed offset")

# %%
relu_out = next(r for r in plan if r["made by"] == "relu")
frame_in = next(r for r in plan if r["made by"] == "input")
print(f"#{relu_out['#']} (the first relu's output, {relu_out['bytes']:,} bytes) is at offset {relu_out['offset']:,}: "
      f"the bytes the input frame #{frame_in['#']} used (offset {frame_in['offset']:,}) until the first "
      "convolution had read it.")
print(f"arena with the portable kernels: {portable.planned_memory_bytes():,} bytes")
xnn_plan = shapes.memory_plan(artifact)
print(f"arena with XNNPACK:              {artifact.planned_memory_bytes():,} bytes = "
      + " + ".join(f"{r['bytes']:,} ({r['made by']})" for r in xnn_plan) + " + 64")

# %% [markdown]
# With XNNPACK the arena holds the input and the delegate's output only: XNNPACK keeps its intermediates in memory
# of its own. The last 64 bytes are padding: ExecuTorch's memory planner adds 64 bytes to every buffer of a program
# that contains an XNNPACK delegate (`extra_padding = 64` in `exir/memory_planning.py`; the source gives no reason).

# %% [markdown]
# Same offset, different times: the arena's size is a property of the program, and every offset above was computed
# from 1×3×64×64.
#
# ### What the process really holds
#
# The arena is what the runtime's instructions need. It is not all the memory your app holds while the model
# runs: the program's bytes (weights included) stay loaded, and XNNPACK, when a method loads, rebuilds its graph
# and packs the weights into memory it allocates itself, beside a workspace for its intermediates. `WideMLP` is
# two 1024×1024 linear layers, 8.4 MB of weights, lowered to XNNPACK. Measured in a fresh process, how much the
# process grows when it loads the method (the figure varies a little from run to run):

# %% tags=["nbval-ignore-output"]
wide = shapes.WideMLP()
wide_art = helpers.lower(wide, (torch.randn(1, 1024),))
held = shapes.process_memory(wide_art, [(1, 1024)])
print(f".pte file:                      {wide_art.nbytes / 1e6:5.2f} MB")
print(f"arena:                          {wide_art.planned_memory_bytes() / 1e6:5.2f} MB")
print(f"process growth at load_method:  {held['load_method'] / 1e6:5.2f} MB")

# %% [markdown]
# The arena is 8 KB, yet loading the method grows the process by about the size of the weights again: that is
# XNNPACK's packed copy, held for as long as the method is loaded, next to the program's own bytes. Budget for all
# of it, not for the arena alone.

# %% [markdown]
# ### 3. What the runtime checks, in its own words
#
# Before the list below, two predictions. A 32×128 frame has exactly as many pixels as 64×64:

# %%
questions.ask("06.same_pixels")

# %% [markdown]
# And the camera's raw buffer is often channels-last: 1×64×64×3. Write `"match"`, `"diverge"` or `"rejected"`
# below, then run the cell.

# %%
my_prediction = None  # "match", "diverge" or "rejected"
questions.reveal("06.channels_last", my_prediction)

# %% [markdown]
# Six inputs the camera code might plausibly produce, all sent to the runtime as they are:

# %%
attempts = {
    "48×64 frame (another resolution)": shapes.camera_frame(48, 64),
    "32×128 frame (the same 4,096 pixels)": shapes.camera_frame(32, 128),
    "32×32 frame (a quarter of the bytes)": shapes.camera_frame(32, 32),
    "1×64×64×3 (channels-last buffer)": frame_64.permute(0, 2, 3, 1).contiguous(),
    "3×64×64 (batch axis forgotten)": frame_64[0],
    "1×3×64×64 float16": frame_64.half(),
}
for what, tensor in attempts.items():
    try:
        artifact.run_raw(tensor)
        print(f"{what}: accepted")
    except helpers.RuntimeRejectedError as exc:
        print(f"{what}: rejected by the runtime\n    {exc.reason.split('. Error')[0]}")

# %% [markdown]
# Sizes, rank and dtype are each compared with what the `.pte` recorded. Look at the 32×32 frame: a quarter of the
# bytes, it would fit where the 64×64 input lives, and it is refused all the same. The refusal is not a memory
# check: for an input without a dynamic axis the runtime requires exactly the recorded shape before anything runs
# ("Attempted to resize a static tensor"). Where is that record?

# %% [markdown]
# ### 4. Read the signature from the `.pte` itself
#
# `artifact.input_contract()` is what *our* library remembered at export time. On a device there is only the file.
# The runtime bindings load it and expose `MethodMeta`: per input a `TensorInfo` with sizes, dtype, whether it is
# memory-planned, and its bytes. The plain calls, with nothing of exportlab in between:

# %%
from executorch.runtime import Runtime

pte_path = artifact.save(Path(workdir.name) / "tiny_vision.pte")  # the file you would ship
program = Runtime.get().load_program(pte_path)
meta = program.metadata("forward")  # keep `program` alive while you read `meta`: meta points into it
print(meta)
print("inputs:", meta.num_inputs(), "· input 0 sizes:", tuple(meta.input_tensor_meta(0).sizes()),
      "· bytes:", meta.input_tensor_meta(0).nbytes())

# %% [markdown]
# `sizes=[1, 3, 64, 64]` and `nbytes=49152` (1·3·64·64 values of 4 bytes). This is the first thing to look at when
# a device rejects inputs, with one caution: `sizes()` is the **largest** shape the input may have, and `MethodMeta`
# does not say whether an axis may vary. A program exported with a dynamic height up to 64 reports the very same
# sizes. The program's flatbuffer does record it, per input, as its `TensorShapeDynamism` (reading it takes the
# compiler's deserializer, not the runtime):

# %%
from helpers.serialized import input_dynamism
from torch.export import Dim

up_to_64 = helpers.lower(model, (frame_64,), dynamic_shapes={"x": {2: Dim("height", min=32, max=64)}})
recorded = {}
for name, art in {"static": artifact, "height up to 64": up_to_64}.items():
    signature = shapes.read_signature(art)["forward"]  # keeps its program alive while we read it
    sizes = tuple(signature.input_tensor_meta(0).sizes())
    dynamism = input_dynamism(art.save(Path(workdir.name) / f"{name}.pte").read_bytes())["forward"]
    recorded[name] = (sizes, dynamism)
    print(f"{name:<16} MethodMeta sizes {sizes} · flatbuffer: {dynamism}")

# %% [markdown]
# This file's input is `STATIC`: the contract is the example. The host-side view says the same, and `run` (which
# checks the contract before calling the runtime) spells out the fix:

# %%
print(artifact.input_contract())
err = helpers.show_error(artifact.run, camera)

# %% [markdown]
# ### ✏️ Exercise 06.read_signature: the shapes a file records
#
# A colleague sends you `.pte` files and asks what shapes each one records. Write `input_shapes(pte_path)`: the
# shape of **every** input of `forward`, read from the file with the runtime bindings, as a list of tuples (for a
# dynamic input, the largest shape: what `MethodMeta` gives). The check builds three real files, with other shapes at
# each check (one input; two inputs; an input with dynamic height and width), runs your function on each and compares
# with what the file records.

# %%
# ✏️ Exercise 06.read_signature — edit this cell, then run the check below.
from executorch.runtime import Runtime


def input_shapes(pte_path):
    """The shape of every input of the forward method, read from the .pte file."""
    return [(1, 3, 64, 64)]  # what this lesson's file records; other files record other things


answer = input_shapes

# %%
grade = exercises.check("06.read_signature", answer)

# %% [markdown]
# ## Try it: the camera frame picker
#
# Pick a camera resolution. Each change runs eager PyTorch and the cached `.pte` (no export, no lowering) and shows
# the verdict. Try the resolutions with the same pixel count, then switch the host step to *letterbox on host*
# (lesson 09 builds it): the frame is resized, keeping its aspect ratio, and padded to 64×64 before it reaches the
# model.

# %%
explorer = shapes.camera_explorer()
explorer

# %%
for label, resolution in shapes.CAMERA_RESOLUTIONS:
    print(f"{label:<36} {explorer.set(resolution=resolution, preprocess='none').verdict}")
explorer.set(resolution=(64, 64)).verdict

# %% [markdown]
# ## The fixes
#
# Nothing about the `.pte` can change on the device. The choice is made on the build machine:
#
# 1. **Normalize on the host** (lesson 09): resize and letterbox every frame to 64×64 in the app. The graph stays
#    static. Usually the right answer for vision.
# 2. **Declare a bounded dynamic dimension** (lesson 07): `Dim("height", min=32, max=128)`; its costs are lesson 08.
# 3. **Ship buckets** (lesson 09): a few static shapes, as methods of one `.pte`.
#
# Fix 1 on the device's 48×64 frame: the app letterboxes, the unchanged `.pte` runs.

# %%
boxed = letterbox(camera, 64)
print("letterboxed shape:", tuple(boxed.shape))
print("eager on the letterboxed frame:", helpers.fmt(model(boxed)))
print(".pte on the letterboxed frame: ", helpers.fmt(artifact.run(boxed)[0]))

# %% [markdown]
# A fix is done only when it is re-checked. Frames from every camera size, letterboxed, against eager on the same
# letterboxed frames; then where the graph runs and what it reserves:

# %%
letterboxed = [helpers.Probe(f"camera {h}×{w}, letterboxed", (letterbox(shapes.camera_frame(h, w), 64),))
               for _, (h, w) in shapes.CAMERA_RESOLUTIONS]
fix_report = helpers.compare(model, artifact, letterboxed)
print(fix_report)
print(artifact.delegation().summary())
print(f"arena: {artifact.planned_memory_bytes():,} bytes (the program did not change)")

# %% [markdown]
# (The model now sees scaled and padded frames: train and evaluate it with the same preprocessing. That is a
# question of accuracy, not of the runtime.)

# %% [markdown]
# ## Parity: the static export matches eager on everything it accepts
#
# A varied probe set: values of every kind at 1×3×64×64, and each axis nudged by ±1 (outside the contract on
# purpose). The report groups identical outcomes, one line per reason:

# %%
report = helpers.compare(model, artifact, helpers.probe_inputs((frame_64,)))
print(report)

# %% [markdown]
# Inside the contract, every probe matches. Outside it, the runtime rejects every other size; the probes with 2 or
# 4 channels fail in eager PyTorch already (the first convolution wants 3), and the runtime rejects those too.

# %% [markdown]
# ## Takeaways
# - An example input is a **contract**: export turns every size it reads into a constant and folds size arithmetic
#   (reshape targets, broadcasts) into literals.
# - That is on purpose: static sizes let `to_executorch()` plan one arena with a fixed offset per tensor, so the
#   runtime's instructions run without allocating. A delegate holds memory of its own besides (XNNPACK's packed
#   weights and workspace): the arena is not all the app needs.
# - The runtime compares sizes, rank and dtype with the `.pte`'s recorded `TensorInfo` and refuses anything else
#   ("Attempted to resize a static tensor…"). It never resizes and never recompiles.
# - When a device rejects inputs, read the signature from the file (`program.metadata("forward")`), reproduce with
#   the device's real shape, then choose: normalize on the host, a bounded `Dim`, or buckets.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("06.static_reject")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
helpers.set_progress(False)  # the checks below load cached programs: no progress lines
assert report.ok_within_contract, report
assert all(r.status in ("rejected", "eager_error") for r in report if not r.within_contract), report.table()
assert all("static tensor" in r.runtime_message for r in report if r.status == "eager_error"), report.table()
assert all(r.status == "rejected" and "static tensor" in r.runtime_message
           for r in report if not r.within_contract and r.status == "rejected"), report.table()
assert fix_report.ok and artifact.delegation().portable_nodes == 0
assert sum(r["bytes"] for r in xnn_plan) + 64 == artifact.planned_memory_bytes()  # input + output + 64 padding
try:  # a frame with fewer bytes than planned is refused too: the static-shape check, not a memory check
    artifact.run_raw(shapes.camera_frame(32, 32))
    raise AssertionError("the runtime accepted a 32×32 frame")
except helpers.RuntimeRejectedError as exc:
    assert "static tensor" in exc.reason
assert recorded == {"static": ((1, 3, 64, 64), ["STATIC"]), "height up to 64": ((1, 3, 64, 64), ["DYNAMIC_BOUND"])}
weights = sum(p.numel() * 4 for p in wide.parameters())
assert wide_art.planned_memory_bytes() == 8_256 and 0.8 * weights < held["load_method"] < 1.5 * weights, held
assert [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())] == [(1, 3, 64, 64)]
assert all(questions.get(q).actual()[0] == "rejected" for q in ("06.camera_frame", "06.same_pixels", "06.channels_last"))
print(f"parity inside the contract ({report.summary()}); letterboxed frames: {fix_report.summary()}; "
      f"{artifact.delegation().summary()}")
helpers.set_progress(None)
workdir.cleanup()
