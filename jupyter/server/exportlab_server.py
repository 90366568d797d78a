"""JupyterLab server settings for the lessons: widget replies without a 40 ms stall.

jupyter_server writes each kernel message to the browser's websocket as a small TCP segment, with Nagle's
algorithm on (tornado leaves it on unless told otherwise). When a reply follows another small write whose
ACK the browser delays, the kernel's answer waits for that ACK: on Linux about 40 ms. A widget interaction
is a handful of such small messages, so about half of them took ~48 ms instead of ~15 ms (measured in
headless Chromium, ``benchmarks/bench_browser.py``). This connection turns Nagle off for kernel websockets
(``TCP_NODELAY``), as tornado's documentation suggests for small, latency-bound messages.

Used by ``make lab`` and the browser tests: ``--ServerApp.kernel_websocket_connection_class=
exportlab_server.NoDelayKernelConnection`` with this folder on ``PYTHONPATH``.
"""

from __future__ import annotations

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class NoDelayKernelConnection(ZMQChannelsWebsocketConnection):
    """The default kernel websocket connection, with ``TCP_NODELAY`` on its socket."""

    def connect(self):  # type: ignore[override]
        self.websocket_handler.set_nodelay(True)
        return super().connect()
