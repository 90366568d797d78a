# %% [markdown]
# # 06 · Static shapes are the default
#
# **What you will learn**
# - what `torch.export` records about an input's size when you give it one example: facts, not a type;
# - why that is deliberate: ahead-of-time **memory planning**, so the device allocates (almost) nothing while it runs;
# - what the ExecuTorch runtime says when the input has another size, another rank or another dtype — its own words;
# - how to read the input signature stored **in the `.pte` itself** (`MethodMeta` / `TensorInfo`) through the runtime bindings.
#
# Track 2 is about shapes on device. This first lesson is the default case: no `dynamic_shapes` at all.

# %%
import tempfile
from pathlib import Path

import pandas as pd
import torch

import helpers
from helpers.lessons import shapes
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# A small vision model (`helpers.models.TinyVision`: two convolutions, a global average, a linear head)
# is exported with a 64×64 example frame — the size the notebook happened to use. The phone's camera
# pipeline delivers 48×64 frames (4:3). In Python, nothing looks wrong: the model has global pooling,
# so eager PyTorch accepts any resolution.

# %%
model, artifact, frame_64 = shapes.vision_program()
camera = shapes.camera_frame(48, 64)  # what the device actually hands to forward()

print("eager, 64×64 frame:", helpers.fmt(model(frame_64)))
print("eager, 48×64 frame:", helpers.fmt(model(camera)))

# %% [markdown]
# Now the same 48×64 frame through the `.pte` in the ExecuTorch runtime, with no help from the host
# (`run_raw` is exactly what a device does):

# %%
err = helpers.show_error(artifact.run_raw, camera)

# %% [markdown]
# That is the message your app's log shows: *Attempted to resize a static tensor. Expected shape
# (1, 3, 64, 64), but received (1, 3, 48, 64)*, then `set_inputs() … failed with error 0x10`
# (`InvalidArgument`). It is a contract violation at the runtime boundary, not a model error. Nothing
# resizes the frame, and nothing recompiles: there is no compiler on the phone.

# %% [markdown]
# ## Why it happens
#
# ### 1. Export records sizes as facts
#
# `torch.export` runs `forward()` once with the example. Every `x.shape` read during that run returns
# a plain Python `int`, so any arithmetic on sizes is folded into constants. `shapes.FrameTokens` reads
# all four sizes of its input to flatten the frame into pixel tokens and add a position ramp:

# %%
tokens_model = shapes.FrameTokens()
exported = torch.export.export(tokens_model, (frame_64,))
print(exported.graph_module.code.strip())

# %% [markdown]
# The reshape target is the literal `[1, 3, 4096]`; the ramp is `linspace(0, 1, 4096)`; the broadcast of
# a `(4096, 1)` ramp against `(1, 4096, 3)` tokens is fixed. This graph is valid for one geometry only.
#
# Export also attaches **guards** that state those assumptions. The exported program checks them when
# you call it in Python, and its range constraints are empty (no size is a symbol):

# %%
print("symbolic sizes:", exported.range_constraints)
err = helpers.show_error(exported.module(), shapes.camera_frame(48, 64))

# %% [markdown]
# ### 2. Static shapes are what make memory planning possible
#
# `to_executorch()` computes, before the program ever runs, how big one arena must be and at which
# **offset** every intermediate tensor lives inside it. Tensors whose lifetimes do not overlap share
# bytes. On the device the runtime allocates that arena once and then walks the instructions without
# calling `malloc` — what you want in an app with a tight memory budget and an OS that kills memory hogs.
#
# We can read the plan back from the serialized program. With the portable kernels (no delegate), every
# intermediate is in the plan:

# %%
portable = helpers.lower(model, (frame_64,), backend="portable")
plan = shapes.memory_plan(portable)
pd.DataFrame(plan)

# %%
shapes.plot_memory_plan(plan, "TinyVision at 64×64: every tensor at a fixed offset")

# %% [markdown]
# Same offset, different times: the ReLU's 1×8×32×32 output (#3) sits at offset 0, in the bytes the
# input frame (#1) occupied until the first convolution had read it. Nothing is allocated while the
# program runs; the arena's size is a property of the program:

# %%
print(f"portable kernels: arena of {portable.planned_memory_bytes():,} bytes")
print(f"XNNPACK:          arena of {artifact.planned_memory_bytes():,} bytes (input + output; XNNPACK keeps "
      "its intermediates in its own workspace)")

# %% [markdown]
# Every offset above was computed from the sizes 1×3×64×64. A 48×64 frame would need other sizes,
# other offsets, another arena: a different program. So the runtime refuses it.

# %% [markdown]
# ### 3. What the runtime checks, in its own words
#
# Four inputs the camera code might plausibly produce, all sent through `run_raw`:

# %%
attempts = {
    "48×64 frame (another resolution)": shapes.camera_frame(48, 64),
    "32×128 frame (same 4,096 pixels)": shapes.camera_frame(32, 128),
    "3×64×64 (batch axis forgotten)": frame_64[0],
    "1×3×64×64 float16": frame_64.half(),
}
for what, tensor in attempts.items():
    try:
        artifact.run_raw(tensor)
        print(f"{what}: accepted")
    except helpers.RuntimeRejectedError as exc:
        print(f"{what}: rejected\n    {exc.reason.split(';')[0]}")

# %% [markdown]
# Shape, rank and dtype are each checked against what the `.pte` recorded. Where is that record?

# %% [markdown]
# ### 4. Read the signature from the `.pte` itself
#
# `art.input_contract()` is what *our* library remembered at export time. On a device there is only the
# file. The ExecuTorch runtime bindings load it and expose `MethodMeta` — per input a `TensorInfo` with
# sizes, dtype, whether it is memory-planned and its byte size. This is the first thing to look at when
# a device rejects inputs:

