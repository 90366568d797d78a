# %% [markdown]
# # 13 · A language model on the device: a static KV cache, one token per call
#
# **What you will learn**
# - what a decoder-only language model's KV cache becomes in an exported program: buffers the program writes in
#   place, kept in the memory plan on the device;
# - why that cache has a fixed size on the device (`max_cache_len`), and what each of its slots costs in the arena;
# - the app's decode loop on the ExecuTorch runtime, compared token for token with eager greedy generation;
# - three ways to feed the prompt (token by token, one prefill method with a `Dim`, prompt buckets), and the one
#   option without which a prefill method and a decode method do not share their cache;
# - four traps of this model kind, live: a position passed as an `int`, a prompt and answer longer than the cache,
#   positions that do not match the tokens, the cache exported the default (non-strict) way;
# - what ExecuTorch's own LLM runner needs from a program, and its tokens next to eager's;
# - to choose `max_cache_len` and prompt buckets for a product's prompts under an arena budget (an exercise).
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **token** | an integer id from the model's vocabulary; the model reads ids and predicts the next one |
# | **logits** | the model's scores for every token of the vocabulary as the next one, at each input position |
# | **greedy decoding** | pick the highest-scoring token, feed it back, repeat |
# | **KV cache** | each attention layer's keys and values for the tokens seen so far: a new token attends to them instead of recomputing the whole prefix |
# | **static cache** | a KV cache allocated once for `max_cache_len` positions, written slot by slot: the shape a device program can plan |
# | **`cache_position`** | the slot(s) the current call writes, i.e. the position(s) of its tokens in the sequence |
# | **prefill / decode** | processing the prompt / generating one new token per call |

# %%
import pandas as pd
import torch

import helpers
from helpers import course, interview, plots, questions
from helpers.display import show_source

lm = course.lesson(13)  # this lesson's model and tools: helpers/lessons/13_language_model.py

_ = torch.manual_seed(0)

# %% [markdown]
# ## 1. A tiny Llama
#
# A real architecture from `transformers` (Llama: RMSNorm, rotary positions, grouped-query attention, SwiGLU), built
# from its config with random, seeded weights: small enough to lower in seconds, the same structure as a real
# checkpoint. Its config:

# %%
print(lm.CONFIG)
show_source(lm.tiny_llama)

# %% [markdown]
# ## 2. The cache as the module's state
#
# `transformers.integrations.executorch.TorchExportableModuleWithStaticCache` wraps the model for export: it
# allocates a static cache of `max_cache_len` slots and registers each layer's keys and values as *buffers* of the
# module. The app's loop calls one step at a time: token ids, and the slot(s) they go to:

# %%
show_source(lm.DecodeStep)

# %% [markdown]
# The buffers, for `max_cache_len = 32` (a head's size is `hidden_size / num_attention_heads = 16`; the 2 key/value
# heads are shared by the 4 query heads):

# %%
pd.DataFrame(lm.cache_buffers())

# %% [markdown]
# ## 3. On the runtime
#
# Exported with `strict=True`, as `transformers`' own recipe (`convert_and_export_with_cache`) does (section 6 shows
# what the default does), lowered to XNNPACK and loaded by the ExecuTorch runtime:

# %%
program = lm.lower_decode_step()
program

# %% [markdown]
# One step, the first token of a prompt at slot 0, eager and `.pte` side by side (the logits of the first 6 tokens of
# the vocabulary):

# %%
step = lm.DecodeStep(lm.tiny_llama())
ids, position = torch.tensor([[5]]), torch.tensor([0])
with torch.no_grad():
    eager_logits = step(ids, position)
(device_logits,) = program.run(ids, position)
print("eager:", helpers.fmt(eager_logits[0, 0, :6]))
print(".pte: ", helpers.fmt(device_logits[0, 0, :6]))

# %% [markdown]
# Where does the cache go? The graph export recorded writes the new keys and values into the cache buffers *in
# place*, at `cache_position`:

