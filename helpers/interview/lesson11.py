"""Interview cards of lesson 11 (the diagnosis workflow as an export CI job)."""

from __future__ import annotations

from . import Card

__all__ = ["CARDS"]

CARDS = [
    Card(
        id="11.export_ci", lesson="11_export_doctor", topic="export CI job", kind="diagnosis",
        question="What would you put in the CI job that exports your on-device model?",
        answer=("Export, lower and load the exact artifact we ship, then diff it against eager PyTorch on a varied "
                "probe set: values of both signs, zeros and extremes, both sides of every branch, and every dynamic "
                "dimension at its min, max and one step beyond. Inside the input contract every probe must match; "
                "outside it, something must refuse, and inputs the runtime runs anyway get a host-side check in the "
                "app. Then gate on what parity cannot see: delegated coverage with the partitioner's reasons, and "
                "the memory plan's arena against a budget. Failures are machine-readable (JSON, JUnit), and the "
                "probes ship with the program as a bundle the device can verify."),
        points=("the real .pte diffed against eager on varied inputs, including every bound's edges and both branch "
                "sides",
                "inside the contract must match; outside must be refused (and the app checks what the runtime "
                "does not)",
                "delegated coverage and arena size as gates, not only correctness",
                "the tool's own errors are kept apart from the model's")),
    Card(
        id="11.parity_blind_spots", lesson="11_export_doctor", topic="export CI job", kind="conceptual",
        question="Your exported model passes a parity test against eager. What can still be wrong on the device?",
        answer=("Parity compares the .pte with the model I handed the test, so anything baked into both sides "
                "passes: a config flag the app will flip later, a Python scalar, a decision the app takes. It only "
                "covers the inputs I probed, so a Dim's untested edge or a shape the runtime accepts outside the "
                "contract can still be wrong. And it says nothing about speed or memory: the partitioner may have "
                "declined half the graph, or the arena may be planned for a huge max. So I export one program per "
                "setting, probe every bound, check inputs on the host, and gate on delegation and arena too."),
        points=("flags and decisions baked into both the eager model and the .pte pass unnoticed",
                "only the probed inputs are proven: bounds' edges and silently accepted shapes need probes or host "
                "checks",
                "parity is silent about delegation and memory: measure those separately")),
]
