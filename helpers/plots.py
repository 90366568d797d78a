"""Shared plots. Every lesson that draws a chart draws it with one of these (no copies in notebooks).

All functions return the matplotlib ``Figure`` (a notebook shows it; a script can ``savefig``).
Each figure is closed after drawing, so a notebook shows it once (as the cell's value).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .artifact import DelegationReport

__all__ = ["delegation_bars", "series", "grouped_bars"]


def delegation_bars(reports: Mapping[str, DelegationReport], title: str = "Where the graph runs") -> Figure:
    """Stacked bars per variant: nodes delegated to the backend vs nodes on portable kernels."""
    names = list(reports)
    delegated = [reports[n].delegated_nodes for n in names]
    portable = [reports[n].portable_nodes for n in names]
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(names), 3.2))
    ax.bar(names, delegated, label="delegated (XNNPACK)", color="#2e7d32")
    ax.bar(names, portable, bottom=delegated, label="portable kernels", color="#ef6c00")
    for i, (d, p) in enumerate(zip(delegated, portable)):
        total = d + p
        ax.text(i, total, f"{d}/{total}", ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("graph nodes")
    ax.set_title(title)
    ax.set_ylim(0, max(d + p for d, p in zip(delegated, portable)) * 1.25 + 1)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def series(x: Sequence[float], ys: Mapping[str, Sequence[float]], *, xlabel: str, ylabel: str, title: str,
           logx: bool = False, logy: bool = False, marker: str = "o") -> Figure:
    """Lines of ``ys`` against ``x`` (e.g. arena bytes vs the Dim's max; latency vs sequence length)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for label, values in ys.items():
        ax.plot(list(x), list(values), marker=marker, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    if len(ys) > 1:
        ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def grouped_bars(groups: Sequence[str], values: Mapping[str, Sequence[float]], *, ylabel: str, title: str,
                 fmt: str = "{:.2f}") -> Figure:
    """Bars for several series side by side per group (e.g. latency of where vs cond per model size)."""
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(groups) * max(1, len(values)) / 1.5), 3.4))
    width = 0.8 / max(1, len(values))
    for k, (label, vals) in enumerate(values.items()):
        xs = [i + (k - (len(values) - 1) / 2) * width for i in range(len(groups))]
        bars = ax.bar(xs, list(vals), width=width, label=label)
        for bar, v in zip(bars, vals):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), fmt.format(v), ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig
