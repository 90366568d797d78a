"""Lesson 13 · a language model on the device: a decoder-only LM with a static KV cache, decoded token by token
in the ExecuTorch runtime, compared with eager greedy generation; its predictions.

The model is a tiny Llama built from a ``transformers`` :class:`~transformers.LlamaConfig` (random weights, seeded),
wrapped by ``transformers.integrations.executorch.TorchExportableModuleWithStaticCache``: the KV cache becomes
buffers of the module (``key_cache_i``, ``value_cache_i``, ``cumulative_length_i``), which the exported program
writes in place, so that it is state of the program between two calls of the runtime.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.export import Dim

from helpers import lowering
from helpers._quiet import runtime_log_lines
from helpers.artifact import PteArtifact
from helpers.exercises.grading import Exercise, Verdict, base_context, lowered
from helpers.interview import Card
from helpers.questions import Question, Reveal

if TYPE_CHECKING:  # imported where used: transformers takes ~2 s to import
    from transformers import LlamaForCausalLM

LESSON = "13_language_model"

# The tiny Llama: 2 layers, 4 query heads sharing 2 key/value heads (grouped-query attention), 256 tokens.
CONFIG: dict[str, Any] = {
    "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
}
MAX_CACHE_LEN = 32  # the cache's slots: prompt + generated tokens must fit
BUCKETS = (8, 16)  # prompt lengths with a prefill method of their own (section 6)
PROMPTS = ((5, 17, 42), (200, 3), (31, 64, 127, 8, 250))  # token ids (no tokenizer: the weights are random)
NEW_TOKENS = 12


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    """The tiny Llama of :data:`CONFIG`, seeded weights, in eval mode, set up for a static cache."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    # a static cache (what the wrapper exports), and no end-of-sequence token: every loop generates its full count
    model.generation_config = GenerationConfig(use_cache=True, cache_implementation="static", eos_token_id=None)
    return model


class DecodeStep(nn.Module):
    """One call of the app's loop: ``input_ids`` (1, n) written at ``cache_position`` (n,) → logits (1, n, vocab).

    The KV cache is the wrapped module's state: each call writes the new keys and values into the slots from
    ``cache_position[0]`` on, one per token (``transformers``' wrapper writes a call's tokens at consecutive slots
    from its first position), and attends over the slots up to there.
    """

    def __init__(self, model: LlamaForCausalLM, max_cache_len: int = MAX_CACHE_LEN) -> None:
        super().__init__()
        from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

        self.cached = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=max_cache_len)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        return self.cached(input_ids=input_ids, cache_position=cache_position)


class IntPositionStep(DecodeStep):
    """The same step, with the position passed as a Python ``int``, as the app's loop counter is."""

    def forward(self, input_ids: torch.Tensor, position: int) -> torch.Tensor:  # type: ignore[override]
        return self.cached(input_ids=input_ids, cache_position=torch.tensor([position]))


def step_example(step_class: type[DecodeStep] = DecodeStep) -> tuple[torch.Tensor, Any]:
    """A decode step's example: one token at position 0 (a tensor, or an ``int`` for :class:`IntPositionStep`)."""
    return torch.tensor([[1]]), (0 if step_class is IntPositionStep else torch.tensor([0]))


def _recipe(variant: str) -> str:
    """A recipe (:func:`helpers.lowering.lower_by_recipe`) of this lesson: this module's source (config, wrapper),
    the installed transformers, and ``variant`` (step class, methods, ``max_cache_len``, seed, or an answer's
    fingerprint)."""
    from importlib.metadata import version

    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"{LESSON}/{source}/transformers {version('transformers')}/{variant}"


def _lowered(variant: str, label: str, build: Callable[[], PteArtifact]) -> PteArtifact:
    def built() -> PteArtifact:
        with torch.no_grad():
            return build()

    return lowering.lower_by_recipe(_recipe(variant), built, label=label)


def lower_decode_step(max_cache_len: int = MAX_CACHE_LEN, seed: int = 0,
                      step_class: type[DecodeStep] = DecodeStep) -> PteArtifact:
    """Export :class:`DecodeStep` (``strict=True``, as ``transformers``' own recipe does: see the lesson), lower it
    for XNNPACK and load it, cached like every lesson's program (and by recipe: :func:`_lowered`)."""
    runner = step_class is DecodeStep and max_cache_len == MAX_CACHE_LEN  # lower_for_runner's program, + metadata
    return _lowered(f"{step_class.__name__}/{max_cache_len}/{seed}", "forward", lambda: lowering.lower_methods(
        {"forward": (step_class(tiny_llama(seed), max_cache_len), step_example(step_class))}, strict=True,
        siblings=[lowering.ProgramOptions(constant_methods=RUNNER_METADATA)] if runner else ()))


def prompt_example(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A prompt of ``n`` tokens written at slots 0 … n-1: ``input_ids`` (1, n) and ``cache_position`` (n,)."""
    return torch.arange(1, n + 1)[None], torch.arange(n)


def prefill_methods(step: DecodeStep, kind: str, max_cache_len: int = MAX_CACHE_LEN,
                    buckets: Sequence[int] = BUCKETS) -> dict[str, Any]:
    """The methods of a prefill + decode program, all of one module (so their buffers have the same names), for
    :func:`helpers.lower_methods`. ``kind="dim"``: ``prefill`` takes 1 … ``max_cache_len`` tokens (one bounded
    ``Dim`` for both inputs); ``kind="buckets"``: ``prefill_<n>`` takes exactly n tokens, one method per bucket.
    Both have ``decode``: one token."""
    methods: dict[str, Any] = {}
    if kind == "dim":
        seq = Dim("seq", min=1, max=max_cache_len)
        methods["prefill"] = (step, prompt_example(4), {"input_ids": {1: seq}, "cache_position": {0: seq}})
    elif kind == "buckets":
        methods.update({f"prefill_{n}": (step, prompt_example(n)) for n in buckets})
    else:
        raise ValueError(f"kind must be 'dim' or 'buckets', got {kind!r}")
    methods["decode"] = (step, step_example())
    return methods


def lower_prefill_decode(kind: str = "dim", share_mutable_buffers: bool = True, seed: int = 0) -> PteArtifact:
    """One ``.pte`` with a prefill method (or one per bucket) and ``decode``, strict export, XNNPACK, cached.
    ``share_mutable_buffers`` is ExecuTorch's memory-planning option (see :func:`helpers.lower_methods`)."""
    variant = f"prefill/{kind}/{BUCKETS}/{share_mutable_buffers}/{MAX_CACHE_LEN}/{seed}"
    label = "prefill+decode" if kind == "dim" else "+".join([*(f"prefill_{n}" for n in BUCKETS), "decode"])
    return _lowered(variant, label, lambda: lowering.lower_methods(
        prefill_methods(DecodeStep(tiny_llama(seed)), kind), strict=True,
        share_mutable_buffers=share_mutable_buffers,  # the lesson shows both for "dim": one lowering builds both
        siblings=[lowering.ProgramOptions(share_mutable_buffers=not share_mutable_buffers)] if kind == "dim" else ()))


def greedy(step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], prompt: Sequence[int],
           new_tokens: int = NEW_TOKENS) -> list[int]:
    """The app's loop: feed the prompt one token per call, then feed back the most likely next token
    ``new_tokens`` times. ``step(input_ids, cache_position)`` returns logits. Returns the new tokens."""
    logits = None
    for position, token in enumerate(prompt):
        logits = step(torch.tensor([[token]]), torch.tensor([position]))
    assert logits is not None, "the prompt is empty"
    return decode_after(step, int(logits[0, -1].argmax()), len(prompt), new_tokens)


def decode_after(step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], first: int, prompt_len: int,
                 new_tokens: int = NEW_TOKENS) -> list[int]:
    """The decode half of the loop: ``first`` is the token the prompt's last logits chose; each call feeds the
    last token back at the next position. Returns the ``new_tokens`` new tokens."""
    generated = [first]
    while len(generated) < new_tokens:
        logits = step(torch.tensor([[generated[-1]]]), torch.tensor([prompt_len + len(generated) - 1]))
        generated.append(int(logits[0, -1].argmax()))
    return generated


def bucket_for(prompt_len: int, buckets: Sequence[int] = BUCKETS) -> int:
    """The smallest bucket that holds ``prompt_len`` tokens; :class:`ValueError` if none does."""
    fitting = [n for n in buckets if n >= prompt_len]
    if not fitting:
        raise ValueError(f"a prompt of {prompt_len} tokens fits no bucket {tuple(buckets)}: refuse it on the host, "
                         "or feed the rest token by token")
    return min(fitting)


