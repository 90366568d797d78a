# %% [markdown]
# # 16 · Inputs as they come: a dict, keyword arguments, a dataclass — and their `dynamic_shapes`
#
# **What you will learn**
# - what the device receives when `forward()` takes a dict, keyword arguments or a dataclass: a flat list of
#   tensors, in the order export flattened them;
# - what happens when the app builds that list in another order, and how to make the order impossible to miss;
# - how to write `dynamic_shapes` for nested inputs: it mirrors the inputs' structure;
# - what `torch.export.AdditionalInputs` infers from recorded inputs, and what it leaves out that the device needs;
# - what a saved export (`torch.export.save`, `.pt2`) carries to the person who lowers it.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **pytree** | torch's way of walking nested Python containers (tuples, lists, dicts, registered classes) down to their leaves, here tensors |
# | **flatten** | turn nested inputs into the list of their leaves, in pytree order |
# | **`register_dataclass`** | `torch.export.register_dataclass(cls)`: tells pytree how to walk a dataclass, so export accepts it as an input |

# %%
from importlib.metadata import version

import torch

import helpers
from helpers import course, interview, questions
from helpers.display import show_source

inputs = course.lesson(16)  # this lesson's models and tools: helpers/lessons/16_inputs_as_they_come.py
print(f"torch {version('torch')} · executorch {version('executorch')}")

# %% [markdown]
# ## 1. A dict input
#
# `Denoise` takes one batch, a dict of two tensors of the same shape, as the training code's data loader gives it:

# %%
show_source(inputs.Denoise)

# %%
batch = inputs.loader_batch()
print({key: tuple(value.shape) for key, value in batch.items()})

# %% [markdown]
# The exporter lowers it with that batch as the example. (`helpers.lower` takes tensors one by one, so the lesson's
# `lower_structured` exports the model behind a `forward` that takes its tensors one by one, in the order
# `torch.export` would give the `.pte`'s inputs.)

# %%
program, flat = inputs.denoise_program()
print(program)

# %% [markdown]
# The app on the phone calls the program with a list of tensors: the runtime has no dicts. The app's developer
# reads `forward()` and sends them in the order it uses them. Predict:

# %%
questions.ask("16.key_order")

# %%
with torch.no_grad():
    eager = inputs.Denoise()(batch)
(app_out,) = program.run_raw(batch["signal"], batch["noise"])
print("eager:", helpers.fmt(eager[0]))
print(".pte: ", helpers.fmt(app_out[0]), f"· max |.pte - eager| = {(app_out - eager).abs().max():.3f}")

# %%
print("the .pte's inputs, in order:", flat.names)
print(program.input_contract().signature())

# %% [markdown]
# A dict is flattened in its keys' order, and the example's keys were in the data loader's (alphabetical) order:
# `noise` first. The runtime checks each input's shape and dtype; both are `float32 (2, 8)`, so nothing tells it
# which is which. The program computed `noise - signal`.
#
# The structure is recorded. Export keeps it (`in_spec`), and ExecuTorch's emitter writes it into the program, from
# the installed sources (`exir/emit/_emitter.py`):

# %%
import inspect

from executorch.exir.emit import _emitter

source = inspect.getsource(_emitter._TopLevelEmitter.__init__).splitlines()
print("\n".join(line.strip() for line in source if "create_container_str(exported_program" in line
                or "ContainerMetadata(" in line))

# %%
try:
    program.run_raw(batch)
except helpers.RuntimeRejectedError as exc:
    print("the runtime, given the dict:", exc.error.splitlines()[0])

# %% [markdown]
# But the runtime does not read it: `execute()` takes a flat list. The order is a contract between the exporter and
# the app, so make it one nobody can miss: export a wrapper whose inputs are positional, in the order of its
# signature.

# %%
show_source(inputs.DenoiseApp)

# %%
fixed = helpers.lower(inputs.DenoiseApp(), (batch["signal"], batch["noise"]))
print(fixed.input_contract().signature())
row = helpers.check_one(inputs.DenoiseApp(), fixed, (batch["signal"], batch["noise"]))
print("the app's order, signal then noise:", row.status)

# %% [markdown]
# ## 2. Keyword arguments and a dataclass
#
# The same rule for the other ways inputs come. Keyword arguments are flattened in the order they were *passed to
# export*, not the order of `forward()`'s signature:

# %%
show_source(inputs.KeywordDenoise)

# %%
signal, noise = batch["signal"], batch["noise"]
print(inputs.export_input_names(inputs.KeywordDenoise(), (), {"noise": noise, "signal": signal}))

# %% [markdown]
# A dataclass is not a container export knows:

# %%
show_source(inputs.DataclassDenoise)