# %%
writes = [line.split(";")[0].strip() for line in program.graph().splitlines()
          if "= torch.ops.aten.index_copy_." in line]  # index_copy_(buffer, dim, positions, new values)
print(*writes, sep="\n")

# %% [markdown]
# A buffer the graph writes is a *mutable buffer*: ExecuTorch plans it in the method's memory (the arena) with the
# activations, and it stays there between two calls of the loaded method. So the cache's size is fixed when the
# program is built. How much arena does each slot cost?

# %%
questions.ask("13.slot_cost")

# %% [markdown]
# The same model built for 16, 32 and 64 slots:

# %%
arena = pd.DataFrame(lm.arena_by_cache_len())
arena["arena bytes per slot"] = arena["arena bytes"] / arena["max_cache_len"]
arena

# %%
plots.series(list(arena["max_cache_len"]), {"arena": list(arena["arena bytes"]),
                                            "KV cache itself": list(arena["KV cache bytes"])},
             xlabel="max_cache_len (slots)", ylabel="bytes", title="What the memory plan reserves")

# %%
per_slot = (arena["arena bytes"].iloc[-1] - arena["arena bytes"].iloc[0]) / (
    arena["max_cache_len"].iloc[-1] - arena["max_cache_len"].iloc[0])
kv_per_slot = lm.kv_bytes(1)
print(f"each slot adds {per_slot:,.0f} bytes to the arena; the cache's own keys and values are {kv_per_slot} of "
      f"them ({kv_per_slot / per_slot:.0%})")

# %% [markdown]
# The rest grows with the cache too. The largest tensors of the plan, for 32 slots:

# %%
pd.DataFrame(lm.largest_planned(program))

# %% [markdown]
# Copies of the cache in other layouts, made on every step: `expand_copy` repeats the 2 key/value heads for the 4
# query heads (grouped-query attention stores 2, attends with 4), and delegated subgraphs output tensors of the same
# size. On a device, budget the arena for `max_cache_len`, not the cache alone.

# %% [markdown]
# ## 4. Decode on the device
#
# The app's loop: feed the prompt one token per call, then feed back the most likely next token, one `execute()`
# per token. Before running it:

# %%
questions.ask("13.tokens_match")

# %% [markdown]
# The loop, in the lesson's module:

# %%
show_source(lm.greedy, lm.decode_after)

# %% [markdown]
# Eager tokens come from `transformers`' own `generate` (greedy, static cache); `.pte` tokens from the loop above on
# the runtime, for three prompts:

# %%
rows = []
for prompt in lm.PROMPTS:
    eager, device = lm.eager_tokens(prompt), lm.device_tokens(program, prompt)
    rows.append({"prompt": list(prompt), "eager": eager, ".pte": device, "equal": eager == device})
    print(f"prompt {list(prompt)}\n  eager {eager}\n  .pte  {device}   {'equal' if eager == device else 'DIFFERENT'}")

# %% [markdown]
# Speed, one decode step at a time (the runtime's call alone, median of 50):

# %% tags=["nbval-ignore-output"]
speed = lm.time_per_token(program)
eager_ms, pte_ms = speed["eager ms/token"], speed[".pte ms/token"]
print(f"eager {eager_ms:.3f} ms/token ({1000 / eager_ms:,.0f} tokens/s), .pte {pte_ms:.3f} ms/token "
      f"({1000 / pte_ms:,.0f} tokens/s): the runtime is {eager_ms / pte_ms:.0f}× faster per step\n"
      f"(runtime thread pool: {helpers.runtime_threads()} threads; torch: {torch.get_num_threads()} threads)")

# %% [markdown]
# ## 5. Prefill: the prompt in one call
#
# Token by token, a prompt of n tokens costs n calls before the first new token (the *time to first token*). A
# *prefill* method takes the whole prompt in one call. Its length varies, so it needs a shape the device can plan:
# one method whose length is a bounded `Dim` (1 to 32 tokens, lesson 07), or one static method per *bucket*
# of lengths, each prompt padded up to its bucket (lesson 09). Either goes into one program with `decode`:

# %%
show_source(lm.prefill_methods)

# %% [markdown]
# Every method is the same `DecodeStep`, so its buffers have the same names in every method. The app's loop with a
# prefill method:

# %%
show_source(lm.prefill_then_decode)

# %% [markdown]
# Built with `to_executorch()`'s defaults, what does decode make of the cache prefill wrote?

# %%
questions.ask("13.shared_cache")

# %% [markdown]
# The `Dim` program, built with the defaults:

# %%
separate = lm.lower_prefill_decode("dim", share_mutable_buffers=False)
print("eager:", lm.eager_tokens(lm.PROMPTS[0]))
print(".pte: ", lm.prefill_then_decode(separate, lm.PROMPTS[0]))

# %% [markdown]
# Where each method's memory plan puts the cache's 4 key and value buffers (arena 1 holds the activations):

# %%
pd.DataFrame(lm.cache_in_plan(separate))

# %% [markdown]
# The memory planner plans each method on its own, so each holds its own copy of the cache: prefill filled its copy,
# decode attended to its own, which prefill never wrote. No error: both copies have the right shape.
#
# ExecuTorch has an option for this: `MemoryPlanningPass(share_mutable_buffers=True)`, passed to `to_executorch()`
# in an `ExecutorchBackendConfig`. `helpers.lower_methods(..., share_mutable_buffers=True)` builds with it:

# %%
show_source(lm.lower_prefill_decode)

# %%
shared = lm.lower_prefill_decode("dim")
pd.DataFrame(lm.cache_in_plan(shared))

# %% [markdown]
# One place for both methods, in an arena of its own (arena 2) that each method's plan lists. The same prompts as in
# section 4, and one of 14 tokens:

# %%
shared_rows = []
for prompt in lm.PREFILL_PROMPTS:
    eager, device = lm.eager_tokens(prompt), lm.prefill_then_decode(shared, prompt)
    shared_rows.append(eager == device)
    print(f"prompt of {len(prompt)}\n  eager {eager}\n  .pte  {device}   {'equal' if eager == device else 'DIFFERENT'}")

# %% [markdown]
# Sharing also needs the runtime to give both methods the same arena 2. ExecuTorch's Python runtime shares one set of
# arenas between the methods of a program that run on the host (`Program.load_method`'s docstring); a C++ app's `Module` does it only
# with `share_memory_arenas = true` (default `false`; `extension/module/module.h`, which says a program built with
# `share_mutable_buffers` requires it).
#
# ### Three strategies side by side
#
# The bucket program has `prefill_8`, `prefill_16` and `decode`, built the same way. Before the table:

# %%
questions.ask("13.prefill_arena")

# %% [markdown]
# Each strategy's program, its tokens on the four prompts, and what it costs (the arena of its largest method: prefill
# and decode never run at the same time, so with shared arenas that is what the app holds):

# %%
strategies = pd.DataFrame(lm.prefill_strategies())
strategies

# %% [markdown]
# The `Dim` prefill also delegates less. The partitioner's reasons for its portable nodes that the 16-token bucket
# does not have:

# %%
for declined in lm.declined_only_by_dim():
    print(f"{declined['op']}: {declined['reason']}")

# %% [markdown]
# XNNPACK's partitioner takes a `slice_copy` only when its input and output sizes are static (its `SliceCopyConfig`):
# sliced along the symbolic length (`s11`, the `Dim`), it stays on a portable kernel, and the graph splits into more
# delegated pieces. "invalid dtype" is its check that a node's tensors are `float32` or `float16`: the `Dim` program
# reshapes tensors of other types (integers, booleans) where the bucket's does not.
#
# Time to first token for a prompt of 3 and of 14 tokens (the runtime's calls alone, median of 21):