def prefill_then_decode(artifact: PteArtifact, prompt: Sequence[int], new_tokens: int = NEW_TOKENS) -> list[int]:
    """The app's loop with a prefill method: the whole prompt in one call, then ``decode`` one token per call.

    The program's prefill is ``prefill`` (any length up to its ``Dim``'s max) or one ``prefill_<n>`` per bucket;
    then the prompt is padded with token 0 to the bucket. The padding's keys and values land in the slots after
    the prompt, which no real position attends to yet (the causal mask) and which decode overwrites one by one,
    and the first new token is read from the logits of the prompt's last real token."""
    if "prefill" in artifact.methods:
        method, length = "prefill", len(prompt)
    else:
        length = bucket_for(len(prompt), [int(m.removeprefix("prefill_")) for m in artifact.methods
                                          if m.startswith("prefill_")])
        method = f"prefill_{length}"
    ids = torch.tensor([list(prompt) + [0] * (length - len(prompt))])
    logits = artifact.run_raw(ids, torch.arange(length), method=method)[0]
    return decode_after(lambda i, p: artifact.run_raw(i, p, method="decode")[0],
                        int(logits[0, len(prompt) - 1].argmax()), len(prompt), new_tokens)


def eager_tokens(prompt: Sequence[int], new_tokens: int = NEW_TOKENS, seed: int = 0) -> list[int]:
    """Greedy generation in eager PyTorch, by ``transformers``' own ``generate`` (no exportlab code). Computed once
    per prompt, count and seed in a process (the weights are seeded: the same arguments give the same tokens)."""
    return list(_eager_tokens(tuple(int(t) for t in prompt), new_tokens, seed))


@functools.lru_cache(maxsize=64)
def _eager_tokens(prompt: tuple[int, ...], new_tokens: int, seed: int) -> tuple[int, ...]:
    model = tiny_llama(seed)
    with torch.no_grad():
        out = model.generate(torch.tensor([list(prompt)]), max_new_tokens=new_tokens, do_sample=False)
    return tuple(int(t) for t in out[0, len(prompt):])


def device_tokens(artifact: PteArtifact, prompt: Sequence[int], new_tokens: int = NEW_TOKENS) -> list[int]:
    """The same loop on the ``.pte`` in the ExecuTorch runtime: one ``execute`` per token."""
    return greedy(lambda ids, pos: artifact.run_raw(ids, pos)[0], prompt, new_tokens)


def check_fits(prompt: Sequence[int], new_tokens: int = NEW_TOKENS, max_cache_len: int = MAX_CACHE_LEN) -> None:
    """The host check an app runs before the loop: the prompt and the answer must fit the cache's slots.
    Raises :class:`ValueError` saying by how much they do not."""
    if len(prompt) == 0:
        raise ValueError("the prompt is empty: the loop needs at least one token to start from")
    needed = len(prompt) + new_tokens - 1  # the last new token is returned, never written to the cache
    if needed > max_cache_len:
        raise ValueError(f"the prompt ({len(prompt)} tokens) and {new_tokens} new tokens need {needed} cache slots; "
                         f"the program has {max_cache_len}: shorten the prompt to "
                         f"{max(0, max_cache_len - new_tokens + 1)} tokens or ask for at most "
                         f"{max(0, max_cache_len - len(prompt) + 1)} new tokens")


def cache_buffers(max_cache_len: int = MAX_CACHE_LEN) -> list[dict[str, Any]]:
    """The KV cache as the wrapped module holds it: one row per buffer (name, shape, dtype, bytes)."""
    step = DecodeStep(tiny_llama(), max_cache_len)
    return [{"buffer": name, "shape": tuple(b.shape), "dtype": str(b.dtype).removeprefix("torch."),
             "bytes": b.numel() * b.element_size()}
            for name, b in ((n.removeprefix("cached."), b) for n, b in step.named_buffers())
            if name.startswith(("key_cache_", "value_cache_", "cumulative_length_"))]


def kv_bytes(max_cache_len: int) -> int:
    """Bytes of keys and values for ``max_cache_len`` slots: 2 × layers × kv heads × head size × slots × 4."""
    head_dim = CONFIG["hidden_size"] // CONFIG["num_attention_heads"]
    return 2 * CONFIG["num_hidden_layers"] * CONFIG["num_key_value_heads"] * head_dim * max_cache_len * 4


def arena_by_cache_len(lengths: Sequence[int] = (16, 32, 64)) -> list[dict[str, Any]]:
    """For each ``max_cache_len``: the planned arena, the KV cache's own bytes and the ``.pte``'s size."""
    rows = []
    for n in lengths:
        art = lower_decode_step(n)
        rows.append({"max_cache_len": n, "arena bytes": art.planned_memory_bytes(), "KV cache bytes": kv_bytes(n),
                     ".pte bytes": art.nbytes})
    return rows


def largest_planned(artifact: PteArtifact, n: int = 8) -> list[dict[str, Any]]:
    """The ``n`` largest tensors of the method's memory plan (what made each, its shape and bytes), largest first."""
    rows = sorted(artifact.memory_plan(), key=lambda r: -r["bytes"])[:n]
    return [{"made by": r["made by"], "shape": tuple(r["shape"]), "bytes": r["bytes"]} for r in rows]


def time_per_token(artifact: PteArtifact, repeats: int = 50) -> dict[str, float]:
    """Milliseconds per decode step, median of ``repeats``: eager ``DecodeStep`` vs the runtime's call alone."""
    step = DecodeStep(tiny_llama())
    call = artifact.bare_call()
    ids, pos = torch.tensor([[7]]), torch.tensor([3])
    with torch.no_grad():
        eager_ms = _median_ms(lambda: step(ids, pos), repeats)
    return {"eager ms/token": eager_ms, ".pte ms/token": _median_ms(lambda: call([ids, pos]), repeats)}


STRATEGIES = ("token by token", "one prefill, Dim 1–32", "buckets 8, 16")
PREFILL_PROMPTS = (*PROMPTS, tuple(range(100, 114)))  # the lesson's three, and one of 14 tokens (bucket 16)


def strategy_program(strategy: str) -> PteArtifact:
    """The program of one of :data:`STRATEGIES` (the shared-cache programs for the prefill ones)."""
    if strategy == STRATEGIES[0]:
        return lower_decode_step()
    return lower_prefill_decode("dim" if strategy == STRATEGIES[1] else "buckets")


def strategy_tokens(strategy: str, prompt: Sequence[int], new_tokens: int = NEW_TOKENS) -> list[int]:
    """The new tokens the app's loop gets on the runtime with ``strategy``'s program."""
    program = strategy_program(strategy)
    if strategy == STRATEGIES[0]:
        return device_tokens(program, prompt, new_tokens)
    return prefill_then_decode(program, prompt, new_tokens)


def prefill_strategies() -> list[dict[str, Any]]:
    """Per strategy: its methods, the arena of its largest method (what an app with one set of shared arenas
    holds: prefill and decode never run at once; the KV cache included), the prefill's delegated share, the
    ``.pte``'s size, and whether its tokens equal eager ``generate``'s on every prompt of :data:`PREFILL_PROMPTS`."""
    rows = []
    for strategy in STRATEGIES:
        program = strategy_program(strategy)
        prefills = [m for m in program.methods if m.startswith("prefill")] or ["forward"]
        sizes = {m: program._info(m)["planned_buffer_sizes"] for m in program.methods}
        rows.append({
            "strategy": strategy, "methods": ", ".join(program.methods),
            "arena bytes (largest method)": max(sum(s) for s in sizes.values()),
            "prefill delegated": f"{min(program.delegation(m).coverage for m in prefills):.0%}",
            ".pte bytes": program.nbytes,
            "tokens = eager": all(strategy_tokens(strategy, p) == eager_tokens(p) for p in PREFILL_PROMPTS)})
    return rows


def declined_only_by_dim() -> list[dict[str, str]]:
    """The partitioner's reasons for the ``Dim`` prefill's portable nodes that the bucket prefill does not have."""
    dim, buckets = lower_prefill_decode("dim"), lower_prefill_decode("buckets")
    static = {(d["op"], d["reason"]) for d in buckets.delegation(f"prefill_{max(BUCKETS)}").declined}
    return [d for d in dim.delegation("prefill").declined if (d["op"], d["reason"]) not in static]


def _median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Milliseconds per call of ``fn``, the median of ``repeats`` after one call to warm up."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[len(samples) // 2] * 1000


