# %% [markdown]
# # 05 · Hoisting the decision out of the model
#
# **What you will learn**
# - when a branch chooses between two genuinely different computations and the app can make the choice, the
#   cleanest export has **no branch**: two exported methods in one `.pte` (or two `.pte` files), and the app picks;
# - why: the branch becomes app logic (Kotlin or Swift on a phone), where branching is free and debuggable, and
#   each exported graph stays straight-line and fully delegated. We measure the coverage against `torch.cond`;
# - which decisions belong in the app (orientation, language, the device's tier), and which must stay in the graph.
#
# Terms from lesson 00's glossary used here: delegate, XNNPACK, portable kernels, input contract, `.pte`.

# %%
import torch

import helpers
from helpers import interview, models, questions
from helpers.display import show_source
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fixes
from helpers.plots import delegation_bars

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The trap, live: a cond region the delegate cannot enter
#
# `ScaleOrShiftCond` (lesson 03) keeps `ScaleOrShift`'s branch with `torch.cond`: correct on both sides, but its
# branches run on portable kernels.

# %%
show_source(models.ScaleOrShiftCond)

# %%
art_cond = helpers.lower(models.ScaleOrShiftCond(), (x,))
print(", ".join(f"{n} {k}" for k, n in fixes.node_counts(art_cond.delegation()).items()))

# %% [markdown]
# ## The fix: two methods, and the app decides
#
# Each side becomes its own straight-line model, with the same weights (same class, same seed):

# %%
show_source(fixes.ScaleOrShiftA, fixes.ScaleOrShiftB)

# %% [markdown]
# Predict before we lower them: method `b` alone, how much of it will XNNPACK take?

# %%
questions.ask("05.hoisted_share")

# %% [markdown]
# `lower_methods` exports both into **one** `.pte`, as two methods:

# %%
art_methods = helpers.lower_methods({"a": (fixes.ScaleOrShiftA(), (x,)), "b": (fixes.ScaleOrShiftB(), (x,))})
for method in ("a", "b"):
    print(art_methods.input_contract(method), "·", art_methods.delegation(method).summary())

# %% [markdown]
# The decision now lives in the app. Here it is in plain Python, standing in for a few lines of Kotlin or Swift:

# %%
def app_pick(x: torch.Tensor) -> str:
    """The app's `if`: which method to call for this input."""
    return "a" if float(x.sum()) > 0 else "b"


def app_run(x: torch.Tensor) -> torch.Tensor:
    (out,) = art_methods.run(x, method=app_pick(x))
    return out


for label, sample in {"sum > 0": x.abs() + 0.1, "sum < 0": -x.abs() - 0.1}.items():
    print(f"{label}: the app calls '{app_pick(sample)}' →", helpers.fmt(app_run(sample)))

# %% [markdown]
# Parity is checked against the **original** model, `ScaleOrShift` with its Python `if`, over varied values that
# take both sides, with the app's pick in the loop. Each row says which method the app called:

# %%
probes = cf.value_probes((x,)) + cf.shifted(x)
hoisted = fixes.hoisted_parity(models.ScaleOrShift(), art_methods, probes, pick=app_pick)
print(hoisted)

# %% [markdown]
# ### Or two `.pte` files
#
# The same two graphs can ship as two files. Either way the runtime loads a method only when the app asks for it
# (`program.load_method("a")`), so one file does not make the app load both. What differs is what ships: one file
# with two methods is one download and one artifact to version; two files let the app download only the one it
# uses, and must be kept in step. The sizes:

# %%
art_a = helpers.lower(fixes.ScaleOrShiftA(), (x,))
art_b = helpers.lower(fixes.ScaleOrShiftB(), (x,))
print(f"one .pte, two methods: {art_methods.nbytes:,} bytes")
print(f"two .pte files:        {art_a.nbytes:,} + {art_b.nbytes:,} = {art_a.nbytes + art_b.nbytes:,} bytes")
print(f"one .pte with cond:    {art_cond.nbytes:,} bytes")
sample = -x.abs()
print("file b agrees with method 'b':", torch.allclose(art_b.run(sample)[0], art_methods.run(sample, method="b")[0]))

# %% [markdown]
# ### Delegation coverage, side by side

# %%
fig = delegation_bars({"cond (one method)": art_cond.delegation(),
                       "hoisted: a": art_methods.delegation("a"),
                       "hoisted: b": art_methods.delegation("b")},
                      title="Where the graph runs: cond vs hoisted")
fig

# %% [markdown]
# ## Why it works
#
# A `.pte` can hold several methods; each is its own graph with its own input contract and memory plan. The
# branch condition was never something the model needed to compute *inside* the graph: it is a decision about
# which graph to run. Moved into the app, it costs an `if` in Kotlin or Swift, where you can log it, test it and
# change it without re-exporting. Each graph is straight-line, so the partitioner sees every node.
#
# ## Which decisions belong in the app
#
# Preprocessing decisions usually do: they are about the *input*, which the app knows before calling the model.
# `TinyVision` is a small CNN for camera frames:

# %%
show_source(models.TinyVision)

# %% [markdown]
# **Orientation.** The program below holds a `small` method exported for landscape frames (32×48) and a `large`
# one (64×96). Predict first: the app forgets to rotate a portrait frame (48×32) and sends it to `small`.