# %% tags=["nbval-ignore-output"]
ttft = pd.DataFrame(lm.time_to_first_token()).set_index("strategy")
print(ttft.round(3).to_string())
by_token, dim_ms, bucket_ms = ttft["14 tokens: ms"]
print(f"\n14 tokens: token by token {by_token:.2f} ms in 14 calls; one prefill call {dim_ms:.2f} ms (Dim), "
      f"{bucket_ms:.2f} ms (bucket 16): {by_token / dim_ms:.1f}× and {by_token / bucket_ms:.1f}× sooner\n"
      f"(runtime thread pool: {helpers.runtime_threads()} threads)")

# %% [markdown]
# ## 6. The traps of this model kind, live
#
# ### A position as a Python `int`
#
# The app's loop counter is an `int`. A step that takes the position as one:

# %%
show_source(lm.IntPositionStep)

# %% [markdown]
# Eager, the same loop gives `generate`'s tokens. Exported with position 0 and run by the loop on the runtime:

# %%
questions.ask("13.int_position")

# %% [markdown]
# Eager first, then the `.pte`:

# %%
int_step = lm.IntPositionStep(lm.tiny_llama())
with torch.no_grad():
    int_eager = lm.greedy(lambda ids, position: int_step(ids, int(position)), lm.PROMPTS[0])
print("eager:", int_eager)
int_program = lm.lower_decode_step(step_class=lm.IntPositionStep)
int_error = helpers.show_error(lm.greedy, lambda ids, position: int_program.run_raw(ids, int(position))[0], lm.PROMPTS[0])

# %% [markdown]
# Export kept the example's value, 0, as a constant of the graph; the runtime compares the `int` it receives with
# that value and refuses any other. The fix is the step above: the position as a tensor, which export keeps as an
# input.
#
# ### A prompt and an answer longer than the cache
#
# A 25-token prompt and 12 new tokens. Eager `generate` sizes its cache for them; the program has 32 slots:

# %%
long_prompt = list(range(1, 26))
print("eager:", lm.eager_tokens(long_prompt))
long_error = helpers.show_error(lm.device_tokens, program, long_prompt)

# %% [markdown]
# The runtime refuses the call whose write falls outside the cache, in the middle of the answer. The app checks before
# the loop, on the host, and says what to do:

# %%
show_source(lm.check_fits)

# %%
fits_error = helpers.show_error(lm.check_fits, long_prompt)

# %% [markdown]
# ### Positions that do not match the tokens
#
# An app that numbers the new tokens from 0 again (it counts answers, not the sequence) writes them over the
# prompt's slots. What does the user get?

# %%
def counts_new_tokens_from_zero(ids, position, prompt=lm.PROMPTS[0]):
    p = int(position)
    return program.run_raw(ids, torch.tensor([p - len(prompt) if p >= len(prompt) else p]))[0]


shifted = lm.greedy(counts_new_tokens_from_zero, lm.PROMPTS[0])
print("eager:     ", rows[0]["eager"])
print(".pte, bug: ", shifted)

# %% [markdown]
# No error, different tokens: the runtime cannot know which slot a token belongs to. Only a comparison with eager over
# whole sequences catches it, as in section 4.
#
# ### Exported the default way
#
# This lesson exports with `strict=True`. `torch.export.export`'s default is `strict=False`: Python runs `forward()`
# itself while torch records the operations. Does the same `DecodeStep` become a program that way?

# %%
non_strict = helpers.diagnose_export(lm.DecodeStep(lm.tiny_llama()), lm.step_example(), backend="portable")
print("torch says:", non_strict.message)
print(non_strict)

# %% [markdown]
# Export succeeds; lowering fails, with an assertion that names nothing in the model. The exported program does name
# it. The wrapper registers the cache's tensors as buffers, but `forward()` reaches them through the cache object, and
# non-strict export did not find them among the module's buffers: the program holds all six (keys, values and position
# counter of each layer) as constants and writes them in place. With `strict=True`, export follows those references
# back to the registered buffers, and the program lowers (section 3).

