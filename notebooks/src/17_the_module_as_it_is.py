# %% [markdown]
# # 17 · The module as export finds it: training mode, NumPy, state between calls
#
# **What you will learn**
# - what a model left in training mode becomes on the device;
# - what export does with NumPy inside `forward()`, with its default settings and with `strict=True`;
# - what happens to state a module keeps between calls, on the device.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **training mode** | `model.train()`, the mode a model is in while it learns: dropout zeroes random activations, batch norm uses the batch's statistics; `model.eval()` turns both off |

# %%
import inspect
from importlib.metadata import version

import torch

import helpers
from helpers import course, interview, questions
from helpers.display import show_source

module = course.lesson(17)  # this lesson's models and tools: helpers/lessons/17_the_module_as_it_is.py
print(f"torch {version('torch')} · executorch {version('executorch')}")

# %% [markdown]
# ## 1. A model left in training mode
#
# Export runs `forward()` once, on the module as you hand it over. A training script ends, and the model it leaves is
# still in training mode:

# %%
show_source(module.FrameScorer)

# %%
trained = module.as_trained(module.FrameScorer())
print("training mode:", trained.training)

# %% [markdown]
# It is exported as it is and lowered for XNNPACK. Predict:

# %%
questions.ask("17.train_mode")

# %%
frame = module.frame(1)
train_pte = module.scorer_program("train")
calls = module.answers_of(train_pte, frame)  # 10 calls on the same frame
with torch.no_grad():
    eval_out = module.FrameScorer().eval()(frame)
answers = {tuple(out.flatten().tolist()) for out in calls}
print("10 calls on one frame gave", "one answer" if len(answers) == 1 else "different answers")
print("calls that differ from the model in eval mode:",
      "none" if all(torch.allclose(out, eval_out, atol=1e-5) for out in calls) else "at least one")

# %% [markdown]
# The program holds the dropout. XNNPACK takes the layers; the dropout runs on ExecuTorch's portable kernel:

# %%
print(train_pte.delegation().summary())
print("on portable kernels:", train_pte.delegation().portable_ops())

# %% [markdown]
# That kernel (`kernels/portable/cpu/op_native_dropout.cpp` in ExecuTorch's source) seeds a new random generator
# from `std::random_device` on every call, so no seed makes the `.pte` repeatable. And it is not torch's dropout:
# torch scales the values it keeps by 1 / (1 - p), so that each activation's expected value stays the same; the
# kernel keeps them as they are. A dropout of p = 0.3 on ten thousand ones:

# %%
print(module.dropout_values())

# %% [markdown]
# So the device's answers are neither eval mode's nor training mode's in torch.
#
# Batch norm in training mode is louder. It normalises with the batch's own statistics and updates its running ones,
# and the operator that does both is not in the core ATen set that ExecuTorch's `to_edge` accepts:

# %%
show_source(module.NormScorer)

# %%
try:
    helpers.lower(module.as_trained(module.NormScorer()), (module.frame(0, rows=2),))
except Exception as exc:  # noqa: BLE001 - the lowering error is what this cell shows
    print(type(exc).__name__, str(exc).strip().splitlines()[0])

# %% [markdown]
# The fix is one call before export: `model.eval()`. The program in eval mode gives one answer, eval mode's:

# %%
eval_pte = module.scorer_program("eval")
(a,), (b,) = eval_pte.run_raw(frame), eval_pte.run_raw(frame)
print(f"call 1 vs call 2: {(a - b).abs().max():.1e} · vs the model in eval mode: {(a - eval_out).abs().max():.1e}")

# %% [markdown]
# It has to come *before* export. What `torch.export` returns does not switch afterwards:

# %%
exported = torch.export.export(module.as_trained(module.FrameScorer()), (frame,))
try:
    exported.module().eval()
except NotImplementedError as exc:
    print("NotImplementedError:", exc)

# %% [markdown]
# (torchao's `move_exported_model_to_eval`, written for quantization-aware training, rewrites the dropout and batch
# norm patterns in an exported graph; its docstring warns that code which branched on `self.training` stays as it was
# traced. Exporting again in eval mode leaves nothing to rewrite.)

# %% [markdown]
# ## 2. NumPy in `forward()`: strict or not
#
# `Clipper` post-processes its scores with NumPy, as code written for the host often does:

# %%
show_source(module.Clipper)

# %%
questions.ask("17.numpy_default")

# %%
print(module.export_default(module.Clipper().eval(), (module.frame(0, rows=2),)))
print("export's default:", inspect.signature(torch.export.export).parameters["strict"])

# %% [markdown]
# Export's default is **non-strict**: it runs `forward()` as plain Python on *fake tensors*, which have a shape and a
# dtype but no values. Every torch operation is recorded; anything that needs the values, like `.numpy()`, has none
# to work with. **Strict** export (`strict=True`) traces with TorchDynamo instead, which reads the Python bytecode
# and turns NumPy calls on tensors into torch operations:

