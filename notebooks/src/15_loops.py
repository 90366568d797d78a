# %% [markdown]
# # 15 · Loops: a `while` on data, on a device that runs a fixed program
#
# **What you will learn**
# - why a Python `while` on a tensor does not export, and what ExecuTorch 1.5.1 does with `torch.while_loop`;
# - the loop a device can run: a cap on the number of steps, each step masked — unrolled, or written once with
#   `scan`;
# - what happens past the cap, and what each way costs (program size, time per call);
# - the loop in the app: one program call per step, and an exit as early as the input allows.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **cap** | the most steps a program's loop runs, fixed when it is exported |
# | **masked step** | a step that computes its update and keeps it only where the loop would still be running (`torch.where`) |
# | **`torch.while_loop(cond_fn, body_fn, carried)`** | torch's loop operator for export: runs `body_fn` on the carried values while `cond_fn` says so (a prototype in torch 2.13) |
# | **`scan(step, init, xs)`** | runs `step` once per row of `xs`, carrying a value from one step to the next (`torch._higher_order_ops.scan`, a prototype in torch 2.13) |
# | **emitter** | the part of `to_executorch()` that writes the graph as the program's instructions |

# %%
from importlib.metadata import version

import torch

import helpers
from helpers import course, interview, questions
from helpers.diagnose import diagnose_export
from helpers.display import show_source

loops = course.lesson(15)  # this lesson's models and tools: helpers/lessons/15_loops.py
print(f"torch {version('torch')} · executorch {version('executorch')}")

# %% [markdown]
# ## 1. A loop on data
#
# An audio app halves each frame of 8 samples until its peak fits in [-1, 1]. A loud frame needs more halvings than
# a quiet one:

# %%
show_source(loops.HalveUntilQuiet)

# %%
for peak in (0.5, 3.0, 1000.0):
    print(f"peak {peak:6}: {loops.halvings(loops.frame(peak))} halvings")

# %%
d_while = diagnose_export(loops.HalveUntilQuiet(), (loops.frame(1000.0),))
print(d_while.stage, "·", d_while.kind, "·", d_while.source_line)

# %% [markdown]
# Lesson 02's data-dependent error: each time around, the `while` asks Python whether the frame is still loud, a
# question about data that export cannot answer.
#
# ## 2. A cap and a mask
#
# The app's contract says a frame's peak is at most 2¹⁶, so 16 halvings always suffice. `HalveAtMost` runs a fixed
# number of steps and masks each one: once the frame is quiet, `torch.where` keeps it as it is.

# %%
show_source(loops.HalveAtMost)

# %%
capped = helpers.lower(loops.HalveAtMost(16), (loops.frame(1000.0),))
for peak in (0.5, 1.0, 2.0, 1000.0, 2.0**16):
    x = loops.frame(peak, seed=2)
    row = helpers.check_one(loops.HalveUntilQuiet(), capped, (x,), label=f"peak {peak}")
    print(f"peak {peak:8}: {loops.halvings(x):2d} halvings in eager · .pte: {row.status}")

# %% [markdown]
# Every frame in the contract matches: the steps after the frame is quiet change nothing. A cap smaller than the
# contract needs is an easy mistake. Predict:

# %%
questions.ask("15.past_the_cap")

# %%
short = helpers.lower(loops.HalveAtMost(8), (loops.frame(1000.0),))
loud = loops.frame(1000.0, seed=1)
(out,) = short.run_raw(loud)
print(f"peak in: {loud.abs().max():.1f} · peak out: {out.abs().max():.2f} · eager's: "
      f"{loops.HalveUntilQuiet()(loud).abs().max():.2f}")

# %% [markdown]
# Past the cap, the program returns an unfinished answer, silently: every input runs the same 8 steps. So the cap
# comes from the input contract, and the app checks the result before it uses it (here one comparison on the host):

# %%
print("quiet enough to use:", bool(out.abs().max() <= 1))

# %% [markdown]
# ## 3. `torch.while_loop`
#
# torch has a loop operator meant for this: the condition and the body are functions you pass to it.

# %%
show_source(loops.HalveWhileLoop)

# %%
questions.ask("15.while_loop")

# %%
d_loop = loops.while_loop_diagnosis()
print("\n".join(line.strip() for line in d_loop.exported.graph_module.code.splitlines() if "while_loop(" in line))
print(d_loop.stage, "·", loops.line_with(d_loop.message, "Unsupported"))

# %% [markdown]
# Export recorded `while_loop`; lowering failed when the emitter wrote the program. Its dispatch, from the installed
# ExecuTorch (`exir/emit/_emitter.py`):

# %%
import inspect

from executorch.exir.emit import _emitter

