"""Imports go one way inside each package: no import cycles, no private names across modules.

The sources are read with :mod:`ast` (nothing is imported), so every ``import`` statement counts:
module level, inside functions and methods, and under ``if TYPE_CHECKING:``. An import of a
package counts as an import of its ``__init__`` module, and ``from pkg import name`` as an import
of ``pkg.name`` when that is a module, else of ``pkg``. Importing ``pkg.mod`` is an edge to
``pkg.mod`` alone: Python initialises ``pkg`` first, but a package's ``__init__`` re-exports its
submodules, so counting that edge would put every submodule in a cycle. A private name is taken
either by importing it or by reading it off an imported module (``runner._recorders``). Checked:
trnblas, trnfft, trntensor and trncore, the emulator ``trncore.sim`` included, whose modules also
follow the layer table ``SIM_LAYERS`` below. A further check: only trncore.config touches the
environment.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: (package, module prefix left out of the check)
PACKAGES = [("trnblas", None), ("trnfft", None), ("trntensor", None), ("trncore", None)]


def _modules(src: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``package`` under ``src``."""
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str | None, int]]:
    """(imported module, private name taken from it or None, line) for each import in ``path``,
    and for each private attribute read off an imported module (``runner._recorders``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    bound: dict[str, str] = {}  # local name -> the module of the package it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _owner(alias.name, modules)
                if target is not None:
                    if alias.asname and target == alias.name:
                        bound[alias.asname] = target
                    yield target, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:
                    bound[alias.asname or alias.name] = submodule
                    yield submodule, None, node.lineno
                    continue
                target = _owner(source, modules)
                if target is None:
                    continue
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                yield target, alias.name if private else None, node.lineno
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = bound.get(node.value.id)
            if owner is not None and node.attr.startswith("_") and not node.attr.startswith("__"):
                yield owner, node.attr, node.lineno


def _graph(package: str, skip: str | None) -> tuple[dict[str, set[str]], list[str]]:
    """The package's import graph and the private names its modules take from one another."""
    src = ROOT / "packages" / package / "src"
    modules = _modules(src, package)
    return _graph_of(modules, skip)


def _graph_of(modules: dict[str, Path], skip: str | None) -> tuple[dict[str, set[str]], list[str]]:
    def kept(name: str) -> bool:
        return skip is None or not (name == skip or name.startswith(skip + "."))

    edges: dict[str, set[str]] = {m: set() for m in modules if kept(m)}
    private: list[str] = []
    for module in edges:
        for target, name, line in _imports(module, modules[module], modules):
            if target == module or not kept(target):
                continue
            edges[module].add(target)
            if name is not None:
                private.append(f"{module}:{line} takes {name} from {target}")
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.mark.parametrize(("package", "skip"), PACKAGES)
def test_no_import_cycle_inside_the_package(package: str, skip: str | None) -> None:
    edges, _ = _graph(package, skip)
    assert len(edges) > 5, f"found only {len(edges)} modules of {package}: wrong source path?"
    assert _cycles(edges) == []


@pytest.mark.parametrize(("package", "skip"), PACKAGES)
def test_no_module_takes_a_private_name_from_another(package: str, skip: str | None) -> None:
    _, private = _graph(package, skip)
    assert private == []


def _environment_readers(package: str, skip: str | None) -> list[str]:
    """``module:line`` of every use of ``os.environ``, ``os.getenv``, ``os.putenv`` or ``os.unsetenv``."""
    src = ROOT / "packages" / package / "src"
    found = []
    for module, path in _modules(src, package).items():
        if module == "trncore.config" or (skip is not None and module.startswith(skip)):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
                if node.attr in ("environ", "getenv", "putenv", "unsetenv", "environb"):
                    found.append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom) and node.module == "os":
                if any(a.name in ("environ", "getenv", "putenv", "unsetenv") for a in node.names):
                    found.append(f"{module}:{node.lineno}")
    return found


@pytest.mark.parametrize(("package", "skip"), PACKAGES)
def test_only_trncore_config_reads_the_environment(package: str, skip: str | None) -> None:
    """The libraries and trncore (the emulator included) take environment variables from trncore.config."""
    assert _environment_readers(package, skip) == []


