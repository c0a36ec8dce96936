"""Where the Python code lives: sparkforge.api is a package of modules by topic whose public names
``sparkforge.api`` re-exports, the package ships them all, and no Python file in src/ or the collection's
plugins/ grows past 500 lines without a reason written at its top (issue 34, item 5)."""

import ast
import glob
import importlib
import os
import pkgutil
import re
import subprocess
import sys
import tomllib

import setuptools

import sparkforge.api as api
from helpers import COLLECTION, REPO

LIMIT = 500
REASON = "# Kept whole:"
HEAD = 12  # the reason is among a file's first lines: after the license header, before the docstring


def _public_names(path):
    """Names a module defines at its top level (functions, classes, constants), not those it imports."""
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in names if not n.startswith("_")}


def _defined():
    """``{public name: the api module that defines it}``."""
    defined = {}
    for info in pkgutil.iter_modules(api.__path__):
        module = importlib.import_module("sparkforge.api." + info.name)
        for name in _public_names(module.__file__):
            assert name not in defined, "%s is defined in %s and %s" % (name, defined[name], info.name)
            defined[name] = info.name
            # The package's name is the module's object, not a copy: a caller's isinstance and `is` hold.
            assert getattr(api, name, None) is getattr(module, name), "sparkforge.api.%s" % name
    return defined


def test_the_api_reexports_every_public_name_of_its_modules():
    defined = _defined()
    assert sorted(api.__all__) == sorted(defined), \
        "sparkforge.api.__all__ and the modules' public names differ: %s" % sorted(set(api.__all__) ^ set(defined))
    # The callers' names (cli.py, the tests, molecule's api_run.py) are among them.
    for name in ("plan", "provision", "verify", "status", "rollback", "bundle", "report", "list_runs", "stream",
                 "run_playbook", "project_root", "parse_extravars", "extract_build_status", "RUN_TOKEN_VAR",
                 "RunResult", "HostResult", "ProgressEvent", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE"):
        assert name in api.__all__, name


def test_the_package_docstring_maps_every_public_name_to_its_module():
    rows = {}
    for line in api.__doc__.splitlines():
        found = re.match(r"^``(\w+)``\s+(.*)$", line)
        if found:
            rows[found.group(1)] = found.group(2)
    for name, module in _defined().items():
        word = "EXIT_*" if name.startswith("EXIT_") else name
        assert re.search(r"(^|[\s,])%s([\s,]|$)" % re.escape(word), rows.get(module, "")), \
            "the docstring's row for ``%s`` does not name %s: %r" % (module, name, rows.get(module))


def test_importing_the_api_needs_no_ansible_runner():
    # `sparkforge report` and `sparkforge versions` work where ansible-runner is not installed.
    code = "import sys, sparkforge.api, sparkforge.cli; print('ansible_runner' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_distribution_ships_every_package_under_src():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        find = tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]
    where = os.path.join(REPO, *find["where"])
    on_disk = {os.path.relpath(os.path.dirname(p), where).replace(os.sep, ".")
               for p in glob.glob(os.path.join(where, "**", "__init__.py"), recursive=True)}
    assert "sparkforge.api" in on_disk
    assert set(setuptools.find_packages(where)) == on_disk


def test_no_python_file_over_500_lines_without_a_reason_at_its_top():
    files = glob.glob(os.path.join(REPO, "src", "**", "*.py"), recursive=True) + \
        glob.glob(os.path.join(COLLECTION, "plugins", "**", "*.py"), recursive=True)
    assert any(p.endswith(os.path.join("api", "runs.py")) for p in files)
    unexplained = []
    for path in sorted(files):
        with open(path) as handle:
            lines = handle.read().splitlines()
        if len(lines) > LIMIT and not any(line.startswith(REASON) for line in lines[:HEAD]):
            unexplained.append("%s (%d lines)" % (os.path.relpath(path, REPO), len(lines)))
    assert not unexplained, ("split these, or say why each stays whole in a comment starting %r among its "
                             "first %d lines: %s" % (REASON, HEAD, ", ".join(unexplained)))


# The module_utils folders' cycles (of any length) are the collection's own rule: its tests/unit/plugins/module_utils/
# test_layout.py, which holds when the collection is tested alone (issue 55, item 4). src/'s rules are here.
SRC = os.path.join(REPO, "src", "sparkforge")


def _src_files():
    files = sorted(glob.glob(os.path.join(SRC, "**", "*.py"), recursive=True))
    assert len(files) > 10, "src/sparkforge's files were not found"
    return files


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(SRC))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _src_imports():
    """``{module: {sparkforge modules it imports, at any depth (inside functions too)}}`` of src/sparkforge."""
    files = _src_files()
    known = {_module_name(p) for p in files}
    graph = {}
    for path in files:
        name = _module_name(path)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    full = base + "." + alias.name
                    found.add(full if full in known else base)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        # A package's __init__ re-exporting its modules is not a cycle with them: each module's own imports are.
        graph[name] = {m for m in found & known if m != name and not (path.endswith("__init__.py")
                                                                      and m.startswith(name + "."))}
    return graph


