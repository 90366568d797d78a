"""The exercises of the lessons that live in ``helpers/lessons/NN_*`` (the registry, ``helpers.course``), each through
the real pipeline: starter fails, solution passes, plausible mistakes fail with useful feedback (see
exercise_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import course, exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "01.vectorize_loop": [
        WrongAnswer("the row weights forgotten", """
class Forgot(BatchLoop):
    def forward(self, x):
        return torch.tanh(self.item(x))
answer = Forgot()
""", ("on batch 2", "the reference")),
        WrongAnswer("a model that returns zeros (matches its own .pte)", """
class Zeros(BatchLoop):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("on batch 1", "the reference")),
        WrongAnswer("the class instead of an instance", "answer = BatchLoop", ("not an nn.Module instance",)),
    ],
    "02.triage": [
        WrongAnswer("the branch's edge moved (>= instead of >: an input whose mean is exactly 0)", """
class Edge(Triage):
    def forward(self, x):
        return torch.cond(x.mean() >= 0, self.bright, self.dark, (x,))
answer = Edge()
""", ("on dark side (x.mean() <= 0): zeros", "the reference")),
        WrongAnswer("only the bright branch kept (the dark side diverges)", """
class OneSide(Triage):
    def forward(self, x):
        return self.bright(x)
answer = OneSide()
""", ("on dark side (x.mean() <= 0)", "the reference")),
        WrongAnswer("the NaN check kept (export fails, data-dependent)", """
class KeepsCheck(Triage):
    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError("NaN in the input")
        return torch.cond(x.mean() > 0, self.bright, self.dark, (x,))
answer = KeepsCheck()
""", ("export failed", "data-dependent", "incidental")),
        WrongAnswer("zeros", """
class Zeros(Triage):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("on bright side (x.mean() > 0)", "the reference")),
    ],
    "03.cond_rewrite": [
        WrongAnswer("torch.where instead of a runtime branch", """
class WithWhere(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.where(h.sum() > 0, self.big2(torch.relu(self.big1(h))), -h * 0.5)
answer = WithWhere()
""", ("keeps a real runtime branch", "straight-line", "torch.where's trade")),
        WrongAnswer("the block computed before the cond, which only picks a result", """
class PicksOnly(Router):
    def forward(self, x):
        h = self.pre(x)
        heavy = self.big2(torch.relu(self.big1(h)))
        return torch.cond(h.sum() > 0, lambda h, heavy: heavy.clone(), lambda h, heavy: -h * 0.5, (h, heavy))
answer = PicksOnly()
""", ("runs inside a branch", "3 linear layers run in the main graph", "cond only chooses")),
        WrongAnswer("zeros from a real torch.cond", """
class Zeros(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: torch.zeros_like(h), lambda h: h * 0.0, (h,))
answer = Zeros()
""", ("the reference",)),
        WrongAnswer("the branch's edge moved (>= instead of >: h.sum() exactly 0)", """
class Edge(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() >= 0, lambda h: self.big2(torch.relu(self.big1(h))), lambda h: -h * 0.5, (h,))
answer = Edge()
""", ("on the edge, h.sum() == 0 exactly", "the edge (h.sum() == 0) #1", "compare what your predicate says")),
        WrongAnswer("branches swapped", """
class Swapped(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: -h * 0.5, lambda h: self.big2(torch.relu(self.big1(h))), (h,))
answer = Swapped()
""", ("on block side (h.sum() > 0)", "the reference", "which of your functions is which")),
        WrongAnswer("branches returning different shapes (torch's cond error quoted)", """
class Shapes(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: self.big2(torch.relu(self.big1(h))), lambda h: (-h * 0.5).sum(0),
                          (h,))
answer = Shapes()
""", ("export failed", "torch says", "expected same dim")),
        WrongAnswer("branches taking different operands (torch's cond error quoted)", """
class Operands(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: self.big2(torch.relu(self.big1(h))), lambda h, x: -h * 0.5, (h,))
answer = Operands()
""", ("export failed", "torch says", "Argument mismatch")),
    ],
    "04.where_rewrite": [
        WrongAnswer("the branch's edge moved (>= instead of >: an input whose sum is exactly 0)", """
class Edge(GatedProj):
    def forward(self, x):
        y = self.proj(x)
        return torch.where(x.sum() >= 0, torch.relu(y), y * 0.1)
answer = Edge()
""", ("on x.sum() <= 0: zeros", "the reference")),
        WrongAnswer("torch.cond (control flow, branches on portable kernels)", """
class WithCond(GatedProj):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: torch.relu(self.proj(x)), lambda x: self.proj(x) * 0.1, (x,))
answer = WithCond()
""", ("no control flow in the graph", "torch.cond", "portable kernels")),
        WrongAnswer("a per-element mask instead of the whole-input decision", """
class Mask(GatedProj):
    def forward(self, x):
        y = self.proj(x)
        return torch.where(x > 0, torch.relu(y), y * 0.1)
answer = Mask()
""", ("mixed signs", "the reference", "decides ONCE")),
        WrongAnswer("zeros", """
class Zeros(GatedProj):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("XNNPACK runs the projection", "not in the program at all")),
    ],
    "05.hoist": [
        WrongAnswer("the app's edge moved (>= instead of >: an input whose mean is exactly 0)", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
class B(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))
def pick(x):
    return "a" if float(x.mean()) >= 0 else "b"
answer = ({"a": A(), "b": B()}, pick)
""", ("on x.mean() <= 0: zeros", "the reference")),
        WrongAnswer("one method keeps the cond", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
def pick(x):
    return "a" if float(x.mean()) > 0 else "cond"
answer = ({"a": A(), "cond": CondLinear()}, pick)
""", ("method 'cond'", "keeps a torch.cond", "25% delegated")),
        WrongAnswer("the pick inverted", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
class B(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))
def pick(x):
    return "b" if float(x.mean()) > 0 else "a"
