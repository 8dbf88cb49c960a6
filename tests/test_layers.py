"""The stages depend downwards only, no module imports itself round a cycle, and no
production module is longer than a reader can hold (MAX_MODULE_LINES).

base (settings, errors...) < store < scraper < retrieval < chatbot < eval / ui / CLI.
The import graph is read from the source with `ast` (imports inside functions count: a
lazy import is still a dependency; so do imports under `if TYPE_CHECKING:`, for layers
and for cycles alike: two modules that need each other's types are one concern, or want
an interface between them), with module names from the package-dir mapping in
pyproject.toml, so the check follows the layout a reader sees.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Lowest first. A module's layer is that of the longest prefix listed here.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("guiderag", "guiderag.settings", "guiderag.errors", "guiderag.files", "guiderag.progress", "guiderag.ranges",
              "guiderag.clock", "guiderag.resources", "guiderag.data")),
    ("store", ("guiderag.store",)),
    ("scraper", ("guiderag.scraper",)),
    ("retrieval", ("guiderag.retrieval",)),
    ("chatbot", ("guiderag.chatbot",)),
    ("top", ("guiderag.eval", "guiderag.ui", "guiderag.api", "guiderag.cli", "guiderag.commands",
             "guiderag.__main__")),
]
# Top-layer peers that must not lean on each other (the CLI may use them all).
PEERS = ("guiderag.eval", "guiderag.ui", "guiderag.api")


def package_modules() -> dict[str, Path]:
    """Module name -> source file, from pyproject's package-dir mapping."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    modules: dict[str, Path] = {}
    for package, folder in mapping.items():
        for path in (REPO / folder).glob("*.py"):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            modules[name] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """(imported guiderag module, only for type checking) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.stem == "__init__"
    out: list[tuple[str, bool]] = []

    def resolve(target: str) -> str | None:
        # the longest known module the name starts with (a name imported from a package)
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    def visit(node: ast.AST, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.body:
                    visit_one(sub, True)
                for sub in child.orelse:
                    visit_one(sub, typing_only)
                continue
            visit_one(child, typing_only)

    def visit_one(node: ast.AST, typing_only: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("guiderag"):
                    if (m := resolve(alias.name)) is not None:
                        out.append((m, typing_only))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.startswith("guiderag"):
                for alias in node.names:
                    if (m := resolve(f"{module}.{alias.name}")) is not None:
                        out.append((m, typing_only))
        visit(node, typing_only)

    visit(tree, False)
    return [(m, t) for m, t in out if m != name]


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def peer_of(module: str) -> str | None:
    return next((p for p in PEERS if module == p or module.startswith(p + ".")), None)


def back_edges(graph: dict[str, list[tuple[str, bool]]]) -> list[str]:
    """Every import of a higher layer, or of another top-layer peer."""
    bad = []
    for module, targets in sorted(graph.items()):
        for target, _ in targets:
            if layer_of(target) > layer_of(module):
                bad.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                           f"({LAYERS[layer_of(target)][0]})")
            elif peer_of(module) and peer_of(target) and peer_of(module) != peer_of(target):
                bad.append(f"{module} imports its peer {target}")
    return bad


def cycles(graph: dict[str, list[tuple[str, bool]]]) -> list[list[str]]:
    """Import cycles among the modules (type-checking imports included)."""
    edges = {m: sorted({t for t, _ in ts if t in graph}) for m, ts in graph.items()}
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                found.append(stack[stack.index(t):] + [t])
            elif t not in state:
                walk(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            walk(m)
    return found


def import_graph() -> dict[str, list[tuple[str, bool]]]:
    modules = package_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def test_every_module_is_in_a_layer_and_the_graph_is_not_empty() -> None:
    graph = import_graph()
    assert {"guiderag.store.pages", "guiderag.retrieval.analyzer", "guiderag.ui.page"} <= set(graph)
    assert sum(len(v) for v in graph.values()) > 100  # the parser does see the imports
    for module in graph:
        layer_of(module)


def test_stages_depend_downwards_only() -> None:
    assert back_edges(import_graph()) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_checks_catch_a_back_edge_a_peer_edge_and_a_cycle() -> None:
    graph = {
        "guiderag.store.pages": [("guiderag.retrieval.index", False)],
        "guiderag.retrieval.index": [("guiderag.store.pages", False)],
        "guiderag.ui.page": [("guiderag.eval.runner", False)],
        "guiderag.eval.runner": [],
    }
    assert len(back_edges(graph)) == 2
    assert cycles(graph) == [["guiderag.retrieval.index", "guiderag.store.pages", "guiderag.retrieval.index"]]


def test_a_cycle_through_a_type_checking_import_is_a_cycle() -> None:
    graph = {
        "guiderag.retrieval.analyzer": [("guiderag.retrieval.synonyms", True)],
        "guiderag.retrieval.synonyms": [("guiderag.retrieval.analyzer", False)],
    }
    assert cycles(graph) == [["guiderag.retrieval.analyzer", "guiderag.retrieval.synonyms",
                              "guiderag.retrieval.analyzer"]]


# Stages handed their own config (guiderag.scopes: ScraperConfig, StoreConfig,
# RetrievalConfig, AnswerConfig, ModelConfig, chatbot.config.BotConfig, a GuidelineScope, a
# ProgressReporter) and never the whole Settings (#19): no module of
# theirs depends on guiderag.settings, directly or through a module it imports. The one
# exception is a stage's CLI layer (its commands.py: `run_<name>(args, settings)`), which
# splits the Settings it is given into the stage's parts.
OWN_CONFIG_STAGES = ("guiderag.store", "guiderag.scraper", "guiderag.retrieval", "guiderag.chatbot")
CLI_LAYER = frozenset({"guiderag.scraper.commands", "guiderag.retrieval.commands", "guiderag.chatbot.commands"})
SETTINGS = "guiderag.settings"


def reaches_settings(graph: dict[str, list[tuple[str, bool]]], stages: tuple[str, ...] = OWN_CONFIG_STAGES,
                     exempt: frozenset[str] = CLI_LAYER) -> list[str]:
    """Each module of `stages` that depends on guiderag.settings, with the import chain.
    The package `guiderag` itself is not followed (its __init__ re-exports the public
    surface, Settings included; a submodule does not depend on it by being one)."""
    bad = []
    for start in sorted(m for m in graph if m.startswith(stages) and m not in exempt):
        seen, todo = {start}, [[start]]
        while todo:
            chain = todo.pop()
            for target, _ in graph.get(chain[-1], []):
                if target == SETTINGS:
                    bad.append(" -> ".join(chain + [target]))
                    todo = []
                    break
                if target not in seen and target != "guiderag" and target not in exempt:
                    seen.add(target)
                    todo.append(chain + [target])
    return bad


def test_the_pipeline_stages_import_no_settings() -> None:
    """store/, scraper/, retrieval/ and chatbot/ are handed their configs; only their CLI
    layers (commands.py) read the Settings, to split it."""
    graph = import_graph()
    assert {"guiderag.scraper.run", "guiderag.scraper.fetch", "guiderag.store.connection", "guiderag.retrieval.loader",
            "guiderag.retrieval.build", "guiderag.chatbot.bot", "guiderag.chatbot.library_cache"} <= set(graph)
    assert reaches_settings(graph) == []
    for cli in sorted(CLI_LAYER):
        assert SETTINGS in {t for t, _ in graph[cli]}, cli  # the CLI layer does split it


def test_the_settings_check_sees_a_direct_and_an_indirect_dependency() -> None:
    graph = {
        "guiderag.scraper.fetch": [("guiderag.store.pages", False)],
        "guiderag.store.pages": [("guiderag.store.connection", True)],
        "guiderag.store.connection": [("guiderag.settings", True)],
        "guiderag.scraper.commands": [("guiderag.settings", False)],
        "guiderag.scraper.urls": [("guiderag", False)],
        "guiderag": [("guiderag.settings", False)],
        # an answer stage module leaning on a retrieval one that reads the Settings; the CLI
        # layer's own use is allowed, and is not followed from a module importing it
        "guiderag.chatbot.bot": [("guiderag.retrieval.loader", True)],
        "guiderag.retrieval.loader": [("guiderag.settings", False)],
        "guiderag.chatbot.commands": [("guiderag.settings", False), ("guiderag.chatbot.bot", False)],
        "guiderag.chatbot.library": [("guiderag.chatbot.commands", False)],
    }
    assert reaches_settings(graph) == [
        "guiderag.chatbot.bot -> guiderag.retrieval.loader -> guiderag.settings",
        "guiderag.retrieval.loader -> guiderag.settings",
        "guiderag.scraper.fetch -> guiderag.store.pages -> guiderag.store.connection -> guiderag.settings",
        "guiderag.store.connection -> guiderag.settings",
        "guiderag.store.pages -> guiderag.store.connection -> guiderag.settings",
    ]


# A module a reader can hold: split a longer one by its reasons to change.
MAX_MODULE_LINES = 500
# Modules allowed over the limit for now, each with why. An exception no longer needed
# fails too, so the list only shrinks.
# Production modules allowed over the limit, each with why (none: keep it so).
LONG_MODULES: dict[str, str] = {}


def long_modules(modules: dict[str, Path], limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Lines of every module over `limit`."""
    counts = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in modules.items()}
    return {name: n for name, n in sorted(counts.items()) if n > limit}


