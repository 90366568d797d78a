"""A zoo of real architectures at toy size, for the export doctor: BERT, GPT-2, ResNet, ViT, ConvNeXt, a GRU, and a
Llama with a static KV cache.

Each builder makes the model from a small config (``transformers`` classes, 2 layers, hidden size 32)
with seeded random weights, in ``eval()`` mode, and never downloads anything. Each one is wrapped so
that ``forward()`` takes plain tensors by name and returns one tensor (not a ``ModelOutput`` or a
``DynamicCache``, which are not pytree types export can return).

:data:`ZOO` describes, per entry, the ``--example`` and ``--dim`` arguments of ``python -m
helpers.doctor`` (:meth:`ZooModel.command`), and the verdict it reaches with them (measured with
torch 2.13 / transformers 5.24 / executorch 1.5.1):

============  ============================================  =======  ===============================================
entry         dynamic axes                                  verdict  why
============  ============================================  =======  ===============================================
bert          input_ids, attention_mask: seq 2..64 shared   pass     ids stay inside the word vocabulary
gpt2          input_ids: seq 2..64                          pass     causal decoder, logits out (no KV cache)
resnet        pixel_values: height, width 32..128           pass     fully convolutional: every size works
vit           pixel_values: height, width 16..64            fail     the patch embedding checks the image size:
                                                                     export specializes both to 32
vit_static    (none, 32×32)                                 pass     the fix torch suggests: height = width = 32
convnext      pixel_values: height, width 32..128           pass     convolutions and per-pixel LayerNorms
gru           x: frames 2..64                               fail     nn.GRU specializes its sequence length
gru_batch     x: batch 1..8                                 pass     a dynamic batch works
llama         input_ids, cache_position: seq 1..16 shared   pass     the cache is state the program writes: probes
                                                                     start from it empty, then run in a row
============  ============================================  =======  ===============================================

``llama`` is a spec (``--spec helpers.zoo:llama_spec``): ``transformers``' static-cache wrapper exports only with
``strict=True``, which a spec can ask for and ``--example`` cannot; its entry also gives the values the app sends
(``--value-range``: token ids of the vocabulary; ``--positions``: a run of consecutive slots of the cache).

From Python: ``ZOO["bert"].prepared()`` gives the model, the example inputs and the dynamic shapes
exactly as the command builds them (the same seeded values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from .models import seeded

__all__ = ["ZooModel", "ZOO", "bert", "gpt2", "resnet", "vit", "convnext", "gru", "llama", "llama_spec",
           "TextEncoder", "TextDecoder", "ImageClassifier", "RecurrentTagger", "CachedDecoder"]

VOCAB = 99  # deliberately not a power of two: an id bound taken from the wrong embedding shows up
HIDDEN = 32
LAYERS = 2
HEADS = 2
POSITIONS = 64
CACHE_SLOTS = 32  # the Llama's static KV cache: prompt and generated tokens together


def _transformers(*names: str) -> list[Any]:
    """Classes from ``transformers``, imported with their noise swallowed: a model class pulls in torchao,
    which logs deprecation lines through torch's handler on the real stderr (and prints CUDA kernels it
    cannot load)."""
    import logging

    from ._quiet import captured_output, silence_library_noise_after_import

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with captured_output():
            import transformers

            found = [getattr(transformers, name) for name in names]
    finally:
        logging.disable(previous)
    silence_library_noise_after_import()  # only in a process that opted in to quiet output
    return found


class TextEncoder(nn.Module):
    """A BERT encoder: ``forward(input_ids, attention_mask)`` → the last hidden states ``[batch, seq, hidden]``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


class TextDecoder(nn.Module):
    """A GPT-2 language model without a KV cache: ``forward(input_ids)`` → logits ``[batch, seq, vocab]``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


class ImageClassifier(nn.Module):
    """A vision model: ``forward(pixel_values)`` → logits ``[batch, labels]``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values, return_dict=False)[0]


class RecurrentTagger(nn.Module):
    """A GRU over frames and a per-frame classifier: ``forward(x)`` with ``x`` ``[batch, frames, features]``."""

    def __init__(self, features: int = 8, hidden: int = 16, classes: int = 3, layers: int = 1):
        super().__init__()
        self.rnn = nn.GRU(features, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out)


