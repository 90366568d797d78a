"""Spec functions for ``export-doctor --spec`` (tests/test_doctor_spec.py): inputs as torch.export takes them."""

import torch
from torch import nn
from torch.export import Dim


class Tracker(nn.Module):
    """Keyword, nested and dict inputs; a dict output with a nested state."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.step = nn.Linear(4, 4)

    def forward(self, x, state, *, mask):
        h, c = state
        pooled = (x * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # mask: (batch, steps, 1)
        h = torch.tanh(self.step(pooled) + h * c)
        return {"y": h.sum(-1), "state": (h, c + h)}


def tracker():
    batch, steps = Dim("batch", min=1, max=8), Dim("steps", min=2, max=16)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, generator=g)
    state = (torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g))
    mask = (torch.rand(3, 5, 1, generator=g) > 0.3).float()
    return {"model": Tracker(), "args": (x, state), "kwargs": {"mask": mask},
            "dynamic_shapes": {"x": {0: batch, 1: steps}, "state": ({0: batch}, {0: batch}),
                               "mask": {0: batch, 1: steps}}}


class ChunkMean(nn.Module):
    """Lesson 07's guard: the time axis is read in chunks of 4."""

    def forward(self, x):
        b, t = x.shape
        return x.reshape(b, t // 4, 4).mean(-1)


def chunk_mean_derived():
    chunk = Dim("chunk", min=1, max=16)
    return {"model": ChunkMean(), "args": (torch.randn(2, 32),), "dynamic_shapes": {"x": {1: 4 * chunk}}}


def chunk_mean_plain():
    return {"model": ChunkMean(), "args": (torch.randn(2, 32),),
            "dynamic_shapes": {"x": {1: Dim("t", min=4, max=64)}}}


class Project(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(6, 3)

    def forward(self, x):
        return self.proj(x).relu()


def auto():
    """Dim.AUTO on both axes: export keeps the batch dynamic and makes the features static (the Linear needs 6)."""
    return {"model": Project(), "args": (torch.randn(4, 6),), "dynamic_shapes": ((Dim.AUTO, Dim.AUTO),)}


class Pool(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(4, 2)

    def forward(self, x):
        return self.proj(x).mean(dim=1)


def buckets():
    """Lesson 09's fix: one method per sequence bucket, static shapes, one program."""
    g = torch.Generator().manual_seed(0)
    model = Pool()
    return {"methods": {"short": {"model": model, "args": (torch.randn(1, 8, 4, generator=g),)},
                        "long": {"model": model, "args": (torch.randn(1, 32, 4, generator=g),)}}}


def buckets_and_a_chunked_method():
    """A program whose second method declares a plain Dim on lesson 07's chunked axis."""
    return {"methods": {"short": buckets()["methods"]["short"], "chunks": chunk_mean_plain()}}


class Counter(nn.Module):
    """Counts its calls in a buffer it writes (state kept between calls, like a KV cache) and scales the input by it."""

    def __init__(self, start: float = 0.0):
        super().__init__()
        self.register_buffer("calls", torch.full((1,), start))

    def forward(self, x):
        self.calls.add_(1)
        return x * self.calls


def counter():
    return {"model": Counter(), "args": (torch.randn(2, 4, generator=torch.Generator().manual_seed(0)),),
            "dynamic_shapes": {"x": {0: Dim("batch", min=1, max=8)}}}


def counter_from_one():
    """The same, its count starting at 1: a starting value the program does not carry."""
    return {**counter(), "model": Counter(1.0)}


SLOTS = 16


class SlotCache(nn.Module):
    """A KV cache in miniature: each call writes its vector into the slot at ``position`` (a buffer kept between
    calls) and returns the sum of the slots up to it, as attention reads the cache up to the current token."""

    def __init__(self):
        super().__init__()
        self.register_buffer("slots", torch.zeros(SLOTS, 4))

    def forward(self, x, position):  # x (1, 4), position (1,) int64
        self.slots.index_copy_(0, position, x)
        upto = (torch.arange(SLOTS) <= position).unsqueeze(-1)
        return (self.slots * upto).sum(0, keepdim=True)


class CountingSlotCache(SlotCache):
    """The same, numbering the calls itself in a Python attribute (lesson 13's AppStep does this): export reads the
    counter once, so the program writes every call into the slot it read."""

    def __init__(self):
        super().__init__()
        self.next_position = 0

    def forward(self, x, position):
        position = torch.tensor([self.next_position])
        self.next_position += 1
        return super().forward(x, position)


def slot_cache():
    return {"model": SlotCache(), "args": (torch.randn(1, 4, generator=torch.Generator().manual_seed(0)),
                                           torch.tensor([0]))}


def counting_slot_cache():
    return {**slot_cache(), "model": CountingSlotCache()}


class TokenCache(nn.Module):
    """The same with a token id for input, as a language model's decode step: each call writes the token's
    embedding at ``position`` and returns the mean of the slots written up to it (attention with equal weights)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(16, 4, generator=torch.Generator().manual_seed(0)))  # embeddings
        self.register_buffer("slots", torch.zeros(SLOTS, 4))

    def forward(self, token, position):  # token (1,) int64, position (1,) int64
        self.slots.index_copy_(0, position, nn.functional.embedding(token, self.table))
        upto = (torch.arange(SLOTS) <= position).unsqueeze(-1)
        return (self.slots * upto).sum(0, keepdim=True) / (position + 1)


class CountingTokenCache(TokenCache):
    """Numbering the calls itself, as lesson 13's AppStep: wrong after the first call, and invisible while every call
    feeds the same token (the mean of equal slots is that slot)."""

    def __init__(self):
        super().__init__()
        self.next_position = 0

    def forward(self, token, position):
        position = torch.tensor([self.next_position])
        self.next_position += 1
        return super().forward(token, position)


def counting_token_cache():
    return {"model": CountingTokenCache(), "args": (torch.tensor([1]), torch.tensor([0]))}


class PromptCache(nn.Module):
    """Prefill and decode in miniature: one module behind two methods, as one language model is. Each call writes
    its tokens' embeddings at their positions (a prompt of n tokens at once, or one token) and returns, for each
    token, scores over the 256 token ids from its embedding and the mean of the slots up to the last position:
    (n, 256), as a language model's logits."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(256, 64, generator=torch.Generator().manual_seed(0)) / 8)
        self.register_buffer("slots", torch.zeros(SLOTS, 64))

    def forward(self, tokens, positions):  # tokens (n,) int64, positions (n,) int64
        embedded = nn.functional.embedding(tokens, self.table)
        self.slots.index_copy_(0, positions, embedded)
        last = positions.max()
        context = (self.slots * (torch.arange(SLOTS) <= last).unsqueeze(-1)).sum(0) / (last + 1)
        return (embedded + context) @ self.table.T


def _prefill_and_decode(model: nn.Module, share: bool):
    """A program spec of two methods over one ``model(tokens, positions)``: ``prefill`` (2 to 8 tokens, the example
    4 at slots 0-3) and ``decode`` (one token at slot 4)."""
    n = Dim("n", min=2, max=8)
    return {"methods": {"prefill": {"model": model, "args": (torch.tensor([1, 2, 3, 4]), torch.arange(4)),
                                    "dynamic_shapes": {"tokens": {0: n}, "positions": {0: n}}},
                        "decode": {"model": model, "args": (torch.tensor([5]), torch.tensor([4]))}},
            "share_mutable_buffers": share}


def prefill_decode(share: bool = True):
    """A program of two methods over one PromptCache: ``prefill`` (2 to 8 tokens) and ``decode`` (one token)."""
    return _prefill_and_decode(PromptCache(), share)


def prefill_decode_separate():
    """The same program built with ExecuTorch's default: each method plans its own copy of ``slots``."""
    return prefill_decode(share=False)


class FirstSlotPrompt(nn.Module):
    """A prompt written as ``transformers``' static-cache wrapper writes it (lesson 13): its n tokens go to the n
    consecutive slots from its *first* position on, whatever the other positions say, so positions that do not run
    on from a start below ``SLOTS - n + 1`` ask for slots the cache does not have (eager raises ``IndexError``)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(64, 16, generator=torch.Generator().manual_seed(1)) / 4)
        self.register_buffer("slots", torch.zeros(SLOTS, 16))

    def forward(self, tokens, positions):  # tokens (n,) int64, positions (n,) int64
        embedded = nn.functional.embedding(tokens, self.table)
        written = positions[:1] + torch.arange(tokens.shape[0])
        self.slots.index_copy_(0, written, embedded)
        upto = (torch.arange(SLOTS) <= written[-1]).unsqueeze(-1)
        return (embedded + (self.slots * upto).sum(0)) @ self.table.T


def first_slot_prompt():
    """A prefill of 1 to ``SLOTS`` tokens into a FirstSlotPrompt."""
    n = Dim("n", min=1, max=SLOTS)
    return {"model": FirstSlotPrompt(), "args": (torch.tensor([1, 2, 3, 4]), torch.arange(4)),
            "dynamic_shapes": {"tokens": {0: n}, "positions": {0: n}}}


class SlotMean(nn.Module):
    """Prefill and decode in miniature, small enough that ExecuTorch's planner puts ``slots`` at the same offset of
    arena 1 in both methods' separate plans: 4 numbers per slot, each token's embedding plus the mean of the slots."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(256, 4, generator=torch.Generator().manual_seed(0)))
        self.register_buffer("slots", torch.zeros(SLOTS, 4))

    def forward(self, tokens, positions):  # tokens (n,) int64, positions (n,) int64
        embedded = nn.functional.embedding(tokens, self.table)
        self.slots.index_copy_(0, positions, embedded)
        return embedded + self.slots.mean(0)


def slot_mean(share: bool = False):
    """A program of two methods over one SlotMean (``prefill``: 2 to 8 tokens, ``decode``: one), built with
    ExecuTorch's default (each method plans its own ``slots``) unless ``share``."""
    return _prefill_and_decode(SlotMean(), share)


def slot_mean_shared():
    return slot_mean(share=True)


class WordTable(nn.Module):
    """A table of constants two models read and neither writes."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.randn(256, 8, generator=torch.Generator().manual_seed(2)))


class OwnSlots(nn.Module):
    """A model with a cache of its own, reading a shared WordTable."""

    def __init__(self, words: WordTable):
        super().__init__()
        self.words = words
        self.register_buffer("slots", torch.zeros(SLOTS, 8))

    def forward(self, tokens, positions):  # tokens (n,) int64, positions (n,) int64
        embedded = nn.functional.embedding(tokens, self.words.table)
        self.slots.index_copy_(0, positions, embedded)
        return embedded + self.slots.mean(0)


def own_slots_shared_table():
    """Two methods, each with its own cache, both reading one WordTable: nothing one writes, the other holds."""
    words = WordTable()
    return {"methods": {"prefill": {"model": OwnSlots(words), "args": (torch.tensor([1, 2, 3, 4]), torch.arange(4))},
                        "decode": {"model": OwnSlots(words), "args": (torch.tensor([5]), torch.tensor([4]))}}}
