# %% [markdown]
# # 18 · It built: does it load, and where does it diverge?
#
# **What you will learn**
# - what a `.pte` holds of each operator, and what the runtime needs when it loads a method;
# - how a program that exports, lowers and saves without a word can still fail on the device;
# - the two checks that catch it in CI, before a phone does;
# - for a program that loads and disagrees with eager, how to find the stage that changed the answer, and so who
#   has to fix it.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **kernel** | the compiled code that runs one operator (`aten::add.out`) on the device |
# | **kernel registry** | the table of kernels a runtime was built with, looked up by operator name |
# | **`load_method`** | the runtime's step that prepares one method of a program to run, before the first call |

# %%
import tempfile
from importlib.metadata import version
from pathlib import Path

import torch

import helpers
from helpers import course, interview, questions
from helpers.display import show_source

loading = course.lesson(18)  # this lesson's models and tools: helpers/lessons/18_does_it_load.py
print(f"torch {version('torch')} · executorch {version('executorch')}")

# %% [markdown]
# ## 1. A program that builds
#
# A sensor app removes spikes with a median filter: each window of 9 samples becomes its middle value once ordered.

# %%
show_source(loading.MedianFilter)

# %%
example = (loading.windows(0),)
print("windows:", tuple(example[0].shape), "→ medians:", loading.MedianFilter()(*example).numpy().round(2))

# %% [markdown]
# The team's CI builds the app's model like this, and keeps the file it writes:

# %%
show_source(loading.build_like_ci)

# %% [markdown]
# (`built_like_ci` runs `build_like_ci` the first time and keeps the file it writes in the lessons' cache, keyed on
# the exported program and the library versions: a second Run All copies it instead of lowering again.)

# %%
workdir = tempfile.TemporaryDirectory()  # removed when the kernel stops
path = loading.built_like_ci(loading.MedianFilter(), example, Path(workdir.name))
print("built:", path.name, "· its first bytes:", path.read_bytes()[4:8])  # the FlatBuffer's file identifier

# %% [markdown]
# No error, no warning. Predict what the app sees:

# %%
questions.ask("18.sort_loads")

# %%
said, log = loading.load_and_run(path, example)
print(said)
print("the runtime's log:", *log, sep="\n  ")

# %% [markdown]
# The error code (`0x:14`, as the Python bindings print 0x14) is ExecuTorch's; its meaning is in the runtime's
# headers, installed with the wheel:

# %%
import executorch

header = Path(next(iter(executorch.__path__))) / "include/executorch/runtime/core/error.h"  # a namespace package
print(next(line.strip() for line in header.read_text().splitlines() if "= 0x14" in line))

# %% [markdown]
# ## 2. Why it built
#
# A `.pte` holds no kernels. Each instruction that calls one names its operator, and `load_method` looks each name
# up in the kernel registry of the runtime it runs in. The operators `model.pte` names, read from the file:

# %%
from helpers.serialized import program_operators

pte = path.read_bytes()
print(program_operators(pte))

# %% [markdown]
# `to_edge` checks that `aten.sort` is a core ATen operator (it is), and `to_executorch` that it has an `out`
# variant to call (it has). Neither asks the runtime that will load the file: which kernels it has was decided when it was
# compiled. This one, the runtime in the `executorch` wheel, registers these many:

# %%
from helpers._runtime import registered_operators

print(len(registered_operators()), "kernels")
print("named by model.pte, missing from this runtime:", loading.missing_operators(pte))

# %% [markdown]
# An app's runtime is often built with only the kernels its models need (ExecuTorch's *selective build*), so the
# registry that counts is the app's. Two checks catch this before a phone does:
#
# 1. **Load every method in CI**, with the runtime the app ships, and run it on varied inputs. `helpers.lower` does
#    the first part as it builds: it loads each method, so the same model fails at build time here:

# %%
try:
    helpers.lower(loading.MedianFilter(), example)
except helpers.RuntimeRejectedError as exc:
    print("helpers.lower:", exc.reason.split(". ")[0])

# %% [markdown]
# 2. **Compare the operators a program names with the kernels the target runtime registers**, from the file alone
#    (`missing_operators` above): it needs no device and loads nothing, and it reads every method in the file.
#
# ## ✏️ Exercise 18.median_loads
#
# Write a module that computes `MedianFilter`'s median with operators this runtime has kernels for: the `.pte` must
# load and match `MedianFilter` on every kind of window (4 windows of 9 samples per call).

# %%
MedianFilter, WINDOW = loading.MedianFilter, loading.WINDOW