def test_the_check_sees_a_private_attribute_of_an_imported_module(tmp_path: Path) -> None:
    """``from demo import a`` then ``a._hidden`` (or ``import demo.a as a``) takes a private name."""
    pkg = tmp_path / "demo"
    pkg.mkdir()
    files = {
        "__init__.py": "",
        "a.py": "_hidden = []\n",
        "b.py": "from demo import a\n\ndef f():\n    a._hidden.append(1)\n",
        "c.py": "import demo.a as m\n\nm._hidden.clear()\nm.__name__\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text, encoding="utf-8")
    _, private = _graph_of(_modules(tmp_path, "demo"), None)
    assert sorted(private) == ["demo.b:4 takes _hidden from demo.a", "demo.c:3 takes _hidden from demo.a"]


def test_the_check_sees_function_level_cycles_and_private_names(tmp_path: Path) -> None:
    """The detector itself: a cycle closed by an import inside a function, through a package's
    ``__init__``, and a private name taken across modules are all reported."""
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "from demo import c\nfrom demo.a import run\n",
        "a.py": "from demo import b\n\ndef run():\n    return b.go()\n",
        "b.py": "def go():\n    from demo.a import run  # closes a cycle at call time\n    return run\n",
        "c.py": "from demo.sub import helper\n",
        "sub/__init__.py": "from demo.sub.helper import _secret\n",
        "sub/helper.py": "_secret = 1\n\ndef late():\n    import demo  # the package's __init__\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text), encoding="utf-8")
    edges, private = _graph_of(_modules(tmp_path, "demo"), None)
    assert sorted(_cycles(edges)) == [["demo", "demo.c", "demo.sub.helper"], ["demo.a", "demo.b"]]
    assert private == ["demo.sub:1 takes _secret from demo.sub.helper"]
    edges, private = _graph_of(_modules(tmp_path, "demo"), "demo.sub")
    assert _cycles(edges) == [["demo.a", "demo.b"]]
    assert private == []


#: The emulator's layers, bottom to top (docs/architecture.md, "The emulator's layers", shows the
#: same table). A module of ``trncore.sim`` imports only modules of its own layer or a lower one;
#: every import counts, inside functions and under ``TYPE_CHECKING`` too. ``""`` is the package's
#: ``__init__``. A new module gets a row here (the test fails until it has one).
SIM_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("errors", "context", "hooks", "arrays", "accesses", "rules", "blas",
                    "nki_object", "nki_typing", "matmul_modes", "dtypes", "versions",
                    "known_issues", "from_nki_0_2", "lnc_control", "cache_purity",
                    "python_subset", "heap", "work_clock")),
    ("tensors", ("dynamic", "tensor", "views")),
    ("operand rules", ("alu", "checks", "release_rules", "creation", "core_races")),
    ("instruction plumbing", ("isa_common", "isa_instruction")),
    ("instructions", ("isa_movement", "isa_scalar", "isa_vector", "isa_statistics",
                      "isa_tensor_engine", "isa_dma_compute", "isa_gather", "isa_nonzero",
                      "isa_range_select", "isa_reduce_chain", "isa_select", "isa_sequence", "isa_topk",
                      "isa_local_gather", "isa_random", "isa_mx", "registers", "lnc", "grid")),
    ("namespaces", ("isa", "isa_constants", "wrappers", "hbm_constants", "language", "loops",
                    "collectives")),
    ("program", ("liveness", "psum_ranges", "lending", "program", "schedule")),
    ("runner", ("binding", "runner")),
    ("reports", ("report", "timeline", "launches")),
    ("nki module", ("modules",)),
    ("package and tools", ("", "__main__", "cli", "conform", "conform_meter", "conform_plugin",
                           "conform_stubs", "testing")),
)  # fmt: skip


def _layer_index(layers: tuple[tuple[str, tuple[str, ...]], ...], package: str) -> dict[str, int]:
    """Dotted module name -> its layer's position (0 = bottom)."""
    return {
        f"{package}.{name}" if name else package: level
        for level, (_, names) in enumerate(layers)
        for name in names
    }


def _upward(edges: dict[str, set[str]], level: dict[str, int]) -> list[str]:
    """Every import from a module of ``level`` to a module of a higher layer."""
    return sorted(
        f"{module} (layer {level[module]}) imports {target} (layer {level[target]})"
        for module, targets in edges.items()
        if module in level
        for target in targets
        if target in level and level[target] > level[module]
    )


def test_the_emulator_follows_its_layers() -> None:
    edges, _ = _graph("trncore", None)
    sim = {m for m in edges if m == "trncore.sim" or m.startswith("trncore.sim.")}
    level = _layer_index(SIM_LAYERS, "trncore.sim")
    assert sorted(sim - set(level)) == [], "a module of trncore.sim without a row in SIM_LAYERS"
    assert sorted(set(level) - sim) == [], "a row of SIM_LAYERS names no module"
    assert len(level) == sum(len(names) for _, names in SIM_LAYERS), "a module in two layers"
    assert _upward(edges, level) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    """The check itself: a lower module importing a higher one (even inside a function) is named."""
    layers = (("low", ("a",)), ("high", ("b", "")))
    level = _layer_index(layers, "demo")
    edges = {"demo": {"demo.a"}, "demo.a": {"demo.b"}, "demo.b": {"demo.a"}}
    assert _upward(edges, level) == ["demo.a (layer 0) imports demo.b (layer 1)"]


def test_the_architecture_page_shows_the_emulator_layers() -> None:
    """docs/architecture.md's table of the emulator's layers lists the same modules per layer."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The emulator's layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line]
    shown = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = cells[2].replace(" ", "").strip("`").split("`,`")
        shown.append((cells[1], tuple("" if n == "trncore.sim" else n for n in names)))
    assert shown == list(SIM_LAYERS)