class CachedDecoder(nn.Module):
    """A causal language model with a static KV cache (``transformers``' ExecuTorch wrapper,
    ``TorchExportableModuleWithStaticCache``): ``forward(input_ids, cache_position)`` writes the tokens' keys and
    values into the cache's slots from ``cache_position[0]`` on, one per token (see :func:`llama_spec`), and returns
    logits ``[1, seq, vocab]``. The cache is buffers the program writes and keeps between calls (lesson 13's
    ``DecodeStep`` is the same wrapper)."""

    def __init__(self, model: Any, max_cache_len: int = CACHE_SLOTS):  # a transformers PreTrainedModel
        super().__init__()
        from ._quiet import captured_output

        with captured_output():
            from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

            self.cached = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=max_cache_len)

    def forward(self, input_ids: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        return self.cached(input_ids=input_ids, cache_position=cache_position)


def bert(seed: int = 0) -> TextEncoder:
    """BERT (text encoder), 2 layers, hidden 32, vocabulary 99, 64 positions, random weights."""
    BertConfig, BertModel = _transformers("BertConfig", "BertModel")
    config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=2 * HIDDEN, max_position_embeddings=POSITIONS, type_vocab_size=2,
                        pad_token_id=0)
    with seeded(seed):
        return TextEncoder(BertModel(config, add_pooling_layer=False)).eval()


def gpt2(seed: int = 0) -> TextDecoder:
    """GPT-2 (text decoder), 2 layers, hidden 32, vocabulary 99, 64 positions, random weights, no KV cache."""
    GPT2Config, GPT2LMHeadModel = _transformers("GPT2Config", "GPT2LMHeadModel")
    config = GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=POSITIONS,
                        use_cache=False, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    with seeded(seed):
        return TextDecoder(GPT2LMHeadModel(config)).eval()


def resnet(seed: int = 0) -> ImageClassifier:
    """ResNet (CNN), two basic stages of 8 and 16 channels, 4 labels, random weights."""
    ResNetConfig, ResNetForImageClassification = _transformers("ResNetConfig", "ResNetForImageClassification")
    config = ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                          num_labels=4)
    with seeded(seed):
        return ImageClassifier(ResNetForImageClassification(config)).eval()


def vit(seed: int = 0) -> ImageClassifier:
    """ViT (vision transformer) for 32×32 images in 8×8 patches, 2 layers, hidden 32, 4 labels, random weights."""
    ViTConfig, ViTForImageClassification = _transformers("ViTConfig", "ViTForImageClassification")
    config = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                       num_attention_heads=HEADS, intermediate_size=2 * HIDDEN, num_labels=4)
    with seeded(seed):
        return ImageClassifier(ViTForImageClassification(config)).eval()


def convnext(seed: int = 0) -> ImageClassifier:
    """ConvNeXt (modern CNN), two stages of 8 and 16 channels, 4 labels, random weights."""
    ConvNextConfig, ConvNextForImageClassification = _transformers("ConvNextConfig",
                                                                 "ConvNextForImageClassification")
    config = ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, num_labels=4)
    with seeded(seed):
        return ImageClassifier(ConvNextForImageClassification(config)).eval()


def gru(seed: int = 0) -> RecurrentTagger:
    """A recurrent tagger: one ``torch.nn.GRU`` layer (8 → 16) and a linear head, random weights."""
    with seeded(seed):
        return RecurrentTagger().eval()


def llama(seed: int = 0) -> CachedDecoder:
    """Llama (decoder with a static KV cache of 32 slots), 2 layers, hidden 32, 2 query heads sharing 1 key/value head,
    vocabulary 99, random weights."""
    GenerationConfig, LlamaConfig, LlamaForCausalLM = _transformers("GenerationConfig", "LlamaConfig",
                                                                    "LlamaForCausalLM")
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=1, max_position_embeddings=POSITIONS)
    with seeded(seed):
        model = LlamaForCausalLM(config).eval()
    model.generation_config = GenerationConfig(use_cache=True, cache_implementation="static", eos_token_id=None)
    return CachedDecoder(model)


def llama_spec() -> dict[str, Any]:
    """The doctor's spec of :func:`llama`: a prompt of 1 to 16 tokens (one ``Dim`` for both inputs; the example: 4
    tokens at slots 0-3), exported with ``strict=True`` as the wrapper needs.

    In ``transformers`` 5.24 the wrapper writes a prompt's keys and values at consecutive slots from its *first*
    position (it sets the cache's ``cumulative_length`` to ``cache_position[0]``; ``StaticLayer.update`` writes at
    ``cumulative_length + arange(n)``): the first position plus the prompt's length must fit the 32 slots, which is
    why the entry gives ``cache_position`` as ``--positions`` (a run of consecutive slots from 0 to 31: a 16-token
    prompt starts at slot 16 at the latest) and not as ``--value-range``, whose values are drawn one by one (positions
    31, 31, 31, 31 raise ``index 32 is out of bounds`` in eager)."""
    seq = Dim("seq", min=1, max=16)
    return {"model": llama(), "args": (torch.arange(1, 5)[None], torch.arange(4)),
            "dynamic_shapes": {"input_ids": {1: seq}, "cache_position": {0: seq}}, "strict": True}