def _first_token_calls(n: int) -> list[tuple[int, Callable[[], Any]]]:
    """Per strategy, the runtime calls that take a prompt of ``n`` tokens to its first new token's logits."""
    ids = list(range(1, n + 1))
    steps = [[torch.tensor([[t]]), torch.tensor([i])] for i, t in enumerate(ids)]
    decode = lower_decode_step().bare_call()
    dim = lower_prefill_decode("dim").bare_call("prefill")
    b = bucket_for(n)
    bucket = lower_prefill_decode("buckets").bare_call(f"prefill_{b}")
    whole, padded = [torch.tensor([ids]), torch.arange(n)], [torch.tensor([ids + [0] * (b - n)]), torch.arange(b)]
    return [(n, lambda: [decode(step) for step in steps]), (1, lambda: dim(whole)), (1, lambda: bucket(padded))]


def time_to_first_token(prompt_lengths: Sequence[int] = (3, 14), repeats: int = 21) -> list[dict[str, Any]]:
    """Milliseconds from the prompt to its first new token's logits, median of ``repeats``, the runtime's calls
    alone: token by token (one decode call per prompt token), the ``Dim`` prefill (one call), the bucket (one call
    of the padded prompt). One row per strategy, two columns per prompt length (calls, ms)."""
    rows: list[dict[str, Any]] = [{"strategy": s} for s in STRATEGIES]
    for n in prompt_lengths:
        for row, (count, fn) in zip(rows, _first_token_calls(n)):
            row[f"{n} tokens: calls"] = count
            row[f"{n} tokens: ms"] = _median_ms(fn, repeats)
    return rows


# ----- the ExecuTorch LLM runner -----------------------------------------------------------------------
# What ExecuTorch's text LLM runner reads from a program: methods without inputs that return a constant. It refuses a
# program without get_max_seq_len; the others have defaults (llm_runner_helper.cpp). enable_dynamic_shape False: it
# prefills one token per call of forward.
RUNNER_METADATA = {"get_max_seq_len": MAX_CACHE_LEN, "get_max_context_len": MAX_CACHE_LEN, "use_kv_cache": True,
                   "enable_dynamic_shape": False}


def lower_for_runner(seed: int = 0) -> PteArtifact:
    """The decode step as ``forward``, with :data:`RUNNER_METADATA` as constant methods, strict export, XNNPACK."""
    return _lowered(f"runner/{sorted(RUNNER_METADATA.items())}/{seed}", "forward", lambda: lowering.lower_methods(
        {"forward": (DecodeStep(tiny_llama(seed)), step_example())}, strict=True, constant_methods=RUNNER_METADATA,
        siblings=[lowering.ProgramOptions()]))  # the plain program (lower_decode_step) from the same lowering


def tokenizer_json() -> dict[str, Any]:
    """A tokenizer for the random-weight model, in Hugging Face's ``tokenizer.json`` format: token id i is the text
    ``t<i>`` (a BPE model without merges; the pre-tokenizer splits ``t5t17`` into ``t5``, ``t17``). Id 0 is the special
    ``<bos>``, which the runner's tokenizer also takes as the end of text."""
    vocab = {"<bos>": 0, **{f"t{i}": i for i in range(1, CONFIG["vocab_size"])}}
    return {"version": "1.0", "normalizer": None, "post_processor": None, "decoder": None,
            "added_tokens": [{"id": 0, "content": "<bos>", "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True}],
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "t[0-9]+"}, "behavior": "Isolated",
                              "invert": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                      "merges": []}}


def as_text(tokens: Sequence[int]) -> str:
    """Token ids as the tokenizer's text: [5, 17] → ``t5t17``."""
    return "".join(f"t{t}" for t in tokens)


@contextlib.contextmanager
def _c_output_to(sink: list[str]) -> Iterator[None]:
    """Send what C++ code writes to file descriptors 1 and 2 (the runner prints its tokens, statistics with
    timestamps, and its log there) into ``sink`` instead of the notebook."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            tmp.seek(0)
            sink.append(tmp.read().decode(errors="replace"))


def runner_tokens(program: PteArtifact, prompt: Sequence[int], new_tokens: int = NEW_TOKENS) -> list[int]:
    """Greedy generation by ExecuTorch's ``TextLLMRunner`` (``executorch.extension.llm.runner``) on ``program``,
    saved with :func:`tokenizer_json` to a temporary directory: the prompt as text, the new tokens back as ids.
    Raises :class:`RuntimeError` with the runner's own reasons (from its log) when it refuses the program."""
    pieces: list[str] = []
    log: list[str] = []
    with _c_output_to(log):  # its tokenizer library logs a line when the module is imported
        from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner
    with tempfile.TemporaryDirectory() as tmp:
        pte, tokenizer = Path(tmp) / "model.pte", Path(tmp) / "tokenizer.json"
        program.save(pte)
        tokenizer.write_text(json.dumps(tokenizer_json()))
        try:
            with _c_output_to(log):
                runner = TextLLMRunner(str(pte), str(tokenizer))
                config = GenerationConfig(max_new_tokens=new_tokens, temperature=0.0, num_bos=0, num_eos=0,
                                          echo=False)
                runner.generate(as_text(prompt), config, token_callback=pieces.append)
        except RuntimeError as exc:
            reasons = [line for line in runtime_log_lines(log[-1]) if "not found" in line or "ailed" in line]
            message = str(exc).replace(str(pte), pte.name)  # the temporary directory's name changes every run
            raise RuntimeError(f"{message}: {'; '.join(reasons) or 'the runner logged no reason'}") from None
        del runner
    return [int(t) for t in re.findall(r"t(\d+)", "".join(pieces))]


# ----- predictions ----------------------------------------------------------------------------------
def _tokens_match() -> Reveal:
    art = lower_decode_step()
    prompt = PROMPTS[0]
    eager, device = eager_tokens(prompt), device_tokens(art, prompt)
    same = sum(1 for a, b in zip(eager, device) if a == b)
    first_diff = next((i for i, (a, b) in enumerate(zip(eager, device)) if a != b), None)
    options = dict(zip(("all", "drift", "first"), TOKEN_OPTIONS))
    if first_diff is None:
        answer = options["all"]
    elif first_diff > 0:
        answer = options["drift"]
    else:
        answer = options["first"]
    reasons = {
        options["all"]: f"token {first_diff} differs: eager {eager}, .pte {device}",
        options["drift"]: ("no token drifts: the cache each call reads is the one the calls before it wrote"
                           if first_diff is None else f"the very first token differs: eager {eager[0]}, "
                                                      f".pte {device[0]}"),
        options["first"]: f"the first new token is {device[0]} in both",
    }
    return Reveal(answer, (
        f"eager {eager}\n.pte  {device}\n{same} of {NEW_TOKENS} equal. Each execute() wrote its token's keys and "
        "values into the cache buffers, and the next call read them: the buffers are the loaded method's memory "
        "and persist between its calls."), why_not={o: r for o, r in reasons.items() if o != answer})


def _slot_cost() -> Reveal:
    small, large = arena_by_cache_len((32, 64))
    growth = large["arena bytes"] - small["arena bytes"]
    kv_growth = large["KV cache bytes"] - small["KV cache bytes"]
    options = dict(zip(("nothing", "about", "several"), SLOT_OPTIONS))
    if growth == 0:
        answer = options["nothing"]
    elif growth < 1.5 * kv_growth:
        answer = options["about"]
    else:
        answer = options["several"]
    reasons = {
        options["nothing"]: f"the arena grew from {small['arena bytes']:,} to {large['arena bytes']:,} bytes",
        options["about"]: f"it grew by {growth:,} bytes, {growth / kv_growth:.1f}× the cache's own {kv_growth:,}",
        options["several"]: f"it grew by {growth:,} bytes, only {growth / kv_growth:.1f}× the cache's {kv_growth:,}",
    }
    return Reveal(answer, (
        f"32 slots: {small['arena bytes']:,} bytes of arena; 64 slots: {large['arena bytes']:,} (+{growth:,}); the "
        f"keys and values themselves: +{kv_growth:,}. The memory plan holds the cache, and also every tensor of a "
        "step whose size follows the cache's."), why_not={o: r for o, r in reasons.items() if o != answer})


