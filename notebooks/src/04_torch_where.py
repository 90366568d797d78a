# %% [markdown]
# # 04 · `torch.where`: selection without control flow
#
# **What you will learn**
# - how `torch.where(cond, a, b)` turns many "branches" into arithmetic: a data-dependent *result* with no
#   control flow at all, so nothing to specialise and nothing to guard;
# - its price: **both sides are always computed**. We measure it on the real runtime: a cheap pair of branches,
#   then an expensive subnetwork, `where` against `cond`;
# - what "both sides computed" means for the side you throw away: which inputs it must still survive;
# - when to choose `where`, `cond`, or neither.
#
# Terms from lesson 00's glossary used here: specialization, guard, delegate, XNNPACK, portable kernels.

# %%
import torch

import helpers
from helpers import interview, models, questions, timing
from helpers.display import show_source
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fixes
from helpers.plots import grouped_bars

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The fix, live: the same decision as arithmetic
#
# `ScaleOrShiftWhere` makes lesson 02's decision (`x.sum() > 0` picks layer `a` or `b`) with `torch.where`:

# %%
show_source(models.ScaleOrShift, models.ScaleOrShiftWhere)

# %%
where_model = models.ScaleOrShiftWhere()
art_where = helpers.lower(where_model, (x,))
cf.source_and_graph(where_model, art_where, "ScaleOrShiftWhere")

# %% [markdown]
# A straight line: both `linear`s, then `where` picks. No sub-graphs, no predicate to evaluate before running
# anything. It matches the original Python `if` on both sides (values at the example's shape):

# %%
probes = cf.value_probes((x,)) + cf.shifted(x)
print("probes per side of `x.sum() > 0`:", cf.branch_sides(probes, lambda t: t.sum() > 0))
where_report = helpers.compare(models.ScaleOrShift(), art_where, probes)
print(where_report)

# %% [markdown]
# And because it is straight-line code, the partitioner sees every node: nothing is hidden in a branch. What it
# takes is another matter. Compare `torch.cond` (lesson 03), node by node:

# %%
art_cond = helpers.lower(models.ScaleOrShiftCond(), (x,))
for name, a in {"where": art_where, "cond": art_cond}.items():
    print(f"{name:<6}", ", ".join(f"{n} {k}" for k, n in fixes.node_counts(a.delegation()).items()))
print("left on portable kernels by where:", ", ".join(art_where.delegation().portable_ops()))

# %% [markdown]
# XNNPACK takes both `linear`s of the `where` version; the reduction and the comparison that make the predicate
# stay on portable kernels, as they did in lesson 03, and so does the `where` itself.
#
# ## The trap: both sides, every time
#
# `torch.where` is an ordinary elementwise operator: its inputs must exist before it runs. So `self.a(x)` *and*
# `self.b(x)` are computed for every input. For an expensive subnetwork that is the whole subnetwork, even when
# its result is thrown away. `HeavyWhere` and `HeavyCond` choose between a 6-layer MLP (128 features) and a cheap
# `x * 0.5`:

# %%
show_source(fixes._CheapOrHeavy, fixes.HeavyWhere, fixes.HeavyCond)

# %% [markdown]
# Predict before you look at the graph:

# %%
questions.ask("04.heavy_count")

# %% [markdown]
# The `linear` layers in the `HeavyWhere` graph, all in the main graph, before the `where`:

# %%
big = torch.randn(32, 128)
heavy_side, cheap_side = big.abs() + 0.1, -(big.abs() + 0.1)  # mean > 0 → heavy, mean < 0 → cheap
art_heavy_where = helpers.lower(fixes.HeavyWhere(), (big,))
art_heavy_cond = helpers.lower(fixes.HeavyCond(), (big,))
print("linear layers in the where graph:", art_heavy_where.graph().count("aten.linear"))
print("control-flow operators in the where graph:", fixes.node_counts(art_heavy_where.delegation())["control flow"])

# %% [markdown]
# ## Measured: `where` against `cond`
#
# One more prediction, for the input that takes the **heavy** side: both programs run the MLP. Which is faster?

# %%
questions.ask("04.heavy_faster")

# %% [markdown]
# We time each `.pte`'s runtime call alone (`artifact.bare_call()`: the loaded method, as an app's `execute()`, with
# no check of ours around it), on the runtime's own thread pool: 5 rounds, each the median of 20 calls, the programs
# interleaved so they share the machine's noise. The sentences below the table are generated from
# these numbers, and say only what every round agrees on. Your numbers will differ from these.

# %% tags=["nbval-ignore-output"]
cheap_pair = timing.latency_spread({"where": art_where, "cond": art_cond},
                               {"true side": x.abs() + 0.1, "false side": -(x.abs() + 0.1)})
heavy = timing.latency_spread({"where": art_heavy_where, "cond": art_heavy_cond},
                          {"MLP side taken": heavy_side, "x·0.5 side taken": cheap_side})