# %%
# ✏️ Exercise 18.median_loads — edit this cell, then run the check below.
class MyMedian(MedianFilter):
    def forward(self, windows):
        ordered = torch.sort(windows, dim=-1).values
        return ordered[..., WINDOW // 2]


answer = MyMedian()

# %%
from helpers import exercises

grade = exercises.check("18.median_loads", answer)

# %% [markdown]
# ## 3. It loads and disagrees: which stage changed the answer?
#
# A program that loads can still disagree with eager. Who fixes it depends on *where* the answer changed. Between
# the model and the file are four stages, and the same input can be run through each one:
#
# | stage | what runs | a first difference here means |
# |---|---|---|
# | exported program | `ExportedProgram.module()`, the graph export recorded | a Python decision was taken once: fix the model |
# | edge program | `to_edge`'s graph (core ATen decompositions), as a module | ExecuTorch's decompositions changed it |
# | portable `.pte` | the export lowered with no delegate, in the runtime | ExecuTorch's portable kernels changed it |
# | XNNPACK `.pte` | the program the app ships | only the delegate computes it differently |
#
# The export doctor ([lesson 11](11_export_doctor.ipynb)) runs this ladder for the inputs that disagree (up to three
# per report). `BlockMax` downsamples a camera frame by 2×2 blocks, and the camera pipeline marks a dead pixel NaN:

# %%
show_source(loading.BlockMax)

# %%
first_in_block = loading.dead_pixel_frame(2, 2)  # the first pixel of its 2×2 block is dead
block_pte = helpers.lower(loading.BlockMax(), (first_in_block,))
(device_out,) = block_pte.run_raw(first_in_block)
print("that block, eager:", loading.BlockMax()(first_in_block)[0, 1, 1, 1].item(),
      "· the XNNPACK .pte:", round(device_out[0, 1, 1, 1].item(), 3))

# %%
found = loading.where_it_diverges(loading.BlockMax(), first_in_block)
print(found.line())
print("→", found.meaning)

# %% [markdown]
# Eager's `max_pool2d` propagates the NaN; the XNNPACK program returns -inf for that block, and the portable one
# agrees with eager. Now the dead pixel is the *second* of its block:

# %%
questions.ask("18.dead_pixel_stage")

# %%
second_in_block = loading.dead_pixel_frame(2, 3)
found_second = loading.where_it_diverges(loading.BlockMax(), second_in_block)
print(found_second.line())
print("→", found_second.meaning)

# %% [markdown]
# The same model, the same delegate, and a different stage. The block's value for a dead pixel at each of its four
# positions (1 = top left, 4 = bottom right), in each implementation:

# %%
import pandas as pd

table = pd.DataFrame(loading.dead_pixel_table()).set_index("position")
print(table.round(4).to_string())

# %% [markdown]
# Three implementations of one operator, three ways with a NaN. Eager propagates it at every position. The portable
# kernel keeps it only at position 1 and returns the largest live pixel elsewhere. XNNPACK returns -inf at position
# 1, the largest live pixel at 2 and 3, and at position 4 a live pixel that is not the largest (the block's first,
# -0.838). So a divergence is located per input, not per model.

# %% [markdown]
# ## ✏️ Exercise 18.dead_pixels
#
# The app's rule: a dead pixel never decides its block. Write `BlockMax` so that each 2×2 block becomes its largest
# *live* pixel, in eager and in the `.pte` alike, wherever the dead pixel sits in its block (a frame has at most one
# per block). The check compares your `.pte` with your model in eager, then with the rule, on frames with a dead
# pixel at each position of its block, a dark frame, several dead pixels and none.

# %%
BlockMax = loading.BlockMax

# %%
# ✏️ Exercise 18.dead_pixels — edit this cell, then run the check below.
class MyBlockMax(BlockMax):
    def forward(self, frame):
        return torch.nn.functional.max_pool2d(frame, 2)


answer = MyBlockMax()

# %%
grade = exercises.check("18.dead_pixels", answer)

# %% [markdown]
# ## Takeaways
#
# - A `.pte` names its operators; the runtime looks up their kernels when a method loads. Export, lowering and
#   `to_executorch` never ask the runtime that will run the file, so "it built" says nothing about "it loads".
# - `OperatorMissing` (0x14) means the runtime has no kernel by that name: rewrite with operators it has, or build the
#   runtime with the kernel.
# - In CI, load every method with the runtime the app ships and run it; check the program's operators against that
#   runtime's kernels.
# - When a program that loads disagrees with eager, run the same input through each stage (exported, edge,
#   portable, delegated): the first that differs says whether the model, ExecuTorch or the delegate changed it.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("18.loads")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
import math

assert "0x:14" in said and any("aten::sort.values" in line for line in log)
assert loading.missing_operators(pte) == {"forward": ["aten::sort.values"]}
assert torch.Tag.core in torch.ops.aten.sort.default.tags  # "a core ATen operator"
assert torch.ops.aten.sort.values  # "an out variant to call"
assert loading.BlockMax()(first_in_block)[0, 1, 1, 1].isnan() and not device_out[0, 1, 1, 1].isnan()
assert found.first == "delegated .pte" and found_second.first == "portable .pte"
rows = loading.dead_pixel_table()
assert all(math.isnan(r["eager"]) for r in rows) and math.isnan(rows[0]["portable .pte"])
assert all(r["portable .pte"] == r["largest live pixel"] for r in rows[1:])
assert rows[0]["XNNPACK .pte"] == float("-inf") and all(r["XNNPACK .pte"] == r["largest live pixel"] for r in rows[1:3])
assert round(rows[3]["XNNPACK .pte"], 3) == rows[3]["block"][0] == -0.838 < rows[3]["largest live pixel"]
print("checked: the load failure and its code, the missing kernel read from the file, the two dead pixels' first "
      "stages (the exercises' solutions: tests/test_exercises_lessons.py)")