# %% [markdown]
# ## 7. ExecuTorch's own LLM runner
#
# An app need not write the loop itself: ExecuTorch ships a C++ runner for text language models, `TextLLMRunner`
# (in the wheel as `executorch.extension.llm.runner`): it reads a `.pte` and a tokenizer file, feeds the prompt,
# decodes, samples and streams text. The lesson's module runs it on a program and a tokenizer:

# %%
show_source(lm.runner_tokens)

# %% [markdown]
# Given the program of section 4, which decodes like `generate` in the app's loop:

# %%
questions.ask("13.runner_plain")

# %%
runner_refusal = helpers.show_error(lm.runner_tokens, program, lm.PROMPTS[0])

# %% [markdown]
# The runner reads its settings from the program itself: methods without inputs that return a constant. It refuses
# a program without `get_max_seq_len`; for the others it has defaults (`llm_runner_helper.cpp`). With
# `enable_dynamic_shape` false it feeds the prompt one token per call of `forward`; with two inputs it takes the
# second for the position. `to_edge_transform_and_lower(..., constant_methods=...)` adds them, and
# `helpers.lower_methods` passes them on:

# %%
print(lm.RUNNER_METADATA)
show_source(lm.lower_for_runner)

# %% [markdown]
# The tokenizer: the weights are random, so there are no words to learn. Token id i is the text `t<i>`, written in
# Hugging Face's `tokenizer.json` format, which the runner's C++ tokenizer reads. Id 0 is its special `<bos>`, which
# the runner also takes as the end of the text (none of the answers below contains it):

# %%
tokenizer = lm.tokenizer_json()
print(tokenizer["pre_tokenizer"], tokenizer["added_tokens"][0]["content"], len(tokenizer["model"]["vocab"]))
print(lm.as_text(lm.PROMPTS[0]))

# %% [markdown]
# The runner's greedy answers (temperature 0), decoded back to ids, next to `generate`'s:

# %%
for_runner = lm.lower_for_runner()
runner_rows = []
for prompt in lm.PROMPTS:
    eager, runner = lm.eager_tokens(prompt), lm.runner_tokens(for_runner, prompt)
    runner_rows.append(eager == runner)
    print(f"prompt {lm.as_text(prompt)}\n  generate {lm.as_text(eager)}\n  runner   {lm.as_text(runner)}   "
          f"{'equal' if eager == runner else 'DIFFERENT'}")

# %% [markdown]
# ## ✏️ Exercise 13.position
#
# A teammate's decode step numbers the tokens itself, so that no caller can pass a wrong position:

# %%
show_source(lm.AppStep)

# %% [markdown]
# They tested it eager, a fresh step per prompt:

# %%
app_step = lm.AppStep(lm.tiny_llama())
with torch.no_grad():
    print("AppStep, eager:", lm.greedy(app_step, lm.PROMPTS[0]))
print("generate:      ", lm.eager_tokens(lm.PROMPTS[0]))

# %% [markdown]
# Give a step class, `answer = YourStep`, built as `answer(lm.tiny_llama())`, whose `forward(input_ids,
# cache_position)` gives `generate`'s tokens in the app's loop, eager and as a `.pte`. The check runs it eager, then
# exports it (`strict=True`), builds it with the portable kernels (a cold check then takes seconds; what happens to a
# position does not depend on the backend) and runs the app's loop on the runtime: prompts the lesson did not show,
# one conversation after another on one loaded program.

# %%
# ✏️ Exercise 13.position — edit this cell, then run the check below.
class MyStep(lm.AppStep):
    pass  # AppStep's own forward(), its counter included


answer = MyStep

# %%
from helpers import exercises

grade = exercises.check("13.position", answer)

# %% [markdown]
# ## ✏️ Exercise 13.plan
#
# The product goes on a phone. A day of its prompts, by length (1,000 prompts; each is answered with 12 new tokens):

# %%
pd.DataFrame(lm.day_table()).set_index("prompt tokens")