source = inspect.getsource(_emitter._Emitter._emit_control_flow).splitlines()
start = next(i for i, line in enumerate(source) if "target is torch.ops.higher_order.cond" in line)
end = next(i for i, line in enumerate(source) if "Unsupported control flow operator" in line)
print("\n".join(line[4:].rstrip() for line in source[start:end + 1]))

# %% [markdown]
# The emitter writes `cond`, `map` and `scan` as instructions, and refuses `while_loop`: in ExecuTorch 1.5.1 a
# program has no loop that stops on a value it computes.
#
# ## 4. `scan`: the masked step written once
#
# `scan` runs a step once per row of a tensor, carrying a value from one step to the next. With a tensor of 16 rows
# the step does not read, it is `HalveAtMost(16)`'s loop, its step written once in Python:

# %%
show_source(loops.HalveScan)

# %% [markdown]
# (`scan` is a prototype in torch 2.13: a step that reads a parameter requiring gradients and also carries integers
# or booleans — token ids, a done flag — fails to export with `outs_to_grad length (0) != tangents length`. Export
# an inference model: `model.requires_grad_(False)`. `HalveScan` has no parameters.)

# %%
scanned = helpers.lower(loops.HalveScan(16), (loops.frame(1000.0),))
for peak in (0.5, 1000.0, 2.0**16):
    x = loops.frame(peak, seed=2)
    print(f"peak {peak:8}: .pte {helpers.check_one(loops.HalveUntilQuiet(), scanned, (x,)).status}")

# %% [markdown]
# Both ways run. Their programs differ; predict the size of a scan with four times the steps:

# %%
questions.ask("15.scan_size")

# %%
programs = {"unrolled, 8 steps": short, "unrolled, 16 steps": capped, "scan, 16 steps": scanned,
            "scan, 64 steps": helpers.lower(loops.HalveScan(64), (loops.frame(1000.0),))}
for name, art in programs.items():
    instructions, size = loops.program_size(art)
    delegation = art.delegation()
    print(f"{name:19s} {size:6,} bytes · {instructions:3d} instructions · "
          f"{delegation.delegated_subgraphs:2d} XNNPACK subgraphs · {delegation.portable_nodes:3d} portable nodes")

# %% [markdown]
# Unrolled, the graph holds every step: XNNPACK takes each step's `abs` and division (one delegate call per step)
# and the `.pte` grows with the cap. Scan's program is the same at 16 and 64 steps: the emitter wrote the step once
# and a jump back to it, and the number of steps is a tensor's length in the program. Its last instructions:

# %%
for kind, detail in scanned.instructions()[-5:]:
    print(f"{kind:14s} {detail}")

# %% [markdown]
# `et_copy_index` stores the step's output row, `add` counts the step, `eq` compares the count with the rows to walk,
# `JumpFalseCall` goes back to the step until they are equal, and `sub` resets the count for the next call. The
# step itself runs on portable kernels: XNNPACK does not lower inside a loop body.
#
# ## 5. The loop in the app
#
# Both programs run every step, whatever the frame needs. To stop as soon as the frame is quiet, loop outside the
# program: export one step, and let the app call it until the frame is quiet, as an LLM app calls its decode step until the end token
# (lesson 13).

# %%
show_source(loops.HalveOnce, loops.app_loop)

# %%
step = helpers.lower(loops.HalveOnce(), (loops.frame(1000.0),))
for peak in (0.5, 1000.0, 2.0**16):
    x = loops.frame(peak, seed=2)
    quiet, calls = loops.app_loop(step, x)
    same = torch.equal(quiet, loops.HalveUntilQuiet()(x))
    print(f"peak {peak:8}: {calls:2d} calls · {'matches' if same else 'differs from'} eager")

# %% [markdown]
# ## 6. What each costs, measured
#
# Each program's runtime call alone (`artifact.bare_call()`), on the runtime's own thread pool, the median of 100
# calls, 5 rounds interleaved; the app's loop is its calls to the one-step program back to back. A quiet frame
# (peak 0.5, no halving) and a loud one (peak 1000, 10 halvings). Timings vary between machines and runs: this output
# is not compared in CI, and the sentences are computed from the numbers.

# %% tags=["nbval-ignore-output"]
from helpers import timing

quiet_frame, loud_frame = loops.frame(0.5, seed=2), loops.frame(1000.0, seed=2)
print(f"the runtime's thread pool: {helpers.runtime_threads()} threads")
rounds = timing.latency_rounds({
    "unrolled 16, quiet": (programs["unrolled, 16 steps"], (quiet_frame,)),
    "unrolled 16, loud": (programs["unrolled, 16 steps"], (loud_frame,)),
    "scan 16, quiet": (programs["scan, 16 steps"], (quiet_frame,)),
    "scan 16, loud": (programs["scan, 16 steps"], (loud_frame,)),
    "scan 64, loud": (programs["scan, 64 steps"], (loud_frame,)),
}, rounds=5, repeat=100)
rounds["app loop, quiet"] = loops.app_loop_rounds(step, quiet_frame)
rounds["app loop, loud"] = loops.app_loop_rounds(step, loud_frame)
for name, ms in rounds.items():
    print(f"{name:19s} median {sorted(ms)[2] * 1000:6.1f} µs (rounds {min(ms) * 1000:.1f} to {max(ms) * 1000:.1f})")
