"""The doctor's package has no import circle, and its layers import downwards only:
cli → examine → (bundle, draft, shipped) → render → report. The report (what was found, exit statuses, the
verdict's rules) imports no other module of the doctor; the renderers read the report; nothing but the
package's face and ``__main__`` imports the command line.

Every import statement counts wherever it is written (top level, inside a function, under ``if TYPE_CHECKING``).
"""

from __future__ import annotations

from import_graph import ROOT, find_cycle, import_graph, imports_of, modules_under

PACKAGE = "helpers.doctor"
MODULES = modules_under(ROOT / "helpers" / "doctor")


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    lazy = "def f():\n    from .cli import main\n"  # an import inside a function counts
    assert imports_of(f"{PACKAGE}.examine", lazy, MODULES) == {f"{PACKAGE}.cli"}


def test_the_doctor_package_has_no_import_cycle():
    assert find_cycle(import_graph(MODULES)) is None, find_cycle(import_graph(MODULES))


def test_the_layers_import_downwards():
    graph = import_graph(MODULES)
    assert graph[f"{PACKAGE}.report"] == set(), "the report imports no other module of the doctor"
    assert graph[f"{PACKAGE}.render"] == {f"{PACKAGE}.report"}, "the renderers read the report, nothing else"
    assert f"{PACKAGE}.cli" not in graph[f"{PACKAGE}.examine"], "the pipeline never imports the command line"
    assert graph[f"{PACKAGE}.spec"] == set(), "--spec's flattening imports no other module of the doctor"
    importers = {name for name, deps in graph.items() if f"{PACKAGE}.cli" in deps}
    assert importers <= {PACKAGE, f"{PACKAGE}.__main__"}, importers
