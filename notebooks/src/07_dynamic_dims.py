# %% [markdown]
# # 07 · Declaring dimensions dynamic
#
# **What you will learn**
# - how `dynamic_shapes` names the axes allowed to vary, each with a `Dim` that has a **name** and a **range**;
# - that one `Dim` object used on two inputs asserts their axes are **equal** (token ids and their mask);
# - what happens outside the bounds — at export time, and at run time on the device;
# - `Dim.AUTO` / `Dim.DYNAMIC` / `Dim.STATIC` for exploring versus a named, bounded `Dim` for an artifact you ship;
#   why an unbounded `Dim` is a trap on ExecuTorch;
# - what the `.pte` **actually** checks at run time (rank and element capacity — export's asserts are stripped),
#   and the host-side check that catches the rest;
# - the guards export adds when `forward()` does arithmetic on a dynamic size, and how to answer them.

# %%
import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import models
from helpers.lessons import shapes
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
g = torch.Generator().manual_seed(0)  # every random input below comes from this generator

# %% [markdown]
# ## The trap, live
#
# `ShapeBranch` normalises a clip over time — which only makes sense with at least two frames, so the
# author declares `Dim("frames", min=2, max=16)`. Clips of 2…16 frames work on the device. Then a
# one-frame clip arrives:

# %%
clip_model = models.ShapeBranch()
clip = torch.randn(1, 8, 4, generator=g)
frames = Dim("frames", min=2, max=16)
clip_art = helpers.lower(clip_model, (clip,), dynamic_shapes={"x": {1: frames}})

one_frame = torch.randn(1, 1, 4, generator=g)
print("eager:", helpers.fmt(clip_model(one_frame)))
print(".pte: ", helpers.fmt(clip_art.run_raw(one_frame)[0]))

# %% [markdown]
# No error, no warning: the device ran a shape the export excluded and returned NaN. The `min=2` you
# declared is **not checked by the runtime**. Eager PyTorch skipped the normalisation for one frame; the
# `.pte` contains only the normalising branch (export decided `x.shape[1] > 1` from the range), and the
# standard deviation of one value is NaN.

# %% [markdown]
# ## Declaring a dimension: names and ranges
#
# `dynamic_shapes` maps each input (by its `forward()` parameter name) to the axes allowed to vary.
# `TokenPool` takes token ids and a mask; both have a sequence axis:

