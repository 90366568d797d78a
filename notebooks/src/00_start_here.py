# %% [markdown]
# # 00 · Start here: from `nn.Module` to a `.pte` on the real runtime
#
# **What you will learn**
# - what `torch.export` records when it runs your `forward()` once;
# - the stock pipeline, call by call: `export` → `to_edge_transform_and_lower` → `to_executorch` → the runtime;
# - what the library under these lessons (`helpers.lower`) adds to that pipeline, and why;
# - why one example input proves nothing, and how to compare eager PyTorch with the `.pte` over many inputs.
#
# Everything here is real: a real export, real XNNPACK lowering, the real ExecuTorch runtime.
# The first export in a fresh kernel takes a few seconds; after that results come from a cache.
#
# ## The terms these lessons use
#
# One line each; every lesson uses them as defined here.
#
# | term | meaning |
# |---|---|
# | **export** | `torch.export.export(model, args)`: turn a model into one graph of operators that describes it for every input it will accept |
# | **trace** | how export builds that graph: it runs `forward()` once, with symbolic stand-ins for your example inputs, and records each operator called |
# | **guard** | a condition on the inputs that export assumed while tracing (e.g. "batch is 2"); the program is only valid where its guards hold |
# | **specialization** | a value that was a plain Python number or `bool` while tracing (a static size, a flag, an `int` argument) is baked into the graph as a constant: only the path it chose is recorded |
# | **`Dim`** | `torch.export.Dim("batch", min=1, max=8)`: declares that one axis of an input may vary, within a range |
# | **input contract** | what the exported program accepts: each input's dtype, rank, fixed sizes and the ranges of its `Dim`s |
# | **edge dialect** | the restricted operator set ExecuTorch accepts (Core ATen, with fixed dtypes); an exported graph is converted to it before lowering |
# | **partitioner** | the compiler pass that walks the edge graph and picks the subgraphs a backend can run |
# | **delegate** | a subgraph handed to a backend, stored in the `.pte` as one opaque call the backend executes |
# | **XNNPACK** | the optimized CPU backend used on phones; here it is the delegate for every lesson |
# | **portable kernels** | ExecuTorch's own reference implementation of each operator: what runs any node no delegate took |
# | **memory plan / arena** | computed before the `.pte` is written: one buffer (the arena) sized for every intermediate tensor, each at a fixed offset |
# | **`.pte`** | the serialized program: instructions, weights, delegate blobs and the memory plan |
# | **runtime** | the ExecuTorch runtime (`executorch.runtime`, the same C++ a phone app links): loads a `.pte` and walks its instructions; it has no Python and no compiler |
# | **higher-order operator** | an operator that takes functions (graphs) as arguments: `torch.cond(pred, true_fn, false_fn, operands)` holds both branches as sub-graphs |
# | **Dynamo** | the Python-bytecode tracer inside `torch.compile`: it reads your function's bytecode and builds graphs from it. By default (`strict=False`) export traces `forward()` by running it as ordinary Python with symbolic tensors, and uses Dynamo only with `strict=True`; but `torch.cond` hands its branches to Dynamo (`torch.compile(…, fullgraph=True)`) in either mode, so a branch must be code Dynamo can capture whole (lesson 03) |

# %%
import ipywidgets as w
import torch

import helpers
from helpers import interview, models, questions
from helpers.display import show_source
from helpers.widgets import ParityExplorer

_ = torch.manual_seed(0)

# %% [markdown]
# Started with `make lab`? Then a warm-up builds every lesson's programs in the background, lesson by lesson, at
# the lowest priority; a lesson it has not reached yet builds its own on its first run (seconds). Where it stands
# (run this cell again any time):

# %% tags=["nbval-ignore-output"]
print(helpers.warm_up_status())

# %% [markdown]
# ## 1. A model with a decision in it
#
# `ConfigBranch` has one plain Python attribute, `use_residual`, and one `if` that reads it. Here it is, whole:

# %%
show_source(models.ConfigBranch)

# %% [markdown]
# In eager PyTorch the `if` runs on every call, so the flag can change between calls. We will export the model
# with `use_residual=True`. Before anything runs: what will the exported graph hold at that `if`?

# %%
questions.ask("00.graph_if")

# %% [markdown]
# ## 2. The model on the runtime, in one call
#
# The lessons go from a model to a loaded `.pte` with one call, `helpers.lower(model, args)`: export, lowering
# to XNNPACK, and the ExecuTorch runtime loading the program. `ConfigBranch`, exported with `use_residual=True`,
# running in the runtime next to eager PyTorch:

# %%
model = models.ConfigBranch(use_residual=True)
x = torch.randn(2, 4)

artifact = helpers.lower(model, (x,))
(device_out,) = artifact.run(x)
print("eager:", helpers.fmt(model(x)))
print(".pte: ", helpers.fmt(device_out))

