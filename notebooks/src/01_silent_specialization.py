# %% [markdown]
# # 01 · Silent specialization: the `.pte` that is fast and wrong
#
# **What you will learn**
# - why `torch.export` keeps only the branch your example took when an `if` reads a shape, a
#   configuration attribute or a Python scalar;
# - how that reaches the device: a program that runs, fully delegated and fast, and gives a
#   *different answer* from eager PyTorch, or refuses inputs your example did not cover;
# - the same trap in loops: `for i in range(x.shape[0])` unrolled, a Python int passed alongside,
#   and a `while` on a tensor that does not export at all;
# - why parity must be checked on **varied** inputs, never one sample.
#
# Every cell below runs the real exporter, XNNPACK lowering and the ExecuTorch runtime.

# %%
import ipywidgets as w
import torch
from torch.export import Dim

import helpers
from helpers import course, interview, models, questions
from helpers.display import show_source
from helpers.lessons import control_flow as cf

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# ### 1. A configuration attribute
#
# `ConfigBranch` (lesson 00) reads a plain attribute, `use_residual`, in an `if`:

# %%
show_source(models.ConfigBranch)

# %% [markdown]
# We export it the way it was configured in the training repo (`True`), and put its `forward()` next to the
# graph export recorded:

# %%
model = models.ConfigBranch(use_residual=True)
x = torch.randn(2, 4)
art_flag = helpers.lower(model, (x,))
cf.source_and_graph(model, art_flag, "ConfigBranch(use_residual=True)")

# %% [markdown]
# The `if` is gone. While tracing, `self.use_residual` was the Python value `True`, so the `add`
# was recorded and the question was never asked again. The program is straight-line, and XNNPACK
# takes all of it:

# %%
print(art_flag.delegation().summary())

# %% [markdown]
# Now the app's config says `use_residual=False` (a product decision, made after export). Eager PyTorch
# follows the flag; the `.pte` cannot. Before we run it, a variation to predict: the *opposite* story,
# a program exported with the flag **off** and an app that later switches it **on**.

# %%
questions.ask("01.flag_on")

# %% [markdown]
# Now our case: exported with `True`, run by an app configured with `False`. We compare the model *as the app
# configures it* with the program we shipped, on varied **values** at the example's shape (this table is
# about the branch, so no input changes size):

# %%
app_model = models.ConfigBranch(use_residual=False)  # same seed, so the same weights
flag_report = helpers.compare(app_model, art_flag, cf.value_probes((x,)))
print(flag_report)

# %% [markdown]
# Nothing was rejected and nothing crashed: the `.pte` simply computes the other branch. Notice the
# `values: zeros` row: with `x = 0` the residual adds nothing, so that one sample *matches*. Had the
# export check used only that input, it would have passed.
#
# ### 2. A shape
#
# `ShapeBranch` normalises over time only when there is more than one frame. We declare the frame axis
# dynamic, `Dim("frames", min=1, max=8)`, so one-frame clips are explicitly allowed.

# %%
shape_model = models.ShapeBranch()
frames = Dim("frames", min=1, max=8)
clip = torch.randn(1, 4, 4)
art_shape = helpers.lower(shape_model, (clip,), dynamic_shapes={"x": {1: frames}})
cf.source_and_graph(shape_model, art_shape, "ShapeBranch with frames ∈ [1, 8]")

# %% [markdown]
# Again only one branch. Export traced with 4 frames, and `x.shape[1] > 1` was answered `True`
# *without a guard*: the range it recorded still starts at 1.

# %%
art_shape.input_contract()

# %%
shape_probes = helpers.probe_inputs((clip,), {"x": {1: frames}})
shape_report = helpers.compare(shape_model, art_shape, shape_probes)
print(shape_report)

# %% [markdown]
# `frames = 1 (min)` is **inside** the contract and diverges: the `.pte` normalises a single frame, whose
# standard deviation is NaN. Eager skips the normalisation. Without a dynamic axis the same model is
# merely rejected for one frame, because export made 4 frames a constant:

# %%
art_shape_static = helpers.lower(shape_model, (clip,))
print(cf.verdict_line(helpers.check_one(shape_model, art_shape_static, (torch.randn(1, 1, 4),))))

# %% [markdown]
# ### 3. A Python scalar input
#
# `ScalarRepeat.forward(x, steps)` takes an `int`. Export does not make it an input you can vary: it
# runs the loop `steps` times and records the result.

# %%
scalar_model = models.ScalarRepeat()
one = torch.randn(1, 4)
art_scalar = cf.quiet_lower(scalar_model, (one, 2))
cf.source_and_graph(scalar_model, art_scalar, "ScalarRepeat exported with steps=2")

