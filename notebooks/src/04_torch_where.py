# %% [markdown]
# # 04 · `torch.where`: selection without control flow
#
# **What you will learn**
# - how `torch.where(cond, a, b)` turns many "branches" into arithmetic: a data-dependent *result*
#   with no control flow at all, so nothing to specialise and nothing to guard;
# - its price: **both sides are always computed**. We measure it on the real runtime: a cheap pair of
#   branches, then an expensive subnetwork, `where` against `cond`;
# - when to choose `where`, `cond`, or neither.

# %%
import pandas as pd
import torch

import helpers
from helpers import models
from helpers.display import check_prediction
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fx
from helpers.plots import grouped_bars
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The fix, live: the same decision as arithmetic
#
# `ScaleOrShiftWhere` makes lesson 02's decision (`x.sum() > 0` picks layer `a` or `b`) with `torch.where`:

# %%
where_model = models.ScaleOrShiftWhere()
art_where = helpers.lower(where_model, (x,))
cf.source_and_graph(where_model, art_where, "ScaleOrShiftWhere")

# %% [markdown]
# A straight line: both `linear`s, then `where` picks. No sub-graphs, no predicate to evaluate before
# running anything. It matches the original Python `if` on both sides:

# %%
probes = helpers.probe_inputs((x,)) + [helpers.Probe(f"shifted {s:+}", (x + s,)) for s in (-2.0, 2.0)]
print("probes per side of `x.sum() > 0`:", cf.branch_sides(probes, lambda t: t.sum() > 0))
where_report = helpers.compare(models.ScaleOrShift(), art_where, probes)
print(where_report.summary())

# %% [markdown]
# And because it is straight-line code, the partitioner sees it: XNNPACK takes both `linear`s. (The
# reduction, the comparison and the `where` itself stay on portable kernels.) Compare `torch.cond`:

# %%
art_cond = helpers.lower(models.ScaleOrShiftCond(), (x,))
print("where:", art_where.delegation().summary())
print("cond: ", art_cond.delegation().summary())

# %% [markdown]
# ## The trap: both sides, every time
#
# `torch.where` is an ordinary elementwise operator: its inputs must exist before it runs. So `self.a(x)` *and*
# `self.b(x)` are computed for every input. For two small layers that costs nothing worth measuring. For an
# expensive subnetwork it costs exactly that subnetwork, even when its result is thrown away.
#
# `HeavyWhere` and `HeavyCond` choose between a 6-layer MLP (128 features) and a cheap `x * 0.5`:

# %%
big = torch.randn(32, 128)
heavy_side, cheap_side = big.abs() + 0.1, -(big.abs() + 0.1)  # mean > 0 → heavy, mean < 0 → cheap
art_heavy_where = helpers.lower(fx.HeavyWhere(), (big,))
art_heavy_cond = helpers.lower(fx.HeavyCond(), (big,))
print(cf.forward_source(fx.HeavyWhere()))
print("linear layers in the where graph:", art_heavy_where.graph().count("aten.linear"))

# %% [markdown]
# All six `linear`s sit in the main graph, before the `where`: the device runs them for every input. We
# measure the `.pte` on the real runtime (median of 50 calls, `run_raw`, the device's view). Your numbers
# will differ from these; the *ratios* are the point.

# %%
# NBVAL_IGNORE_OUTPUT
timings = fx.where_vs_cond_latency(
    {"where · cheap pair": art_where, "cond · cheap pair": art_cond},
    {"true side": x.abs() + 0.1, "false side": -(x.abs() + 0.1)})
heavy = fx.where_vs_cond_latency(
    {"where": art_heavy_where, "cond": art_heavy_cond},
    {"input takes the heavy side": heavy_side, "input takes the cheap side": cheap_side})
print(pd.DataFrame(timings).round(3).to_string())
print()
print(pd.DataFrame(heavy).round(3).to_string())

# %%
# NBVAL_IGNORE_OUTPUT
groups = {"cheap pair,\ntrue side": (timings["true side"], "where · cheap pair", "cond · cheap pair"),
          "cheap pair,\nfalse side": (timings["false side"], "where · cheap pair", "cond · cheap pair"),
          "MLP vs x·0.5,\nMLP side taken": (heavy["input takes the heavy side"], "where", "cond"),
          "MLP vs x·0.5,\nx·0.5 side taken": (heavy["input takes the cheap side"], "where", "cond")}