# %% [markdown]
# The same numbers. That one call hides four stages; here they are with the plain ExecuTorch calls a tutorial
# shows.
#
# ## 3. Underneath: the stock pipeline, call by call
#
# Each call is a stage that can fail on its own (lesson 02 reads those failures). Nothing here is cached: every
# stage runs now.

# %%
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

from helpers._quiet import captured_output

exported = torch.export.export(model, (x,))  # 1. trace forward() once into a graph
edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])  # 2. edge dialect + XNNPACK
program = edge.to_executorch()  # 3. memory plan, serialized .pte bytes
with captured_output():  # XNNPACK's first start prints CPU-probing lines specific to this machine
    method = Runtime.get().load_program(program.buffer).load_method("forward")  # 4. the runtime loads it
    (stock_out,) = method.execute([x])  # and runs it, as a phone app would
print(f".pte: {len(program.buffer):,} bytes")
print("eager:", helpers.fmt(model(x)))
print(".pte: ", helpers.fmt(stock_out))

# %% [markdown]
# The graph export recorded (stage 1), as code:

# %%
print(exported.graph_module.code.strip())

# %% [markdown]
# There is no `if` in that graph. The attribute was `True` while tracing, so the `add` ran and was recorded.
# Had it been `False`, the graph would have no `add` at all. Python decisions are made at export time and only
# their *outcome* is recorded: that is **specialization**.
#
# ## 4. What `helpers.lower` adds
#
# `helpers.lower` makes the same four calls, and adds three things:
#
# - a **cache** keyed on the exported program: a program is lowered once, then loaded from disk;
# - a **report** of what the pipeline did: the input contract, what XNNPACK took, the memory plan;
# - a **partitioner that survives `torch.cond`**. The stock `XnnpackPartitioner` asks the pipeline to keep some
#   operators (`linear`, …) whole so XNNPACK can take them, but it never takes nodes inside a `torch.cond`
#   branch, so a `linear` there is left neither decomposed nor delegated and lowering fails. `lower` subclasses
#   the partitioner to let branch nodes decompose to portable kernels (lesson 03 shows the failure and the fix).
#
# The report of section 2's program:

# %%
artifact

# %% [markdown]
# ## 5. Compare with eager, on many inputs
#
# One matching sample is weak evidence. `probe_inputs` builds a varied set around the example: signs, scales,
# zeros, extremes, and every axis nudged outside what export recorded. `compare` runs eager and the `.pte` on
# each one, the `.pte` through `artifact.run_raw`: with the runtime's own input checks only, as an app that skips
# validation would. (A few inputs would be undefined behaviour inside a delegate: `run_raw` refuses those on the
# host and the report counts them as "refused on the host"; none appear here.) The report groups identical
# outcomes:

# %%
probes = helpers.probe_inputs((x,))
report = helpers.compare(model, artifact, probes)
print(report)

# %% [markdown]
# Three outcomes appear, and each line says whose words it quotes:
#
# - **match**: every input with the example's shape;
# - **rejected by the runtime**: a batch of 3 or 1. Export made the batch size 2 a constant of the contract, and
#   the runtime refuses a static tensor of another size;
# - **eager error**: 3 or 5 features break eager PyTorch itself (the layer expects 4), so there is nothing to
#   compare: the message is eager's.
#
# Nothing *diverged* here. The next lessons are about programs that run fine and give a different answer.
# `report.table()` lists every row, and the notebook view of `report` shows them behind a "every input" toggle.
#
# ## 6. Try it yourself
#
# Change the batch size and the sign of the input. Each change runs eager PyTorch and the cached `.pte` (no
# re-export) and shows the verdict. Outside what export recorded you see what the runtime itself says, and the
# host-side contract check (`artifact.run` raises it as an `InputContractError`) naming the input, the axis,
# the expected value and the fix.

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
# - `torch.export` runs `forward()` once and keeps only what ran. An `if` on a plain Python value, like this
#   attribute, is decided while tracing: only the side it took is in the graph. An `if` on a tensor's values
#   stops export instead (lesson 02), and one on a dynamic size is settled by export's assumptions or becomes a
#   guard checked against your `Dim` (lessons 01 and 02).
# - The pipeline is four stages: export, edge + partitioner (`to_edge_transform_and_lower`), `to_executorch`,
#   the runtime. Each can fail on its own.
# - A `.pte` is a fixed program for a fixed contract; the runtime on a device has no Python and no compiler.
# - Parity with eager must be shown on **varied** inputs, not one sample: `probe_inputs` + `compare`.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("00.pipeline")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert "aten.add" in exported.graph_module.code and "cond" not in exported.graph_module.code
assert torch.allclose(device_out, model(x), atol=1e-5) and torch.allclose(stock_out, device_out, atol=1e-5)
counts = report.counts()
assert counts["match"] > 0 and counts["diverge"] == 0 and counts["rejected"] > 0 and counts["eager_error"] > 0
assert all(r.within_contract for r in report if r.status == "match")
assert counts["refused"] == 0  # "none appear here": no input was refused on the host
print("ConfigBranch: one recorded path, the stock pipeline and helpers.lower agree with eager inside the contract")