def test_no_production_module_is_over_500_lines() -> None:
    modules = package_modules()
    over = long_modules(modules)
    assert {m: n for m, n in over.items() if m not in LONG_MODULES} == {}, (
        f"over {MAX_MODULE_LINES} lines: split these by reason to change")
    stale = sorted(m for m in LONG_MODULES if m not in over)
    assert stale == [], f"no longer over {MAX_MODULE_LINES} lines (or gone): remove from LONG_MODULES: {stale}"


def test_the_length_check_counts_lines(tmp_path: Path) -> None:
    short, long = tmp_path / "short.py", tmp_path / "long.py"
    short.write_text("x = 1\n" * 500, encoding="utf-8")
    long.write_text("x = 1\n" * 501, encoding="utf-8")
    assert long_modules({"guiderag.short": short, "guiderag.long": long}) == {"guiderag.long": 501}


def test_relative_and_lazy_imports_are_seen(tmp_path: Path) -> None:
    src = tmp_path / "bot.py"
    src.write_text(
        "from typing import TYPE_CHECKING\nfrom . import answer\nfrom .lines import x\n"
        "if TYPE_CHECKING:\n    from guiderag.retrieval import Retriever\n"
        "def f():\n    from guiderag.ui import page\n",
        encoding="utf-8",
    )
    known = {"guiderag.chatbot.answer", "guiderag.chatbot.lines", "guiderag.retrieval", "guiderag.ui.page",
             "guiderag.chatbot.bot"}
    assert sorted(imports_of("guiderag.chatbot.bot", src, known)) == [
        ("guiderag.chatbot.answer", False), ("guiderag.chatbot.lines", False),
        ("guiderag.retrieval", True), ("guiderag.ui.page", False),
    ]


