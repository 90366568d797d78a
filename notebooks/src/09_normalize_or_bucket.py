# %% [markdown]
# # 09 · Normalize on the host, or bucket
#
# **What you will learn**
# - the usual answer for vision: resize and letterbox the frame **in the app**, so the exported graph stays static;
# - when padding genuinely costs (variable-length sequences), the middle option: **buckets**, a few static shapes as
#   methods of one `.pte` (or as separate files), and a dispatcher that pads to the nearest one with a mask;
# - how to choose the bucket sizes from the length distribution, and test parity on every bucket's edges;
# - the trade-off, measured: padding waste vs number of buckets vs artifact size vs latency, against a dynamic `Dim`.
#
# **Terms** (from [lesson 00](00_start_here.ipynb)): `.pte`, delegate, XNNPACK, portable kernels, memory plan /
# arena, `Dim`. From lesson 07: host check. New here: a **bucket** is one static input size the program is exported
# at; a request is *padded* up to the smallest bucket that holds it; *padding waste* is the share of all processed
# positions that are padding; a **mask** marks which positions are real.

# %%
import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import exercises, interview, models, plots, questions
from helpers.display import show_source
from helpers.lessons import bucketing, shapes

_ = torch.manual_seed(0)

# %% [markdown]
# ## The model and the requests
#
# A sequence model must accept requests of 12 to 512 tokens. It is `TokenPool` (lesson 07) with a 1000-token
# vocabulary: it embeds the ids, multiplies them by the mask, averages over the real tokens and applies a linear
# head. Because padding is multiplied by 0 and the average divides by the mask's sum, padding cannot change its
# answer:

# %%
show_source(models.TokenPool)

# %%
token_model = bucketing.bucket_model()  # TokenPool(vocab=1000, features=32, classes=3)
lengths = bucketing.request_lengths()  # a sample of 400 request lengths: mostly short, a long tail
print(f"{len(lengths)} requests, median {sorted(lengths)[len(lengths) // 2]} tokens, "
      f"shortest {min(lengths)}, longest {max(lengths)}")

# %% [markdown]
# The simplest static answer is one program at the maximum: pad every request to 512 tokens. **Predict** how much of
# the work is then padding:

# %%
questions.ask("09.pad_to_512")

# %% [markdown]
# ## The trap, live

# %%
print(f"padded to 512: {bucketing.padding_waste(lengths, (512,)):.0%} of all processed positions are padding")

# %% [markdown]
# It works, and most of what it computes is padding. For vision the opposite reflex, "make the model accept
# anything", gave lesson 08's dynamic program: a declined operator and a worst-case arena. Both problems have a
# host-side answer.

# %% [markdown]
# ## Vision: normalize on the host
#
# A camera pipeline resizes frames anyway. If the app letterboxes every frame to the network's input size (scale so
# the longer side fits, keep the aspect ratio, pad the rest), the model only ever sees one shape, and lesson 06's
# static export applies unchanged:

# %%
show_source(bucketing.letterbox)

# %%
model, static, frame_64 = shapes.vision_program()
camera_frames = {f"{h}×{w}": shapes.camera_frame(h, w) for h, w in [(48, 64), (36, 64), (64, 48), (120, 160)]}
boxed = {name: bucketing.letterbox(f, shapes.VISION_SIZE) for name, f in camera_frames.items()}
bucketing.plot_letterbox({"camera frame": camera_frames["48×64"], "letterboxed": boxed["48×64"],
                          "camera frame ": camera_frames["120×160"], "letterboxed ": boxed["120×160"]})

# %% [markdown]
# Parity is judged on the pipeline as shipped, host letterbox then model, in eager and on the runtime, over frames
# from every camera size and values of every kind; then where the graph runs:

# %%
letterbox_probes = [helpers.Probe(f"camera {name}", (frame,)) for name, frame in boxed.items()]
letterbox_probes += [p for p in helpers.probe_inputs((frame_64,)) if p.label.startswith("values")]
letterbox_report = helpers.compare(model, static, letterbox_probes)
print(letterbox_report.summary())
print(static.delegation().summary(), f"· arena {static.planned_memory_bytes():,} bytes")

# %% [markdown]
# (The model now sees a scaled, padded frame: train and evaluate it with the same preprocessing. That is a question
# of accuracy, not of the runtime.) Keep dynamic sizes for inputs where padding really costs: sequences.

# %% [markdown]
# ## Buckets for sequences
#
# Export `TokenPool` three times, at 128, 256 and 512 tokens, each **static**, as three methods of one `.pte`:

# %%
program = bucketing.bucket_program()  # methods seq_128, seq_256, seq_512
program