# %%
art_scalar.input_contract()

# %% [markdown]
# Two `linear`s, two `tanh`s: the loop is unrolled for `steps=2`. The runtime compares the scalar you pass
# with the baked-in value and refuses any other:

# %%
for steps in (2, 3):
    print(f"steps={steps}:", cf.verdict_line(helpers.check_one(scalar_model, art_scalar, (one, steps))))

# %% [markdown]
# ### 4. Loops over a shape
#
# `BatchLoop` transforms each row and weights it by its position:

# %%
show_source(models.BatchLoop)

# %% [markdown]
# `for i in range(x.shape[0])` asks for a Python int. With a static batch, export unrolls the loop once
# per example row and the batch becomes a constant.

# %%
loop_model = models.BatchLoop()
rows = torch.randn(3, 4)
art_loop = helpers.lower(loop_model, (rows,))
print("linear ops in the graph:", art_loop.graph().count("aten.linear"))
for batch in (3, 4, 2):
    print(f"batch {batch}:", cf.verdict_line(helpers.check_one(loop_model, art_loop, (torch.randn(batch, 4),))))

# %% [markdown]
# Declaring the batch dynamic does not rescue the loop: `range()` needs a concrete number, so export
# specialises the `Dim` and says so.

# %%
err = cf.show_export_error(torch.export.export, loop_model, (rows,),
                           dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}})

# %% [markdown]
# ### 5. The loop over a Python int you also pass in
#
# `CountedMean.forward(x, n)` averages the first `n` items:

# %%
show_source(cf.CountedMean)

# %% [markdown]
# In eager PyTorch the caller passes `n = len(x)`. We export with 3 items and `n=3` and let the item axis
# vary. Export itself objects first: reading `x[2]` needs at least 3 items.

# %%
counted = cf.CountedMean()
items3 = torch.randn(3, 4)
err = cf.show_export_error(torch.export.export, counted, (items3, 3),
                           dynamic_shapes={"x": {0: Dim("items", min=1, max=8)}, "n": None})

# %% [markdown]
# Take torch's suggested fix, `min=3`, and it exports. Now the program holds a loop unrolled exactly
# three times, over an axis that may hold up to 8 items:

# %%
items = Dim("items", min=3, max=8)
art_counted = cf.quiet_lower(counted, (items3, 3), dynamic_shapes={"x": {0: items}, "n": None})
art_counted.input_contract()

# %% [markdown]
# Predict before running anything on it: the app sends **4** items and, as the program demands, `n=3`.
# Compared with eager run as intended (`n=4`), is the device's answer a match, a divergence, or a rejection?
# Write your answer, then run the cell.

# %%
my_prediction = None  # "match", "diverge" or "rejected"
questions.reveal("01.counted_four", my_prediction)

# %% [markdown]
# ### 6. A `while` on a tensor fails outright
#
# `WhileDouble` doubles `x` while `x.sum() < 10`. The trip count depends on the *values*, which do not
# exist while tracing, and there is no branch to pick: export stops. This is the loud failure mode,
# the subject of the next lesson.

# %%
err = cf.show_export_error(torch.export.export, models.WhileDouble(), (torch.rand(3),))

# %% [markdown]
# ## Why it happens
#
# `torch.export` runs `forward()` once, with *symbolic* tensors shaped like your example. Every Python
# decision along the way needs a concrete answer right then:
#
# | the condition reads… | at trace time it is… | what the graph gets |
# |---|---|---|
# | a config attribute (`self.use_residual`) | a plain Python `bool` | the taken branch; no trace of the `if` |
# | a Python scalar input (`steps`, `n`) | a constant | the loop unrolled that many times; the runtime refuses other values |
# | a static shape (`x.shape[0]` of a non-dynamic axis) | an `int` | one branch / the loop unrolled; the size is fixed |
# | a dynamic shape (`x.shape[1] > 1`, `Dim` min 1) | decided by export's assumption that dynamic sizes are ≥ 2, with no guard | one branch, wrong for size 1 |
# | a tensor's values (`x.sum() > 0`, `while`) | unknown | **nothing: export fails** (lesson 02) |
#
# On the device there is no Python left to re-ask the question: the runtime walks the recorded
# instructions. The eager model in your notebook and the `.pte` on the phone disagree only on inputs
# the example did not cover, which is exactly why the bug ships.
#
# ## The fixes
#
# Each trap has a fix that keeps *every* case in the graph, or moves the decision where it belongs:
#
# - **config flag** → export one method per setting and let the app pick (shown below; lesson 05 develops
#   it); treat the flag as part of the artifact's identity;
# - **Python scalar** → one method per value the app uses (shown below), or, if it has a small maximum,
#   a loop to that maximum that a tensor count switches off step by step (shown below). Passing it as a
#   tensor alone does not help: `range(tensor)` needs the value, which is data, and export fails as in §6;
# - **loop over a batch** → one batched operation;
# - **a count passed alongside** → compute from the tensor you have;
# - **shape branch** → state the range the code really supports (`min=2`) so a one-frame clip is
#   *outside* the contract and the host check refuses it (or handle one frame on the host);
# - **data-dependent branch** → `torch.cond` (03), `torch.where` (04), or hoisting (05).
#
# A flag and a scalar, one method per value. Each method is its own straight-line graph in one `.pte`; the app
# calls the one that matches its setting:

# %%
art_per_value = cf.quiet_lower_methods({
    "residual": (models.ConfigBranch(use_residual=True), (x,)),
    "plain": (models.ConfigBranch(use_residual=False), (x,)),
    "steps2": (scalar_model, (one, 2)),
    "steps3": (scalar_model, (one, 3)),
})
sample = -x.abs()
for method, reference in {"residual": models.ConfigBranch(use_residual=True)(sample),
                          "plain": models.ConfigBranch(use_residual=False)(sample)}.items():
    print(f"method '{method}' matches eager:", torch.allclose(art_per_value.run(sample, method=method)[0], reference,
                                                             atol=1e-5))
for steps in (2, 3):
    (out,) = art_per_value.run(one, steps, method=f"steps{steps}")
    print(f"method 'steps{steps}' matches eager ScalarRepeat(x, {steps}):",
          torch.allclose(out, scalar_model(one, steps), atol=1e-5))

# %% [markdown]
# A scalar with a small maximum can also become a tensor input, if the loop runs to the maximum and each step
# is switched off by arithmetic once the count is reached. The loop bound is a Python constant (unrolled 4
# times); the count is data, used only in a `torch.where`. Every step is computed for every input: the price
# of one program for all counts.

# %%
class ScalarRepeatUpTo(models.ScalarRepeat):
    max_steps = 4

    def forward(self, x, steps):  # steps: an int tensor, 0 … max_steps
        for i in range(self.max_steps):  # a Python constant: unrolled max_steps times
            x = torch.where(i < steps, torch.tanh(self.step(x)), x)  # step i counts only if i < steps
        return x


art_upto = helpers.lower(ScalarRepeatUpTo(), (one, torch.tensor(2)))
for steps in range(5):
    (out,) = art_upto.run(one, torch.tensor(steps))
    print(f"steps={steps}: matches eager ScalarRepeat(x, {steps}):", torch.allclose(out, scalar_model(one, steps),
                                                                                   atol=1e-5))

# %% [markdown]
# ## Exercises
#
# ### ✏️ Exercise 01.vectorize_loop: one `.pte` for every batch
#
# `BatchLoop` (its source is in §4) loops over the rows of `x`. Rewrite its `forward()` so that it exports
# with `dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}}` and the `.pte` computes what the loop
# computes, for every batch from 1 to 8. Edit the cell, run it, then run the check: it exports, lowers and
# runs your model in the ExecuTorch runtime and compares it with `BatchLoop` in eager mode.

# %%
# ✏️ Exercise 01.vectorize_loop — edit this cell, then run the check below.
from helpers.models import BatchLoop


class MyBatchLoop(BatchLoop):
    def forward(self, x):
        rows = []
        for i in range(x.shape[0]):  # export needs a Python number here
            rows.append(torch.tanh(self.item(x[i])) * (i + 1))
        return torch.stack(rows)


answer = MyBatchLoop()

# %%
from helpers import exercises

grade = exercises.check("01.vectorize_loop", answer)

# %% [markdown]
# ### After the exercise: the vectorised loop, checked like every fix
#
# Once you have passed the check (or pressed *Show solution*), here is the same idea checked the lesson's way,
# against the original `BatchLoop` on the full probe set, with the batch dynamic from 1 to 8:

# %%
loop_fixed = cf.BatchLoopVectorized()
batch = Dim("batch", min=1, max=8)
art_loop_fixed = helpers.lower(loop_fixed, (rows,), dynamic_shapes={"x": {0: batch}})
loop_report = helpers.compare(loop_model, art_loop_fixed, helpers.probe_inputs((rows,), {"x": {0: batch}}))
print(loop_report.summary())
print("linear ops in the graph:", art_loop_fixed.graph().count("aten.linear"))

# %% [markdown]
# Note the eager reference is the **original** `BatchLoop`: the fix must compute what the loop computed.
# The count, taken from the tensor (compared with the original called the way it was meant, `n = len(x)`):