# %%
strict_ep = torch.export.export(module.Clipper().eval(), (module.frame(0, rows=2),), strict=True)
print([str(node.target) for node in strict_ep.graph.nodes if "clamp" in str(node.target)])

# %%
clip_pte = module.clipper_program()
loud = module.frame(5, rows=2) * 4  # its scores go well outside [-1, 1]
row = helpers.check_one(module.Clipper().eval(), clip_pte, (loud,))
print("a new input, strict program vs eager:", row.status)

# %% [markdown]
# The two modes differ in other ways too; this is one where the default fails and strict works. The portable fix is
# to write the post-processing in torch (`torch.clamp`), which exports either way.
#
# ## 3. State kept between calls
#
# A streaming model keeps something between calls. `RunningDenoise` subtracts a running mean of the frames it has
# seen:

# %%
show_source(module.RunningDenoise)

# %%
questions.ask("17.running_mean")

# %%
stateful_pte = helpers.lower(module.RunningDenoise(), (module.frame(0),))
same = [module.frame(3)] * 3
device, eager = module.device_stream(stateful_pte, same), module.eager_stream(module.RunningDenoise(), same)
for call, (d, e) in enumerate(zip(device, eager), start=1):
    print(f"call {call}: .pte {d[0, :3].numpy().round(3)}  eager {e[0, :3].numpy().round(3)}")  # 3 of 8 samples

# %% [markdown]
# The graph export recorded shows why. The mean comes in as a constant (`c_mean`), the value the attribute held when
# export ran; the update is computed and then dropped, because nothing in the graph stores it:

# %%
print(torch.export.export(module.RunningDenoise(), (module.frame(0),)).graph_module.code.strip())

# %% [markdown]
# ## ✏️ Exercise 17.keep_state
#
# Make the running mean survive export: write a module that does what `RunningDenoise` does, so that the `.pte`,
# called once per frame from a fresh load, returns what `RunningDenoise` returns in eager, call after call. The app
# calls `forward(frame)` with one frame of `SAMPLES` samples. [Lesson 13](13_language_model.ipynb)'s KV cache is
# state of this kind.

# %%
from torch import nn

RunningDenoise, SAMPLES = module.RunningDenoise, module.SAMPLES

# %%
# ✏️ Exercise 17.keep_state — edit this cell, then run the check below.
class MyDenoise(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.zeros(SAMPLES)

    def forward(self, x):
        self.mean = 0.8 * self.mean + 0.2 * x.mean(dim=0)
        return x - self.mean


answer = MyDenoise()

# %%
from helpers import exercises

grade = exercises.check("17.keep_state", answer)

# %% [markdown]
# Export did say something about `RunningDenoise`: a Python warning, which a kernel or a script that hides warnings
# (as this course's kernel does) never shows. Read export's warnings when a program is new. (A **buffer** is a tensor
# registered on a module with `register_buffer`: part of its state, like a parameter, but not trained.)

# %%
for message in module.export_warnings(module.RunningDenoise(), (module.frame(0),)):
    print(message.split(" (https")[0])

# %% [markdown]
# ## Takeaways
#
# - Export records one run of `forward()` on the module as it is. Its mode is part of the program: call `.eval()`
#   before export (training-mode dropout gives a new answer on every call; training-mode batch norm does not lower).
# - Non-strict export (the default) runs Python on fake tensors, so code that needs values, like NumPy, fails;
#   `strict=True` traces NumPy into torch operations. Post-processing written in torch exports either way.
# - State kept on the module in a Python attribute is read once, as a constant; state the `.pte` must keep between
#   calls is a buffer the graph writes. Test a stream of calls, not one.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("17.module_as_it_is")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert trained.training and len(answers) > 1 and not all(torch.allclose(o, eval_out, atol=1e-5) for o in calls)
assert train_pte.delegation().portable_ops() == ["aten_native_dropout_default"]
dropped = module.dropout_values()
assert dropped["torch"] == [0.0, 1.4286] and dropped[".pte"] == [0.0, 1.0] and dropped["zeroed by the .pte"] == 0.3
assert (a - b).abs().max() == 0 and (a - eval_out).abs().max() < 1e-5
assert row.status == "match" and module.Clipper().proj(loud).abs().max() > 1  # the clip changes the scores
assert all(torch.equal(d, device[0]) for d in device) and not torch.allclose(device[2], eager[2], atol=1e-3)
assert "c_mean" in torch.export.export(module.RunningDenoise(), (module.frame(0),)).graph_module.code
print("checked: training-mode dropout per call, the eval fix, strict NumPy, the constant mean")
