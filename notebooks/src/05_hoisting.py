# %% [markdown]
# # 05 · Hoisting the decision out of the model
#
# **What you will learn**
# - when a branch chooses between two genuinely different networks, the cleanest export has **no branch**:
#   two exported methods in one `.pte` (or two `.pte` files), and the app picks;
# - why: the branch becomes app logic (Kotlin or Swift on a phone), where branching is free and
#   debuggable, and each exported graph stays straight-line and fully delegated. We measure the coverage
#   against the `torch.cond` version;
# - which preprocessing decisions belong in the app: orientation, language, model size.

# %%
import inspect

import torch

import helpers
from helpers import models
from helpers.display import check_prediction
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fx
from helpers.plots import delegation_bars
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
x = torch.randn(2, 8)

# %% [markdown]
# ## The trap, live: a cond region the accelerator cannot enter
#
# `CondLinear` (lesson 03) exports with `torch.cond`: correct on both sides, but XNNPACK takes only the trunk.

# %%
cond_model = models.CondLinear()
art_cond = helpers.lower(cond_model, (x,))
print(art_cond.delegation().summary())

# %% [markdown]
# ## The fix: two methods, and the app decides
#
# Each branch becomes its own straight-line model with the same weights: `StraightLinear` always takes
# branch `a`, `StraightLinearB` branch `b`. `lower_methods` exports both into **one** `.pte`, as two methods.

# %%
art_methods = helpers.lower_methods({"positive": (models.StraightLinear(), (x,)),
                                     "negative": (fx.StraightLinearB(), (x,))})
for method in ("positive", "negative"):
    print(art_methods.input_contract(method), "·", art_methods.delegation(method).summary())

# %% [markdown]
# Both methods: 100 % delegated, one XNNPACK subgraph each. The decision now lives in the app. Here it is
# in plain Python, standing in for a few lines of Kotlin or Swift:

# %%
print(inspect.getsource(fx.app_pick))
print(inspect.getsource(fx.app_run))

# %%
for label, sample in {"mean > 0": x.abs() + 0.1, "mean < 0": -x.abs() - 0.1}.items():
    print(f"{label}: the app calls '{fx.app_pick(sample)}' →", helpers.fmt(fx.app_run(art_methods, sample)))

# %% [markdown]
# Parity is checked against the **original** model, `CondLinear` in eager mode, over a varied set that takes
# both sides. Each row says which method the app picked:

# %%
probes = helpers.probe_inputs((x,)) + [helpers.Probe(f"shifted {s:+}", (x + s,)) for s in (-2.0, 2.0)]
hoisted = fx.hoisted_parity(cond_model, art_methods, probes)
print(hoisted)

# %% [markdown]
# ### Or two `.pte` files
#
# The same two graphs can ship as two files: the app loads the one it needs (or both). Compare the sizes:
# one file with two methods is a little smaller than the two files together, and it is one load and one
# file to version; two files let the app download or load only what it uses.

# %%
art_a = helpers.lower(models.StraightLinear(), (x,))
art_b = helpers.lower(fx.StraightLinearB(), (x,))
print(f"one .pte, two methods: {art_methods.nbytes:,} bytes")
print(f"two .pte files:        {art_a.nbytes:,} + {art_b.nbytes:,} = {art_a.nbytes + art_b.nbytes:,} bytes")
print(f"one .pte with cond:    {art_cond.nbytes:,} bytes")
sample = -x.abs()
print("file b agrees with method 'negative':",
      torch.allclose(art_b.run(sample)[0], art_methods.run(sample, method="negative")[0]))

# %% [markdown]
# ### Delegation coverage, side by side

# %%
fig = delegation_bars({"cond (one method)": art_cond.delegation(),
                       "hoisted: positive": art_methods.delegation("positive"),
                       "hoisted: negative": art_methods.delegation("negative")},
                      title="Where the graph runs: cond vs hoisted")
fig

# %% [markdown]
# ## Why it works
#
# A `.pte` can hold several methods; each is its own graph with its own input contract and memory plan. The
# branch condition was never something the model needed to compute *inside* the graph: it is a decision
# about which graph to run. Moved into the app, it costs an `if` in Kotlin or Swift, where you can log it,
# test it and change it without re-exporting. Each graph is straight-line, so the partitioner sees every
# node.
#
# ## Which decisions belong in the app
#
# Preprocessing decisions usually do: they are about the *input*, which the app knows before calling the model.
#
# **Orientation.** `TinyVision` is exported for landscape frames (32×48). A portrait frame is refused by the
# runtime; the app rotates it first (with the platform's image API; here `torch.rot90`):

