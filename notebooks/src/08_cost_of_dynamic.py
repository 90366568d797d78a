# %% [markdown]
# # 08 · What dynamic costs
#
# **What you will learn**
# - that a partitioner may **decline** an operator once a dimension is symbolic, so part of the graph falls back to
#   the runtime's portable kernels — the model still runs, only slower, and nothing tells you unless you measure
#   delegated coverage;
# - that the memory plan is sized for the **maximum**: the arena grows with a `Dim`'s `max`, and a small input holds
#   the worst-case arena anyway;
# - how to measure latency static vs dynamic with the runtime, and how to read the result honestly.
#
# (Guard errors during export, the third cost, were lesson 07.)

# %%
import pandas as pd
import torch

import helpers
from helpers import plots
from helpers.lessons import shapes
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# `shapes.TinySegmenter` is a per-pixel head: two strided convolutions, a bilinear upsample ×4, a 1×1
# convolution. The team exported it at 64×64, then made height and width dynamic (32…128) "so any camera
# works". Same model, same weights — look at where the graph runs:

# %%
model, static, frame, _ = shapes.segmenter_program()
_, dynamic, _, dynamic_shapes = shapes.segmenter_program(max_side=128)

print(static.delegation().summary())
print(dynamic.delegation().summary())

# %% [markdown]
# The static program is one XNNPACK subgraph. The dynamic one is two, with an operator between them on the
# portable kernels. Which one?

# %%
dynamic.delegation()

# %% [markdown]
# ## Why it happens: the partitioner declines what it cannot prove
#
# The XNNPACK partitioner checks every node against what the backend can run. For `upsample_bilinear2d`
# its rule says, in its own words, *"XNNPACK's static_resize_bilinear does not support dynamic output
# sizes"*: with a symbolic height and width, the output size is symbolic, so the node is declined. The
# partitioner does not fail; it simply leaves the node to the runtime's portable kernel and cuts the
# delegated graph in two. Other rules of the same kind: a view/reshape with more than one inferred
# dimension, max-pooling with `ceil_mode` on a dynamic shape.
#
# Delegated coverage, side by side (counts of graph nodes, from each artifact's delegation report):

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
# Dynamic is not always a delegation loss: it depends on the operators. The classifier from lesson 06
# (`TinyVision`: convolutions, a mean, a linear) keeps **every** node on XNNPACK with the same dynamic
# height and width. You find out by looking, per model:

# %%
vision_model, vision_static, vision_frame = shapes.vision_program()
vision_dynamic = helpers.lower(vision_model, (vision_frame,), dynamic_shapes=dynamic_shapes)
print(vision_static.delegation().summary())
print(vision_dynamic.delegation().summary())

# %% [markdown]
# ## Memory planning against the maximum
#
# The arena is planned for the **largest** input the contract allows. Re-export the segmenter with
# growing `max` (each point is a real export + lowering; results are cached):

# %%
maxes = [64, 96, 128, 192, 256]
arena = shapes.arena_vs_max(maxes, lambda m: shapes.segmenter_program(max_side=m)[1])
for m, b in zip(maxes, arena):
    print(f"max side {m:>3}: arena {b:>10,} bytes")

# %%
plots.series(maxes, {"dynamic (height, width ≤ max)": arena,
                     "static 64×64": [static.planned_memory_bytes()] * len(maxes)},
             xlabel="Dim max (pixels per side)", ylabel="planned arena (bytes)",
             title="TinySegmenter: the arena follows the max")

# %% [markdown]
# The arena grows with max² (height × width). Note also that even at `max=64` the dynamic arena is twice the
# static one: the activation between the two delegated pieces now lives in the planned arena, because a
# portable kernel sits between them.
#
# The arena is a property of the program, not of the input: a **small** frame holds the worst case too.
# Run a 32×32 frame on the `max=256` program and compare with what a static 32×32 export needs:

# %%
_, big, _, _ = shapes.segmenter_program(max_side=256)
_, static_32, frame_32, _ = shapes.segmenter_program(size=32)
(out,) = big.run_raw(frame_32)
print(f"output {tuple(out.shape)} from the max=256 program: arena held {big.planned_memory_bytes():,} bytes")
print(f"a static 32×32 export needs:                 {static_32.planned_memory_bytes():,} bytes")
print(f"ratio: {big.planned_memory_bytes() / static_32.planned_memory_bytes():.0f}×")

# %% [markdown]
# That is why the `max` deserves a real number: it is the memory your app reserves every time it loads the model.

# %% [markdown]
# ## Latency, measured with the runtime
#
# Median of 200 calls of `run_raw` (the runtime only) on the same 64×64 frame, after a warm-up. Timings vary
# between machines and runs, so this cell's output is not compared in CI; read your own numbers.

# %%
# NBVAL_IGNORE_OUTPUT
torch.set_num_threads(1)
portable = helpers.lower(model, (frame,), backend="portable")
latency = {
    "segmenter static": shapes.median_latency_ms(static, (frame,)),
    "segmenter dynamic": shapes.median_latency_ms(dynamic, (frame,)),
    "segmenter portable only": shapes.median_latency_ms(portable, (frame,)),
    "classifier static": shapes.median_latency_ms(vision_static, (vision_frame,)),
    "classifier dynamic": shapes.median_latency_ms(vision_dynamic, (vision_frame,)),
}
for name, ms in latency.items():
    print(f"{name:<24} {ms:7.3f} ms")