answer = ({"a": A(), "b": B()}, pick)
""", ("on x.mean() > 0", "the reference", "what pick returns")),
        WrongAnswer("a pick that names a method that does not exist", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
class B(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))
def pick(x):
    return "positive" if float(x.mean()) > 0 else "negative"
answer = ({"a": A(), "b": B()}, pick)
""", ("pick returned 'positive'", "not one of the methods")),
        WrongAnswer("a model instead of (methods, pick)", "answer = CondLinear()", ("a dict of methods and a pick",)),
    ],
    "06.read_signature": [
        WrongAnswer("only the first input", '''
from executorch.runtime import Runtime


def input_shapes(pte_path):
    program = Runtime.get().load_program(pte_path)
    meta = program.metadata("forward")
    return [tuple(meta.input_tensor_meta(0).sizes())]


answer = input_shapes
''', ("two_inputs.pte", "more than one input")),
        WrongAnswer("the lesson's shape, hard-coded", "answer = lambda path: [(1, 3, 64, 64)]",
                    ("two_inputs.pte", "not the shapes this file records")),
        WrongAnswer("the function called instead of passed", "answer = [(1, 3, 64, 64)]", ("is a list", "the function itself")),
    ],
    "07.bound_dim": [
        WrongAnswer("no max: ExecuTorch plans the example's 8 frames", 'answer = {"x": {1: Dim("frames", min=2)}}',
                    ("a clip of 23 frames", "planned capacity")),
        WrongAnswer("the lesson's range copied (2 to 16): the app's longer clips are refused",
                    'answer = {"x": {1: Dim("frames", min=2, max=16)}}', ("a clip of 23 frames", "above the Dim's max")),
        WrongAnswer("max=64: the arena is over-provisioned", 'answer = {"x": {1: Dim("frames", min=2, max=64)}}',
                    ("plans 64 frames", "where 24 frames need")),
        WrongAnswer("Dim.AUTO", 'answer = {"x": {1: Dim.AUTO}}', ("frames", "planned capacity")),
        WrongAnswer("min=5: the app's four-frame clips refused", 'answer = {"x": {1: Dim("frames", min=5, max=24)}}',
                    ("a clip of 4 frames", "below the Dim's minimum")),
        WrongAnswer("min=1: a one-frame clip inside the contract", 'answer = {"x": {1: Dim("frames", min=1, max=24)}}',
                    ("one-frame clip is inside your contract",)),
        WrongAnswer("the wrong argument name", 'answer = {"clip": {1: Dim("frames", min=2, max=24)}}', ("['x']",)),
    ],
    "07.derived_dim": [
        WrongAnswer("a derived Dim whose max stops at 32", 'answer = {"x": {1: 4 * Dim("chunks", min=2, max=8)}}',
                    ("T=36", "above the maximum")),
        WrongAnswer("Dim.AUTO", 'answer = {"x": {1: Dim.AUTO}}', ("T=36", "planned capacity")),
        WrongAnswer("a max far beyond every row the app sends", 'answer = {"x": {1: 4 * Dim("chunk", min=2, max=256)}}',
                    ("the memory plan holds T = 64, not more", "plans rows of T = 1024", "T = 68 passes")),
        WrongAnswer("one chunk too many (the edge just above the max)",
                    'answer = {"x": {1: 4 * Dim("chunk", min=2, max=17)}}', ("plans rows of T = 68", "T = 68 passes")),
    ],
    "08.arena_budget": [
        WrongAnswer("max 64: the 96×64 frame is refused", '''
answer = {"x": {2: Dim("height", min=32, max=64), 3: Dim("width", min=32, max=64)}}
''', ("96×64", "above the Dim's max")),
        WrongAnswer("one square max read off the lesson's table (96): the 64×112 frame is refused", '''
answer = {"x": {2: Dim("height", min=32, max=96), 3: Dim("width", min=32, max=96)}}
''', ("64×112", "above the Dim's max")),
        WrongAnswer("one square max large enough for both (112): over budget", '''
answer = {"x": {2: Dim("height", min=32, max=112), 3: Dim("width", min=32, max=112)}}
''', ("501,824", "over")),
        WrongAnswer("the axes swapped (height 112, width 96)", '''
answer = {"x": {2: Dim("height", min=32, max=112), 3: Dim("width", min=32, max=96)}}
''', ("64×112", "above the Dim's max")),
        WrongAnswer("a static export", "answer = None", ("a dynamic_shapes dict",)),
    ],
    "09.pick_buckets": [
        WrongAnswer("long requests refused", "answer = [128, 256]", ("43 of 400 requests", "largest bucket (256)")),
        WrongAnswer("powers of two: 29% padding", "answer = [64, 128, 256, 512]", ("29.0%",)),
        WrongAnswer("equal-count buckets", "answer = [64, 105, 176, 512]", ("36.0%",)),
        WrongAnswer("too many buckets", "answer = [32, 64, 96, 128, 192, 256, 384, 512]", ("you have 8",)),
        WrongAnswer("a string", 'answer = "96, 160, 256, 512"', ("string",)),
    ],
    "10.probe_set": [
        WrongAnswer("random values only (misses the min edge)", '''
def probes(example, dims):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(example.shape, generator=g) for _ in range(8)]


answer = probes
''', ("one_frame", "all match", "min and max")),
        WrongAnswer("the edges, but only positive values", '''
def probes(example, dims):
    out = [example.abs()]
    for axis, (lo, hi) in dims.items():
        for size in (lo, hi):
            shape = list(example.shape)
            shape[axis] = size
            out.append(torch.rand(shape))
    return out


answer = probes
''', ("'sign'", "all match", "signs")),
        WrongAnswer("only the minimum edge", '''
def probes(example, dims):
    out = [torch.randn(example.shape), -example.abs()]
    for axis, (lo, hi) in dims.items():
        shape = list(example.shape)
        shape[axis] = lo
        out.append(torch.randn(shape))
    return out


answer = probes
''', ("no_max", "max")),
    ],
    "11.gru_step": [
        WrongAnswer("the state passed back unchanged", """
class Frozen(RecurrentTagger):
    def forward(self, x_t, h):
        out, _ = self.rnn(x_t.unsqueeze(1), h)
        return self.head(out[:, 0]), h
answer = Frozen()
""", ("on 2 frames", "the reference")),
        WrongAnswer("the output alone (no state back)", """
class NoState(RecurrentTagger):
    def forward(self, x_t, h):
        out, _ = self.rnn(x_t.unsqueeze(1), h)
        return self.head(out[:, 0])
answer = NoState()
""", ("returns (output of this frame, next state)",)),
        WrongAnswer("the whole-sequence model itself", "answer = RecurrentTagger()", ("failed",)),
        WrongAnswer("zeros of the right shapes", """
class Zeros(RecurrentTagger):
    def forward(self, x_t, h):
        out, h_next = self.rnn(x_t.unsqueeze(1), h)
        return torch.zeros_like(self.head(out[:, 0])), torch.zeros_like(h_next)
answer = Zeros()
""", ("the reference",)),
    ],
    "12.wont_export": [
        WrongAnswer("the loudness branch deleted with the assertion", """
class NoBranch(FrameNormalizer):
    def forward(self, x):
        return self.dec(self.enc(x))
answer = NoBranch()
""", ("on loud frames", "the reference")),
        WrongAnswer("the assertion kept", """
class KeepsAssert(FrameNormalizer):
    def forward(self, x):
        assert not torch.isnan(x).any()
        h = self.enc(x)
        peak = h.abs().max()
        return self.dec(torch.where(peak > 1.0, h / peak, h))
answer = KeepsAssert()
""", ("export failed", "data-dependent")),
        WrongAnswer("clamping instead of scaling", """
class Clamps(FrameNormalizer):
    def forward(self, x):
        return self.dec(self.enc(x).clamp(-1.0, 1.0))
answer = Clamps()
""", ("on loud frames",)),
    ],
    "12.phone_disagrees": [
        WrongAnswer("only a static batch-1 method", """
model = BatchStatsClassifier()
answer = ({"single": (model, (torch.randn(1, 6),))}, lambda x: "single")
""", ("on batch 2", "refused")),
        WrongAnswer("the right methods, the pick inverted", """
model = BatchStatsClassifier()
methods = {"single": (model, (torch.randn(1, 6),)),
           "batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=2, max=8)}})}
answer = (methods, lambda x: "batch" if x.shape[0] == 1 else "single")
""", ("on batch 1",)),
        WrongAnswer("methods fitted to the batches the feedback named (1, 2, 3, 5, 8)", """
model = BatchStatsClassifier()
methods = {f"b{n}": (model, (torch.randn(n, 6),)) for n in (1, 2, 3, 5, 8)}
answer = (methods, lambda x: f"b{x.shape[0]}")
""", ("on batch 4", "pick() chose 'b4'")),
        WrongAnswer("right answers, but a batch method planned for 64 samples", """
model = BatchStatsClassifier()
methods = {"single": (model, (torch.randn(1, 6),)),
           "batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=2, max=64)}})}
answer = (methods, lambda x: "single" if x.shape[0] == 1 else "batch")
""", ("no method plans for more than 8 samples", "'batch' plans for 64 samples")),
        WrongAnswer("the shipped program renamed: one method, batch from 1", """
model = BatchStatsClassifier()
methods = {"batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=1, max=8)}})}
answer = (methods, lambda x: "batch")
""", ("on batch 1", "nan")),
    ],
    "12.camera_rejected": [
        WrongAnswer("stretching every frame to 96×96", """
def prepare(frame):
    return F.interpolate(frame, size=(96, 96), mode="bilinear", align_corners=False)
answer = prepare
""", ("became a 96×96 picture",)),
        WrongAnswer("a centre crop of the short side", """
def prepare(frame):
    _, _, h, w = frame.shape
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    crop = frame[:, :, top:top + side, left:left + side]
    return F.interpolate(crop, size=(96, 96), mode="bilinear", align_corners=False)
answer = prepare
""", ("became a 96×96 picture",)),
        WrongAnswer("the frame as it comes", "answer = lambda frame: frame", ("120×160 frame", "refused")),
    ],
    "13.position": [
        WrongAnswer("the Python counter kept, reset by an if on the position (a new conversation)", """
class Resets(lm.AppStep):
    def forward(self, input_ids, cache_position):
        if cache_position[0] == 0:
            self.next_position = 0
        return super().forward(input_ids, cache_position)
answer = Resets
""", ("exports (strict), lowers and loads", "export failed")),
        WrongAnswer("the counter kept as a buffer: state of the program, not the app's position", """
class BufferCounter(lm.AppStep):
    def __init__(self, model, max_cache_len=lm.MAX_CACHE_LEN):
        super().__init__(model, max_cache_len)
        self.register_buffer("counter", torch.zeros((), dtype=torch.long))
    def forward(self, input_ids, cache_position):
        position = torch.arange(input_ids.shape[1]) + self.counter
        self.counter.add_(input_ids.shape[1])
        return self.cached(input_ids=input_ids, cache_position=position)
answer = BufferCounter
""", ("on prompt 2", "the runtime refused the call")),
        WrongAnswer("every token at slot 0", """
class Zero(lm.AppStep):
    def forward(self, input_ids, cache_position):
        return self.cached(input_ids=input_ids, cache_position=torch.zeros_like(cache_position))
answer = Zero
""", ("eager, new token", "on prompt 1")),
        WrongAnswer("positions off by one (right shape, wrong slots)", """
class OffByOne(lm.AppStep):
    def forward(self, input_ids, cache_position):
        return self.cached(input_ids=input_ids, cache_position=cache_position + 1)
answer = OffByOne
""", ("eager, new token",)),
        WrongAnswer("fits the lesson's short prompts only (positions clamped below the cache's end)", """
class Clamped(lm.AppStep):
    def forward(self, input_ids, cache_position):
        return self.cached(input_ids=input_ids, cache_position=cache_position.clamp(max=15))
answer = Clamped
""", ("on prompt 2 (21 tokens), eager",)),
        WrongAnswer("zeros for logits", """
class Zeros(lm.AppStep):
    def forward(self, input_ids, cache_position):
        return torch.zeros(1, input_ids.shape[1], lm.CONFIG["vocab_size"])
answer = Zeros
""", ("eager, new token",)),
        WrongAnswer("an instance instead of the class", """
class Fixed(lm.AppStep):
    def forward(self, input_ids, cache_position):
        return self.cached(input_ids=input_ids, cache_position=cache_position)
answer = Fixed(lm.tiny_llama())
""", ("assign the class itself",)),
    ],
    "13.plan": [
        WrongAnswer("a cache one slot short of the longest prompt and its answer (the edge)", """
answer = {"max_cache_len": 30, "buckets": (8, 20)}
""", ("check_fits", "prompts of 20 tokens")),
        WrongAnswer("the largest bucket one short of the longest prompt (the edge)", """
answer = {"max_cache_len": 31, "buckets": (8, 19)}
""", ("prompts of 20 tokens: no bucket holds them",)),
        WrongAnswer("room to spare: a 40-slot cache (over the arena budget, found only by building it)", """
answer = {"max_cache_len": 40, "buckets": (8, 20)}
""", ("arena within", "prefill_20 plans")),
        WrongAnswer("beyond every bound: a cache of 1,000 slots", """
answer = {"max_cache_len": 1000, "buckets": (8, 20)}
""", ("KV cache alone", "512,000 bytes")),
        WrongAnswer("one bucket for every prompt", """
answer = {"max_cache_len": 31, "buckets": (20,)}
""", ("padding tokens per prompt",)),
        WrongAnswer("fits the day exactly: a bucket per length it shows", """
answer = {"max_cache_len": 31, "buckets": tuple(range(1, 21))}
""", ("20 prefill methods",)),
        WrongAnswer("a bucket larger than the cache (right shape, numbers swapped)", """
answer = {"max_cache_len": 20, "buckets": (8, 31)}
""", ("prefill_31 writes 31 slots of a 20-slot cache",)),
        WrongAnswer("zeros", """
answer = {"max_cache_len": 0, "buckets": (0,)}
""", ("max_cache_len is 0",)),
        WrongAnswer("the plan as a tuple", """
answer = (31, (8, 20))
""", ("got tuple",)),
        WrongAnswer("buckets as text", """
answer = {"max_cache_len": 31, "buckets": "8, 20"}
""", ("buckets is '8, 20'",)),
    ],
    "14.bound_positions": [
        WrongAnswer("the table's 16 rows as the bound (runs, but plans for prompts the app never sends)", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 16)
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)
answer = Bounded()
""", ("plans its output for 16 rows",)),
        WrongAnswer("a bound below the longest prompt (8)", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 8)
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)
answer = Bounded()
""", ("on n = 11", "refused", "maximum capacity")),
        WrongAnswer("a huge bound, to be safe (past the table's 16 rows: the slice's guard stays open)", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 100000)
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)
answer = Bounded()
""", ("lower failed",)),
        WrongAnswer("the lower bound only", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 1)
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)
answer = Bounded()
""", ("lower failed",)),
        WrongAnswer("n ignored: always the longest prompt's 12 rows", """
class Bounded(Positions):
    def forward(self, tokens, n):
        position = torch.arange(12, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:12]) + torch.sin(position)
answer = Bounded()
""", ("on n = 1 ", "the reference")),
        WrongAnswer("the right rows without the position code", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 12)
        return self.proj(tokens[:k])
