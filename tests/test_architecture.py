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


def cycles_in(edges):
    """Every import cycle a depth-first walk of {module: modules it imports} meets, each as a path."""
    state, cycles = {}, []

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
    return cycles


def test_lab_modules_import_each_other_without_a_cycle():
    cycles = cycles_in(graph())
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
    "runs": {"base", "data", "nets", "training", "server", "experiments"},
    "cli": {"base", "data", "nets", "training", "instruments", "server", "experiments", "runs"},
}


def part_of(module):
    if module in BASE:
        return "base"
    if module in ("lab.__main__", "lab.train_command"):
        return "cli"
    if module == "lab.runs":
        return "runs"
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


# ---------------------------------------------------------------------------
# The app's shape: one package per page in ui/, one package for what they share, and thin page scripts.
#
#   ui.shared (and ui.cell_labels)  imports lab only: never a page's package, never ui.app
#   ui.<page>                       imports ui.shared and lab: never another page's package, never ui.app
#   ui.app (the frame, the warm-up) imports the pages' packages, ui.shared and lab
#   a page script                   imports its own page's package, ui.app, ui.shared and lab, never
#                                   lab.server; app.py is Home's script, serve.py the server's (ui.app)
#
# Imports inside functions count, and no import cycle runs through ui at all. A page's session keys
# (its widgets' keys, what it keeps in st.session_state) start with its prefix, and no other package
# uses them: what the pages share goes through a function of ui.shared.

ROOT = LAB.parent
UI = ROOT / "ui"
SHARED_MODULES = {"ui", "ui.cell_labels"}  # ui.cell_labels: each cell's name and colour, read by every page
PAGE_PACKAGES = {  # package -> its script and the prefix of its session keys
    "ui.home": ("app.py", "home_"),
    "ui.train": ("pages/1_Train.py", "train_"),
    "ui.sample": ("pages/2_Sample.py", "sample_"),
    "ui.gates": ("pages/3_Gates.py", "gates_"),
    "ui.memory": ("pages/4_Memory.py", "memory_"),
    "ui.checkpoints": ("pages/5_Checkpoints.py", "ckpt_"),
    "ui.ablation": ("pages/6_Ablation.py", "ablation_"),
    "ui.lessons": ("pages/7_Lessons.py", "lessons_"),
    "ui.class_board": ("pages/8_Class.py", "class_"),
}
SCRIPTS = {script: package for package, (script, _) in PAGE_PACKAGES.items()} | {"serve.py": "ui.app"}
MAX_SCRIPT_LINES = 120


def ui_modules():
    return {module_name(p): p for p in UI.rglob("*.py")}


def kind_of(module):
    """'shared', 'app', a page's package ('ui.train') or a script ('pages/1_Train.py'), for any node."""
    if module in SCRIPTS:
        return module
    if module in SHARED_MODULES or module == "ui.shared" or module.startswith("ui.shared."):
        return "shared"
    if module == "ui.app" or module.startswith("ui.app."):
        return "app"
    package = ".".join(module.split(".")[:2])
    return package if package in PAGE_PACKAGES else None


def imported_names(path):
    """Every module `path` imports, at the top or inside a function, absolute (`from ui.x import y` gives
    both ui.x and ui.x.y: y may be a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert not node.level, f"{path}: a relative import"
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def ui_graph():
    """node -> the ui modules it imports; the nodes are ui's modules and the scripts."""
    modules = ui_modules()
    nodes = dict(modules) | {script: ROOT / script for script in SCRIPTS}
    edges = {}
    for name, path in nodes.items():
        targets = {n for n in imported_names(path) if n in modules and n != name}
        edges[name] = targets - {"ui"}  # every `import ui.x` runs ui/__init__.py, which imports nothing
    return edges


def may_import(source, target):
    source_kind, target_kind = kind_of(source), kind_of(target)
    if source_kind is None or target_kind is None:  # a module outside the layout: the test above names it
        return False
    if target_kind == "shared":
        return True
    if source_kind == "shared":
        return False
    if source_kind == "app":
        return target_kind == "app" or target_kind in PAGE_PACKAGES
    if source_kind in PAGE_PACKAGES:
        return target_kind == source_kind
    return target_kind in ("app", SCRIPTS[source_kind])  # a script: ui.app and its own page's package