# %%
with tempfile.TemporaryDirectory() as tmp:
    pte_path = artifact.save(Path(tmp) / "tiny_vision.pte")
    signature = shapes.read_signature(pte_path)
meta = signature["forward"]
print(meta)
print("input 0 sizes:", tuple(meta.input_tensor_meta(0).sizes()), "· nbytes:", meta.input_tensor_meta(0).nbytes())

# %% [markdown]
# `sizes=[1, 3, 64, 64]`, `nbytes=49152` (= 1·3·64·64·4): the contract is the example. Our host-side
# view says the same, with the fix spelled out:

# %%
print(artifact.input_contract())
err = helpers.show_error(artifact.run, camera)

# %% [markdown]
# ## Try it: the camera frame picker
#
# Pick a camera resolution. Each change runs eager PyTorch and the cached `.pte` (no export, no lowering)
# and shows the verdict. Try the resolutions with the same pixel count, then switch the host step to
# *letterbox on host* (lesson 09 builds it): the frame is resized, keeping its aspect ratio, and padded
# to 64×64 before it reaches the model.

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
# Nothing about the `.pte` can be changed on the device. The choice is made on the build machine:
#
# 1. **Normalize on the host** (lesson 09): resize/letterbox every frame to 64×64 in the app. The graph
#    stays static and fully delegated. Usually the right answer for vision.
# 2. **Declare a bounded dynamic dimension** (lesson 07): `Dim("height", min=32, max=128)`; costs in
#    lesson 08.
# 3. **Ship buckets** (lesson 09): a few static shapes as methods of one `.pte`.
#
# Fix 1 in three lines, on the device's 48×64 frame:

# %%
from helpers.lessons.bucketing import letterbox

boxed = letterbox(camera, 64)
print("letterboxed shape:", tuple(boxed.shape))
print("eager:", helpers.fmt(model(boxed)))
print(".pte: ", helpers.fmt(artifact.run_raw(boxed)[0]))

# %% [markdown]
# ## Exercises
#
# **1. Predict, then reveal.** The camera's raw buffer is often channels-last: 1×64×64×3. Same number of
# elements as the 1×3×64×64 export, same dtype, same rank. Record your prediction, then run the check.

# %%
my_prediction = "rejected"  # "accepted" or "rejected"

# %%
channels_last = frame_64.permute(0, 2, 3, 1).contiguous()
try:
    artifact.run_raw(channels_last)
    actual, why = "accepted", "the runtime ran it"
except helpers.RuntimeRejectedError as exc:
    actual, why = "rejected", exc.reason.split(";")[0]
helpers.display.check_prediction(my_prediction, actual, why)

# %% [markdown]
# **2. Predict, then reveal (widget).** A 96×96 frame has *more* pixels than the plan holds; a 32×32
# frame has fewer. Is the smaller one accepted?

# %%
def reveal_small_frame():
    row = helpers.check_one(model, artifact, (shapes.camera_frame(32, 32),))
    return row.status, row.runtime_message.split(";")[0]


quiz = PredictThenReveal("A 32×32 frame on the 64×64 export?", ["match", "rejected"], reveal_small_frame)
quiz

# %%
quiz.answer("rejected")  # what a learner pressing the buttons would see
print(quiz.actual)

# %% [markdown]
# **3. Change the code.** In the first cell, export with a 48×64 example instead
# (`shapes.camera_frame(48, 64)` with `helpers.lower(model, (frame,))`) and re-run the picker: now
# 64×64 is the rejected size. The contract is whatever the example was.

# %% [markdown]
# ## Parity: the static export matches eager on everything it accepts
#
# A varied probe set: values of every kind at 1×3×64×64, and every axis nudged by ±1 (outside the
# contract on purpose). Inside the contract every probe matches; outside it, every probe is refused
# (by the runtime, or already by eager for a wrong channel count).

# %%
report = helpers.compare(model, artifact, helpers.probe_inputs((frame_64,)))
report

# %%
assert report.ok_within_contract, report
assert all(r.status in ("rejected", "eager_error") for r in report if not r.within_contract), report
print(report.summary())

# %% [markdown]
# ## Takeaways
# - An example input is a **contract**: export turns every size it sees into a constant and folds size
#   arithmetic (reshape targets, broadcasts) into literals.
# - That is on purpose: static sizes let `to_executorch()` plan one arena with a fixed offset per tensor,
#   so the device runs without dynamic allocation.
# - The runtime checks shape, rank and dtype against the `.pte`'s recorded `TensorInfo` and refuses
#   anything else ("Attempted to resize a static tensor…"). It never resizes and never recompiles.
# - When a device rejects inputs, read the signature from the file (`Program.metadata(name)` →
#   `MethodMeta`), reproduce with the device's real shape, then choose: normalize, bounded `Dim`, or buckets.
#
# ## Interview answer
# *"Why does the exported model reject a different input size on the device?"* — Because export
# specializes by default: it records the example's sizes as facts, constant-folds every reshape and
# broadcast against them, and guards on them. That is what lets `to_executorch()` plan memory ahead of
# time, so the runtime allocates an arena once and never mallocs — exactly what you want on a phone. The
# flip side is that a different resolution is a contract violation at the runtime boundary ("attempted to
# resize a static tensor"); nothing recompiles on the device. I'd confirm it by reading the `.pte`'s
# `MethodMeta`, reproduce it by loading the `.pte` with the device's real shape, and then pick
# deliberately: letterbox on the host, a bounded `Dim`, or a few buckets.