# %%
for name, meta in shapes.read_signature(program).items():
    print(name, [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())])

# %% [markdown]
# How much of each method is delegated, and why not all of it, in the partitioner's own words:

# %%
for method in program.methods:
    print(program.delegation(method).summary())
for op, why in shapes.declined_reasons(program, "seq_128").items():
    print(f"left on portable kernels: {op} — {'; '.join(why)}")

# %% [markdown]
# XNNPACK (in ExecuTorch 1.5.1) has no rule for an embedding lookup or for a `sum` over an axis, so they run on the
# portable kernels whatever the shapes. A bucket is a static program, so it is delegated exactly like the static
# export; a dynamic `Dim` would not do better here (measured below). For lesson 08's segmenter, a bucket is entirely
# delegated.
#
# The app dispatches each request to the smallest bucket that holds it, pads the ids with token 0, and passes a mask
# that is 1 on real tokens and 0 on padding. That app-side code:

# %%
show_source(bucketing.choose_bucket, bucketing.pad_to, bucketing.dispatch)

# %% [markdown]
# **Predict** which method serves a 257-token request:

# %%
questions.ask("09.bucket_257")

# %%
for n in (40, 128, 129, 257, 300):
    request = bucketing.tokens(n)
    d = bucketing.dispatch(request, program)
    eager = token_model(request, torch.ones(1, n))
    print(bucketing.describe_dispatch(d), "| .pte", helpers.fmt(d.output), "| eager, unpadded", helpers.fmt(eager))

# %%
err = helpers.show_error(bucketing.dispatch, bucketing.tokens(513), program)

# %% [markdown]
# The same buckets could ship as **separate files** (what you would do if each had to be downloaded on demand).
# **Predict** first: adding a fourth bucket (64) as one more method of the same `.pte`, how much bigger is the file?

# %%
questions.ask("09.fourth_bucket")

# %%
files = bucketing.separate_programs()
weights = sum(p.numel() * p.element_size() for p in token_model.parameters())
for b, art in files.items():
    print(f"seq_{b}.pte: {art.nbytes:,} bytes")
print(f"three files: {sum(a.nbytes for a in files.values()):,} bytes · one .pte with three methods: "
      f"{program.nbytes:,} bytes · the weights: {weights:,} bytes")

# %% [markdown]
# The weights are most of the bytes. Methods of one `.pte` share them; separate files each carry a copy.

# %% [markdown]
# ### Parity on every bucket edge
#
# For each bucket: one token less, exactly full, one token more (which moves to the next bucket), and the shortest
# request. Eager runs on the **unpadded** request; the `.pte` on the padded one. Both deliveries (methods of one
# `.pte`, separate files) are checked, and a request beyond the largest bucket must be refused.

# %%
edges = sorted({1, 2} | {b + d for b in bucketing.BUCKETS for d in (-1, 0, 1)} - {513})
rows = []
for n in edges:
    request = bucketing.tokens(n)
    eager = token_model(request, torch.ones(1, n))
    one = bucketing.dispatch(request, program)
    sep = bucketing.dispatch(request, files)
    rows.append({"tokens": n, "bucket": one.bucket, "padding": f"{one.waste:.0%}",
                 "one .pte": "match" if torch.allclose(one.output, eager, atol=1e-5) else "DIVERGE",
                 "separate files": "match" if torch.allclose(sep.output, eager, atol=1e-5) else "DIVERGE"})
edge_table = pd.DataFrame(rows)
edge_table

# %% [markdown]
# Each method is also an ordinary static program with its own contract. The probe set at its shape (values of every
# kind, each axis nudged outside):