print()
print(timing.ratio_sentence("scan 16, loud / quiet", rounds["scan 16, loud"], rounds["scan 16, quiet"]))
print(timing.ratio_sentence("scan 64 / scan 16, loud", rounds["scan 64, loud"], rounds["scan 16, loud"]))
print(timing.ratio_sentence("app loop, loud / scan 16, loud", rounds["app loop, loud"], rounds["scan 16, loud"]))
print(timing.ratio_sentence("app loop, quiet / scan 16, quiet", rounds["app loop, quiet"], rounds["scan 16, quiet"]))

# %% [markdown]
# How to read it: inside one program, time follows the cap, not the frame (a quiet frame pays for every step). In
# the app's loop, time follows the frame: one call per step, each with the cost of a call. Which wins depends on
# how costly a step is against a call, and on how early the loop usually ends: measure on your model.
#
# ## ✏️ Exercise 15.stop_at_end
#
# `Generate` is greedy generation in miniature: from a start token, the next token is the best-scoring one after
# the last, until the end token (`END`, 0). The app sends a start token (1 to 15) and receives 12 tokens: those
# generated, then `END` as padding. The table of scores guarantees every start reaches `END` within 12 tokens.

# %%
Generate, END, LONGEST = loops.Generate, loops.END, loops.LONGEST
show_source(Generate)
print(Generate()(loops.start(5)))

# %% [markdown]
# Make it export, lower for XNNPACK and run on the device. The check lowers your model and runs every start token
# against `Generate` in eager mode, on this table of scores and on another one it loads into your model.

# %%
# ✏️ Exercise 15.stop_at_end — edit this cell, then run the check below.
class StopAtEnd(Generate):
    pass  # Generate's own forward(): a while on the token's value


answer = StopAtEnd()

# %%
from helpers import exercises

grade = exercises.check("15.stop_at_end", answer)

# %% [markdown]
# ## Takeaways
#
# - A device program runs a fixed number of steps. A `while` on data does not export; `torch.while_loop` exports,
#   and ExecuTorch 1.5.1 refuses to write it into a program.
# - What runs is a cap and a masked step: unrolled (the program grows with the cap, XNNPACK sees every step) or
#   with `scan` (one step in the program, on portable kernels). Every step runs, whatever the input needs.
# - Past the cap the answer is unfinished and nothing says so: take the cap from the input contract, and check the
#   result in the app.
# - A loop that stops as early as the input allows lives in the app: one call per step.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("15.loops")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert (d_while.stage, d_while.kind, d_while.source_line) == ("export", "data_dependent",
                                                               "forward(): while x.abs().max() > 1:")
assert [loops.halvings(loops.frame(p)) for p in (0.5, 3.0, 1000.0, 2.0**16)] == [0, 2, 10, 16]
assert all(helpers.check_one(loops.HalveUntilQuiet(), capped, (loops.frame(p, seed=s),)).status == "match"
           for p in (0.5, 1.0, 2.0, 1000.0, 2.0**16) for s in (2, 3))
assert torch.allclose(out, loud / 2**8) and out.abs().max() > 1  # 8 halvings, still loud
assert d_loop.stage == "lower" and "Unsupported control flow operator: while_loop" in d_loop.message
sizes = {name: loops.program_size(art) for name, art in programs.items()}
assert sizes["scan, 16 steps"] == sizes["scan, 64 steps"]
assert sizes["unrolled, 16 steps"][1] > 1.8 * sizes["unrolled, 8 steps"][1]  # "grows with the cap"
assert programs["unrolled, 16 steps"].delegation().delegated_subgraphs == 16
assert programs["scan, 16 steps"].delegation().delegated_subgraphs == 0
assert [kind for kind, _ in scanned.instructions()[-5:]][-2] == "JumpFalseCall"
assert {op: programs["unrolled, 16 steps"].delegation().by_op()[op] for op in ("aten_abs_default", "aten_div_tensor")} == {
    "aten_abs_default": (16, 0), "aten_div_tensor": (16, 0)}  # each step's abs and division delegated
assert [loops.app_loop(step, loops.frame(p, seed=2))[1] for p in (0.5, 1000.0, 2.0**16)] == [1, 10, 16]
print("checked: the export error, the cap's matches and its silent stop, while_loop refused, the sizes, "
      "the jump, the app's calls")