def _int_position() -> Reveal:
    from helpers.artifact import RuntimeRejectedError

    program = lower_decode_step(step_class=IntPositionStep)
    prompt = PROMPTS[0]
    seen: list[int] = []

    def step(ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        seen.append(int(position))
        return program.run_raw(ids, int(position))[0]

    options = dict(zip(("same", "silent", "refused", "export"), INT_OPTIONS))
    refusal: RuntimeRejectedError | None = None
    try:
        tokens = greedy(step, prompt)
    except RuntimeRejectedError as exc:
        refusal = exc
        answer = options["refused"]
    else:
        answer = options["same"] if tokens == eager_tokens(prompt) else options["silent"]
    evidence = (f"the call at position {seen[-1]} was refused: {refusal.reason.rstrip('.')}" if refusal is not None
                else f"every call ran, positions 0 to {seen[-1]}")
    reasons = {
        options["same"]: f"not all calls ran: {evidence}",
        options["silent"]: f"nothing was silent: {evidence}",
        options["refused"]: evidence,
        options["export"]: "the export and lowering succeeded: the program loaded and its first call ran",
    }
    return Reveal(answer, (
        f"{evidence}. Export specialized the int: the program holds position 0 as a constant, and the ExecuTorch "
        "runtime checks that a non-tensor input has the value it was exported with, so the first call (position "
        "0) ran and the second was refused."), why_not={o: r for o, r in reasons.items() if o != answer})


# ----- 8. the export doctor on a decode step -------------------------------------------------------------
APP_VALUES = {"input_ids": (0, CONFIG["vocab_size"] - 1), "cache_position": (0, MAX_CACHE_LEN - 1)}


@functools.cache
def doctor_report(step_class: type[DecodeStep], app_values: bool) -> Any:
    """The export doctor (:func:`helpers.doctor.examine`) on a fresh ``step_class(tiny_llama())`` with the lesson's
    example (token 1 at position 0), exported and built as the exercise's check does (``strict=True``, the portable
    kernels). ``app_values``: its probes draw token ids and positions from :data:`APP_VALUES` (``value_ranges``)."""
    from helpers import doctor

    return doctor.examine(step_class(tiny_llama()), step_example(), backend=EXERCISE_BACKEND, strict_export=True,
                          value_ranges=APP_VALUES if app_values else None, target=step_class.__name__)


def doctor_line(report: Any) -> str:
    """The verdict and the two comparisons of a decode step's report, in one line each."""
    inside = report.inside_rows
    rows, first = report.sequence.rows if report.sequence is not None else [], report.first_call_apart
    in_a_row = (f"all {len(rows)} match" if first is None else
                f"call {first + 1} of {len(rows)} is the first to differ")
    return (f"{report.verdict.upper()} · one call at a time: {sum(r.status == 'match' for r in inside)} of "
            f"{len(inside)} probes match · calls in a row: {in_a_row}")


def _doctor_example_values() -> Reveal:
    report = doctor_report(AppStep, False)
    options = dict(zip(("pass", "probe", "row"), DOCTOR_OPTIONS))
    if report.failing_rows:
        answer = options["probe"]
    elif report.sequence is None or report.first_call_apart is not None:
        answer = options["row"]
    else:
        answer = options["pass"]
    tokens = sorted({int(v) for probe in report.probes if probe.args[0].numel() for v in probe.args[0].flatten()})
    evidence = doctor_line(report)
    reasons = {
        options["pass"]: f"it did not pass: {evidence}",
        options["probe"]: f"every probe matched one call at a time: {evidence}",
        options["row"]: f"the calls in a row matched too: {evidence}",
    }
    return Reveal(answer, (
        f"{evidence}. The doctor draws an integer input's values from the example's own, so every probe fed token "
        f"id{'s' if len(tokens) > 1 else ''} {', '.join(map(str, tokens))}. With the same token in every slot, "
        "attention returns that token's values whichever slots hold it, so whatever the counter did, eager and the "
        ".pte give the same logits."), why_not={o: r for o, r in reasons.items() if o != answer})


def cache_in_plan(program: PteArtifact) -> list[dict[str, Any]]:
    """Per method: where its memory plan puts the KV cache's key and value buffers (the arena, and each one's
    offset in it), as ``to_executorch()`` fixed them in the ``.pte``."""
    shape = (1, CONFIG["num_key_value_heads"], MAX_CACHE_LEN, CONFIG["hidden_size"] // CONFIG["num_attention_heads"])
    rows = []
    for method in program.methods:
        kv = [r for r in program.memory_plan(method) if r["made by"] == "copy_" and r["shape"] == shape]
        rows.append({"method": method, "buffers": len(kv), "arena": sorted({r["arena"] for r in kv}),
                     "offsets": [r["offset"] for r in kv]})
    return rows


def _shared_cache() -> Reveal:
    from helpers.artifact import RuntimeRejectedError

    program = lower_prefill_decode("dim", share_mutable_buffers=False)
    prompt = PROMPTS[0]
    eager = eager_tokens(prompt)
    options = dict(zip(("all", "first", "refused"), SHARED_OPTIONS))
    same: list[bool] = []
    try:
        device = prefill_then_decode(program, prompt)
    except RuntimeRejectedError as exc:
        answer, evidence = options["refused"], f"a call was refused: {exc.reason.rstrip('.')}"
    else:
        same = [a == b for a, b in zip(eager, device)]
        answer = options["all"] if all(same) else options["first"] if same[0] else ""
        evidence = f"eager {eager}\n.pte  {device}"
    places = {r["method"]: r["offsets"] for r in cache_in_plan(program)}
    reasons = {
        options["all"]: (f"{sum(same)} of {NEW_TOKENS} new tokens are the same as eager's: only the first, which "
                         "prefill's logits give" if same == [True] + [False] * (NEW_TOKENS - 1)
                         else f"{sum(same)} of {NEW_TOKENS} new tokens are the same as eager's" if same else evidence),
        options["first"]: "every token is the same" if same and all(same) else evidence,
        options["refused"]: "every call ran: decode's inputs are the ones it was exported with",
    }
    return Reveal(answer or f"none of the options: {evidence}", (
        f"{evidence}\nThe first token comes from prefill's logits; every later one from decode, which attended to "
        f"a cache prefill never wrote. Each method's memory plan has its own copy of the cache buffers: prefill's "
        f"at offsets {places['prefill']}, decode's at {places['decode']}."),
        why_not={o: r for o, r in reasons.items() if o != answer})


def _prefill_arena() -> Reveal:
    dim, buckets = lower_prefill_decode("dim"), lower_prefill_decode("buckets")
    arenas = {"Dim": dim.planned_memory_bytes("prefill"), "16": buckets.planned_memory_bytes("prefill_16"),
              "8": buckets.planned_memory_bytes("prefill_8")}
    options = dict(zip(("Dim", "16", "same"), ARENA_OPTIONS))
    largest = max(arenas.values())
    winners = [k for k, v in arenas.items() if v == largest]
    answer = options["same"] if len(winners) == len(arenas) else options.get(winners[0], "")
    table = ", ".join(f"{m}: {arenas[k]:,} bytes" for k, m in (("Dim", "prefill (Dim 1–32)"),
                                                                ("16", "prefill_16"), ("8", "prefill_8")))
    reasons = {
        options["Dim"]: f"it is not the largest: {table}",
        options["16"]: f"prefill_16 is not the largest: {table}",
        options["same"]: f"they differ: {table}",
    }
    return Reveal(answer or f"none of the options: {table}", (
        f"{table}. A method with a bounded Dim is planned for its largest input, 32 tokens, whatever the prompt "
        "the app passes; a bucket's method is planned for its own size."),
        why_not={o: r for o, r in reasons.items() if o != answer})


def _runner_plain() -> Reveal:
    prompt = PROMPTS[0]
    eager = eager_tokens(prompt)
    options = dict(zip(("same", "different", "refused"), RUNNER_OPTIONS))
    try:
        tokens = runner_tokens(lower_decode_step(), prompt)
    except RuntimeError as exc:
        answer, evidence = options["refused"], f"the runner refused it: {exc}"
        reasons = {options["same"]: f"it generated nothing: {exc}",
                   options["different"]: "it did not get as far as a token: it read the program's metadata first"}
    else:
        answer = options["same"] if tokens == eager else options["different"]
        evidence = f"generate {eager}, runner {tokens}"
        reasons = {o: evidence for o in options.values() if o != answer}
        reasons[options["refused"]] = f"it ran: {evidence}"
    return Reveal(answer, (
        f"{evidence}. The runner takes its settings from the program (methods that return a constant), and "
        "get_max_seq_len is the one it cannot do without."), why_not={o: r for o, r in reasons.items() if o != answer})


RUNNER_OPTIONS = ("the same tokens as generate", "different tokens", "it refuses the program")
SHARED_OPTIONS = (f"all {NEW_TOKENS} the same as eager", "the first the same, then different",
                  "decode's first call is refused")
ARENA_OPTIONS = ("prefill (Dim 1–32)", "prefill_16", "all the same: the arena holds the cache")
INT_OPTIONS = ("the same tokens as eager", "different tokens, silently", "the runtime refuses a call",
               "the export fails")
SLOT_OPTIONS = ("nothing: the cache is not in the arena", "about the cache's own 16 KB",
                "several times the cache's own 16 KB")
TOKEN_OPTIONS = (f"all {NEW_TOKENS} the same", "the first the same, then they drift apart",
                 "different from the first token")
DOCTOR_OPTIONS = ("PASS", "FAIL: a probe differs from eager, one call at a time",
                  "FAIL: calls one after another differ from eager")
QUESTIONS = [
    Question("13.doctor_example_values", LESSON,
             "The export doctor examines AppStep, the teammate's step of the exercise, with the lesson's example "
             "(token 1 at position 0), exported and built as the exercise's check does. It compares the .pte with "
             "eager on its probes one call at a time from the initial state, then on the same probes in calls one "
             "after another. Its verdict:",
             DOCTOR_OPTIONS, _doctor_example_values),
    Question("13.runner_plain", LESSON,
             "ExecuTorch's TextLLMRunner is given the decode program of section 4 (forward(input_ids, "
             "cache_position), the KV cache inside), a tokenizer file, and the prompt t5t17t42, greedy:",
             RUNNER_OPTIONS, _runner_plain),
    Question("13.shared_cache", LESSON,
             "One program, two methods of the same DecodeStep, so of the same cache buffers: prefill (the prompt, 1 to "
             "32 tokens: a bounded Dim) and decode (one token), built with to_executorch()'s defaults. The app "
             f"prefills {list(PROMPTS[0])} in one call, then decodes one token per call. The {NEW_TOKENS} new "
             "tokens, compared with eager greedy generation:",
             SHARED_OPTIONS, _shared_cache),
    Question("13.prefill_arena", LESSON,
             "Two ways to give prefill a shape the device can plan: one method whose prompt length is a Dim from 1 "
             "to 32, or one method per bucket, prefill_8 and prefill_16 (the prompt padded up to its bucket). "
             "Which of these methods plans the largest arena?",
             ARENA_OPTIONS, _prefill_arena),
    Question("13.slot_cost", LESSON,
             f"Each cache slot holds keys and values for 2 layers × 2 heads × 16 floats: {kv_bytes(1)} bytes. The same "
             "program built for 64 slots instead of 32 adds 32 slots, 16 KB of cache. By how much does the arena grow?",
             SLOT_OPTIONS, _slot_cost),
    Question("13.int_position", LESSON,
             "IntPositionStep takes the position as a Python int, as the app's loop counter is; exported with "
             "position 0, lowered, and run by the same loop (prompt, then new tokens) on the runtime:",
             INT_OPTIONS, _int_position),
    Question("13.tokens_match", LESSON,
             f"The app runs the .pte one token per execute() call: the prompt {list(PROMPTS[0])}, then {NEW_TOKENS} "
             "new tokens, each the most likely next one. The KV cache is inside the program. Compared with eager "
             "greedy generation, the new tokens are:",
             TOKEN_OPTIONS, _tokens_match),
]

# ----- exercise ---------------------------------------------------------------------------------------
class AppStep(DecodeStep):
    """A teammate's decode step: it numbers the tokens itself, so that no caller can pass a wrong position."""

    def __init__(self, model: LlamaForCausalLM, max_cache_len: int = MAX_CACHE_LEN) -> None:
        super().__init__(model, max_cache_len)
        self.next_position = 0

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        position = torch.arange(input_ids.shape[1]) + self.next_position
        self.next_position += input_ids.shape[1]
        return self.cached(input_ids=input_ids, cache_position=position)


# The check's prompts: none is one of the lesson's; the 21-token one fills the cache with its 12 new tokens.
CHECK_PROMPTS = ((9, 200, 31, 77), tuple(range(40, 61)), (3,), (250, 1, 128, 64, 32, 16, 8))


def _first_difference(got: Sequence[int], want: Sequence[int]) -> int:
    return next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)


def _answer_fingerprint(answer: type) -> str | None:
    """A key for "the same answer as before": each class the answer adds over :class:`AppStep` (its name, its
    bases, the source of each of its functions) and what the names those functions read from their module stand
    for. ``None`` (no shortcut: the check exports again) when any of it cannot be read or described."""
    _DESCRIBING.add(answer)
    try:
        return _fingerprint_parts(answer)
    finally:
        _DESCRIBING.discard(answer)


_DESCRIBING: set[type] = set()


def _fingerprint_parts(answer: type) -> str | None:
    parts: list[str] = [EXERCISE_BACKEND]
    for klass in answer.__mro__:
        if klass in (AppStep, DecodeStep, nn.Module, object) or klass.__module__.split(".")[0] in ("torch",
                                                                                                 "transformers"):
            continue
        parts.append(f"class {klass.__qualname__}({', '.join(b.__qualname__ for b in klass.__bases__)})")
        for name, value in sorted(vars(klass).items()):
            if name in _CLASS_BOOKKEEPING:
                continue
            if not inspect.isfunction(value):
                described = _describe_global(value)
                if described is None:
                    return None
                parts.append(f"{name}={described}")
                continue
            try:
                parts.append(inspect.getsource(value))
            except (OSError, TypeError):
                return None
            cells = [c.cell_contents for c in value.__closure__ or ()]
            values = [value.__globals__.get(n, _MISSING) for n in sorted(_global_names(value.__code__))] + cells
            described_all = [_describe_global(v) for v in values]
            if any(d is None for d in described_all):
                return None
            parts.extend(f"{n}={d}" for n, d in zip(sorted(_global_names(value.__code__)) + ["cell"] * len(cells),
                                                     described_all))
    return "answer/" + hashlib.sha256("\0".join(parts).encode()).hexdigest()


_CLASS_BOOKKEEPING = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__",
                      "__static_attributes__", "__annotations__"}