# %%
counted_fixed = cf.CountedMeanVectorized()
any_items = Dim("items", min=1, max=8)
art_counted_fixed = helpers.lower(counted_fixed, (items3,), dynamic_shapes={"x": {0: any_items}})
for n in (1, 3, 6, 8):
    sample = torch.randn(n, 4)
    (out,) = art_counted_fixed.run(sample)
    print(f"{n} items: matches eager CountedMean(x, n={n}):", torch.allclose(out, counted(sample, n), atol=1e-5))

# %% [markdown]
# The shape branch with its honest range. One frame is now *outside* the contract, and `run` says so
# before the device computes anything:

# %%
frames2 = Dim("frames", min=2, max=8)
art_shape_fixed = helpers.lower(shape_model, (clip,), dynamic_shapes={"x": {1: frames2}})
err = helpers.show_error(art_shape_fixed.run, torch.randn(1, 1, 4))

# %% [markdown]
# ### Explore: four traps, one widget
#
# Pick a trap; change the values, the batch/frames size, the app's `use_residual`, the scalar `steps`.
# Each change runs eager PyTorch and the **already-lowered** `.pte` (nothing is re-exported) and shows the
# verdict: match, diverge, rejected, or outside contract. Try to find a `diverge` in every trap that has one,
# and an input where a wrong program still *matches*.

# %%
explorer = course.lesson(1).DivergenceExplorer()  # this lesson's widget: helpers/lessons/01_silent_specialization.py
explorer

# %% [markdown]
# The widget is plain Python underneath: `explorer.set(trap=…, values=…, size=…, flag=…, steps=…)` runs one case
# and returns its verdict. Write down the cases you found, one dict each, and run them from code:

# %%
my_finds = []  # e.g. {"trap": "config flag", "size": 2}: the settings you changed, the others as the widget has them
for values in my_finds:
    print(f"{values}: {explorer.set(**values).verdict}")
print(f"{len(my_finds)} case(s) run" if my_finds else "No cases yet: add the ones you found in the widget.")

# %% [markdown]
# ## Takeaways
#
# **The one to keep:** export keeps the *outcome* of every Python decision it meets, and the `.pte` runs that outcome
# for every input without a word. Only a comparison with eager on varied inputs finds it.
#
# In detail:
# - Export records the *outcome* of every Python decision it meets; the other branch does not exist in
#   the `.pte`.
# - Config attributes, Python scalar arguments and static sizes are plain Python values while tracing: an
#   `if` on one keeps the side it took, a loop over one is unrolled. That is silent specialization.
# - A dynamic size is a symbol, not a value: `x.shape[1] > 1` was answered by export's assumption that every
#   dynamic size is at least 2, with no guard, so the program is wrong at 1 inside its own contract. (Other
#   comparisons on a dynamic size become guards that export checks against your `Dim`: lesson 02.)
# - On the device the program runs (here fully delegated) and gives another answer, or it refuses the input.
#   A wrong answer makes no noise: only a comparison with eager on **varied** inputs finds it, including every
#   bound's edge (`frames = 1`) and both settings of every flag.
# - Tensor-valued conditions (`x.sum() > 0`, `while`) fail loudly instead: next lesson.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("01.why_disagree")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the fixed models match eager on their probe sets

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert flag_report.counts()["rejected"] == 0 and flag_report.counts()["eager_error"] == 0, flag_report
assert flag_report.counts()["diverge"] > 0 and next(r for r in flag_report if r.label == "values: zeros").status == "match"
assert loop_report.ok_within_contract, loop_report
found = {(v["trap"], explorer.set(**v).verdict) for v in (
    {"trap": "shape if", "size": 1}, {"trap": "config flag", "size": 2, "flag": False},
    {"trap": "config flag", "values": "zeros"}, {"trap": "Python scalar", "steps": 3},
    {"trap": "loop over batch", "size": 4, "values": "positive", "flag": True})}
assert found == {("shape if", "diverge"), ("config flag", "diverge"), ("config flag", "match"),
                 ("Python scalar", "rejected"), ("loop over batch", "rejected")}, found  # the widget's traps do it
fixed_shape_report = helpers.compare(shape_model, art_shape_fixed,
                                     helpers.probe_inputs((clip,), {"x": {1: frames2}}))
assert fixed_shape_report.ok_within_contract, fixed_shape_report
counted_probes = helpers.probe_inputs((items3,), {"x": {0: any_items}})
assert all(torch.allclose(art_counted_fixed.run(*p.args)[0], counted(p.args[0], len(p.args[0])), atol=1e-4)
           for p in counted_probes if not art_counted_fixed.input_contract().violations(p.args))
print("fixed models: parity with eager inside the contract on", len(loop_report) + len(fixed_shape_report)
      + len(counted_probes), "probes")
