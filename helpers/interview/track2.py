"""Interview cards of the shapes track (lessons 06–10).

Every answer states only what the lessons show on the real pipeline (torch 2.13, ExecuTorch 1.5.1,
XNNPACK); where a habit of the field is wrong for this stack (an unbounded ``Dim`` is *not* planned
conservatively), the card says what really happens. Each answer is about 30 seconds spoken.
"""

from __future__ import annotations

from . import Card

__all__ = ["CARDS"]

CARDS = [
    Card(
        id="06.static_reject", lesson="06_static_shapes", topic="static shapes and memory planning",
        kind="conceptual",
        question=("Why does an exported ExecuTorch model reject a different input size on the device?"),
        answer=("Export specializes by default: it runs forward() once and records the example's sizes as "
                "constants, so reshapes and broadcasts are fixed. That is deliberate: with every size known, "
                "to_executorch() plans one arena with a fixed offset per tensor, and the runtime's instructions "
                "run without allocating (a delegate like XNNPACK still allocates its packed weights and workspace "
                "when the method loads, outside the arena). The runtime compares each input with the shape and dtype in the .pte and refuses "
                "anything else; nothing resizes or recompiles on the phone. I read the .pte's MethodMeta to "
                "confirm, then normalize on the host, declare a bounded Dim, or ship buckets."),
        points=("the example's sizes are recorded as constants (specialization is the default)",
                "static sizes make ahead-of-time memory planning possible: the arena is sized before the program runs "
                "(a delegate's packed weights and workspace come on top)",
                "the runtime checks the input against the recorded shape/dtype and refuses; nothing recompiles on device",
                "read the signature from the .pte (MethodMeta), then choose: normalize, bounded Dim, or buckets")),
    Card(
        id="07.declare_dynamic", lesson="07_dynamic_dims", topic="Dim, shared Dims, bounds and Dim.AUTO",
        kind="constraints",
        question=("How do you export a model whose input length varies, and what must you get right about the Dim?"),
        answer=("I declare it: dynamic_shapes maps each varying axis to a named Dim with a min and a max, and one"
                " shared Dim object ties axes that must be equal, like ids and mask. The max sizes the memory "
                "plan; without one, ExecuTorch plans the example's size and longer inputs are rejected in "
                "production. The min must be what the graph supports: export traces dynamic sizes as at least 2. "
                "Dim.AUTO can come out static silently, so I read the contract. And the runtime only checks rank,"
                " dtype and capacity, so the app checks the contract and CI probes every edge."),
        points=("a named Dim with min and max; one shared Dim object ties equal axes",
                "no max: ExecuTorch plans the example's size (not a conservative worst case), longer inputs rejected",
                "0/1 specialization: sizes traced as >= 2; a min of 1 or a size-1 example is a trap",
                "Dim.AUTO may silently specialize: read the contract; ship explicit bounds",
                "the runtime does not check min or ties: validate on the host, probe the edges in CI")),
    Card(
        id="07.one_frame_nan", lesson="07_dynamic_dims", topic="Dim, shared Dims, bounds and Dim.AUTO",
        kind="diagnosis",
        question=("Clips of 2 to 16 frames work on the device, but a one-frame clip returns NaN, although the "
                  "export declared Dim('frames', min=2, max=16). What happened, and what do you change?"),
        answer=("forward() normalises only when there is more than one frame. Export traced the axis in [2, 16], "
                "so that test was simply true and only the normalising branch is in the graph; one frame gives a "
                "standard deviation of NaN. ExecuTorch strips export's range checks: the runtime checks rank, "
                "dtype and capacity, not the Dim's min, so it ran the clip. The min is honest; the fix is a host-"
                "side contract check before calling the model, a separate one-frame path in the app (what eager "
                "does for one frame; padding does not work here: a repeated frame has a standard deviation of 0, "
                "and a zero frame changes the statistics), and the min edge in the CI probes."),
        points=("export decided the shape branch from the traced range (sizes >= 2): one branch in the graph",
                "ExecuTorch strips export's asserts: min is not checked on device",
                "host-side contract check before calling the model",
                "CI parity probes at min, max and one step beyond each")),
    Card(
        id="08.cost_of_dynamic", lesson="08_cost_of_dynamic", topic="the cost of dynamic shapes",
        kind="conceptual",
        question=("What does making a dimension dynamic cost on the device?"),
        answer=("Three things. Export may add guards on the dynamic size, which I answer with a bounded or "
                "derived Dim or host-side arithmetic. The partitioner may decline operators it cannot prove for "
                "symbolic sizes, like a bilinear upsample with a dynamic output size; they fall back to portable "
                "kernels silently, so I read the delegation report and its reasons. And the arena is planned for "
                "the max and held for every input. The shape itself costs little per call: the runtime resizes the "
                "input, and XNNPACK propagates shapes through its graph before every run, static or not. So I compare "
                "delegation and arena with the static export, "
                "measure latency over repeated runs, and often normalize on the host or use buckets instead."),
        points=("guards on dynamic dimensions (bounded or derived Dim, or host-side arithmetic)",
                "reduced delegation: the partitioner declines ops with symbolic sizes; silent unless you measure",
                "the arena is planned for the max and held for every input",
                "measure delegation, arena and latency against the static export; consider host normalization or buckets")),
    Card(
        id="09.dynamic_or_buckets", lesson="09_normalize_or_bucket", topic="normalize on the host, dynamic or buckets",
        kind="trade-off",
        question=("Camera frames and text requests vary in size. For each: a dynamic Dim, buckets, or normalize on "
                  "the host?"),
        answer=("Camera frames: normalize on the host. The app letterboxes to the network's input, the graph "
                "stays static, delegated like the static export, with the smallest arena, and the model is "
                "trained with the same preprocessing. Text: padding to the maximum wastes most of the work, so "
                "either a bounded Dim, planned for the max and possibly less delegated, or a few static buckets "
                "as methods of one .pte, sharing the weights at a few KB each and bounding the padding (loaded together, "
                "each method holds its own arena unless the app shares one). I measure"
                " latency and size for both, test parity on every bucket's edges, and state the trade."),
        points=("vision: letterbox on the host, static graph, smallest arena; train with the same preprocessing",
                "sequences: padding to the max wastes compute; a bounded Dim or buckets",
                "buckets as methods of one .pte share weights (a few KB per method); separate files copy them",
                "edges from the length distribution; parity on each bucket's edges; measure, then choose")),
    Card(
        id="09.choose_buckets", lesson="09_normalize_or_bucket", topic="normalize on the host, dynamic or buckets",
        kind="constraints",
        question=("You may ship at most four sequence buckets. How do you choose their sizes, and how do you test "
                  "them?"),
        answer=("The largest bucket must hold the longest request the product accepts, or those requests are "
                "refused. A request pays its bucket minus its length, so I place the other edges from the real "
                "length distribution, just above where lengths crowd. Powers of two are a habit, and equal-count "
                "quantiles are not optimal either; a small search over candidate edges against the measured "
                "padding waste does better. Then I test parity at n-1, n and n+1 for each bucket against eager on"
                " the unpadded request, with a mask that makes padding inert."),
        points=("the largest bucket covers the longest accepted request",
                "edges from the measured length distribution; minimise padded positions",
                "powers of two and equal-count quantiles are not automatically optimal",
                "parity at n-1, n, n+1 for each bucket against eager on the unpadded request; mask the padding")),
    Card(
        id="10.camera_diagnosis", lesson="10_diagnosis_drills", topic="diagnosing shape failures on device",
        kind="diagnosis",
        question=("The model works in Python but the app rejects our camera frames. What do you do?"),
        answer=("It is nearly always an export at the notebook's example resolution fed the device's native "
                "resolution. I confirm it by reading the .pte's MethodMeta and comparing with the shape in the "
                "app's log, then reproduce it by loading that same .pte with the runtime bindings and the "
                "device's real shape: same refusal. Then I choose deliberately: letterbox on the host, a bounded "
                "Dim, or a few buckets. Afterwards I re-check parity on every camera size, the delegation report "
                "and the arena, and add the device's shapes to CI."),
        points=("read the .pte's input signature (MethodMeta), compare with the device's shape",
                "reproduce with the runtime bindings and the real shape before changing anything",
                "choose deliberately: normalize on the host, bounded Dim, or buckets",
                "re-check parity, delegation and arena afterwards; add the device shapes to CI")),
    Card(
        id="10.export_ci", lesson="10_diagnosis_drills", topic="parity testing in export CI",
        kind="conceptual",
        question=("What would your export CI job check before a .pte ships?"),
        answer=("Export, lowering and loading succeed; the .pte's maximum shapes cover the promised range; only "
                "accepted operators run on portable kernels, so a delegation regression fails the job; the "
                "device's real shapes are inside the contract and match; and parity against eager, configured "
                "exactly as the app configures it, at every Dim's min and max and next to them, with values of "
                "both signs, zeros and large ones. Outside the contract the host check must refuse; only inputs "
                "above the capacity also go to the runtime, since zero-size inputs or broken ties are undefined "
                "behaviour in the delegate."),
        points=("export, lower and load in CI; max shapes in MethodMeta cover the promised range",
                "delegation checked: only accepted ops on portable kernels",
                "parity vs eager configured as the app does, at every bound's edge and with varied values",
                "outside the contract: the host check refuses; device shapes from logs are probed")),
]