_MISSING = object()


def _global_names(code: Any) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _global_names(const)
    return names


def _describe_global(value: Any) -> str | None:
    if value is _MISSING:
        return "-"  # an attribute name, or a builtin
    if isinstance(value, type(sys)):
        return f"module {value.__name__}"
    if isinstance(value, (bool, int, float, str, bytes, type(None))) or (
            isinstance(value, tuple) and all(isinstance(v, (bool, int, float, str)) for v in value)):
        return repr(value)
    if isinstance(value, torch.Tensor):
        try:
            return f"tensor {hashlib.sha256(value.detach().cpu().contiguous().numpy().tobytes()).hexdigest()}"
        except (TypeError, RuntimeError):  # a dtype numpy does not have
            return None
    if inspect.isclass(value) or inspect.isfunction(value):
        if value.__module__ == __name__ or value.__module__.split(".")[0] in ("torch", "transformers", "builtins"):
            return f"{value.__module__}.{value.__qualname__}"
        if inspect.isfunction(value):
            try:
                return inspect.getsource(value)
            except (OSError, TypeError):
                return None
        if value in _DESCRIBING:  # a class that names itself (super(S, self)): described where it started
            return f"class {value.__qualname__}"
        return _answer_fingerprint(value)  # a class of the learner's: described the same way
    return None


def _one_thread(grade: Callable[[Any], list[Verdict]]) -> Callable[[Any], list[Verdict]]:
    """``grade`` with one torch thread: the eager steps of a model this small gain nothing from two, and beside
    another busy process (a CI worker) two threads made a check 2–3× slower."""
    @functools.wraps(grade)
    def graded(answer: Any) -> list[Verdict]:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return grade(answer)
        finally:
            torch.set_num_threads(threads)

    return graded