# %%
questions.ask("05.portrait")

# %%
vision = models.TinyVision()
landscape = torch.randn(1, 3, 32, 48)
portrait = torch.randn(1, 3, 48, 32)
art_vision = helpers.lower_methods({"small": (vision, (landscape,)),
                                    "large": (vision, (torch.randn(1, 3, 64, 96),))})
print("portrait as is:    ", cf.verdict_line(helpers.check_one(vision, art_vision, (portrait,), method="small")))
upright = torch.rot90(portrait, k=1, dims=(2, 3)).contiguous()
print("rotated by the app:", cf.verdict_line(helpers.check_one(vision, art_vision, (upright,), method="small")))

# %% [markdown]
# The app rotates it first, with the platform's image API (here `torch.rot90`).
#
# **Input resolution per device tier.** `small` and `large` are the same network exported at two input
# resolutions (32×48 and 64×96): a low-end phone calls `small`, a flagship `large`, and the app resizes the frame
# to the method it picked. (That is resolution bucketing, lesson 09's subject. A smaller *network* for low-end
# phones works the same way: two different models, one method each.)

# %%
def app_vision(frame: torch.Tensor, tier: str) -> torch.Tensor:
    if frame.shape[2] > frame.shape[3]:  # portrait → landscape
        frame = torch.rot90(frame, k=1, dims=(2, 3))
    method, size = ("small", (32, 48)) if tier == "low-end" else ("large", (64, 96))
    frame = torch.nn.functional.interpolate(frame, size=size, mode="bilinear", align_corners=False)
    return art_vision.run(frame.contiguous(), method=method)[0]


_ = torch.manual_seed(5)  # a fixed frame, whatever ran before
camera = torch.randn(1, 3, 480, 320)  # a portrait camera frame
for tier in ("low-end", "flagship"):
    print(tier, helpers.fmt(app_vision(camera, tier)))
print(art_vision.input_contract("small"), "·", art_vision.input_contract("large"))

# %% [markdown]
# **Language.** A text model with a vocabulary per language: one method per language, and the app passes the
# user's locale. (`TokenPool` with two seeds stands in for two trained heads.)

# %%
ids = torch.randint(0, 32, (1, 8))
mask = torch.ones(1, 8)
per_language = {"en": models.TokenPool(seed=1), "de": models.TokenPool(seed=2)}
art_text = helpers.lower_methods({lang: (m, (ids, mask)) for lang, m in per_language.items()})
for lang, m in per_language.items():
    row = helpers.check_one(m, art_text, (ids, mask), method=lang)
    print(f"locale {lang}: method '{lang}' → {row.describe()}")

# %% [markdown]
# What stays *inside* the model: decisions that depend on intermediate values the app does not have (a gating
# score computed by the network itself, like lesson 03's `Router`). For those, `torch.cond` (03) or
# `torch.where` (04).
#
# ## ✏️ Exercise 05.hoist
#
# `CondLinear` (lesson 03) runs a `linear → relu` trunk, then one of two layers by the sign of the input's mean.
# The input's mean is something the app has: hoist the decision.

# %%
show_source(models.CondLinear)

# %% [markdown]
# Give `CondLinear` as methods of one `.pte` and an app-side `pick(x)` that names the method to call:
# `answer = (methods, pick)` with `methods` a dict `{name: model}`. The check lowers every method with
# `lower_methods`, requires each to be straight-line and 100% delegated, then runs the app (your `pick`, then the
# method it names) against `CondLinear` in eager mode on inputs from both sides of `x.mean() > 0` and on its edge.

# %%
# ✏️ Exercise 05.hoist — edit this cell, then run the check below.
from helpers.models import CondLinear


class OnlyMethod(CondLinear):
    pass  # CondLinear's own forward(), torch.cond included


def pick(x):
    return "forward"  # the app's decision: which method to call for this input


answer = ({"forward": OnlyMethod()}, pick)

# %%
from helpers import exercises

grade = exercises.check("05.hoist", answer)

# %% [markdown]
# ## Takeaways
#
# - If a branch picks between two different computations and the app can decide, export one method per side (or
#   one `.pte` per side) and let the app pick: the condition becomes app logic, free and debuggable.
# - Each exported graph stays straight-line and fully delegated; the `cond` version ran its branches on portable
#   kernels.
# - Orientation, language and the device's tier (an input resolution, or a smaller network) are known to the app
#   before it calls the model, so they belong in the app, not in `forward()`. Decisions on intermediate values
#   stay in the graph.
# - Parity is still checked against the original eager model, with the app's choice in the loop, on inputs that
#   take both sides.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("05.hoist")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the hoisted program, driven by the app, matches the original eager model on both sides

# %% tags=["ci-check"] jupyter={"source_hidden": true}
picked = {r.label.rsplit("→ ", 1)[1] for r in hoisted}
assert picked == {"a", "b"}, picked
assert hoisted.ok, hoisted
assert all(art_methods.delegation(m).coverage == 1.0 for m in art_methods.methods)
assert art_cond.delegation().delegated_nodes == 0
print(f"hoisted: parity with ScaleOrShift on {len(hoisted)} inputs, both methods used, both fully delegated")
