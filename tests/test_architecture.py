"""The lab package's shape: its parts import only the parts below them, its modules import each other
without a cycle (counting the imports inside functions, which would otherwise hide one), never import
Streamlit, and import Ray only where a Ray run starts (lab.server.ray_runs), so that the app runs
without Ray installed."""

import ast
import subprocess
import sys
from pathlib import Path

LAB = Path(__file__).resolve().parent.parent / "lab"


def module_name(path):
    parts = path.relative_to(LAB.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path):
    """Every lab module `path` imports, at the top or inside a function."""
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .config import ...
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
    return {name for name in found if name == "lab" or name.startswith("lab.")}


def graph():
    modules = {module_name(p): p for p in LAB.rglob("*.py")}
    edges = {}
    for name, path in modules.items():
        targets = set()
        for imported in imports_of(path):
            while imported not in modules and "." in imported:  # lab.x.y where y is a name: lab.x
                imported = imported.rsplit(".", 1)[0]
            if imported in modules and imported != name and imported != "lab":
                targets.add(imported)
        edges[name] = targets
    return edges


def test_no_module_of_lab_imports_streamlit():
    offenders = [str(p) for p in LAB.rglob("*.py") if "streamlit" in {n.split(".")[0] for n in _all_imports(p)}]
    assert offenders == []


def test_ray_is_imported_only_inside_lab_ray_runs_functions_so_the_app_runs_without_it():
    importers = [p.name for p in LAB.rglob("*.py") if "ray" in {n.split(".")[0] for n in _all_imports(p)}]
    tree = ast.parse((LAB / "server" / "ray_runs.py").read_text(encoding="utf-8"))
    at_top = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    assert importers == ["ray_runs.py"] and "ray" not in at_top
    without_ray = (
        "import sys; sys.modules['ray'] = None; import lab.server.jobs, lab.experiments.probe, lab.experiments.ablation"
    )
    subprocess.run([sys.executable, "-c", without_ray], cwd=LAB.parent, check=True, timeout=120)


def _all_imports(path):
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_lab_modules_import_each_other_without_a_cycle():
    edges, state, cycles = graph(), {}, []

    def visit(node, path):
        state[node] = "open"
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target] if target in path else [node, target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)


# Each part of lab and the parts it may import (lab/__init__.py): the networks never reach training,
# training never reaches the pages' instruments or the server, only the command line and the experiments
# see everything, and the lessons' sentences read what the instruments and the experiments measure.
BASE = {"lab.errors", "lab.schema", "lab.settings", "lab.words"}
MAY_IMPORT = {
    "base": set(),
    "data": {"base"},
    "nets": {"base"},
    "training": {"base", "data", "nets"},
    "instruments": {"base", "data", "nets", "training"},
    "server": {"base", "data", "nets", "training"},
    "experiments": {"base", "data", "nets", "training", "instruments", "server"},
    "lessons": {"base", "data", "nets", "training", "instruments", "experiments"},
    "cli": {"base", "data", "nets", "training", "instruments", "server", "experiments"},
}


def part_of(module):
    if module in BASE:
        return "base"
    if module in ("lab.__main__", "lab.train_command"):
        return "cli"
    return module.split(".")[1]


def test_each_part_of_lab_imports_only_the_parts_below_it():
    parts = {part_of(module) for module in graph() if module != "lab"}
    assert parts == set(MAY_IMPORT), "a module outside the parts lab/__init__.py names"
    wrong = [
        f"{source} ({part_of(source)}) imports {target} ({part_of(target)})"
        for source, targets in sorted(graph().items())
        if source != "lab"
        for target in sorted(targets)
        if part_of(target) != part_of(source) and part_of(target) not in MAY_IMPORT[part_of(source)]
    ]
    assert wrong == []


def test_the_served_app_watches_no_files_and_runs_no_full_collection_after_each_script():
    """Two server settings a class's page loads depend on (BENCHMARKS-HISTORY.md, "One screen, two seconds"):
    Streamlit's file watcher walked every imported module after each script run, and its post-script garbage
    collection walked the whole heap while other students' pages waited."""
    import tomllib

    config = tomllib.loads((LAB.parent / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    assert config["server"]["runOnSave"] is False
    assert config["runner"]["postScriptGC"] is False