seg_ratio = latency["segmenter dynamic"] / latency["segmenter static"]
cls_ratio = latency["classifier dynamic"] / latency["classifier static"]
print(f"segmenter: dynamic / static = {seg_ratio:.1f}×   classifier: dynamic / static = {cls_ratio:.2f}×")

# %%
# NBVAL_IGNORE_OUTPUT
plots.grouped_bars(["segmenter", "classifier"],
                   {"static": [latency["segmenter static"], latency["classifier static"]],
                    "dynamic": [latency["segmenter dynamic"], latency["classifier dynamic"]]},
                   ylabel="median ms per call", title="Same frame, static vs dynamic program", fmt="{:.3f}")

# %% [markdown]
# How to read it: where the partitioner declined an operator (the segmenter), the dynamic program is clearly
# slower — on our 2-core CI machine about 3–5× — because the upsample runs on a portable kernel and the
# graph is split into two delegate calls. Where everything stayed delegated (the classifier), the two
# programs differ by a few percent either way: **within noise**. Do not conclude "dynamic is slow"; measure
# coverage, then latency, per model.

# %% [markdown]
# ## The fixes
#
# - Keep the path static: normalize frames on the host (lesson 09) — 100% delegated, smallest arena.
# - If you need several sizes, ship a few static **buckets** (lesson 09): each one fully delegated, each with a
#   tight arena (a multi-method `.pte` shares the weights).
# - If you do go dynamic, set the tightest honest `max`, check the delegation report after every change, and
#   move a declined operator out of the dynamic region if you can (e.g. upsample to a fixed size on the host).

# %% [markdown]
# ## Exercises
#
# **1. Predict, then reveal.** Raise the segmenter's `max` from 128 to 256. What changes?
# `"only the arena"`, `"only delegation"`, `"both"` or `"neither"`?

# %%
my_prediction = "only the arena"

# %%
d128, d256 = dynamic.delegation(), big.delegation()
same_delegation = (d128.delegated_nodes, d128.portable_nodes) == (d256.delegated_nodes, d256.portable_nodes)
bigger_arena = big.planned_memory_bytes() > dynamic.planned_memory_bytes()
actual = {(True, True): "only the arena", (False, False): "only delegation", (False, True): "both",
          (True, False): "neither"}[(same_delegation, bigger_arena)]
helpers.display.check_prediction(
    my_prediction, actual,
    f"delegated {d128.delegated_nodes}→{d256.delegated_nodes} nodes; arena {dynamic.planned_memory_bytes():,} → "
    f"{big.planned_memory_bytes():,} bytes. The partitioner declines by *kind* of shape (symbolic or not), not by size.")

# %% [markdown]
# **2. Predict, then reveal (widget).** The classifier's dynamic program: how many of its nodes run on portable kernels?

# %%
def reveal_classifier():
    d = vision_dynamic.delegation()
    return str(d.portable_nodes), d.summary()


quiz = PredictThenReveal("Dynamic TinyVision: nodes on portable kernels?", ["0", "1", "2", "all"], reveal_classifier)
quiz

# %%
quiz.answer("0")
print(quiz.actual)

# %% [markdown]
# **3. Change the code.** Make the segmenter's upsample produce a fixed size (`F.interpolate(h, size=(64, 64))`)
# in a subclass, export it with the same dynamic `Dim`s and look at the delegation report again. What does the
# output shape mean for a frame that is not 64×64?

# %% [markdown]
# ## Parity: both programs match eager inside their contracts
#
# Probes: values of every kind at 64×64, and for the dynamic program each `Dim` at min, middle, max and one step
# beyond. (The "extremes" probe feeds ±10⁴, so outputs reach ~10⁴; `compare` scales its tolerance with the
# output's magnitude, so float32 rounding in a different summation order is not mistaken for a divergence.)

# %%
static_report = helpers.compare(model, static, helpers.probe_inputs((frame,)))
dynamic_probes = helpers.probe_inputs((frame,), dynamic_shapes)
dynamic_report = helpers.compare(model, dynamic, dynamic_probes)
print("static: ", shapes.inside_summary(static_report))
print("dynamic:", shapes.inside_summary(dynamic_report))

# %%
assert static_report.ok_within_contract, static_report
assert dynamic_report.ok_within_contract, dynamic_report
assert dynamic.delegation().delegated_nodes <= static.delegation().delegated_nodes
assert arena == sorted(arena) and arena[0] < arena[-1]
print("parity inside both contracts; the dynamic program delegates no more nodes; the arena grows with max")

# %% [markdown]
# ## Takeaways
# - A symbolic dimension can make the partitioner decline an operator (`upsample_bilinear2d` on XNNPACK). The model
#   still runs, on portable kernels, split into more delegate calls — an invisible regression unless you read
#   `art.delegation()`.
# - The memory plan is sized for the `max`: the arena grows with it (here with max²), and every input — even a tiny
#   one — holds the worst case.
# - Latency follows coverage: clearly slower where an operator fell back, within noise where nothing did. Measure
#   with the runtime, per model.
#
# ## Interview answer
# *"What does making a dimension dynamic cost on device?"* — Three things. Export may add guards on the dynamic
# dimension that I have to bound or rewrite. The backend may delegate less: a partitioner that can't handle a
# symbolic shape in an operator just declines that subgraph, it falls back to portable kernels and runs slower,
# and you only see it if you measure delegated coverage. And memory planning is done against the maximum, so the
# app holds the worst-case arena even for small inputs. So I check the delegation report and the planned arena
# static vs dynamic, measure latency on the runtime, and often prefer normalizing on the host or a few static buckets.