@_one_thread
def _grade_position(answer: Any) -> list[Verdict]:
    from helpers.artifact import RuntimeRejectedError

    criterion = "a step class, built as answer(tiny_llama())"
    if not (isinstance(answer, type) and issubclass(answer, nn.Module)):
        what = f"an instance of {type(answer).__name__}" if isinstance(answer, nn.Module) else type(answer).__name__
        return [Verdict(criterion, False, f"got {what}",
                        "assign the class itself (answer = YourStep), not an instance: the check builds a fresh "
                        "one for every prompt, as the app starts a new conversation")]
    try:
        answer(tiny_llama())
    except Exception as exc:  # noqa: BLE001 - the learner's constructor
        return [Verdict(criterion, False, f"answer(tiny_llama()) raised {type(exc).__name__}: {exc}",
                        "keep AppStep's constructor: (model, max_cache_len=MAX_CACHE_LEN)")]
    verdicts = [Verdict(criterion, True, answer.__name__)]
    for number, prompt in enumerate(CHECK_PROMPTS, 1):
        step = answer(tiny_llama())  # a new conversation: a fresh step, as the teammate tested it
        try:
            with torch.no_grad():
                tokens = greedy(step, prompt)
        except Exception as exc:  # noqa: BLE001 - the learner's forward
            verdicts.append(Verdict("eager, it gives generate's tokens", False,
                                    f"on prompt {number} ({len(prompt)} tokens) your step raised "
                                    f"{type(exc).__name__}: {exc}"))
            return verdicts
        if tokens != eager_tokens(prompt):
            k = _first_difference(tokens, eager_tokens(prompt))
            verdicts.append(Verdict(
                "eager, it gives generate's tokens", False,
                f"on prompt {number} ({len(prompt)} tokens), eager, new token {k + 1} of {NEW_TOKENS} differs from "
                "generate's", "the step writes the tokens it is given at the slots the app names and must read "
                "them back as generate does, for prompts as long as the cache allows"))
            return verdicts
    verdicts.append(Verdict("eager, it gives generate's tokens", True, f"{len(CHECK_PROMPTS)} prompts"))
    fingerprint = _answer_fingerprint(answer)  # None: no shortcut, the check exports again
    with torch.no_grad():
        program, verdict = lowered(answer(tiny_llama()), step_example(), strict=True, backend=EXERCISE_BACKEND,
                                   criterion="exports (strict), lowers and loads",
                                   recipe=_recipe(fingerprint) if fingerprint else None,
                                   hint="export reads the step's forward once: keep it to tensor operations on its "
                                        "inputs and buffers")
    verdicts.append(verdict)
    if program is None:
        return verdicts
    for number, prompt in enumerate(CHECK_PROMPTS, 1):  # one loaded program for every conversation, as on a phone
        positions: list[int] = []

        def run(ids: torch.Tensor, pos: torch.Tensor, seen: list[int] = positions) -> torch.Tensor:
            seen.append(int(pos[0]))
            return program.run_raw(ids, pos)[0]

        try:
            tokens = greedy(run, prompt)
        except RuntimeRejectedError as exc:
            verdicts.append(Verdict("the .pte gives eager's tokens, conversation after conversation", False,
                                    f"on prompt {number} ({len(prompt)} tokens) the runtime refused the call at "
                                    f"position {positions[-1]}: {exc.reason}"))
            return verdicts
        if tokens != eager_tokens(prompt):
            k = _first_difference(tokens, eager_tokens(prompt))
            verdicts.append(Verdict(
                "the .pte gives eager's tokens, conversation after conversation", False,
                f"on prompt {number} ({len(prompt)} tokens; the app passed positions 0 to {positions[-1]}), the "
                f".pte's new token {k + 1} of {NEW_TOKENS} differs from eager's, with no error",
                "export ran forward once, on the example (one token at position 0): what in your step is a Python "
                "value, or state kept between calls, rather than an input of the program?"))
            return verdicts
    verdicts.append(Verdict("the .pte gives eager's tokens, conversation after conversation", True,
                            f"{len(CHECK_PROMPTS)} prompts in a row on one loaded program"))
    return verdicts


def solve_position() -> Any:
    """13.position: the step writes at the positions the app passes, an input of the program."""
    class PositionedStep(lm.AppStep):
        def forward(self, input_ids, cache_position):
            return self.cached(input_ids=input_ids, cache_position=cache_position)


    return PositionedStep


# ----- exercise 13.plan: a cache and prompt buckets for a day of prompts ------------------------------
# A day of the product's prompts: how many had each length, in tokens (1,000 prompts, every one answered with
# NEW_TOKENS new tokens). Short prompts are common, long ones rare; none is longer than 20 tokens.
DAY_OF_PROMPTS: dict[int, int] = {n: count for first, last, count in
                                  ((1, 4, 120), (5, 8, 80), (9, 12, 30), (13, 16, 15), (17, 20, 5))
                                  for n in range(first, last + 1)}
ARENA_BUDGET = 128 * 1024  # bytes of planned memory the phone gives the program's largest method, KV cache included
MAX_PREFILLS = 2  # prefill methods the team allows in the .pte (each is another graph in it)
PADDING_LIMIT = 5.0  # padded prompt tokens per prompt, on average over the day: work whose result no token reads


def day_table() -> list[dict[str, Any]]:
    """:data:`DAY_OF_PROMPTS` as rows, lengths with the same count on one row."""
    rows: list[dict[str, Any]] = []
    for n, count in sorted(DAY_OF_PROMPTS.items()):
        if rows and rows[-1]["prompts of each length"] == count and rows[-1]["last"] == n - 1:
            rows[-1]["last"] = n
        else:
            rows.append({"first": n, "last": n, "prompts of each length": count})
    return [{"prompt tokens": f"{r['first']}–{r['last']}", "prompts of each length": r["prompts of each length"]}
            for r in rows]


def mean_padding(buckets: Sequence[int]) -> float:
    """Padding tokens per prompt, on average over :data:`DAY_OF_PROMPTS`, when each prompt is padded to the
    smallest bucket that holds it (:func:`bucket_for`). :class:`ValueError` if a prompt of the day fits none."""
    total = sum((bucket_for(n, buckets) - n) * count for n, count in DAY_OF_PROMPTS.items())
    return total / sum(DAY_OF_PROMPTS.values())


def plan_problems(max_cache_len: int, buckets: Sequence[int]) -> dict[str, tuple[str, str]]:
    """What the app's host checks and the team's rules refuse in a plan, before anything is built: for each rule,
    by name, ``(criterion, what is wrong)``, ``""`` where the plan keeps it (the padding rule only when every
    prompt of the day has a bucket)."""
    refused = [n for n in DAY_OF_PROMPTS if n > max(buckets)]
    too_big = [b for b in buckets if b > max_cache_len]
    unfit = [n for n in DAY_OF_PROMPTS if n + NEW_TOKENS - 1 > max_cache_len]  # the last new token is not written
    problems = {
        "methods": (f"at most {MAX_PREFILLS} prefill methods",
                    f"{len(buckets)} buckets, {len(buckets)} prefill methods" if len(buckets) > MAX_PREFILLS else ""),
        "bucket_for": ("every prompt of the day fits a bucket (the app's bucket_for)",
                       f"the app refuses the day's {sum(DAY_OF_PROMPTS[n] for n in refused)} prompts of "
                       f"{_lengths(refused)} tokens: no bucket holds them" if refused else ""),
        "bucket_in_cache": ("every bucket fits the cache",
                            "; ".join(f"prefill_{b} writes {b} slots of a {max_cache_len}-slot cache"
                                      for b in too_big)),
        "check_fits": (f"every prompt of the day and its {NEW_TOKENS} new tokens fit the cache (the app's check_fits)",
                       f"the app's host check refuses the day's {sum(DAY_OF_PROMPTS[n] for n in unfit)} prompts of "
                       f"{_lengths(unfit)} tokens: with their new tokens they need more than {max_cache_len} slots"
                       if unfit else ""),
        "cache_budget": ("the KV cache alone fits the arena budget",
                         f"{max_cache_len} slots of keys and values are {kv_bytes(max_cache_len):,} bytes, over the "
                         f"budget of {ARENA_BUDGET:,}" if kv_bytes(max_cache_len) > ARENA_BUDGET else ""),
    }
    if not refused:  # padding is counted over prompts that have a bucket
        padding = mean_padding(buckets)
        problems["padding"] = (f"at most {PADDING_LIMIT:g} padding tokens per prompt over the day",
                               f"{padding:.2f} padding tokens per prompt" if padding > PADDING_LIMIT else "")
    return problems


# Why a rule refuses, without the number that would keep it: the hint beside a broken rule.
_PLAN_HINTS = {
    "methods": "each bucket is a prefill method of its own",
    "bucket_for": "the largest bucket sets which prompts the app can take",
    "bucket_in_cache": "a prefill writes its whole bucket, padding included, into the cache",
    "check_fits": "a prompt and its answer share the cache: count the slots up to the last one written",
    "cache_budget": "every slot costs arena: size the cache for the day's prompts and their answers",
    "padding": "where most prompts are, a bucket close above them pads them least",
}
# What makes a plan's program meaningless to build and measure.
_UNBUILDABLE = ("bucket_for", "bucket_in_cache", "cache_budget")


def _lengths(lengths: Sequence[int]) -> str:
    """``[17, 18, 19, 20]`` → ``"17–20"``; a single length as itself; gaps as a list."""
    ordered = sorted(lengths)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}–{ordered[-1]}"
    return ", ".join(str(n) for n in ordered)


def plan_program(max_cache_len: int, buckets: Sequence[int]) -> PteArtifact:
    """A plan's program: ``prefill_<b>`` for each bucket and ``decode``, all writing one KV cache of
    ``max_cache_len`` slots (``share_mutable_buffers``), strict export, portable kernels (:data:`EXERCISE_BACKEND`),
    cached by recipe. Built cold it takes about 4 s per method on this machine's CPU."""
    buckets = tuple(sorted(set(buckets)))
    return _lowered(f"plan/{max_cache_len}/{buckets}/{EXERCISE_BACKEND}",
                    "+".join([*(f"prefill_{b}" for b in buckets), "decode"]),
                    lambda: lowering.lower_methods(
                        prefill_methods(DecodeStep(tiny_llama(), max_cache_len), "buckets", buckets=buckets),
                        strict=True, backend=EXERCISE_BACKEND, share_mutable_buffers=True))