answer = Bounded()
""", ("on n = 2 ", "the reference")),
        WrongAnswer("zeros of the right shape", """
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        torch._check(k >= 1)
        torch._check(k <= 12)
        return torch.zeros_like(tokens[:k])
answer = Bounded()
""", ("on n = 1 ", "the reference")),
        WrongAnswer("the class instead of an instance", """
class Bounded(Positions):
    pass
answer = Bounded
""", ("not an nn.Module instance",)),
    ],
    "15.stop_at_end": [
        WrongAnswer("Generate's own forward: a while on the token's value", """
class StopAtEnd(Generate):
    pass
answer = StopAtEnd()
""", ('export failed', 'data-dependent')),
        WrongAnswer('torch.while_loop (exports; ExecuTorch 1.5.1 does not write it)', """
class StopAtEnd(Generate):
    def forward(self, start):
        def going(i, token, tokens):
            return (token != END).all()

        def step(i, token, tokens):
            token = self.next_token(token).argmax(-1)
            tokens = torch.where(torch.arange(LONGEST) == i, token, tokens)
            return i + 1, token, tokens

        first = (torch.zeros((), dtype=torch.long), start, torch.full((LONGEST,), END))
        _, _, tokens = torch.while_loop(going, step, first)
        return tokens
answer = StopAtEnd()
""", ('lower failed', 'while_loop')),
        WrongAnswer('a cap one step short: 10 generated tokens, then END', """
