# %% [markdown]
# # 09 · Normalize on the host, or bucket
#
# **What you will learn**
# - the usual answer for vision: resize/letterbox the frame **in the app**, so the exported graph stays static
#   and fully delegated;
# - when padding genuinely costs (variable-length sequences), the middle option: **buckets** — a few static
#   shapes as methods of one `.pte` (or as separate files), and a dispatcher that pads to the nearest one with a mask;
# - parity on every bucket edge, and the trade-off measured: padding waste vs number of buckets vs artifact size
#   vs latency.

# %%
import pandas as pd
import torch
from torch.export import Dim

import helpers
from helpers import plots
from helpers.lessons import bucketing, shapes
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# A sequence model must accept requests of 1…512 tokens. The simplest static answer is one program at the
# maximum: pad every request to 512. It works — and most of what it computes is padding. Over a realistic
# sample of request lengths (mostly short, a long tail):

# %%
lengths = bucketing.request_lengths()
print(f"{len(lengths)} requests, median {sorted(lengths)[len(lengths) // 2]} tokens, longest {max(lengths)}")
print(f"padded to 512: {bucketing.padding_waste(lengths, (512,)):.0%} of all processed positions are padding")

# %% [markdown]
# For vision the same reflex — "make the model accept anything" — gave us lesson 08's dynamic program: split
# delegation and a worst-case arena. Both problems have a host-side answer.

# %% [markdown]
# ## Why normalizing on the host works
#
# A camera pipeline resizes frames anyway. If the app letterboxes every frame to the network's input size
# (scale so the longer side fits, keep the aspect ratio, pad the rest), the model only ever sees one shape:
# the static export from lesson 06 applies unchanged, fully delegated, with the smallest arena.

# %%
model, static, frame_64 = shapes.vision_program()
camera_frames = {f"{h}×{w}": shapes.camera_frame(h, w) for h, w in [(48, 64), (36, 64), (64, 48), (120, 160)]}
boxed = {name: bucketing.letterbox(f, shapes.VISION_SIZE) for name, f in camera_frames.items()}
bucketing.plot_letterbox({"camera frame": camera_frames["48×64"], "letterboxed": boxed["48×64"],
                          "camera frame ": camera_frames["120×160"], "letterboxed ": boxed["120×160"]})

# %%
for name, frame in boxed.items():
    (out,) = static.run(frame)
    print(f"camera {name:<8} → {tuple(frame.shape)} → .pte {helpers.fmt(out)}")
print(static.delegation().summary())

# %% [markdown]
# Parity is judged on the pipeline as shipped: host letterbox → model, in eager and on the runtime, over frames
# from every camera size and values of every kind:

# %%
letterbox_probes = [helpers.Probe(f"camera {name}", (frame,)) for name, frame in boxed.items()]
letterbox_probes += [p for p in helpers.probe_inputs((frame_64,)) if p.label.startswith("values")]
letterbox_report = helpers.compare(model, static, letterbox_probes)
print(letterbox_report.summary())

# %% [markdown]
# (The model now sees a scaled, padded frame — train and evaluate it with the same preprocessing. That is an
# accuracy question, not a runtime one.) Keep dynamic dimensions for inputs where padding really costs:
# sequences.

# %% [markdown]
# ## Buckets for sequences
#
# `bucketing.bucket_model()` is `TokenPool` (token ids + mask, mean-pooled embeddings, a linear head) with a
# 1000-token vocabulary. Export it three times — 128, 256 and 512 tokens, each **static** — as three methods of
# one `.pte`:

# %%
token_model = bucketing.bucket_model()
program = bucketing.bucket_program()  # methods seq_128, seq_256, seq_512
program

# %%
for name, meta in shapes.read_signature(program).items():
    print(name, [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())])

# %% [markdown]
# The app dispatches each request to the smallest bucket that holds it, pads the ids with token 0, and passes a
# mask that is 1 on real tokens and 0 on padding. The model multiplies embeddings by the mask and divides by the
# mask's sum, so the padding cannot change the answer:

# %%
for n in (40, 128, 129, 300):
    request = bucketing.tokens(n)
    d = bucketing.dispatch(request, program)
    eager = token_model(request, torch.ones(1, n))
    print(bucketing.describe_dispatch(d), "| .pte", helpers.fmt(d.output), "| eager, unpadded", helpers.fmt(eager))

# %%
err = helpers.show_error(bucketing.dispatch, bucketing.tokens(513), program)

# %% [markdown]
# The same buckets as **separate files** (what you would ship if methods had to be downloaded on demand):