# %%
try:
    torch.export.export(inputs.DataclassDenoise(), (inputs.Frames(signal, noise),))
except ValueError as exc:
    print(str(exc).split(". To register a custom container")[0])

# %% [markdown]
# Registered, it is flattened in the order of its fields:

# %%
inputs.register_frames()  # torch.export.register_dataclass(Frames), once per process
print(inputs.export_input_names(inputs.DataclassDenoise(), (inputs.Frames(signal, noise),)))

# %% [markdown]
# ## 3. `dynamic_shapes` mirrors the inputs
#
# For a dict input, `dynamic_shapes` holds a dict too: the argument's name, then one entry per key. Two tensors
# subtracted from each other share their sizes, so their batch axes share one `Dim`:

# %%
from torch.export import Dim

rows = Dim("rows", min=1, max=8)
spec = {"batch": {"noise": {0: rows}, "signal": {0: rows}}}
dynamic, dynamic_flat = inputs.lower_structured(inputs.Denoise(), (batch,), dynamic_shapes=spec)
print(dynamic.input_contract().signature())

# %% [markdown]
# A structure that differs from the inputs' is refused before anything is traced, with torch's words:

# %%
try:
    torch.export.export(inputs.Denoise(), (batch,), dynamic_shapes={"batch": {"signal": {0: rows}}})
except torch._dynamo.exc.UserError as exc:  # what torch.export raises for a wrong spec
    print(str(exc).splitlines()[0])

# %% [markdown]
# ## 4. Letting torch infer the spec from recorded inputs
#
# For a deep structure, writing every `Dim` is work, and the person exporting may not know which axes vary. torch can
# infer it: `torch.export.AdditionalInputs` holds more real inputs, and an axis whose size differs between them and
# the example becomes dynamic (`Dim.DYNAMIC`, defined in [lesson 07](07_dynamic_dims.ipynb)); the rest stay static.
# The app's traffic, recorded on test phones, has batches of 5 and 3 frames:

# %%
recorded = inputs.recorded_inputs()
inferred = recorded.dynamic_shapes(inputs.Denoise(), (batch,))
print(inferred)  # per tensor, axis 0 then axis 1; None: static

# %%
exported = torch.export.export(inputs.Denoise(), (batch,), dynamic_shapes=recorded)
recorded.verify(exported)  # raises if the exported program does not accept one of the recorded batches
print("verify(): the exported program accepts every recorded batch")
print("the rows axis's range:", *exported.range_constraints.values())  # int_oo: torch's infinity

# %% [markdown]
# One range: the samples axis stayed static, as the `None`s said. That export also logged something, which this
# kernel hides (torch's log lines carry timestamps). The same export, with torch's messages about the spec collected:

# %%
with inputs.spec_log() as said:
    torch.export.export(inputs.Denoise(), (batch,), dynamic_shapes=recorded)
for message in said:
    print("torch.export:", message)

# %% [markdown]
# Once per `None` (one in each tensor's spec): the spec that torch's own `AdditionalInputs` writes uses a spelling
# torch's exporter calls deprecated. The axis is still static today; if you copy an inferred spec into your code,
# write `Dim.STATIC` where it says `None`.

# %% [markdown]
# The exporter lowers that program for XNNPACK and the app sends it the first recorded batch. Predict:

# %%
questions.ask("16.recorded_batches")

# %%
inferred_pte, inferred_flat = inputs.inferred_program()
five_rows = inputs.loader_batch(seed=20, rows=5)  # the first recorded batch
try:
    inferred_pte.run_raw(five_rows["noise"], five_rows["signal"])
except helpers.RuntimeRejectedError as exc:
    print("the runtime:", exc.reason)
print("planned input shapes:", inferred_pte.runtime_input_shapes())

# %% [markdown]
# `verify()` checks the *exported* program, on the host, where the range [2, ∞) holds every recorded batch. The
# `.pte` also has a memory plan, and `Dim.DYNAMIC` gives no max, so ExecuTorch planned the axis at the example's 2
# rows ([lesson 07](07_dynamic_dims.ipynb)): the recorded batches themselves do not fit. Use what `AdditionalInputs`
# found (which axes vary) and write the bounds from the app's contract, 1 to 8 frames per batch: that is §3's
# program.

# %%
for rows in (*inputs.RECORDED_ROWS, 8):
    check = inputs.loader_batch(seed=20 + rows, rows=rows)
    (out,) = dynamic.run_raw(check["noise"], check["signal"])
    with torch.no_grad():
        print(f"{rows} rows, §3's program: max |.pte - eager| = {(out - inputs.Denoise()(check)).abs().max():.1e}")