def test_no_import_cycle_in_src():
    """issue 55, item 3: the CLI's modules import one way (versions and checksums imported each other)."""
    from ansible_collections.sparkforge.stack.tests.unit.utils.cycles import strongly_connected
    graph = _src_imports()
    assert sum(len(v) for v in graph.values()) > 10, "the import graph was not read"
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == [], "import cycles in src/: %s" % "; ".join(" <-> ".join(c) for c in cycles)


def _touches_sys_path(node):
    """sys.path.insert/append/extend(...), sys.path[...] = or sys.path = / += ..."""
    def is_sys_path(target):
        return isinstance(target, ast.Attribute) and target.attr == "path" and isinstance(target.value, ast.Name) \
            and target.value.id == "sys"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
        return node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear")
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(is_sys_path(t) or isinstance(t, ast.Subscript) and is_sys_path(t.value) for t in targets)
    return False


def test_src_never_edits_sys_path():
    """issue 55, item 3: the package reaches the collection through one door (sparkforge/collection.py), never by
    putting a directory on sys.path."""
    found = []
    for path in _src_files():
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        found += ["%s:%d" % (os.path.relpath(path, REPO), n.lineno) for n in ast.walk(tree) if _touches_sys_path(n)]
    assert found == [], "sys.path edited in src/ (import the collection through sparkforge.collection): " + \
        ", ".join(found)
    # The rule sees what it forbids.
    assert _touches_sys_path(ast.parse("sys.path.insert(0, x)").body[0].value)
    assert _touches_sys_path(ast.parse("sys.path[:0] = [x]").body[0])