# %%
method_reports = {}
for b in bucketing.BUCKETS:
    example = bucketing.pad_to(bucketing.tokens(b // 2), b)
    method_reports[b] = helpers.compare(token_model, program, helpers.probe_inputs(example),
                                        method=bucketing.method_name(b))
    print(f"seq_{b}: {method_reports[b].summary()}")

# %% [markdown]
# ## Choosing the buckets
#
# More buckets means less padding, and one more method to export, test and ship. Powers of two are the habit:

# %%
bucket_sets = [(512,), (256, 512), (128, 256, 512), (64, 128, 256, 512)]
trade = pd.DataFrame(bucketing.tradeoff(bucket_sets, lengths))
trade

# %%
n = trade["n_buckets"].tolist()
per_method = (trade["one_pte_bytes"].iloc[-1] - trade["one_pte_bytes"].iloc[0]) / (n[-1] - n[0])
per_file = (trade["separate_files_bytes"].iloc[-1] - trade["separate_files_bytes"].iloc[0]) / (n[-1] - n[0])
print(f"padding waste: {trade['padding_waste'].iloc[0]:.0%} with one bucket, {trade['padding_waste'].iloc[-1]:.0%} "
      f"with four")
print(f"each extra bucket adds {per_method / 1024:.1f} KiB as a method of one .pte, {per_file / 1024:.1f} KiB as a "
      "separate file")
print(f"four buckets, every method loaded: arena {trade['arena_all_loaded_bytes'].iloc[-1]:,} bytes; "
      f"shared by the methods: {trade['arena_shared_bytes'].iloc[-1]:,} bytes")

# %% [markdown]
# Each method's memory plan is sized for its own bucket, but an app that loads every bucket's method holds all of
# those plans at once: the runtime gives each loaded method its own planned buffers. ExecuTorch's C++ `Module` can
# share one arena between its methods, sized to the largest (`share_memory_arenas = true`, default `false`, in
# `extension/module/module.h`; an output is then only valid until another method runs). The Python bindings these
# lessons use do not offer it.

# %%
plots.series(n, {"one .pte, one method per bucket": (trade["one_pte_bytes"] / 1024).round(1).tolist(),
                 "separate .pte files": (trade["separate_files_bytes"] / 1024).round(1).tolist()},
             xlabel="number of buckets", ylabel="artifact size (KiB)", title="What the buckets cost in bytes")

# %% [markdown]
# Are powers of two a good choice for *these* requests? A request pays its bucket minus its length, so what matters
# is where the lengths crowd relative to the edges. Two ways to place four buckets, against the histogram: powers of
# two, and "equal-count" buckets (each serving about a quarter of the requests, edges at the quartiles):

# %%
powers = (64, 128, 256, 512)
equal_count = bucketing.equal_count_buckets(lengths, 4, longest=512)
bucketing.plot_lengths(lengths, {"powers of two": powers, "equal count": equal_count})

# %%
for label, buckets in (("powers of two", powers), ("equal count", equal_count)):
    print(f"{label:<14} {'/'.join(map(str, buckets)):<16} padding waste "
          f"{bucketing.padding_waste(lengths, buckets):.1%}")

# %% [markdown]
# Serving equal numbers of requests is not the same as wasting little: equal count puts three edges in the crowd of
# short requests and leaves one bucket to span everything from the upper quartile to 512.
#
# ### ✏️ Exercise 09.pick_buckets: buckets for these requests
#
# The team allows at most **4** buckets and at most **28%** padding waste, and every request of `request_lengths()`
# must be served. Choose the sizes. Try candidates with `bucketing.padding_waste(lengths, buckets)` first (it is
# instant); the check then builds a program per bucket and tests parity on every bucket's edges.

# %%
# ✏️ Exercise 09.pick_buckets — edit this cell, then run the check below.
answer = [512]

# %%
grade = exercises.check("09.pick_buckets", answer)

# %% [markdown]
# ## The trade-off, measured: latency
#
# The median time of each bucket's method on the runtime gives each bucket set a mean cost per request (each request
# pays for its bucket). A dynamic program (`Dim("seq", 1..512)`) runs each request at its own length instead; it is
# measured on every 8th request. Each time is the runtime call alone (`artifact.bare_call()`), on the runtime's own
# thread pool. Five rounds, everything interleaved, so each comparison has a spread. Timings vary
# between machines: this output is not compared in CI, and the sentences are computed from the rounds.

# %% tags=["nbval-ignore-output"]
print(f"the runtime's thread pool: {helpers.runtime_threads()} threads")
seq = Dim("seq", min=1, max=512)
dynamic_tokens = helpers.lower(token_model, bucketing.pad_to(bucketing.tokens(128), 128),
                               dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
timing = bucketing.latency_rounds(bucket_sets, lengths, dynamic_tokens, rounds=5)
for name, ms in timing.items():
    print(f"{name:<16} mean per request: median {sorted(ms)[len(ms) // 2]:.4f} ms "
          f"(rounds: {min(ms):.4f} to {max(ms):.4f})")
print()
finest = "/".join(map(str, bucket_sets[-1]))
print(shapes.ratio_sentence(f"one bucket (512) / four buckets ({finest})", timing["512"], timing[finest]))
print(shapes.ratio_sentence(f"dynamic Dim / four buckets ({finest})", timing["dynamic"], timing[finest]))
print(f"processed positions saved by four buckets instead of one: "
      f"{1 - (1 - trade['padding_waste'].iloc[0]) / (1 - trade['padding_waste'].iloc[-1]):.0%}")

# %% tags=["nbval-ignore-output"]
plots.series(n, {"buckets (mean per request)": [sorted(timing["/".join(map(str, b))])[2] for b in bucket_sets],
                 "dynamic Dim (mean per request)": [sorted(timing["dynamic"])[2]] * len(n)},
             xlabel="number of buckets", ylabel="ms per request", title="Latency vs number of buckets")

# %%
print(f"dynamic program: {dynamic_tokens.delegation().summary()}")
print(f"arena: dynamic {dynamic_tokens.planned_memory_bytes():,} bytes · seq_512 method "
      f"{program.planned_memory_bytes('seq_512'):,} bytes · seq_128 method {program.planned_memory_bytes('seq_128'):,}")

# %% [markdown]
# How to read it. Padding waste falls with every bucket; whether the time per request falls as much depends on how
# much of a call's cost grows with its length, and the sentences above say what this machine measured (a difference
# counts only when every round agrees). The dynamic program avoids padding entirely; its delegation is the same as
# the buckets' (the same two operators have no XNNPACK rule), and its arena is planned for 512 tokens, as large as the
# largest bucket's. Which one wins depends on your model's delegation (lesson 08) and your length distribution:
# measure both, on the device you ship to, and say which trade you made.

# %% [markdown]
# ## Try it: the bucket dispatcher
#
# Move the slider: the widget shows the bucket chosen, the padding waste, and the verdict of the real `.pte` method
# against eager on the unpadded request. Switch to *512 only* to see the waste of a single bucket; go past 512 to see
# what happens to a request no bucket holds.

# %%
explorer = bucketing.bucket_explorer(program)
explorer

# %%
for values in [{"length": 40}, {"length": 129}, {"length": 513}, {"length": 40, "buckets": (512,)}]:
    row = explorer.set(**values)
    print(f"{values}: bucket {explorer.bucket}, verdict {row.verdict}")
explorer.set(length=100, buckets=bucketing.BUCKETS).verdict

# %% [markdown]
# ## Takeaways
# - Vision: normalize on the host. Letterboxing in the app keeps the graph static, delegated like the static export,
#   with the smallest arena; the model is trained with the same preprocessing.
# - Sequences: padding everything to the maximum wastes most of the work. Buckets are the middle option: a few static
#   shapes, each with a memory plan sized for its shape (loaded together, they hold the sum of those plans unless
#   the app shares one arena) and bounded padding; pad with a mask that makes padding inert, and test
#   parity on every bucket's edges (n−1, n, n+1).
# - Choose the edges from the measured length distribution: powers of two are a habit, equal-count buckets are not
#   optimal either; the largest bucket must hold the longest request.
# - Ship buckets as methods of one `.pte` (shared weights, a few KiB per method) unless they must be downloaded
#   separately. State the trade: padding vs number of buckets vs size vs latency, measured.
#
# ## Interview questions
#
# Answer each aloud first (about 30 seconds), then compare with the model answer.

# %%
interview.ask("09.dynamic_or_buckets")

# %%
interview.ask("09.choose_buckets")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: what this lesson claims holds

# %% tags=["ci-check"] jupyter={"source_hidden": true}
helpers.set_progress(False)  # the checks below load cached programs: no progress lines
assert letterbox_report.ok_within_contract and static.delegation().portable_nodes == 0, letterbox_report
assert (edge_table[["one .pte", "separate files"]] == "match").all().all(), edge_table
assert all(r.ok_within_contract for r in method_reports.values())
assert all(program.delegation(m).summary().split(": ", 1)[1] == program.delegation("seq_128").summary().split(": ", 1)[1]
           for m in program.methods)
assert set(shapes.declined_reasons(program, "seq_128")) == {"aten_embedding_default", "aten_sum_dim_int_list"}
assert dynamic_tokens.delegation().portable_ops() == program.delegation("seq_512").portable_ops()
assert dynamic_tokens.planned_memory_bytes() >= program.planned_memory_bytes("seq_512")
assert trade["padding_waste"].is_monotonic_decreasing and trade["one_pte_bytes"].is_monotonic_increasing
assert (trade["arena_all_loaded_bytes"] > trade["arena_shared_bytes"])[trade["n_buckets"] > 1].all()
assert per_file > 10 * per_method
assert bucketing.padding_waste(lengths, equal_count) > bucketing.padding_waste(lengths, powers) > 0.28
try:
    bucketing.dispatch(bucketing.tokens(513), program)
    raise AssertionError("a 513-token request must be refused")
except ValueError:
    pass
expected = {"09.pad_to_512": "about three quarters", "09.bucket_257": "seq_512", "09.fourth_bucket": "a few KB"}
assert {q: questions.get(q).actual()[0] for q in expected} == expected
helpers.set_progress(None)
print(f"letterbox: {letterbox_report.summary()}")
print(f"bucket edges {edges}: all match (one .pte and separate files); 513 refused")