# %%
files = bucketing.separate_programs()
for b, art in files.items():
    print(f"seq_{b}.pte: {art.nbytes:,} bytes")
print(f"three files: {sum(a.nbytes for a in files.values()):,} bytes · one .pte with three methods: {program.nbytes:,} bytes")

# %% [markdown]
# The weights are most of the bytes. Methods of one `.pte` share them; separate files each carry a copy.

# %% [markdown]
# ### Parity on every bucket edge
#
# For each bucket: one token less, exactly full, one token more (which moves to the next bucket), and the
# shortest request. Eager runs on the **unpadded** request; the `.pte` on the padded one. Both deliveries
# (methods of one `.pte`, separate files) are checked, and a request beyond the largest bucket must be refused.

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
# Each method is also an ordinary static program with its own contract; the probe set at its shape (values of
# every kind, each axis nudged outside) matches inside the contract:

# %%
method_reports = {}
for b in bucketing.BUCKETS:
    example = bucketing.pad_to(bucketing.tokens(b // 2), b)
    method_reports[b] = helpers.compare(token_model, program, helpers.probe_inputs(example),
                                        method=bucketing.method_name(b))
    print(f"seq_{b}: {method_reports[b].summary()}")

# %% [markdown]
# ## The trade-off, measured
#
# More buckets → less padding, but a bigger artifact (a little for methods of one `.pte`, a whole copy of the
# weights per bucket for separate files). Four bucket sets over the same request sample; every size comes from
# the real artifacts:

# %%
bucket_sets = [(512,), (256, 512), (128, 256, 512), (64, 128, 256, 512)]
trade = pd.DataFrame(bucketing.tradeoff(bucket_sets, lengths))
trade

# %%
n = trade["n_buckets"].tolist()
plots.series(n, {"padding waste (%)": (trade["padding_waste"] * 100).round(1).tolist()},
             xlabel="number of buckets", ylabel="% of processed positions that are padding",
             title="Padding waste falls as buckets are added")

# %%
plots.series(n, {"one .pte, one method per bucket": (trade["one_pte_bytes"] / 1024).round(1).tolist(),
                 "separate .pte files": (trade["separate_files_bytes"] / 1024).round(1).tolist()},
             xlabel="number of buckets", ylabel="artifact size (KiB)", title="What the buckets cost in bytes")

# %% [markdown]
# Latency: the median time of each bucket's method on the runtime, then the mean per request over the sample
# (each request pays for its bucket). For comparison, a dynamic program (`Dim("seq", 1..512)`) runs each
# request at its own length. Timings vary between machines; this output is not compared in CI.

# %%
# NBVAL_IGNORE_OUTPUT
torch.set_num_threads(1)
all_buckets = bucketing.bucket_program((64, 128, 256, 512))
per_bucket = {b: shapes.median_latency_ms(all_buckets, bucketing.pad_to(bucketing.tokens(b), b),
                                          method=bucketing.method_name(b), repeat=100) for b in (64, 128, 256, 512)}
timed = pd.DataFrame(bucketing.tradeoff(bucket_sets, lengths, latency_ms=per_bucket))
seq = Dim("seq", min=1, max=512)
dynamic_tokens = helpers.lower(token_model, bucketing.pad_to(bucketing.tokens(128), 128),
                               dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
sample = lengths[::8]
dynamic_ms = sum(shapes.median_latency_ms(dynamic_tokens, (bucketing.tokens(k), torch.ones(1, k)), repeat=20,
                                          warmup=2) for k in sample) / len(sample)
print({b: round(ms, 4) for b, ms in per_bucket.items()})
print(f"dynamic Dim(1..512), each request at its own length: {dynamic_ms:.4f} ms per request on average")
print(f"arena: dynamic {dynamic_tokens.planned_memory_bytes():,} bytes · seq_512 method "
      f"{program.planned_memory_bytes('seq_512'):,} bytes · seq_128 method {program.planned_memory_bytes('seq_128'):,} bytes")
timed[["buckets", "padding_waste", "one_pte_bytes", "mean_latency_ms"]]

# %%
# NBVAL_IGNORE_OUTPUT
plots.series(n, {"buckets (mean per request)": timed["mean_latency_ms"].tolist(),
                 "dynamic Dim (mean per request)": [dynamic_ms] * len(n)},
             xlabel="number of buckets", ylabel="ms per request", title="Latency vs number of buckets")

# %% [markdown]
# How to read it: waste drops from about three quarters of the work (one bucket) to under a third (four). The mean
# latency per request falls as requests land in smaller buckets, but by less than the padding numbers suggest: this
# model is tiny, so a fixed per-call cost of the runtime is a large share of every call (and differences of a few
# percent between neighbouring sets are within noise). Methods of one `.pte` cost about
# 2.4 KB each; separate files cost the weights again each time. The dynamic program avoids padding entirely; for
# this small model its latency is close to the finest bucketing, while its arena is planned for 512 tokens
# (printed above: the same bytes as the largest bucket's). Which one wins depends on
# your model's delegation (lesson 08) and your length distribution — so measure both, and say which trade you made.

# %% [markdown]
# ## Try it: the bucket dispatcher
#
# Move the slider: the widget shows the bucket chosen, the padding waste, and the verdict of the real `.pte`
# method against eager on the unpadded request. Switch to *512 only* to see the waste of a single bucket; go past
# 512 to see what happens to a request no bucket holds.

# %%
explorer = bucketing.bucket_explorer(program)
explorer

# %%
for values in [{"length": 40}, {"length": 129}, {"length": 513}, {"length": 40, "buckets": (512,)}]:
    row = explorer.set(**values)
    print(f"{values}: bucket {explorer.bucket}, verdict {row.verdict}")
explorer.set(length=100, buckets=bucketing.BUCKETS).verdict

# %% [markdown]
# ## Exercises
#
# **1. Predict, then reveal.** With buckets 128/256/512, which method serves a 257-token request?

# %%
my_prediction = "seq_512"

# %%
d = bucketing.dispatch(bucketing.tokens(257), program)
helpers.display.check_prediction(my_prediction, d.method,
                                 f"257 > 256, so the next bucket: {d.bucket - d.length} padding tokens ({d.waste:.0%})")

# %% [markdown]
# **2. Predict, then reveal (widget).** Adding a fourth bucket (64) as a method of the same `.pte` — roughly how
# much bigger is the file?

# %%
three, four = bucketing.bucket_program(), bucketing.bucket_program((64, 128, 256, 512))


def reveal_growth():
    grew = four.nbytes - three.nbytes
    answer = "a few KB" if grew < 16 * 1024 else "another copy of the weights"
    return answer, f"{three.nbytes:,} → {four.nbytes:,} bytes (+{grew:,}): the new method shares the weights"


quiz = PredictThenReveal("One more bucket as a method of the same .pte?", ["a few KB", "another copy of the weights"],
                         reveal_growth)
quiz

# %%
quiz.answer("a few KB")
print(quiz.actual)

# %% [markdown]
# **3. Change the code.** Replace `request_lengths()` with your product's real length distribution and re-run the
# trade-off. Where does the next bucket stop paying for itself?

# %% [markdown]
# ## Parity summary

# %%
assert letterbox_report.ok_within_contract, letterbox_report
assert (edge_table[["one .pte", "separate files"]] == "match").all().all(), edge_table
assert all(r.ok_within_contract for r in method_reports.values())
assert trade["padding_waste"].is_monotonic_decreasing and trade["one_pte_bytes"].is_monotonic_increasing
try:
    bucketing.dispatch(bucketing.tokens(513), program)
    raise AssertionError("a 513-token request must be refused")
except ValueError:
    pass
print(f"letterbox: {letterbox_report.summary()}")
print(f"bucket edges {edges}: all match (one .pte and separate files); 513 refused")

# %% [markdown]
# ## Takeaways
# - Vision: normalize on the host. Letterboxing in the app keeps the graph static, fully delegated and with the
#   smallest arena; the model just has to be trained with the same preprocessing.
# - Sequences: dynamic dimensions are for where padding really costs. Buckets are the middle option: a few static
#   shapes, each fully planned, with bounded padding waste; pad with a mask that makes padding inert, and test parity
#   on every bucket edge (n−1, n, n+1).
# - Ship buckets as methods of one `.pte` (shared weights, +a few KB per bucket) unless you need to download them
#   separately; separate files cost the weights each time.
# - State the trade explicitly: padding waste vs number of buckets vs artifact size vs latency, measured.
#
# ## Interview answer
# *"How would you handle variable input sizes for an on-device model?"* — For vision, I usually don't make the model
# dynamic at all: the app resizes and letterboxes the camera frame to the fixed network input with the platform's
# image APIs, so the exported graph stays static and fully delegated. I reserve dynamic dimensions for where padding
# really costs, like variable-length sequences. A middle option is bucketing: export, say, 128, 256 and 512 tokens as
# methods of one `.pte`, dispatch each request to the nearest bucket with padding and a mask, and test parity on each
# bucket's edges. That keeps static-shape performance and bounds padding waste, at the cost of artifact size — a
# size-versus-latency trade I'd measure and make explicit.