def test_ui_is_one_package_per_page_one_shared_package_and_the_app():
    unplaced = sorted(m for m in ui_modules() if kind_of(m) is None)
    assert unplaced == [], "a ui module that is neither shared, the app's, nor a page's package's"
    assert {".".join(m.split(".")[:2]) for m in ui_modules() if kind_of(m) in PAGE_PACKAGES} == set(PAGE_PACKAGES)
    assert sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py")) == sorted(
        s for s in SCRIPTS if s.startswith("pages/")
    ), "a page script without its package"


def test_ui_and_the_pages_import_only_in_their_direction():
    wrong = [
        f"{source} ({kind_of(source)}) imports {target} ({kind_of(target)})"
        for source, targets in sorted(ui_graph().items())
        for target in sorted(targets)
        if not may_import(source, target)
    ]
    assert wrong == []


# what starts or holds a run: a page asks lab.runs, the one runner, never these
JOB_MODULES = {"lab.server.jobs", "lab.server.shared_runs", "lab.server.workers", "lab.server.ray_runs"}


def test_no_page_package_starts_a_run_but_through_the_one_runner():
    reaching = {
        name: sorted(n for n in imported_names(path) if n in JOB_MODULES or n.rsplit(".", 1)[0] in JOB_MODULES)
        for name, path in ui_modules().items()
        if kind_of(name) in PAGE_PACKAGES
    }
    assert {name: names for name, names in reaching.items() if names} == {}


def test_no_page_script_reaches_into_lab_server():
    reaching = {
        script: sorted(n for n in imported_names(ROOT / script) if n == "lab.server" or n.startswith("lab.server."))
        for script in SCRIPTS
        if script != "serve.py"
    }
    assert {script: names for script, names in reaching.items() if names} == {}


def test_ui_imports_without_a_cycle_counting_imports_inside_functions():
    cycles = cycles_in(ui_graph())
    assert cycles == [], " ; ".join(" -> ".join(c) for c in cycles)


def test_every_page_script_is_thin():
    long = {
        script: n
        for script in SCRIPTS
        if (n := len((ROOT / script).read_text(encoding="utf-8").splitlines())) > MAX_SCRIPT_LINES
    }
    assert long == {}, f"page scripts over {MAX_SCRIPT_LINES} lines: move their parts into their page's package"


SESSION_STATE_METHODS = {"get", "pop", "setdefault", "update", "clear", "keys", "items", "values", "to_dict"}


def _is_session_state(node):
    return isinstance(node, ast.Attribute) and node.attr == "session_state"


def _leading_text(node):
    """A key written as a literal: the string, or an f-string's text before its first {}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    return None


def session_keys(path):
    """The session-state keys a file writes as literals: widgets' `key=`, st.session_state's items and
    attributes, `"x" in st.session_state`, and a linked setting's widget key ((Field(...), "key"))."""
    keys = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "key":
            keys.append(_leading_text(node.value))
        elif isinstance(node, ast.Subscript) and _is_session_state(node.value):
            keys.append(_leading_text(node.slice))
        elif isinstance(node, ast.Attribute) and _is_session_state(node.value):
            keys.append(None if node.attr in SESSION_STATE_METHODS else node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _is_session_state(node.func.value):
            if node.func.attr in ("get", "pop", "setdefault") and node.args:
                keys.append(_leading_text(node.args[0]))
            elif node.func.attr == "update":
                keys += [k.arg for k in node.keywords]
        elif isinstance(node, ast.Compare) and any(_is_session_state(c) for c in node.comparators):
            keys.append(_leading_text(node.left))
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[0], ast.Call):
            func = node.elts[0].func
            if getattr(func, "id", getattr(func, "attr", None)) == "Field":
                keys.append(_leading_text(node.elts[1]))
    return [key for key in keys if key]


def owner_of_key(key):
    """The page package whose prefix `key` starts with (a leading "_" aside), or None: a shared key."""
    return next((p for p, (_, prefix) in PAGE_PACKAGES.items() if key.lstrip("_").startswith(prefix)), None)


def test_each_page_keeps_to_its_own_session_keys():
    files = {m: p for m, p in ui_modules().items()} | {s: ROOT / s for s in SCRIPTS}
    wrong = []
    for name, path in sorted(files.items()):
        kind = kind_of(name)
        package = SCRIPTS.get(kind, kind)
        for key in session_keys(path):
            owner = owner_of_key(key)
            if owner is not None and owner != package:
                wrong.append(f"{name} uses {owner}'s session key {key!r}")
    assert wrong == []