@dataclass(frozen=True)
class ZooModel:
    """One zoo entry: a builder of :mod:`helpers.zoo`, the doctor's arguments for it, and the verdict they reach."""

    name: str
    architecture: str
    factory: str
    examples: tuple[str, ...]
    dims: tuple[str, ...]
    expected: str
    story: str
    kind: str | None = None  # the diagnosis kind of an expected failure
    torch_suggests: tuple[str, ...] = ()  # torch's suggested fixes for an expected export failure
    spec: str | None = None  # a spec function of this module (--spec), instead of factory, examples and dims
    options: tuple[str, ...] = ()  # more arguments of the command (--value-range, --positions …)

    @property
    def target(self) -> str:
        return f"helpers.zoo:{self.spec or self.factory}"

    def argv(self, *extra: str) -> list[str]:
        """The arguments of ``python -m helpers.doctor`` for this entry (plus ``extra`` options)."""
        out = ["--spec", self.target] if self.spec else [self.target]
        for e in self.examples:
            out += ["--example", e]
        for d in self.dims:
            out += ["--dim", d]
        return out + list(self.options) + list(extra)

    def command(self, *extra: str) -> str:
        """The shell command that examines this entry."""
        return "python -m helpers.doctor " + " ".join(self.argv(*extra))

    def build(self) -> nn.Module:
        """A fresh model (same seed, same weights every time)."""
        return globals()[self.factory]()

    def prepared(self, *extra: str) -> Any:
        """Model, example inputs and dynamic shapes exactly as the command builds them (a
        :class:`helpers.doctor.Prepared`)."""
        from .doctor import prepare

        return prepare(self.argv(*extra))

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """The seeded example inputs the command builds (integer ids inside the right vocabulary)."""
        return self.prepared().example_args

    def dynamic_shapes(self) -> dict[str, dict[int, Any]] | None:
        """The ``dynamic_shapes`` for ``torch.export`` / :func:`helpers.lower` that the ``--dim`` flags declare."""
        return self.prepared().dynamic_shapes

    @property
    def dynamic_axes(self) -> list[str]:
        """The ``--dim`` declarations, ``INPUT:AXIS:NAME:MIN:MAX``."""
        return list(self.dims)


_HW = ("pixel_values:2:height:32:128", "pixel_values:3:width:32:128")

ZOO: dict[str, ZooModel] = {z.name: z for z in (
    ZooModel("bert", "BERT · text encoder", "bert", ("1x16:int64", "1x16:int64"),
             ("input_ids:1:seq:2:64", "attention_mask:1:seq:2:64"), "pass",
             "ids and mask share one Dim; the ids' bound is the vocabulary of the embedding that reads them, "
             "and the mask takes 0 and 1"),
    ZooModel("gpt2", "GPT-2 · text decoder", "gpt2", ("1x16:int64",), ("input_ids:1:seq:2:64",), "pass",
             "a causal language model without KV cache: logits for every position"),
    ZooModel("resnet", "ResNet · CNN", "resnet", ("1x3x64x64",), _HW, "pass",
             "convolutions and a global pool: any resolution in the range, fully delegated"),
    ZooModel("vit", "ViT · vision transformer", "vit", ("1x3x32x32",),
             ("pixel_values:2:height:16:64", "pixel_values:3:width:16:64"), "fail",
             "the patch embedding compares the image size with config.image_size: export specializes height and "
             "width to 32, and torch suggests making them static",
             kind="constraint_violation", torch_suggests=("height = 32", "width = 32")),
    ZooModel("vit_static", "ViT · vision transformer", "vit", ("1x3x32x32",), (), "pass",
             "the fix torch suggests: a static 32×32 input"),
    ZooModel("convnext", "ConvNeXt · CNN", "convnext", ("1x3x64x64",), _HW, "pass",
             "depthwise convolutions and LayerNorm over channels; XNNPACK declines a few operators and says why"),
    ZooModel("gru", "GRU · recurrent", "gru", ("1x10x8",), ("x:1:frames:2:64",), "fail",
             "torch.nn.GRU unrolls over the sequence when traced: export specializes the number of frames",
             kind="constraint_violation", torch_suggests=("frames = 10",)),
    ZooModel("gru_batch", "GRU · recurrent", "gru", ("2x10x8",), ("x:0:batch:1:8",), "pass",
             "a dynamic batch (the frames static) exports and matches eager"),
    ZooModel("llama", "Llama · decoder with a static KV cache", "llama", (), (), "pass",
             "a prompt of 1 to 16 tokens written into a 32-slot cache the program keeps: each probe starts from the "
             "empty cache, then the matching ones run one after another; token ids and positions as the app sends "
             "them", spec="llama_spec",
             options=("--value-range", f"input_ids=0:{VOCAB - 1}", "--positions",
                      f"cache_position=0:{CACHE_SLOTS - 1}")),
)}