class PlanCost:
    """What a plan costs, measured on its program (:func:`measure_plan`, which keeps it as ``program``): each
    method's planned arena, the largest against :data:`ARENA_BUDGET`, and the day's mean padding against :data:`PADDING_LIMIT`."""

    def __init__(self, max_cache_len: int, buckets: tuple[int, ...], program: PteArtifact) -> None:
        self.max_cache_len, self.buckets, self.program = max_cache_len, buckets, program
        self.arenas = {m: program.planned_memory_bytes(m) for m in program.methods}
        self.mean_padding = mean_padding(buckets)

    @property
    def largest(self) -> tuple[str, int]:
        """The method with the largest arena, and its bytes: what the app's shared arenas must hold."""
        method = max(self.arenas, key=lambda m: self.arenas[m])
        return method, self.arenas[method]

    def __repr__(self) -> str:
        method, size = self.largest
        lines = [f"plan: max_cache_len {self.max_cache_len}, buckets {self.buckets}"]
        lines += [f"  {m:<12} {b:>9,} bytes planned" for m, b in self.arenas.items()]
        lines.append(f"  largest: {method}, {size:,} bytes; budget {ARENA_BUDGET:,}: "
                     f"{'within' if size <= ARENA_BUDGET else 'OVER'}")
        lines.append(f"  padding over the day: {self.mean_padding:.2f} tokens per prompt; limit {PADDING_LIMIT:g}: "
                     f"{'within' if self.mean_padding <= PADDING_LIMIT else 'OVER'}")
        lines.append(f"  prefill methods: {len(self.buckets)}; limit {MAX_PREFILLS}")
        return "\n".join(lines)


def measure_plan(max_cache_len: int, buckets: Sequence[int]) -> PlanCost:
    """Build a plan's program (:func:`plan_program`: the one the check of exercise 13.plan builds, about 4 s per
    method the first time, then cached) and measure it. :class:`ValueError` for a plan with nothing to measure: a
    day's prompt that fits no bucket, a bucket larger than the cache, a cache over the budget by itself."""
    max_cache_len, buckets = _plan_of({"max_cache_len": max_cache_len, "buckets": buckets})
    problems = plan_problems(max_cache_len, buckets)
    refusals = [problems[name][1] for name in _UNBUILDABLE if problems[name][1]]
    if refusals:
        raise ValueError("; ".join(refusals))
    return PlanCost(max_cache_len, buckets, plan_program(max_cache_len, buckets))


PLAN_FORM = "a plan: {'max_cache_len': int, 'buckets': (int, ...)}"


def _plan_of(answer: Any) -> tuple[int, tuple[int, ...]]:
    """The plan's ``max_cache_len`` and sorted, distinct buckets; :class:`ValueError` saying what is malformed."""
    if not isinstance(answer, dict) or set(answer) != {"max_cache_len", "buckets"}:
        got = f"a dict with keys {sorted(map(str, answer))}" if isinstance(answer, dict) else type(answer).__name__
        raise ValueError(f"got {got}")
    n, buckets = answer["max_cache_len"], answer["buckets"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"max_cache_len is {n!r}: a number of slots, a positive int")
    if isinstance(buckets, (str, bytes)) or not isinstance(buckets, (tuple, list, set, frozenset)) or not buckets:
        raise ValueError(f"buckets is {buckets!r}: one or more prompt lengths, a tuple of positive ints")
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in buckets):
        raise ValueError(f"buckets is {buckets!r}: every bucket is a prompt length, a positive int")
    return n, tuple(sorted(set(buckets)))


def check_prompts(buckets: Sequence[int]) -> list[tuple[int, ...]]:
    """The prompts the check feeds a plan's program, one conversation after another: for each bucket, the day's
    shortest and longest prompt it takes (the most padding, and none), with token ids no lesson cell shows."""
    g = torch.Generator().manual_seed(13)
    lengths: list[int] = []
    below = 0
    for b in sorted(buckets):
        taken = [n for n in DAY_OF_PROMPTS if below < n <= b]
        lengths += sorted({min(taken), max(taken)}) if taken else []
        below = b
    return [tuple(int(t) for t in torch.randint(0, CONFIG["vocab_size"], (n,), generator=g)) for n in lengths]


@_one_thread
def _grade_plan(answer: Any) -> list[Verdict]:
    try:
        max_cache_len, buckets = _plan_of(answer)
    except ValueError as exc:
        return [Verdict(PLAN_FORM, False, str(exc), "max_cache_len is the cache's slots; buckets the prompt lengths "
                        "that get a prefill method of their own")]
    verdicts = [Verdict(PLAN_FORM, True, f"max_cache_len {max_cache_len}, buckets {buckets}")]
    verdicts += [Verdict(criterion, not problem, problem, _PLAN_HINTS[name] if problem else "")
                 for name, (criterion, problem) in plan_problems(max_cache_len, buckets).items()]
    if any(not v.passed for v in verdicts):
        return verdicts
    criterion = f"builds (portable), its largest method's arena within {ARENA_BUDGET:,} bytes"
    cost = measure_plan(max_cache_len, buckets)
    method, size = cost.largest
    if size > ARENA_BUDGET:
        return [*verdicts, Verdict(criterion, False, f"{method} plans {size:,} bytes",
                                   "every slot of the cache and every token of a bucket costs arena in each method "
                                   "that holds them: measure candidates with lm.measure_plan")]
    verdicts.append(Verdict(criterion, True, f"{method} plans {size:,} bytes"))
    program = cost.program
    prompts = check_prompts(buckets)
    criterion = "the .pte gives eager's tokens, conversation after conversation"
    for number, prompt in enumerate(prompts, 1):
        tokens = prefill_then_decode(program, prompt)
        if tokens != eager_tokens(prompt):
            k = _first_difference(tokens, eager_tokens(prompt))
            return [*verdicts, Verdict(criterion, False, f"on prompt {number} ({len(prompt)} tokens), the .pte's "
                                       f"new token {k + 1} of {NEW_TOKENS} differs from eager's")]
    return [*verdicts, Verdict(criterion, True, f"{len(prompts)} prompts of the day's lengths in a row on one "
                               "loaded program")]


def solve_plan() -> Any:
    """13.plan: the cache holds the longest prompt and its answer; two buckets, one above the common short prompts."""
    # the longest prompt, 20 tokens, and 12 new ones, the last never written back: 31 slots
    return {"max_cache_len": 31, "buckets": (8, 20)}


EXERCISE_BACKEND = "portable"
lm: Any = sys.modules[__name__]  # this module, as the lesson names it (course.lesson(13)): the solution reads as the cell
EXERCISES = [
    Exercise(
        id="13.position", lesson=LESSON, kind="step class",
        title="a decode step whose .pte follows the app's positions",
        goal=("Give a step class (built as answer(tiny_llama())) whose forward(input_ids, cache_position) gives, "
              "eager and as a .pte on the runtime, generate's tokens in the app's loop, for prompts the lesson did "
              "not show, one conversation after another on one loaded program."),
        grade=_grade_position, solve=solve_position,
        context=lambda: {**base_context(), "lm": lm, "DecodeStep": DecodeStep, "AppStep": AppStep}),
    Exercise(
        id="13.plan", lesson=LESSON, kind="plan (a dict)",
        title="a cache and prompt buckets for a day of prompts, under an arena budget",
        goal=(f"Give a plan {{'max_cache_len': int, 'buckets': (int, ...)}} whose program answers every prompt of "
              f"DAY_OF_PROMPTS with eager's tokens, with at most {MAX_PREFILLS} prefill methods, at most "
              f"{PADDING_LIMIT:g} padding tokens per prompt over the day and its largest method's planned arena "
              f"within {ARENA_BUDGET:,} bytes."),
        grade=_grade_plan, solve=solve_plan, context=lambda: {**base_context(), "lm": lm}),
]


