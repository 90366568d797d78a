"""No two modules of ``helpers`` import each other, directly or around a loop: every import statement counts,
wherever it is written (top level, inside a function, under ``if TYPE_CHECKING``).

A package's face (its ``__init__``, which hands its modules' names on) is left out, as ``farm-studio look`` leaves
it out: an edge *into* a package face is not followed. (``helpers.interview._widgets`` importing names from
``helpers.interview`` is such an edge; the lesson registry of issue 16 removes those.)"""

from __future__ import annotations

from import_graph import ROOT, find_cycle, import_graph, modules_under

MODULES = modules_under(ROOT / "helpers")
FACES = {name for name, path in MODULES.items() if path.stem == "__init__"}


def graph_without_faces() -> dict[str, set[str]]:
    """The import graph between modules, package faces left out."""
    return {name: deps - FACES for name, deps in import_graph(MODULES).items() if name not in FACES}


def test_the_library_has_no_import_circle():
    cycle = find_cycle(graph_without_faces())
    assert cycle is None, " -> ".join(cycle)


def test_the_check_sees_a_circle():
    graph = graph_without_faces()
    graph["helpers.host"] = graph["helpers.host"] | {"helpers.lessons.bucketing"}  # bucketing imports host
    assert find_cycle(graph) is not None