class StopAtEnd(Generate):
    def forward(self, start):
        token, done, tokens = start, start == END, []
        for _ in range(10):
            token = torch.where(done, END, self.next_token(token).argmax(-1))
            tokens.append(token)
            done = done | (token == END)
        return torch.cat(tokens + [torch.full((2,), END)])
answer = StopAtEnd()
""", ('on start ', 'the reference')),
        WrongAnswer('12 steps with no mask: generation goes on after END', """
class StopAtEnd(Generate):
    def forward(self, start):
        token, tokens = start, []
        for _ in range(LONGEST):
            token = self.next_token(token).argmax(-1)
            tokens.append(token)
        return torch.cat(tokens)
answer = StopAtEnd()
""", ('on start ', 'the reference')),
        WrongAnswer('END everywhere (the right shape, no generation)', """
class StopAtEnd(Generate):
    def forward(self, start):
        return torch.full((LONGEST,), END) + 0 * start
answer = StopAtEnd()
""", ('on start 1 ', 'the reference')),
        WrongAnswer("this table's answers memorised (computed in eager, then looked up)", """
ANSWERS = torch.stack([Generate()(torch.tensor([t])) if t != END else torch.full((LONGEST,), END)
                       for t in range(16)])

class StopAtEnd(Generate):
    def forward(self, start):
        return ANSWERS.index_select(0, start)[0]
