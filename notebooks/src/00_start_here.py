# %% [markdown]
# # 00 · Start here: from `nn.Module` to a `.pte` on the real runtime
#
# **What you will learn**
# - what `torch.export` records when it runs your `forward()` once;
# - how a model becomes a `.pte` and runs in the ExecuTorch runtime (the same runtime a phone app uses);
# - why one example input proves nothing, and how to compare eager PyTorch with the `.pte` over many inputs.
#
# Everything here is real: a real export, real XNNPACK lowering, the real ExecuTorch runtime.
# The first export in a fresh kernel takes a few seconds; after that results come from a cache.

# %%
import ipywidgets as w
import torch

import helpers
from helpers import models
from helpers.widgets import ParityExplorer

_ = torch.manual_seed(0)

# %% [markdown]
# ## 1. A model with a decision in it
#
# `ConfigBranch` has one plain Python attribute, `use_residual`, and one `if` that reads it.
# In eager PyTorch the `if` runs on every call.

# %%
model = models.ConfigBranch(use_residual=True)
x = torch.randn(2, 4)
print(helpers.fmt(model(x)))

# %% [markdown]
# ## 2. What export records
#
# `helpers.lower` calls `torch.export.export`, lowers the result with the XNNPACK partitioner,
# serializes it with `to_executorch()` and loads the bytes in `executorch.runtime.Runtime`.
# Export ran `forward()` **once**, with symbolic tensors shaped like `x`. Look at the graph it kept:

# %%
artifact = helpers.lower(model, (x,))
print(artifact.graph())

# %% [markdown]
# There is no `if` in that graph. The attribute was `True` while tracing, so the `add` is simply there.
# Had it been `False`, the graph would have no `add` at all. Python decisions are made at export time
# and only their *outcome* is recorded.
#
# The artifact knows more about itself: the input contract it was built for, how much of the graph
# XNNPACK took, and how big its memory plan is.

# %%
artifact

# %% [markdown]
# ## 3. Run it and compare with eager

# %%
(device_out,) = artifact.run(x)
print("eager:", helpers.fmt(model(x)))
print(".pte: ", helpers.fmt(device_out))

# %% [markdown]
# One matching sample is weak evidence. `probe_inputs` builds a varied set around the example:
# signs, scales, zeros, extremes, and every axis nudged outside what export recorded.
# `compare` runs eager and the **raw** runtime (no host-side help, like a device) on each one.

# %%
probes = helpers.probe_inputs((x,))
report = helpers.compare(model, artifact, probes)
report

# %% [markdown]
# Every input with the example's shape matches. The nudged ones are different stories:
# a batch of 3 or 1 is **rejected** by the runtime (export made the batch size a constant), and 3 or 5
# features break eager PyTorch too. Nothing *diverged* — yet. The next lessons are about models where
# the `.pte` runs fine and gives a different answer.

# %%
print(report.summary())

# %% [markdown]
# ## 4. Try it yourself
#
# Change the batch size and the sign of the input. Each change runs eager PyTorch and the cached `.pte`
# (no re-export) and shows the verdict. Outside what export recorded you see two things: what the
# runtime itself says, and the host-side contract check (`artifact.run` raises it as an
# `InputContractError`) naming the input, the axis, the expected value and the fix.

# %%
base = torch.randn(4, 4)


def make_input(batch, sign):
    return (sign * base[:batch].abs(),)


explorer = ParityExplorer(
    model, artifact, make_input, title="ConfigBranch exported at batch 2",
    controls={"batch": w.IntSlider(value=2, min=1, max=4, description="batch"),
              "sign": w.ToggleButtons(options=[("positive", 1.0), ("negative", -1.0)], description="sign")})
explorer

# %% [markdown]
# The widget is plain Python underneath; you can drive it from code too:

# %%
for batch in (1, 2, 3):
    print(f"batch {batch}: {explorer.set(batch=batch).verdict}")
explorer.set(batch=2, sign=1.0).verdict

# %% [markdown]
# ## The map
#
# | track | lessons |
# |---|---|
# | control flow under export | `01_silent_specialization` · `02_loud_failures` · `03_torch_cond` · `04_torch_where` · `05_hoisting` |
# | shapes on device | `06_static_shapes` · `07_dynamic_dims` · `08_cost_of_dynamic` · `09_normalize_or_bucket` · `10_diagnosis_drills` |
# | your own models | `11_export_doctor` |
#
# ## Takeaways
# - `torch.export` runs `forward()` once and keeps only what ran: Python `if`s are decided at export.
# - A `.pte` is a fixed program for a fixed contract; the runtime on a device has no Python and no compiler.
# - Parity with eager must be shown on **varied** inputs, not one sample: `probe_inputs` + `compare`.