# ----- interview cards ----------------------------------------------------------------------------------
CARDS = [
    Card(
        id="13.static_cache", lesson=LESSON, topic="language models on device", kind="conceptual",
        question="Why does a language model exported for ExecuTorch use a static KV cache, and what does its size cost?",
        answer=("The program's memory is planned before it runs: every tensor, the cache included, gets a fixed "
                "place in the arena, so the cache must have a fixed shape, max_cache_len slots. Export turns the "
                "cache into buffers the graph writes in place at cache_position; ExecuTorch plans them as mutable "
                "buffers, kept between the calls of a loaded method, so the app passes only the new token and its "
                "position. The cost is the arena: it grows linearly with max_cache_len, and by more than the keys "
                "and values themselves, because each step also holds copies of the cache in other layouts, such as "
                "the key/value heads repeated for grouped-query attention. So I size max_cache_len from the real "
                "prompt and answer lengths, read the planned arena, and check the tokens against eager generation."),
        points=("memory is planned ahead: the cache needs a fixed shape (max_cache_len)",
                "the cache is mutable buffers written in place at cache_position, kept between calls",
                "the arena grows linearly with max_cache_len, by more than the cache itself (copies per step)",
                "verify token by token against eager greedy generation"),
        follow_ups=(("What happens to a prompt plus answer longer than max_cache_len?",
                     "There is no slot for it. On this program in ExecuTorch 1.5.1 the call at position "
                     "max_cache_len fails: a portable kernel's bounds check refuses the index (Index 32 is out of "
                     "bounds for input dimension 2 with size 32) and execute returns an error, no token. So the app "
                     "stops or refuses on the host before that position, with its own message, and max_cache_len is "
                     "sized for the longest prompt plus answer the product allows."),)),
    Card(
        id="13.second_token_refused", lesson=LESSON, topic="language models on device", kind="diagnosis",
        held_back=True,
        question=("An on-device language model answers the first token, then every second call fails with "
                  "'The 1-th input of method should have the same value as the input_evalue, but got 0 and 1'. "
                  "What happened, and what is the fix?"),
        answer=("The decode step took its position as a Python int, the loop counter. Export specializes a Python "
                "int: the program holds the example's value, 0, as a constant, and the ExecuTorch runtime checks "
                "that a non-tensor input has the value it was exported with, so position 0 runs and position 1 is "
                "refused. Eager never complained because Python ran the int each time. The fix is to pass the "
                "position as a tensor, cache_position, which export keeps as an input; then I re-export and compare "
                "the runtime's tokens with eager greedy generation over whole sequences, several prompts."),
        points=("a Python int input is specialized by export: a constant in the program",
                "the runtime checks a non-tensor input against the exported value and refuses another",
                "fix: the position as a tensor input (cache_position), re-exported",
                "verify token by token against eager over whole sequences"),
        follow_ups=(
            ("Why did eager PyTorch give the right tokens with the same code?",
             "Eager runs forward's Python on every call, so the int is read anew each time and the cache slot "
             "follows it. Export runs forward once with the example and records only what happened, so the value "
             "the example had is all the program knows."),
            ("What if the app had passed the same int, 0, on every call instead?",
             "Then the runtime would accept every call and write every token into slot 0, attending to that slot "
             "only: no error, wrong tokens. Only a comparison with eager over whole sequences would show it, which "
             "is why the parity test feeds real prompts and answers, not one step."))),
    Card(
        id="13.prefill_state", lesson=LESSON, topic="language models on device", kind="diagnosis",
        held_back=True,
        question=("Your on-device language model has a prefill method for the prompt and a decode method for each new "
                  "token, in one .pte. The first new token is right; every later one is wrong, and nothing reports an "
                  "error. What do you suspect, and how do you fix it?"),
        answer=("That the two methods do not share the KV cache. The cache is mutable buffers, and ExecuTorch's memory "
                "planner plans each method on its own, so by default each method holds its own copy: prefill writes "
                "its copy, and its own logits give the first token, but decode attends to a copy nobody wrote. Both "
                "have the right shape, so nothing fails. The fix is in to_executorch: MemoryPlanningPass with "
                "share_mutable_buffers=True gives buffers of the same name one place, in an arena of their own that "
                "every method's plan lists, and the app's Module must share its arenas between methods "
                "(share_memory_arenas in the C++ Module). I check it in the plan, the same offsets in both methods, "
                "and by comparing the runtime's tokens with eager generation over whole answers."),
        points=("mutable buffers are planned per method: by default each method has its own cache",
                "the first token comes from prefill's own logits; decode reads a cache nobody wrote, silently",
                "fix: MemoryPlanningPass(share_mutable_buffers=True), and shared arenas in the app's Module",
                "verify: the same offsets in both plans, tokens equal to eager over whole answers"),
        follow_ups=(
            ("Why is the first token still right?",
             "It is read from the logits of prefill's last prompt position, and prefill computed them with its own "
             "copy of the cache, which it had just written. Only decode's calls read the other copy, so the error "
             "starts at the second new token."),
            ("What if you used a prefill with a bounded Dim instead of prompt buckets?",
             "It shares the cache the same way, but it is planned for its largest prompt: on the lesson's tiny Llama "
             "its arena was 119,168 bytes against 86,272 for a 16-token bucket, and XNNPACK "
             "delegated less of it, because its partitioner keeps a slice with a symbolic size on portable kernels. "
             "Buckets cost a method each and padding; I measure both."))),
    Card(
        id="13.prefill_cost", lesson=LESSON, topic="language models on device", kind="trade-off",
        held_back=True,
        question=("Your on-device language model decodes fast, but the wait for its first token grows with the length "
                  "of the prompt. Why, and what would you change? What does each option cost?"),
        answer=("The app feeds the prompt through the decode step one token per call, so a prompt of n tokens costs n "
                "runtime calls before the first new token. A prefill method takes the whole prompt in one call and "
                "writes all its keys and values at once. There are two ways to export it. One method with a bounded "
                "Dim for the prompt length is planned for its largest prompt and partly falls back to portable "
                "kernels (XNNPACK's partitioner declines, among others, a slice of symbolic size): on the lesson's "
                "tiny Llama its arena was 119,168 bytes and 49 % of its nodes were delegated, against 59,136 "
                "bytes for the decode step. Prompt buckets are one static method per bucket, the prompt padded to "
                "the next bucket: 86,272 bytes for the 16-token bucket and 61 % delegated, but a method each in the "
                ".pte and wasted work on the padding. Either way prefill and decode must share the KV cache, and I "
                "check the tokens against eager generation over whole answers before measuring the time to the first "
                "token."),
        points=("token by token: n runtime calls before the first token",
                "a prefill method takes the prompt in one call",
                "a bounded Dim: one method, planned for its largest prompt, less delegated",
                "buckets: a static method each, padding, best delegation, a larger .pte",
                "prefill and decode share the cache; tokens checked against eager"),
        follow_ups=(
            ("Why does padding a prompt to its bucket not change the answer?",
             "The padding's keys and values are written to the slots after the prompt, where the causal mask hides "
             "them from every prompt token, and the first decode step writes its own token into the first of those "
             "slots. On the lesson's model the tokens equal eager's for prompts of 1, 8, 9 and 16 tokens."),
            ("What if a prompt is longer than the largest bucket?",
             "No method takes it, so the app has to refuse it on the host with its own message, or the product has "
             "to add a larger bucket and pay its arena and its method. The lesson's bucket program refuses a "
             "21-token prompt on the host; the Dim prefill takes it, as its bound allows."))),
    Card(
        id="13.arena_per_slot", lesson=LESSON, topic="language models on device", kind="constraints",
        held_back=True,
        question=("Your phone gives the language model a fixed memory budget. How do you choose max_cache_len, and "
                  "what does one more slot cost?"),
        answer=("A slot holds keys and values for every layer: 2 × layers × key/value heads × head size × bytes per "
                "element. But the arena grows by more than that per slot, because each step also plans tensors whose "
                "size follows the cache, such as the key/value heads repeated for grouped-query attention and the "
                "transposed keys; on a tiny Llama it was 1,828 bytes of arena per slot for 512 bytes of cache. So I "
                "build the program for two cache sizes, read the planned arena of each, fit the line, and choose the "
                "largest max_cache_len under the budget that covers the prompt plus answer lengths the product "
                "allows; the app refuses longer requests on the host."),
        points=("a slot's own bytes: 2 × layers × kv heads × head size × element size",
                "the arena grows by several times that: per-step copies whose size follows the cache",
                "measure the planned arena for two sizes and fit, do not compute from the cache alone",
                "cover the product's prompt + answer lengths; refuse longer ones on the host"),
        follow_ups=(
            ("Why is the growth linear in max_cache_len and not fixed?",
             "Every tensor of a step that spans the cache's positions, the cache itself, its repeated heads, the "
             "attention scores over all slots, is planned at its full static size, so each of them grows with the "
             "number of slots, and the planner can reuse memory between them only where their lifetimes allow."),
            ("What if the prompts are long but answers short, or the other way round?",
             "The cache must hold prompt plus answer, so what matters is the longest sum the product allows. With "
             "long prompts a separate prefill method or prompt buckets change the cost of the prompt, not the "
             "cache's size; I measure the arena of each method as well as the cache's."))),
]
