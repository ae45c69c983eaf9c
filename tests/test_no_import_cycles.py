"""No import cycle anywhere in the project: no module of ``aerorl_ops``, ``assets`` or ``aerorl_pipeline``
imports, directly or through others, a module that imports it back. The graph is grimp's (import-linter's):
every import statement counts, those inside functions and under ``TYPE_CHECKING`` too, so a cycle cannot
hide behind a lazy import or a lazy re-export."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("aerorl_ops", "assets", "aerorl_pipeline")


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """One cycle per import that closes one: ``(a, b, ..., a)`` where ``a`` imports ``b`` and ``b`` leads back to
    ``a`` (by the shortest chain); each cycle once, starting at its first module by name, shortest first."""
    cycles: set[tuple[str, ...]] = set()
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = (module,) if imported == module else graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycle = (module, *back)
                start = cycle.index(min(cycle[:-1]))  # the same cycle found from each of its modules reads the same
                cycles.add((*cycle[start:-1], *cycle[:start], cycle[start]))
    return sorted(cycles, key=lambda cycle: (len(cycle), cycle))


def graph_of(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def test_a_cycle_is_found_once_with_its_modules_in_import_order_shortest_first():
    graph = graph_of(("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.e", "p.e"))
    assert import_cycles(graph) == [("p.e", "p.e"), ("p.a", "p.b", "p.c", "p.a")]
    assert import_cycles(graph_of(("p.a", "p.b"), ("p.b", "p.c"), ("p.a", "p.c"))) == []


@pytest.fixture(scope="module")
def project_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def test_the_graph_holds_the_whole_project(project_graph):
    for module in ("aerorl_ops.storage.training_schema", "assets.training.rl_run", "aerorl_pipeline.definitions"):
        assert module in project_graph.modules
    assert project_graph.direct_import_exists(importer="aerorl_ops.rl.step.stats",
                                              imported="aerorl_ops.storage.training_schema")


def test_no_module_imports_itself_back(project_graph):
    cycles = import_cycles(project_graph)
    assert not cycles, (f"{len(cycles)} import cycles, the shortest first (each module imports the next):\n"
                        + "\n".join(" -> ".join(cycle) for cycle in cycles[:10]))