print(f"the runtime's thread pool: {helpers.runtime_threads()} threads")
for title, table in {"cheap pair (ScaleOrShift)": cheap_pair, "MLP vs x·0.5 (Heavy…)": heavy}.items():
    for side, row in table.items():
        print(f"{title}, {side}: {timing.compare_speed('where', row['where'], 'cond', row['cond'])}")

# %% tags=["nbval-ignore-output"]
groups = {"cheap pair,\ntrue side": cheap_pair["true side"], "cheap pair,\nfalse side": cheap_pair["false side"],
          "MLP vs x·0.5,\nMLP side taken": heavy["MLP side taken"],
          "MLP vs x·0.5,\nx·0.5 side taken": heavy["x·0.5 side taken"]}
fig = grouped_bars(list(groups), {"torch.where": [g["where"].median for g in groups.values()],
                                  "torch.cond": [g["cond"].median for g in groups.values()]},
                   ylabel="median ms per call (log scale)", title="where vs cond on the .pte", fmt="{:.3f}")
fig.axes[0].set_yscale("log")
fig

# %% [markdown]
# What the groups are about, whatever your numbers:
#
# - **cheap pair**: both compute the predicate on portable kernels. Then `where` runs both small layers on
#   XNNPACK and selects; `cond` jumps and runs one layer on portable kernels. Which costs more is a question
#   for the measurement: read the sentence above for what this machine measured;
# - **MLP side taken**: both run the MLP, `where` on XNNPACK, `cond` inside a branch on portable kernels;
# - **x·0.5 side taken**: `where` still pays for the whole MLP; `cond` skips it.
#
# ## Why it happens
#
# `torch.where(cond, a, b)` selects element by element, and `cond` may be a single boolean broadcast over
# everything (our case) or a mask. It is not control flow: there is no decision about *what to run*, only about
# *which value to keep*. That is exactly why export has nothing to specialise, and exactly why both operands are
# always computed.
#
# ## The side you throw away still runs
#
# A Python `if` never computes the side it does not take. `where` computes it, on every input, and keeps only the
# value. So that side must be *safe* on every input, not just correct where it is kept. Four "guarded"
# computations, each written the way an `if` would have protected it:

# %%
class SafeRatio(torch.nn.Module):
    def forward(self, x, d):  # float: x / d where d != 0, else 0
        return torch.where(d != 0, x / d, torch.zeros_like(x))