# %% [markdown]
# ## 5. Saving the export for someone else to lower
#
# Often one job exports (next to the training code) and another lowers and ships. `torch.export.save` writes the
# exported program to a `.pt2` file and `torch.export.load` reads it back as a graph: the loading process needs no
# `Denoise` class. What the deployment side gets, compared with what was saved:

# %%
bounded = torch.export.export(inputs.Denoise(), (batch,), dynamic_shapes=spec)
loaded = inputs.save_and_load(bounded)
print("the rows axis's range:", *loaded.range_constraints.values())
print("same graph:", loaded.graph_module.code == bounded.graph_module.code,
      "· same input structure:", loaded.call_spec.in_spec == bounded.call_spec.in_spec)
with torch.no_grad():
    print(f"the loaded program, given the dict: max |Δ| from eager {(loaded.module()(batch) - eager).abs().max():.1e}")

# %% [markdown]
# The range and the dict's structure travel in the file. A dataclass input needs one more thing: the file names the
# class, and `register_dataclass` without a name leaves it none to write:

# %%
try:
    inputs.save_and_load(torch.export.export(inputs.DataclassDenoise(), (inputs.Frames(signal, noise),)))
except NotImplementedError as exc:
    print(str(exc).split(" Please")[0])

# %% [markdown]
# Registered with a name before exporting (`torch.export.register_dataclass(Frames,
# serialized_type_name="mylib.Frames")`), it saves.

# %% [markdown]
# ## ✏️ Exercise 16.nested_spec
#
# `Scorer` takes a dict and a keyword argument. The app sends **1 to 4 sequences** per call, of **2 to 64 tokens**,
# with prompts of **2 to 8 tokens**; the example has 2 sequences of 16 tokens and a prompt of 4.

# %%
Scorer = inputs.Scorer
show_source(Scorer)

# %% [markdown]
# Write its `dynamic_shapes`. The check exports and lowers `Scorer` with your answer, runs calls of the sizes the app
# sends against eager, and reads the memory plan: it must hold the largest call, no more.

# %%
# ✏️ Exercise 16.nested_spec — edit this cell, then run the check below.
answer = {"batch": {"tokens": {1: Dim("tokens", min=2, max=64)}}}

# %%
from helpers import exercises

grade = exercises.check("16.nested_spec", answer)

# %% [markdown]
# ## Takeaways
#
# - The device takes a flat list of tensors. Export flattens a dict in its keys' order, keyword arguments in the
#   order they were passed, a registered dataclass in its fields' order.
# - The runtime checks shapes and dtypes, not which tensor is which: two inputs of one shape in another order run
#   and give a wrong answer, silently. Make the order visible at the boundary (a positional wrapper) and test the
#   app's own call.
# - `dynamic_shapes` mirrors the inputs: argument names, then keys; axes that hold the same quantity share a `Dim`.
# - `AdditionalInputs` tells you which axes vary, not how far: its `Dim.DYNAMIC` has no max, so the `.pte` is planned
#   at the example's size and refuses larger inputs, even the recorded ones `verify()` accepted. Write the max.
# - A `.pt2` carries the graph, the ranges and the input structure; a dataclass input saves only when registered with
#   a `serialized_type_name`.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("16.input_order")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert list(batch) == ["noise", "signal"] and flat.names == ["batch_noise", "batch_signal"]
assert torch.allclose(app_out, inputs.Denoise().proj(batch["noise"] - batch["signal"]), atol=1e-5)  # noise - signal
assert (app_out - eager).abs().max() > 0.1
assert row.status == "match"
assert inputs.export_input_names(inputs.KeywordDenoise(), (), {"noise": noise, "signal": signal}) == ["noise", "signal"]
assert inputs.export_input_names(inputs.DataclassDenoise(), (inputs.Frames(signal, noise),)) == ["frames_signal",
                                                                                                   "frames_noise"]
assert inferred == {"batch": {"noise": (Dim.DYNAMIC, None), "signal": (Dim.DYNAMIC, None)}}
assert said == ["Using None as a dynamic shape dimension is deprecated. Please use Dim.STATIC instead"] * 2
assert len(exported.range_constraints) == 1  # one symbol: the rows; the samples axis is static
assert inferred_pte.runtime_input_shapes() == [(2, 8), (2, 8)] and questions.get("16.recorded_batches").outcome(
).actual == "refuses it"
assert loaded.call_spec.in_spec == bounded.call_spec.in_spec and str(*loaded.range_constraints.values()) == "VR[1, 8]"
print("checked: the input order, the silent swap, the wrapper, keyword and dataclass orders, the inferred spec, "
      "torch's log about its None, its plan, the saved export")