# %% [markdown]
# The program holds one prefill method per bucket and `decode`, sharing one cache (section 5). The team's rules:
# - every prompt of the day is answered: it fits a bucket, and it and its new tokens fit the cache;
# - at most two prefill methods;
# - at most 5 padding tokens per prompt, on average over the day: a padding token is computed and never read;
# - the largest method's planned arena, the cache included, within 128 KiB (131,072 bytes).
#
# Give a plan, `answer = {"max_cache_len": ..., "buckets": (...)}`. To see what a candidate costs, run
# `lm.measure_plan(max_cache_len, buckets)` in a cell of your own: it builds the program the check builds and prints
# each method's arena and the day's padding (15–20 s the first time for two buckets and `decode`, then cached).
# The check runs the app's host checks on the day's prompts, builds the program, reads its plan, then feeds it prompts
# of the day's lengths that no cell showed, one conversation after another, and compares the tokens with eager's.
#
# Both build with the portable kernels, as in exercise 13.position: the arenas are that build's. A build for another
# backend plans its own, so a real budget is checked on the build that ships.

# %%
# ✏️ Exercise 13.plan — edit this cell, then run the check below.
answer = {"max_cache_len": lm.MAX_CACHE_LEN, "buckets": lm.BUCKETS}  # the lesson's program: 32 slots, buckets 8, 16

# %%
plan_grade = exercises.check("13.plan", answer)

# %% [markdown]
# ## 8. In CI: the export doctor on a decode step
#
# The export doctor ([lesson 11](11_export_doctor.ipynb)) takes a decode step too: exported with `strict=True`, and,
# because the program writes state it keeps between calls, compared with eager from the initial state on every probe,
# then on the probes that matched in calls one after another, the state carried on both sides as the app's loop
# carries it.
# Would it have caught the teammate's step?

# %%
questions.ask("13.doctor_example_values")

# %%
print(lm.doctor_line(lm.doctor_report(lm.AppStep, app_values=False)))

# %% [markdown]
# The doctor draws an integer input's values from the example's own: every probe fed token 1. With the same token
# in every slot, attention returns that token's values whichever slots hold it, so a wrong slot changes nothing the
# logits show. Tell the doctor the values the app sends, token ids 0–255 and positions 0–31 (`value_ranges`, or
# `--value-range NAME=LOW:HIGH` on the command line):

# %%
print(lm.APP_VALUES)
app_report = lm.doctor_report(lm.AppStep, app_values=True)
print(lm.doctor_line(app_report))
print(app_report.next_steps()[0])

# %% [markdown]
# One call at a time still matches: from the initial state, eager's counter and the program's constant agree on the
# first call. In a row they part from the second call. A probe set proves what its values reach: give the doctor
# the values the app sends.
#
# A prefill method's positions are not drawn one by one: they run on from a start, and this wrapper writes a prompt
# at the slots from its first position on (positions 31, 31, 31, 31 ask it for slots 31 to 34). Give them as
# `--positions NAME=LOW:HIGH` (`helpers.PositionRange` in `value_ranges`), and each probe's positions are one run
# inside the range.

# %% [markdown]
# ## Takeaway
#
# A language model's KV cache becomes state *inside* the exported program: buffers it writes in place, planned in the
# arena for `max_cache_len` slots, kept between the calls of a loaded method. The device's loop passes only the new
# token and its position, as a tensor; the app checks on the host that prompt and answer fit the slots, and only a
# comparison with eager over whole sequences catches positions that do not match the tokens. A prefill method and a
# decode method share that state only when it is built with `share_mutable_buffers=True` and run with shared arenas.