class SafeCountRatio(torch.nn.Module):
    def forward(self, n, d):  # integer counts: n // d where d != 0, else 0
        return torch.where(d != 0, n // d, torch.zeros_like(n))


class SafeLookup(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(4.0) * 10)

    def forward(self, i):  # table[i] where i is a valid index, else 0
        return torch.where(i < 4, self.table[i], torch.zeros(i.shape))


class SafeLogCentre(torch.nn.Module):
    def forward(self, x):  # log(x) centred on the row's mean, where x > 0; else 0
        logs = torch.log(x)
        return torch.where(x > 0, logs - logs.mean(dim=1, keepdim=True), torch.zeros_like(x))


# %% [markdown]
# Each is exported with harmless inputs, then run on the `.pte` with the input its guard was meant for:

# %%
art_ratio = helpers.lower(SafeRatio(), (torch.ones(3), torch.tensor([1.0, 2.0, 4.0])))
art_count = helpers.lower(SafeCountRatio(), (torch.tensor([7, 8, 9]), torch.tensor([1, 2, 4])))
art_lookup = helpers.lower(SafeLookup(), (torch.tensor([0, 1, 3]),))
(ratio,) = art_ratio.run_raw(torch.ones(3), torch.tensor([1.0, 0.0, 4.0]))
print("float, d = [1, 0, 4]: ", helpers.fmt(ratio))
err = helpers.show_error(art_count.run_raw, torch.tensor([7, 8, 9]), torch.tensor([1, 0, 4]), max_lines=1)
err = helpers.show_error(art_lookup.run_raw, torch.tensor([0, 1, 7]), max_lines=1)
art_centre = helpers.lower(SafeLogCentre(), (torch.tensor([[1.0, 2.0, 4.0]]),))
(centred,) = art_centre.run_raw(torch.tensor([[1.0, 2.0, -4.0]]))
print("log-centre, x = [1, 2, -4]:", helpers.fmt(centred))

# %% [markdown]
# - **float division by zero** is harmless: `1 / 0` is `inf`, and `where` throws it away;
# - **integer division by zero** is an error in the kernel: the runtime stops the whole call, though the result
#   would have been discarded (eager PyTorch raises `ZeroDivisionError` too);
# - **an out-of-range index** fails the same way: the gather runs before the selection;
# - **a reduction** over the side's values raises nothing and is the quietest: `log(-4)` is `NaN` where the guard
#   is false, but the row's mean mixes it into every element, so the values the guard *kept* (1 and 2) come
#   back `NaN` too.
#
# The fix is the same for all of them: make the discarded side valid on every input. Clamp or mask what feeds it
# (`d.clamp(min=1)`, `i.clamp(max=3)`, a reduction over the kept values only), then select:

# %%
class SafeCountRatioFixed(torch.nn.Module):
    def forward(self, n, d):
        return torch.where(d != 0, n // d.clamp(min=1), torch.zeros_like(n))


class SafeLookupFixed(SafeLookup):
    def forward(self, i):
        return torch.where(i < 4, self.table[i.clamp(max=3)], torch.zeros(i.shape))


art_count_fixed = helpers.lower(SafeCountRatioFixed(), (torch.tensor([7, 8, 9]), torch.tensor([1, 2, 4])))
art_lookup_fixed = helpers.lower(SafeLookupFixed(), (torch.tensor([0, 1, 3]),))
print("integer, d = [1, 0, 4]:", helpers.fmt(art_count_fixed.run_raw(torch.tensor([7, 8, 9]), torch.tensor([1, 0, 4]))[0]))
print("lookup, i = [0, 1, 7]: ", helpers.fmt(art_lookup_fixed.run_raw(torch.tensor([0, 1, 7]))[0]))

# %% [markdown]
# ## The fixes: choosing
#
# | the branch… | use |
# |---|---|
# | is elementwise, or both sides are cheap | `torch.where`: straight-line, delegable, both sides computed (and both must be safe) |
# | skips an expensive subnetwork, decided per input on the device | `torch.cond`, if the expensive side is rare enough to pay for portable kernels; measure |
# | chooses between two genuinely different networks | hoist it: two methods, the app decides (lesson 05) |
#
# ## ✏️ Exercise 04.where_rewrite
#
# `GatedProj` projects its input, then applies `relu` or a 0.1 damping, depending on the sign of the input's sum.
# Both sides are one cheap elementwise step after the same projection: a job for `torch.where`.

# %%
show_source(fixes.GatedProj)

# %% [markdown]
# Rewrite `forward()` with `torch.where`. The check exports, lowers and runs it; it requires a graph with no
# control flow and the projection on XNNPACK, and compares the `.pte` with the original `GatedProj` in eager mode
# on both sides, including inputs whose elements have mixed signs, and on the edge, where the sum is exactly 0.

# %%
# ✏️ Exercise 04.where_rewrite — edit this cell, then run the check below.
from helpers.lessons.control_flow_fixes import GatedProj


class GatedProjForExport(GatedProj):
    def forward(self, x):
        if x.sum() > 0:
            return torch.relu(self.proj(x))
        return self.proj(x) * 0.1


answer = GatedProjForExport()

# %%
from helpers import exercises

grade = exercises.check("04.where_rewrite", answer)

# %% [markdown]
# ## Takeaways
#
# - `torch.where` makes the *result* data-dependent without any control flow: nothing to specialise, nothing to
#   guard, straight-line and delegable.
# - Both sides are always computed: right for cheap expressions, wrong for skipping an expensive subnetwork.
# - The side you throw away must still be valid on every input: integer division, indexing and reductions are
#   where it bites.
# - The condition must be the same decision as the original: a whole-input test is not a per-element mask.
# - `torch.cond` skips work but runs its branches on portable kernels on this stack: measure before choosing, and
#   consider hoisting (lesson 05).
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("04.where_tradeoff")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the `where` models match eager on both sides, and the measured relations hold

# %% tags=["ci-check"] jupyter={"source_hidden": true}
sides = cf.branch_sides(probes, lambda t: t.sum() > 0)
assert sides["true"] > 0 and sides["false"] > 0, sides
assert where_report.ok, where_report
assert set(art_where.delegation().portable_ops()) == {"aten_gt_scalar", "aten_sum_dim_int_list", "aten_where_self"}
heavy_report = helpers.compare(fixes.HeavyCond(), art_heavy_where, [(heavy_side,), (cheap_side,), (big,)])
assert heavy_report.ok, heavy_report
assert art_heavy_where.graph().count("aten.linear") == 6
timed = timing.latency_spread({"where": art_heavy_where, "cond": art_heavy_cond},
                          {"heavy": heavy_side, "cheap": cheap_side}, rounds=3, repeat=15)
assert timed["cheap"]["cond"].high < timed["cheap"]["where"].low, timed  # cond skips the MLP
assert timed["heavy"]["where"].high < timed["heavy"]["cond"].low, timed  # the MLP on XNNPACK beats portable
assert torch.equal(ratio, torch.tensor([1.0, 0.0, 0.25])) and bool(torch.isnan(centred[0, :2]).all())
assert err is not None
print(f"where: parity with the original on {len(probes)} inputs {sides}; HeavyWhere = HeavyCond on both sides; "
      "both heavy-input timing relations held in every round")