answer = StopAtEnd()
""", ('another table', 'the reference')),
        WrongAnswer('the class instead of an instance', """
class StopAtEnd(Generate):
    pass
answer = StopAtEnd
""", ('not an nn.Module instance',)),
    ],
    "16.nested_spec": [
        WrongAnswer('the prompt left out (a keyword argument is in dynamic_shapes too)', """
tokens = Dim("tokens", min=2, max=64)
batch = Dim("batch", min=1, max=4)
answer = {"batch": {"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}}}
""", ('top-level keys must be the arg names',)),
        WrongAnswer('one Dim per tensor for the token axis (tokens and mask hold the same tokens)', """
batch = Dim("batch", min=1, max=4)
answer = {"batch": {"tokens": {0: batch, 1: Dim("tokens", min=2, max=64)},
                    "mask": {0: batch, 1: Dim("mask_tokens", min=2, max=64)}},
          "prompt": {0: batch, 1: Dim("prompt_tokens", min=2, max=8)}}
""", ("export failed", "Constraints violated (mask_tokens)")),
        WrongAnswer("no Dim for the batch axis (the example's 2 sequences baked in)", """
tokens = Dim("tokens", min=2, max=64)
answer = {"batch": {"tokens": {1: tokens}, "mask": {1: tokens}}, "prompt": {1: Dim("prompt_tokens", min=2, max=8)}}
""", ('on batch 1', 'refused')),
        WrongAnswer('a token max below the longest sequence (32)', """
batch = Dim("batch", min=1, max=4)
tokens = Dim("tokens", min=2, max=32)
answer = {"batch": {"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}},
          "prompt": {0: batch, 1: Dim("prompt_tokens", min=2, max=8)}}
""", ('64 tokens', 'refused')),
        WrongAnswer('a token max far above what the app sends (512)', """
batch = Dim("batch", min=1, max=4)
tokens = Dim("tokens", min=2, max=512)
answer = {"batch": {"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}},
          "prompt": {0: batch, 1: Dim("prompt_tokens", min=2, max=8)}}
""", ('batch_tokens (4, 512, 8)',)),
        WrongAnswer("the prompt's length left static (the example's 4 tokens)", """
batch = Dim("batch", min=1, max=4)
tokens = Dim("tokens", min=2, max=64)
answer = {"batch": {"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}}, "prompt": {0: batch}}
""", ('a prompt of 2', 'refused')),
        WrongAnswer("one Dim for every length (the prompt's and the tokens' are different quantities)", """
batch = Dim("batch", min=1, max=4)
length = Dim("length", min=2, max=64)
answer = {"batch": {"tokens": {0: batch, 1: length}, "mask": {0: batch, 1: length}}, "prompt": {0: batch, 1: length}}
""", ('export failed',)),
        WrongAnswer('a Dim instead of the structure', """
answer = Dim("tokens", min=2, max=64)
""", ('the answer is a',)),
    ],
    "17.keep_state": [
        WrongAnswer("a buffer whose update is computed and never written back", """
class NoWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(SAMPLES))

    def forward(self, x):
        new = 0.8 * self.mean + 0.2 * x.mean(dim=0)
        return x - new
answer = NoWrite()
""", ("call 2", "RunningDenoise")),
        WrongAnswer("the buffer reset at the start of every call", """
class Reset(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(SAMPLES))

    def forward(self, x):
        self.mean.zero_()
        self.mean.copy_(0.8 * self.mean + 0.2 * x.mean(dim=0))
        return x - self.mean
answer = Reset()
""", ("call 2",)),
        WrongAnswer("the mean as a second input (the app calls forward(frame))", """
class TwoInputs(nn.Module):
    def forward(self, x, mean):
        return x - (0.8 * mean + 0.2 * x.mean(dim=0))
answer = TwoInputs()
""", ("export failed",)),
        WrongAnswer("right shape, wrong content: another decay", """
class OtherDecay(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(SAMPLES))

    def forward(self, x):
        self.mean.copy_(0.9 * self.mean + 0.1 * x.mean(dim=0))
        return x - self.mean
answer = OtherDecay()
""", ("call 1",)),
        WrongAnswer("fitted to the lesson's stream (one frame repeated): a call counter, mean = (1 - 0.8**k) x", """
class Fitted(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return x - (1 - 0.8 ** self.calls) * x.mean(dim=0)
answer = Fitted()
""", ("call 2",)),
        WrongAnswer("zeros", """
class Zeros(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("call 1",)),
        WrongAnswer("the class instead of an instance", """
class Later(RunningDenoise):
    pass
answer = Later
""", ("not an nn.Module instance",)),
    ],
    "18.median_loads": [
        WrongAnswer("torch.sort kept (the starter: it builds and does not load)", """
class Sorted(MedianFilter):
    def forward(self, windows):
        return torch.sort(windows, dim=-1).values[..., WINDOW // 2]
answer = Sorted()
""", ("load failed", "aten::sort.values")),
        WrongAnswer("torch.quantile (sorts inside: builds, does not load)", """
class Quantile(MedianFilter):
    def forward(self, windows):
        return torch.quantile(windows, 0.5, dim=-1)
answer = Quantile()
""", ("load failed", "aten::sort.values")),
        WrongAnswer("torch.median (not a core ATen operator: lowering fails)", """
class TorchMedian(MedianFilter):
    def forward(self, windows):
        return torch.median(windows, dim=-1).values
answer = TorchMedian()
""", ("failed",)),
        WrongAnswer("topk one short (the edge: the 4th largest of 9)", """
class OneShort(MedianFilter):
    def forward(self, windows):
        return torch.topk(windows, k=WINDOW // 2, dim=-1).values[..., -1]
answer = OneShort()
""", ("spiky sensor windows", "MedianFilter")),
        WrongAnswer("right shape, wrong content: the mean", """
class Mean(MedianFilter):
    def forward(self, windows):
        return windows.mean(dim=-1)
answer = Mean()
""", ("spiky sensor windows",)),
        WrongAnswer("the middle sample (right only when the window is already in order)", """
class Middle(MedianFilter):
    def forward(self, windows):
        return windows[..., WINDOW // 2]
answer = Middle()
""", ("spiky sensor windows",)),
        WrongAnswer("zeros", """
class Zeros(MedianFilter):
    def forward(self, windows):
        return torch.zeros(windows.shape[0])
answer = Zeros()
""", ("spiky sensor windows",)),
        WrongAnswer("the class instead of an instance", "answer = MedianFilter", ("not an nn.Module instance",)),
    ],
    "18.dead_pixels": [
        WrongAnswer("BlockMax unchanged (eager propagates the NaN, the kernels do not)", """
class Same(BlockMax):
    def forward(self, frame):
        return torch.nn.functional.max_pool2d(frame, 2)
answer = Same()
""", ("a dead pixel at (2, 2)",)),
        WrongAnswer("a dead pixel read as 0 (right on bright frames, wrong when every live pixel is negative)", """
class Zeroed(BlockMax):
    def forward(self, frame):
        return torch.nn.functional.max_pool2d(torch.nan_to_num(frame, nan=0.0), 2)
answer = Zeroed()
""", ("a dark frame",)),
        WrongAnswer("right shape, wrong content: the average of the live pixels", """
class Average(BlockMax):
    def forward(self, frame):
        return torch.nn.functional.avg_pool2d(torch.nan_to_num(frame, nan=0.0), 2)
answer = Average()
""", ("largest live pixel",)),
        WrongAnswer("zeros (the same in eager and in the .pte, and not the rule)", """
class Zeros(BlockMax):
    def forward(self, frame):
        return torch.zeros(1, 3, 4, 4)
answer = Zeros()
""", ("largest live pixel",)),
        WrongAnswer("the class instead of an instance", "answer = BlockMax", ("not an nn.Module instance",)),
    ],
}

TRACK = [e for item in course.lessons() for e in getattr(item.module, "EXERCISES", ())]


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_exercise_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG.get(exercise.id, []))


def test_every_lesson_exercise_has_wrong_answers():
    assert {e.id for e in TRACK} == set(WRONG)
    assert {e.id for e in TRACK} <= {e.id for e in exercises.catalog()}


@pytest.mark.parametrize("probes, side", [
    (course.lesson(2).triage_probes, lambda x: x.mean() > 0),
    (course.lesson(3).router_probes, lambda x: course.lesson(3).Router().pre(x).sum() > 0),
    (course.lesson(4).gate_probes, lambda x: x.sum() > 0),
    (course.lesson(5).hoist_probes, lambda x: x.mean() > 0),
], ids=["02.triage", "03.router", "04.gate", "05.hoist"])
def test_probe_sets_cover_both_sides_and_are_finite(probes, side):
    found = probes()
    with torch.no_grad():
        sides = [bool(side(*p.args)) for p in found]
    assert sides.count(True) >= 2 and sides.count(False) >= 2, sides
    assert all(torch.isfinite(p.args[0]).all() for p in found)
    # labels name the side, so feedback says which side failed
    assert all((">" in p.label) == s for p, s in zip(found, sides)), [p.label for p in found]


def test_gate_probes_include_mixed_signs_on_both_sides():
    mixed = [p for p in course.lesson(4).gate_probes() if "mixed signs" in p.label]
    assert len(mixed) == 2 and {bool(p.args[0].sum() > 0) for p in mixed} == {True, False}
    assert all((p.args[0] > 0).any() and (p.args[0] < 0).any() for p in mixed)


def test_read_signature_shows_no_true_shape_and_its_files_change_from_check_to_check(tmp_path):
    """06.read_signature: what the feedback prints cannot be memorised, and a lookup by file fails on the next check."""
    lesson = course.lesson(6)
    truths = []
    for i, variant in enumerate(lesson.SIGNATURE_VARIANTS):
        folder = tmp_path / str(i)
        folder.mkdir()
        truths.append({name: truth for name, (_, truth) in lesson._signature_files(folder, variant).items()})
    for name in truths[0]:
        assert len({str(t[name]) for t in truths}) == len(truths), name  # every file differs between checks
    exercise = exercises.get("06.read_signature")
    for guess in ([(1, 3, 64, 64)], [(1, 12), (1, 12)], [(7, 7)]):
        feedback = exercise.check(lambda path, guess=guess: guess).feedback
        shown = [str(shape) for t in truths for shapes in t.values() for shape in shapes if shape not in guess]
        assert not [s for s in shown if s in feedback], feedback  # only the learner's own answer is quoted
    table = truths[0]  # what one check's files recorded, looked up by file name on the next checks
    grades = [exercise.check(lambda path: table[Path(path).name]).passed for _ in lesson.SIGNATURE_VARIANTS]
    assert grades.count(True) <= 1, grades


def test_probe_set_is_graded_on_scenarios_the_learner_did_not_see():
    """10.probe_set: a probe list fitted to the scenarios one check names (their example sizes and bounds) fails the
    next checks, which draw other examples and bounds; probes that follow (example, dims) pass every check."""
    lesson = course.lesson(10)
    assert len({(s["example"].shape, str(s["dims"])) for v in lesson.PROBE_SET_VARIANTS
                for s in lesson._probe_scenarios(v)}) > len(lesson._probe_scenarios())

    def fitted(example, dims):  # what the first check's scenarios needed: 1, 2 and 15, 16 frames; a batch of 2
        g = torch.Generator().manual_seed(0)
        if example.dim() == 3:
            return [torch.randn(1, n, 4, generator=g) for n in (1, 2, 15, 16)]
        base = torch.randn(2, 4, generator=g)
        return [base, base.abs() + 0.1, -(base.abs() + 0.1)]

    exercise = exercises.get("10.probe_set")
    grades = [exercise.check(fitted) for _ in lesson.PROBE_SET_VARIANTS]
    assert sum(g.passed for g in grades) <= 1, [g.feedback for g in grades]
    assert all(exercise.check(exercise.solution).passed for _ in lesson.PROBE_SET_VARIANTS)


def test_measure_plan_reads_the_program_the_check_builds():
    """After the plan exercise's check (above, in this file's worker): the same program, its numbers and the day's
    padding counted prompt by prompt; a plan with nothing to measure is refused with the host's words."""
    lm = course.lesson(13)
    cost = lm.measure_plan(31, [20, 8, 8])  # any order, duplicates: one plan
    program = lm.plan_program(31, (8, 20))
    assert cost.buckets == (8, 20) and set(cost.arenas) == {"prefill_8", "prefill_20", "decode"}
    assert cost.arenas == {m: program.planned_memory_bytes(m) for m in program.methods}
    assert cost.largest == ("prefill_20", cost.arenas["prefill_20"]) and cost.largest[1] <= lm.ARENA_BUDGET
    prompts = [n for n, count in lm.DAY_OF_PROMPTS.items() for _ in range(count)]
    padded = [(8 if n <= 8 else 20) - n for n in prompts]
    assert cost.mean_padding == pytest.approx(sum(padded) / len(padded))
    assert "largest: prefill_20" in repr(cost) and "within" in repr(cost)
    with pytest.raises(ValueError, match="no bucket holds them"):
        lm.measure_plan(31, (8, 16))
    with pytest.raises(ValueError, match="prefill_32 writes 32 slots of a 31-slot cache"):
        lm.measure_plan(31, (8, 32))
    for shown in lm.PROMPTS:  # the check's prompts are none of the lesson's
        assert shown not in lm.check_prompts((8, 20))
    assert sorted(len(p) for p in lm.check_prompts((8, 20))) == [1, 8, 9, 20]  # each bucket's shortest and longest