# %% [markdown]
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("13.static_cache")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, on this run

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert all(r["equal"] for r in rows), rows
assert questions.get("13.int_position").actual()[0] == "the runtime refuses a call"
assert int_eager == rows[0]["eager"], int_eager  # eager, the int step gives generate's tokens
assert "should have the same value as the input_evalue, but got 0 and 1" in str(int_error), int_error
assert f"Index {lm.MAX_CACHE_LEN} is out of bounds" in str(long_error), long_error
assert len(long_prompt) < lm.MAX_CACHE_LEN < len(long_prompt) + lm.NEW_TOKENS - 1  # the refusal comes mid-answer
assert isinstance(fits_error, ValueError) and lm.check_fits(long_prompt[:21]) is None
assert shifted[0] == rows[0]["eager"][0] and shifted != rows[0]["eager"], shifted  # same first token, then silent
assert questions.get("13.doctor_example_values").actual()[0] == "PASS"
assert not app_report.passed and app_report.failing_rows == [], lm.doctor_line(app_report)
assert app_report.sequence.rows[0].status == "match" and app_report.sequence.rows[1].status == "diverge"
assert len(writes) == 2 * lm.CONFIG["num_hidden_layers"], writes
growth = arena["arena bytes"].diff().dropna()
kv_growth = arena["KV cache bytes"].diff().dropna()
assert (growth >= kv_growth).all(), arena  # the cache is part of the plan: it grows at least by the cache's bytes
largest = lm.largest_planned(program)
assert "expand_copy" in {r["made by"] for r in largest} and "delegate" in {r["made by"] for r in largest}, largest
assert all(lm.MAX_CACHE_LEN in r["shape"] for r in largest[:4]), largest  # the largest tensors span the cache
assert any(r["shape"][1:3] == (2, 2) for r in largest if r["made by"] == "expand_copy"), largest  # 2 kv heads × 2
assert questions.get("13.shared_cache").actual()[0] == "the first the same, then different"
assert all(shared_rows) and all(strategies["tokens = eager"]), strategies
places = {r["method"]: (r["arena"], r["offsets"]) for r in lm.cache_in_plan(shared)}
assert places["prefill"] == places["decode"] and places["decode"][0] == [2], places  # one place, arena 2
apart = {r["method"]: (r["arena"], r["offsets"]) for r in lm.cache_in_plan(separate)}
assert apart["prefill"][1] != apart["decode"][1] and apart["decode"][0] == [1], apart  # two copies in arena 1
assert questions.get("13.prefill_arena").actual()[0] == "prefill (Dim 1–32)"
assert {"slice_copy.Tensor"} <= {d["op"] for d in lm.declined_only_by_dim()}
assert "SymInt" in next(d["reason"] for d in lm.declined_only_by_dim() if d["op"] == "slice_copy.Tensor")
assert app_step.next_position == len(lm.PROMPTS[0]) + lm.NEW_TOKENS - 1  # eager, its counter counted every call
assert questions.get("13.runner_plain").actual()[0] == "it refuses the program"
assert all(runner_rows) and "get_max_seq_len not found" in str(runner_refusal), runner_refusal
assert all(0 not in lm.eager_tokens(p) for p in lm.PROMPTS)  # the tokenizer's end-of-text id never came up
assert non_strict.stage == "lower" and "expected compiled_fn to be GraphModule" in non_strict.message, non_strict
lifted = {name: tuple(t.shape) for name, t in non_strict.exported.constants.items() if "lifted_tensor" in name}
assert sorted(lifted.values()) == [()] * 2 + [(1, 2, lm.MAX_CACHE_LEN, 16)] * 4, lifted  # 2 counters, 4 K/V caches
assert all(f"`{name}`" in non_strict.summary for name in lifted), non_strict.summary  # all six written in place
assert len(lifted) == 3 * lm.CONFIG["num_hidden_layers"]
assert (lm.NEW_TOKENS, lm.MAX_PREFILLS, lm.PADDING_LIMIT, lm.ARENA_BUDGET) == (12, 2, 5, 131_072)  # the rules' words
assert sum(lm.DAY_OF_PROMPTS.values()) == 1000 and max(lm.DAY_OF_PROMPTS) == 20
assert not plan_grade.passed and "no bucket holds them" in plan_grade.feedback, plan_grade.feedback  # the starter
print("checked")
