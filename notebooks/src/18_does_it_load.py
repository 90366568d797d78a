# %% [markdown]
# # 18 · It built: does it load?
#
# **What you will learn**
# - what a `.pte` holds of each operator, and what the runtime needs when it loads a method;
# - how a program that exports, lowers and saves without a word can still fail on the device;
# - the two checks that catch it in CI, before a phone does.
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

# %%
workdir = tempfile.TemporaryDirectory()  # removed when the kernel stops
path = loading.build_like_ci(loading.MedianFilter(), example, Path(workdir.name))
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
# ## Takeaways
#
# - A `.pte` names its operators; the runtime looks up their kernels when a method loads. Export, lowering and
#   `to_executorch` never ask the runtime that will run the file, so "it built" says nothing about "it loads".
# - `OperatorMissing` (0x14) means the runtime has no kernel by that name: rewrite with operators it has, or build the
#   runtime with the kernel.
# - In CI, load every method with the runtime the app ships and run it; check the program's operators against that
#   runtime's kernels.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("18.loads")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert "0x:14" in said and any("aten::sort.values" in line for line in log)
assert loading.missing_operators(pte) == {"forward": ["aten::sort.values"]}
assert torch.Tag.core in torch.ops.aten.sort.default.tags  # "a core ATen operator"
assert torch.ops.aten.sort.values  # "an out variant to call"
assert exercises.get("18.median_loads").check(exercises.solution("18.median_loads")).passed
print("checked: the load failure and its code, the missing kernel read from the file, the exercise's solution")