# getattr/hasattr on objects that are not ours: argparse's Namespace (`args`), the openai
# package's responses (chatbot/llm.py), Starlette's HTTPException (api/app.py).
PROBES_ALLOWED = {("guiderag.chatbot.llm", "response"), ("guiderag.chatbot.llm", "choices[0]"),
                  ("guiderag.chatbot.llm", "message"), ("guiderag.chatbot.llm", "chunk"),
                  ("guiderag.chatbot.llm", "delta"), ("guiderag.api.app", "exc")}
PROBED_STAGES = ("guiderag.chatbot", "guiderag.ui", "guiderag.eval", "guiderag.api")


def attribute_probes(name: str, path: Path) -> list[str]:
    """`getattr(obj, ...)` / `hasattr(obj, ...)` calls in a module, as `obj` source text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [ast.unparse(node.args[0]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr") and node.args]


def test_the_answer_path_does_not_probe_our_own_objects() -> None:
    """Our objects are typed: what a stage needs of another is on its interface (e.g.
    Retriever.query_slots), not looked up with getattr."""
    found = [f"{name}: getattr({obj}, ...)" for name, path in sorted(package_modules().items())
             if name.startswith(PROBED_STAGES)
             for obj in attribute_probes(name, path)
             if obj != "args" and (name, obj) not in PROBES_ALLOWED]
    assert found == []


def test_the_probe_check_sees_a_probe(tmp_path: Path) -> None:
    src = tmp_path / "bot.py"
    src.write_text("def f(r, args):\n    return getattr(r, 'query_slots', None), getattr(args, 'json', False)\n",
                   encoding="utf-8")
    assert attribute_probes("guiderag.chatbot.bot", src) == ["r", "args"]
