"""Core figures for the helpers library, in one run (a script, not a timed test).

    python benchmarks/bench_core.py

- cold ``lower`` (export + lowering + serialization + load, with an empty cache) vs cached
  ``lower`` from disk and from memory, and how much of a cached call is ``torch.export`` (the cache is
  keyed on the exported program, so every call exports: that is what soundness costs), for a small CNN
  and for BERT from ``helpers.zoo``;
- ``run`` (host contract check) vs ``run_raw`` per call;
- eager PyTorch vs the ``.pte`` (XNNPACK) latency for a small CNN.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(fn, repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    os.environ["EXPORTLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="exportlab-bench-")
    import torch

    import helpers
    from helpers import models
    from helpers.lowering import forget_in_memory

    helpers.set_progress(False)
    torch.set_num_threads(1)
    model = models.TinyVision()
    x = torch.randn(1, 3, 64, 64)
    helpers.lower(models.ConfigBranch(), (torch.randn(2, 4),))  # warm the imports, not this model

    cold = timed(lambda: helpers.lower(model, (x,)), 1)[0]
    forget_in_memory()
    disk = statistics.median(timed(lambda: (forget_in_memory(), helpers.lower(model, (x,))), 5))
    memory = statistics.median(timed(lambda: helpers.lower(model, (x,)), 50))
    export = statistics.median(timed(lambda: torch.export.export(model, (x,)), 20))
    art = helpers.lower(model, (x,))
    # What soundness costs: the cache key is the exported program, so every call exports. For a real model too:
    from helpers import zoo

    bert = zoo.ZOO["bert"].prepared()
    bert_cold = timed(lambda: helpers.lower(bert.model, bert.example_args, dynamic_shapes=bert.dynamic_shapes), 1)[0]
    bert_hit = statistics.median(timed(lambda: helpers.lower(bert.model, bert.example_args,
                                                             dynamic_shapes=bert.dynamic_shapes), 5))
    bert_export = statistics.median(timed(lambda: torch.export.export(bert.model, bert.example_args,
                                                                       dynamic_shapes=bert.dynamic_shapes), 5))

    for _ in range(20):
        art.run(x)
    run = statistics.median(timed(lambda: art.run(x), 200))
    raw = statistics.median(timed(lambda: art.run_raw(x), 200))
    with torch.no_grad():
        eager = statistics.median(timed(lambda: model(x), 200))

    print(f"lower, cold (export + lower + to_executorch + load): {cold:8.1f} ms")
    print(f"lower, cached on disk (export + key + read + load):  {disk:8.2f} ms   ({cold / disk:,.0f}x faster)")
    print(f"lower, cached in memory (export + key):              {memory:8.2f} ms   ({cold / memory:,.0f}x faster)")
    print(f"  of which torch.export alone (the price of a sound key): {export:8.2f} ms")
    print(f"BERT (zoo, seq 2..64): lower cold {bert_cold:8.1f} ms · cached {bert_hit:7.1f} ms · "
          f"torch.export alone {bert_export:7.1f} ms")
    print(f"run (contract check + runtime), per call:            {run:8.3f} ms")
    print(f"run_raw (runtime only), per call:                    {raw:8.3f} ms   (host check {run - raw:+.3f} ms)")
    print(f"TinyVision 1x3x64x64, eager PyTorch:                 {eager:8.3f} ms")
    print(f"TinyVision 1x3x64x64, .pte on XNNPACK (run_raw):     {raw:8.3f} ms   ({eager / raw:.1f}x eager speed)")
    print("(1 thread, median of repeated calls)")


if __name__ == "__main__":
    main()