def test_no_python_file_outside_the_collection_over_700_lines():
    """The house rule (the collection's own files are its test_layout.py's): src/, tests/, scripts/, bench/."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split()
    collection = os.path.relpath(COLLECTION, REPO) + os.sep
    files = [p for p in listed if not p.startswith(collection) and os.path.isfile(os.path.join(REPO, p))]
    assert any(p.startswith("src" + os.sep) for p in files) and len(files) > 50, files[:5]
    long_files = []
    for rel in sorted(files):
        with open(os.path.join(REPO, rel)) as handle:
            count = sum(1 for _line in handle)
        if count > 700:
            long_files.append("%s (%d lines)" % (rel, count))
    assert long_files == [], "split these by domain (at most 700 lines a file): " + ", ".join(long_files)


# How a role would derive an arch list itself: string surgery on names, or reading torch's own list.
ARCH_DERIVING = re.compile(r"regex|get_arch_list|join\(|map\(|replace\(|split\(")


def _arch_list_values(node, under=None, found=None):
    """(where, key, value) of every string under a key ending in arch_list (any case) in a role's tasks;
    ``where`` is 'defined' for a set_fact or vars entry (a value the role makes), else 'passed'."""
    found = [] if found is None else found
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and str(key).lower().endswith("arch_list"):
                found.append(("defined" if under in ("ansible.builtin.set_fact", "vars") else "passed", key, value))
            else:
                _arch_list_values(value, key, found)
    elif isinstance(node, list):
        for item in node:
            _arch_list_values(item, under, found)
    return found


def test_no_role_decides_an_arch_list():
    """issue 45: the plan decides each consumer's arch list (sparkforge_plan.arch, module_utils/plan/arch_plan.py);
    a role's arch list is read the one way, the plan_arch filter (the plan's block, or the plan's rules for this host
    when the plan is not the role's), never made in the role by string surgery or by reading the installed torch,
    and never read from sparkforge_plan.arch past the filter (issue 55)."""
    import yaml
    problems, defined = [], []
    for path in sorted(glob.glob(os.path.join(COLLECTION, "roles", "*", "tasks", "*.yml"))):
        with open(path) as handle:
            text = handle.read()
        name = os.path.relpath(path, COLLECTION)
        if "get_arch_list" in text or re.search(r"\^sm_|sm_\(", text):
            problems.append("%s reads or converts torch's arch names itself" % name)
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        if re.search(r"sparkforge_plan\.arch\b", code):
            problems.append("%s reads sparkforge_plan.arch past the plan_arch filter" % name)
        for where, key, value in _arch_list_values(yaml.safe_load(text)):
            if "{{" not in value:
                continue
            if ARCH_DERIVING.search(value):
                problems.append("%s: %s derives a list (%s)" % (name, key, ARCH_DERIVING.search(value).group(0)))
            if where == "defined":
                defined.append(key)
                if not re.search(r"sparkforge_plan\b.*?\|\s*sparkforge\.stack\.plan_arch\b", value, re.S):
                    problems.append("%s: %s is not read through the plan_arch filter" % (name, key))
    # The four consumers (pytorch, torch_domains, ml_packages, runtime_env) each define theirs: the walk saw them.
    assert set(defined) >= {"pytorch_planned_arch_list", "torch_domains_arch_list", "ml_packages_arch_list",
                            "_arch_list"}, defined
    assert problems == [], "; ".join(problems)


def test_cuda_arch_names_are_read_only_under_cuda():
    """issue 45: one home for CUDA arch names (module_utils/cuda/arch.py, and fatbin.py beside it reading
    cuobjdump's file names): no regular expression elsewhere in the collection's plugins or src/ (verify,
    platforms, the builds, the CLI) reads an sm_/compute_ name on its own."""
    pattern = re.compile(r"(sm_|compute_)")
    found = []
    files = glob.glob(os.path.join(REPO, "src", "**", "*.py"), recursive=True) + \
        glob.glob(os.path.join(COLLECTION, "plugins", "**", "*.py"), recursive=True)
    home = os.path.join(COLLECTION, "plugins", "module_utils", "cuda") + os.sep
    for path in sorted(p for p in files if not p.startswith(home)):
        with open(path) as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            # A pattern handed to re (compile, match, search, sub, findall...): its first argument.
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and pattern.search(node.args[0].value):
                found.append("%s:%d" % (os.path.relpath(path, REPO), node.lineno))
    assert len(files) > 100, "the Python files were not found"
    assert found == [], "read arch names through module_utils/cuda/arch.py: " + ", ".join(found)


def test_src_reads_the_manifest_through_the_collections_one_reader():
    """issue 55 item 3: the CLI reads the version manifest with plugin_utils/manifest.py (through the one door,
    sparkforge/collection.py's manifest_reader), never with its own YAML parse of the files."""
    from ansible_collections.sparkforge.stack.tests.unit.utils.readers import manifest_readers
    assert manifest_readers(os.path.join(REPO, "src"), os.devnull) == []