# %%
vision = models.TinyVision()
landscape = torch.randn(1, 3, 32, 48)
portrait = torch.randn(1, 3, 48, 32)
art_vision = helpers.lower_methods({"small": (vision, (landscape,)),
                                    "large": (vision, (torch.randn(1, 3, 64, 96),))})
print("portrait as is:  ", cf.verdict_line(helpers.check_one(vision, art_vision, (portrait,), method="small")))
upright = torch.rot90(portrait, k=1, dims=(2, 3)).contiguous()
print("rotated by the app:", cf.verdict_line(helpers.check_one(vision, art_vision, (upright,), method="small")))

# %% [markdown]
# **Model size.** The same program holds a `small` (32×48) and a `large` (64×96) method. A low-end phone
# calls `small`, a flagship `large`; the app resizes the frame to the method it picked:

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
# **Language.** A text model with a vocabulary per language: one method per language, and the app passes
# the user's locale. (`TokenPool` with two seeds stands in for two trained heads.)

# %%
ids = torch.randint(0, 32, (1, 8))
mask = torch.ones(1, 8)
per_language = {"en": models.TokenPool(seed=1), "de": models.TokenPool(seed=2)}
art_text = helpers.lower_methods({lang: (m, (ids, mask)) for lang, m in per_language.items()})
for lang, m in per_language.items():
    row = helpers.check_one(m, art_text, (ids, mask), method=lang)
    print(f"locale {lang}: method '{lang}' → {row.describe()}")

# %% [markdown]
# What stays *inside* the model: decisions that depend on intermediate values the app does not have (a
# gating score computed by the network itself). For those, `torch.cond` (03) or `torch.where` (04).
#
# ## Exercises
#
# ### Predict, then reveal
#
# The app forgets to rotate, and sends a portrait frame (48×32) to the `small` method. What does the device do?

# %%
def reveal_portrait():
    row = helpers.check_one(vision, art_vision, (portrait,), method="small")
    return row.status, row.runtime_message.split(";")[0]


quiz = PredictThenReveal("a portrait frame to the landscape method…", ["match", "diverge", "rejected"],
                         reveal_portrait)
quiz

# %% [markdown]
# ### Coverage
#
# What share of the `negative` method's nodes does XNNPACK take? Answer as a percentage string, e.g. `"50%"`.

# %%
my_prediction = "50%"  # change me

# %%
actual = f"{art_methods.delegation('negative').coverage:.0%}"
_ = check_prediction(my_prediction, actual, "a straight-line graph of linear and relu: the partitioner takes all "
                     f"of it (the cond version: {art_cond.delegation().coverage:.0%}).")

# %% [markdown]
# ## Takeaways
#
# - If a branch picks between two genuinely different networks, export two methods (or two `.pte` files)
#   and let the app pick: the condition becomes app logic, free and debuggable.
# - Each exported graph stays straight-line and fully delegated; the `cond` version ran its branches on
#   portable kernels.
# - Orientation, language and model size are decisions about the input: the app knows them before it calls
#   the model, so they belong in the app, not in `forward()`.
# - Parity is still checked against the original eager model, with the app's choice in the loop, on inputs
#   that take both sides.
#
# ## Interview answer
#
# Often the cleanest answer: if the branch decides between two genuinely different networks, I export two
# methods, or two `.pte` files, and let the application code pick. The condition becomes app logic in Kotlin
# or Swift, where branching is free and debuggable, and each exported graph stays straight-line and fully
# delegatable. Preprocessing decisions (orientation, language, model size) usually belong there too,
# rather than inside `forward()`.

# %% [markdown]
# ### Check: the hoisted program, driven by the app, matches the original eager model on both sides

# %%
inside = [r for r in hoisted if r.within_contract]
picked = {r.label.rsplit("→ ", 1)[1] for r in inside}
assert picked == {"positive", "negative"}, picked
assert hoisted.ok_within_contract, hoisted
assert all(art_methods.delegation(m).coverage == 1.0 for m in art_methods.methods)
print(f"hoisted: parity with CondLinear on {len(inside)} inputs inside the contract, both methods used, "
      "both fully delegated")