fig = grouped_bars(list(groups), {"torch.where": [t[w] for t, w, _ in groups.values()],
                                  "torch.cond": [t[c] for t, _, c in groups.values()]},
                   ylabel="median ms per call (log scale)", title="where vs cond on the .pte", fmt="{:.3f}")
fig.axes[0].set_yscale("log")
fig

# %% [markdown]
# Read the groups from left to right:
#
# - **cheap pair**: the two are within noise of each other: there is nothing worth skipping;
# - **MLP side taken**: `where` is *faster*, because its MLP runs on XNNPACK, while `cond`'s branches run on
#   portable kernels (lesson 03). On this stack, `cond` saves work only when the expensive branch is rare.
# - **x·0.5 side taken**: `where` still pays for the whole MLP; `cond` skips it. Both sides computed, measured.
#
# ## Why it happens
#
# `torch.where(cond, a, b)` selects element by element, and `cond` may be a single boolean broadcast over
# everything (our case) or a mask. It is not control flow: there is no decision about *what to run*, only
# about *which value to keep*. That is exactly why export has nothing to specialise, and exactly why both
# operands are always computed.
#
# ## The fixes: choosing
#
# | the branch… | use |
# |---|---|
# | is elementwise, or both sides are cheap | `torch.where`: straight-line, delegable, both sides computed |
# | skips an expensive subnetwork, decided per input on the device | `torch.cond`, if the expensive side is rare enough to pay for portable kernels; measure |
# | chooses between two genuinely different networks | hoist it: two methods, the app decides (lesson 05) |
#
# One more property of "both sides computed": the side you do not keep must still be *valid* for every input
# (no out-of-range index, no division you relied on the `if` to avoid). `where` keeps the value, not the
# safety of the branch.
#
# ## Exercises
#
# ### Count before you run
#
# For an input that takes the **cheap** side, how many `linear` layers does the `HeavyWhere` `.pte` execute?

# %%
my_prediction = "0"  # change me: "0", "1" or "6"

# %%
executed = str(art_heavy_where.graph().count("aten.linear"))  # straight-line: every node in the graph runs
_ = check_prediction(my_prediction, executed, "`where` needs both operands, so the whole MLP runs before the "
                     "selection; `HeavyCond` would run none of them for this input.")

# %% [markdown]
# ### Predict, then reveal: which is faster when the heavy side is taken?
#
# Both programs are timed on this machine in the next cell (before you answer); the reveal shows the result.

# %%
t_where = fx.latency_ms(art_heavy_where, heavy_side, repeats=30)  # measured once, before you answer
t_cond = fx.latency_ms(art_heavy_cond, heavy_side, repeats=30)


def reveal_heavy_side():
    winner = "torch.where" if t_where < t_cond else "torch.cond"
    return winner, (f"where {t_where:.3f} ms vs cond {t_cond:.3f} ms: the MLP on XNNPACK (where) against the same "
                    "MLP on portable kernels inside a cond branch.")


quiz = PredictThenReveal("the input takes the heavy side: which .pte is faster?", ["torch.where", "torch.cond"],
                         reveal_heavy_side)
quiz

# %% [markdown]
# ## Takeaways
#
# - `torch.where` makes the *result* data-dependent without any control flow: nothing to specialise, nothing
#   to guard, straight-line and delegable.
# - Both sides are always computed: right for cheap expressions, wrong for skipping an expensive subnetwork.
# - `torch.cond` skips work but loses delegation inside its branches on this stack: measure before choosing,
#   and consider hoisting (lesson 05).
#
# ## Interview answer
#
# Many "branches" are really elementwise selection, and `torch.where(cond, a, b)` expresses them as
# arithmetic: a data-dependent result with no control flow at all. The cost is that both sides are always
# computed, so it is right for cheap expressions and wrong for skipping an expensive subnetwork; there I
# would use `torch.cond` or, better for delegation, export two methods and let the app choose.

# %% [markdown]
# ### Check: the `where` models match eager on both sides

# %%
inside = [p for p in probes if not art_where.input_contract().violations(p.args)]
sides = cf.branch_sides(inside, lambda t: t.sum() > 0)
assert sides["true"] > 0 and sides["false"] > 0, sides
assert where_report.ok_within_contract, where_report
heavy_report = helpers.compare(fx.HeavyCond(), art_heavy_where, [(heavy_side,), (cheap_side,), (big,)])
assert heavy_report.ok, heavy_report
print(f"where: parity with the original on {len(inside)} inputs inside the contract {sides}; "
      f"HeavyWhere = HeavyCond on both sides")