# %%
token_model = models.TokenPool()
ids = torch.randint(0, 32, (1, 16), generator=g)
mask = torch.ones(1, 16)
seq = Dim("seq", min=1, max=64)
token_art = helpers.lower(token_model, (ids, mask), dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
token_art.input_contract()

# %% [markdown]
# ### One `Dim` on two inputs means "equal"
#
# Using the **same** `Dim` object for `ids` and `mask` says "these axes always have the same length".
# If you give them separate `Dim`s, export finds that `forward()` multiplies them elementwise — which
# only works when they are equal — and refuses, with the fix:

# %%
d = helpers.diagnose_export(token_model, (ids, mask), {"ids": {1: Dim("ids_len", min=1, max=64)},
                                                        "mask": {1: Dim("mask_len", min=1, max=64)}}, lower=False)
print(next(line.strip() for line in d.message.splitlines() if "must always be equal" in line))
print("torch suggests:", d.suggested_fixes)

# %% [markdown]
# ### Outside the bounds, at export time
#
# The example itself must lie inside the range you declare:

# %%
err = helpers.show_error(torch.export.export, token_model, (ids, mask),
                         dynamic_shapes={"ids": {1: Dim("seq", min=1, max=8)}, "mask": {1: Dim("seq", min=1, max=8)}})

# %% [markdown]
# ### Outside the bounds, at run time
#
# Above `max`, the runtime refuses: the memory plan reserved room for 64 tokens and not one more.

# %%
long_ids, long_mask = torch.randint(0, 32, (1, 65), generator=g), torch.ones(1, 65)
err = helpers.show_error(token_art.run_raw, long_ids, long_mask)

# %% [markdown]
# Below `min` it does not (the trap above). And the tie between `ids` and `mask`? Export stated it, but
# the runtime does not check it either: it would hand both lengths to the XNNPACK delegate, whose shape
# propagation fails on them. In ExecuTorch 1.5.1 such a failure can leave process-wide XNNPACK state broken
# (programs loaded *afterwards* fail too): undefined behaviour, on a phone as much as here. So `run_raw`,
# which otherwise does exactly what the device does, refuses this class of input before the runtime, and
# says why:

# %%
err = helpers.show_error(token_art.run_raw, torch.randint(0, 32, (1, 10), generator=g), torch.ones(1, 12))

# %% [markdown]
# ## What the `.pte` actually enforces
#
# ExecuTorch **strips export's runtime assertions** (the guards that `exported.module()` checks in Python).
# What the runtime keeps for a dynamic input is its rank and one *maximum* shape — the memory plan's
# capacity. Look at the signature stored in the file for `TinyVision` re-exported with bounded height and width:

# %%
vision_model, _, frame_64 = shapes.vision_program()
hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
bounded = helpers.lower(vision_model, (frame_64,), dynamic_shapes=hw)
print(shapes.read_signature(bounded)["forward"])
print(bounded.input_contract())

# %% [markdown]
# `sizes=[1, 3, 128, 128]` is all the device knows: rank 4 and at most 49,152 elements. So the runtime
# accepts any rank-4 frame that fits in that many elements, whatever its axes — including a height above
# `max` and a size below `min`:

# %%
for shape in [(1, 3, 48, 64), (1, 3, 160, 64), (1, 3, 16, 16), (1, 3, 200, 200), (2, 3, 64, 64)]:
    row = helpers.check_one(vision_model, bounded, (torch.rand(*shape, generator=g),))
    print(f"{str(shape):<16} {row.describe()}")
    if row.status == "rejected":
        print(f"{'':<17}runtime: {row.runtime_message.split(';')[0]}")

# %% [markdown]
# 160×64 and 16×16 are outside the declared ranges and run anyway ("silently accepted"). 200×200 exceeds
# the capacity and is refused by the runtime's input check. A batch of 2 fits the capacity and passes the
# input check; XNNPACK then fails mid-execution — a kernel may or may not catch what the contract would have.
#
# **The host-side check.** The app must enforce the contract itself, before calling the model.
# `art.run` does exactly that: it checks the full contract (dtypes, static sizes, every `Dim`'s min and max,
# tied axes) and says what is wrong and how to fix it:

# %%
err = helpers.show_error(clip_art.run, one_frame)

# %%
err = helpers.show_error(bounded.run, torch.rand(1, 3, 160, 64, generator=g))

# %%
err = helpers.show_error(token_art.run, torch.randint(0, 32, (1, 10), generator=g), torch.ones(1, 12))

# %% [markdown]
# ## `Dim.AUTO`, `Dim.DYNAMIC`, `Dim.STATIC` — and an unbounded `Dim`
#
# Recent torch versions let you mark an axis with a hint instead of a named range. Here is what each
# records for the frames axis of `ShapeBranch` (example: 8 frames). `planned` is the capacity the
# ExecuTorch memory plan reserved for that axis — what the device will accept at most:

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
# Three things to read in that table:
#
# - `Dim.AUTO` let export **infer** the range, and it quietly narrowed the minimum to 2 (the branch needs it):
#   convenient for exploring, but the contract is now whatever export decided.
# - Without a `max` (`AUTO`, `DYNAMIC`, or a bare `Dim('frames')`), export records `∞`, and ExecuTorch cannot
#   plan infinity: it plans the axis at the **example's size**. The "dynamic" artifact accepts at most 8 frames:

# %%
auto_art = helpers.lower(clip_model, (clip,), dynamic_shapes={"x": {1: Dim.AUTO}})
err = helpers.show_error(auto_art.run_raw, torch.randn(1, 12, 4, generator=g))

# %% [markdown]
# - `Dim.AUTO` also hides specialization. `BatchLoop` unrolls `for i in range(x.shape[0])`; with `AUTO` the
#   batch silently becomes static, while `DYNAMIC` or a named `Dim` turns the same fact into an export error:

# %%
loop_modes = shapes.dim_modes(models.BatchLoop(), (torch.randn(3, 4, generator=g),), "x", 0, {
    "Dim.AUTO": Dim.AUTO, "Dim.DYNAMIC": Dim.DYNAMIC, "Dim('batch', max=8)": Dim("batch", max=8)})
for row in loop_modes:
    print(f"{row['spec']:<20} {row['recorded']:<13} {row['note'][:110]}")

# %% [markdown]
# For an artifact you ship, write the contract yourself: a **named** `Dim` with an explicit `min` and
# `max`. The name shows up in errors and in the contract; the `max` turns a potential out-of-memory on
# a phone into a decision made at export time (and sizes the arena — lesson 08).

# %% [markdown]
# ## Guards on dynamic dimensions
#
# When `forward()` does arithmetic on a dynamic size, export must know the arithmetic holds for **every**
# size in the range. If it does not, export adds a guard and refuses, suggesting a constraint.
#
# **`x.view(x.shape[0] * 4, -1)`** — `shapes.ChunkMean` splits each row into 4 chunks and averages them:

# %%
x = torch.randn(2, 32, generator=g)
d = helpers.diagnose_export(shapes.ChunkMean(), (x,), {"x": {1: Dim("T", min=4, max=64)}}, lower=False)
print(d.message.strip().splitlines()[1].strip())
print("torch suggests:", " | ".join(d.suggested_fixes))

# %% [markdown]
# The view needs `T` to be a multiple of 4. Two answers:
#
# 1. **Adopt the constraint**: declare `T` as `4 * chunk` (a *derived* `Dim`). Lengths that are not a multiple of
#    4 are now outside the contract — the host pads to the next multiple of 4.
# 2. **Rewrite** so the model does no size arithmetic: the host hands over the input already as
#    `(B, 4, L)` (`shapes.ChunkedMean`), and `L` is a plain `Dim`.
#
# (The contract below says `4*chunk ∈ [8, 64]`, not `[4, 64]`: export assumes a dynamic size is never 0 or 1
# while tracing, so `chunk` starts at 2. The host check says so; the runtime would not.)

# %%
chunk = Dim("chunk", min=1, max=16)
chunk_art = helpers.lower(shapes.ChunkMean(), (x,), dynamic_shapes={"x": {1: 4 * chunk}})
print(chunk_art.input_contract())
err = helpers.show_error(chunk_art.run, torch.randn(2, 30, generator=g))
chunk_report = helpers.compare(shapes.ChunkMean(), chunk_art, [torch.randn(2, t, generator=g) for t in (8, 12, 36, 64)])
print("derived Dim, T = 8, 12, 36, 64:", chunk_report.summary())

L = Dim("L", min=1, max=16)
chunked_art = helpers.lower(shapes.ChunkedMean(), (x.view(2, 4, 8),), dynamic_shapes={"x": {2: L}})
chunked_report = helpers.compare(shapes.ChunkedMean(), chunked_art,
                                 helpers.probe_inputs((x.view(2, 4, 8),), {"x": {2: L}}))
print("rewrite, probes at L = 1, 8, 16 (and beyond):", shapes.inside_summary(chunked_report))

# %% [markdown]
# **Indexing by a computed size** — `shapes.HalfDiff` returns `x[:, :T // 2] - x[:, T // 2:]`. The two
# halves only line up when `T` is even:

# %%
d = helpers.diagnose_export(shapes.HalfDiff(), (x,), {"x": {1: Dim("T", min=2, max=64)}}, lower=False)
print("torch suggests:", " | ".join(d.suggested_fixes))
half = Dim("half", min=1, max=32)
half_art = helpers.lower(shapes.HalfDiff(), (x,), dynamic_shapes={"x": {1: 2 * half}})
half_report = helpers.compare(shapes.HalfDiff(), half_art, [torch.randn(2, t, generator=g) for t in (4, 10, 64)])
print(half_art.input_contract(), "·", "T = 4, 10, 64:", half_report.summary())

# %% [markdown]
# Each such message is a place where the model reasons about sizes. Read it as a question — "is this
# really true for every length you declared?" — and answer it with a tighter or derived `Dim`, or by
# moving the size arithmetic to the host.

# %% [markdown]
# ## Exercises
#
# **1. Predict, then reveal.** The bounded classifier above accepts heights 32…128. The device sends a
# 1×3×100×150 frame (width above its `max`, 45,000 elements — under the 49,152 capacity). What does the
# raw runtime do?

# %%
my_prediction = "accepted"  # "accepted" or "rejected"

# %%
wide = shapes.camera_frame(100, 150)
try:
    bounded.run_raw(wide)
    actual, why = "accepted", "the runtime checks rank and capacity only; width 150 > max 128 went unnoticed"
except helpers.RuntimeRejectedError as exc:
    actual, why = "rejected", exc.reason
helpers.display.check_prediction(my_prediction, actual, why)

# %% [markdown]
# **2. Predict, then reveal (widget).** `Dim.AUTO` on the `TokenPool` sequence axis with a 16-token example.
# What happens to a 40-token request on the device?

# %%
auto_tokens = helpers.lower(token_model, (ids, mask), dynamic_shapes={"ids": {1: Dim.AUTO}, "mask": {1: Dim.AUTO}})


def reveal_auto_tokens():  # runs the already-lowered program: no export while you click
    row = helpers.check_one(token_model, auto_tokens, (torch.randint(0, 32, (1, 40), generator=g), torch.ones(1, 40)))
    return row.status, ("Dim.AUTO has no max, so the memory plan holds the example's 16 tokens: "
                        + row.runtime_message.split(";")[0])


quiz = PredictThenReveal("Dim.AUTO, 16-token example, 40-token request?", ["match", "rejected"], reveal_auto_tokens)
quiz

# %%
quiz.answer("rejected")
print(quiz.actual)

# %% [markdown]
# **3. Change the code.** Give `ShapeBranch` the range it really supports: `Dim("frames", min=2, max=16)` is
# right *if the app pads one-frame clips*. Write that host step (repeat the frame once), then check that
# `clip_art.run` accepts it and matches eager.

# %% [markdown]
# ## Parity: inside the contract it matches; outside, something refuses
#
# For the token model with its shared, bounded `Dim`: every bound's edge (1, 64), the middle, values of
# every kind — and the probes just outside (65 tokens; a static axis nudged). Inside the contract: all
# match. Outside: each probe is refused by the runtime, by eager, or by the host-side check in `art.run`.
# (A zero-size probe is refused before the runtime: on a delegated program with a dynamic axis the XNNPACK
# delegate would read an uninitialised size for it.)

# %%
probes = helpers.probe_inputs((ids, mask), {"ids": {1: seq}, "mask": {1: seq}})
report = helpers.compare(token_model, token_art, probes)
report

# %%
def refused_on_host(art, args):
    try:
        art.run(*args)
    except helpers.InputContractError:
        return True
    except helpers.RuntimeRejectedError:
        return True
    return False


assert report.ok_within_contract, report
assert all(refused_on_host(token_art, p.args) for p, r in zip(probes, report) if not r.within_contract)
clip_report = helpers.compare(clip_model, clip_art, helpers.probe_inputs((clip,), {"x": {1: frames}}))
assert clip_report.ok_within_contract and refused_on_host(clip_art, (one_frame,)), clip_report
print(report.summary())
print(clip_report.summary())

# %% [markdown]
# ## Takeaways
# - `dynamic_shapes={"input": {axis: Dim("name", min=…, max=…)}}`: the name documents the axis, the range is the
#   contract. One `Dim` object on two inputs asserts the axes are equal.
# - An example outside the range fails at export. On the device, above `max` (beyond the planned capacity) is
#   refused; **below `min`, or an axis above its `max` that still fits the capacity, runs silently**, and a broken
#   tie reaches the delegate (undefined behaviour): ExecuTorch stripped export's asserts and checks only rank and
#   element capacity.
# - So the app checks the contract on the host (`art.run` shows how), and parity tests probe `min`, `max` and
#   one step beyond each.
# - `Dim.AUTO`/`DYNAMIC` are for exploring; without a `max`, ExecuTorch plans the axis at the example's size.
#   Ship a named, bounded `Dim`.
# - A guard error ("not all values of T satisfy …") marks size arithmetic in `forward()`: adopt the suggested
#   (derived) `Dim`, or move the arithmetic to the host.
#
# ## Interview answer
# *"How do you export a model whose input size varies?"* — Declare it: `dynamic_shapes` maps each input's
# varying axes to a `Dim` with a name and a range, and reusing one `Dim` across inputs says those axes are equal
# (ids and mask). Bounds matter on device because the memory plan is sized for the max: a tight upper bound turns
# a possible OOM in the field into an export-time decision. `Dim.AUTO` is handy for exploring, but a shipped
# artifact gets an explicit named range. If export reports a guard on a dynamic dimension, the model does size
# arithmetic I must either bound (a derived `Dim`) or rewrite. And I don't rely on the runtime to enforce the
# range: ExecuTorch only checks rank and capacity, so the app validates inputs and CI probes every bound's edge.
