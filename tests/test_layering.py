"""The layering, checked rather than promised (docs/architecture.md).

- `lint-imports` keeps the contracts of `[tool.importlinter]` in pyproject.toml: the layers
  policydsl.cli -> runtime -> compiler -> the language, and inside runtime
  service -> simulation | kube -> engine -> cluster.
- Our own walk of the import graph (`ast`, every import anywhere in a module, function-level
  ones too; `if TYPE_CHECKING:` blocks left out, since they never run): no import circle between
  our modules, no module using another module's `_private` name, and every function-level
  import of our modules carries a comment (same line or the line above) saying why it is lazy.
  A lazy import kept for start-up time is fine; one that dodges a circle is not.
- docs/architecture.md does not drift: every path it writes in backticks exists and its
  package table lists every package.
- Every import in a ```python block of the README files and docs/ still works.

The walker is a set of functions over a root folder, so each check is also run against a small
synthetic package (tmp_path) to show that it can fail.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from dataclasses import dataclass
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("policydsl", "compiler", "runtime")
ARCHITECTURE = REPO / "docs" / "architecture.md"


# --------------------------------------------------------------------------------------------
# The walker


@dataclass(frozen=True)
class Import:
    importer: str          # the module doing the import
    path: Path             # its file
    line: int              # first line of the statement
    end_line: int          # last line of the statement
    target: str            # the module imported (ours), resolved
    names: tuple[str, ...]  # names taken from it (`from target import a, b`); () for `import x`
    lazy: bool             # inside a function
    type_checking: bool    # inside `if TYPE_CHECKING:`


def find_modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Module name -> file, for every .py file under root/<package> (a package is its __init__),
    and every Cython .pyx (a module too once built: `from runtime.engine.kernels import fit`)."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted([*(root / package).rglob("*.py"), *(root / package).rglob("*.pyx")]):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _own(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _base_of(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The absolute module a `from ... import` names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def module_imports(module: str, path: Path, modules: dict[str, Path], tree: ast.AST) -> list[Import]:
    """Every import of our modules in one module: `import a.b` -> a.b; `from a import b` -> a.b
    when that is a module, else a; relative imports resolved."""
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool, type_checking: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, lazy, True)
            for child in node.orelse:
                visit(child, lazy, type_checking)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lazy = True
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _own(alias.name, modules)
                if target:
                    found.append(Import(module, path, node.lineno, node.end_lineno or node.lineno,
                                        target, (), lazy, type_checking))
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(node, module, path)
            by_target: dict[str, list[str]] = {}
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules else _own(base, modules)
                if target:
                    by_target.setdefault(target, []).append(alias.name)
            for target, names in by_target.items():
                found.append(Import(module, path, node.lineno, node.end_lineno or node.lineno,
                                    target, tuple(names), lazy, type_checking))
        for child in ast.iter_child_nodes(node):
            visit(child, lazy, type_checking)

    visit(tree, False, False)
    return found


def _sources(modules: dict[str, Path]):
    """(module, file, tree) of each Python module (a file moved away meanwhile is skipped)."""
    for module, path in modules.items():
        if path.suffix == ".py":
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            yield module, path, ast.parse(text, filename=str(path))


def all_imports(root: Path, packages=PACKAGES) -> list[Import]:
    modules = find_modules(root, packages)
    return [imp for module, path, tree in _sources(modules) for imp in module_imports(module, path, modules, tree)]


def import_graph(imports: list[Import]) -> dict[str, set[str]]:
    """importer -> imported, leaving out TYPE_CHECKING imports (they never run)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if not imp.type_checking and imp.target != imp.importer:
            graph.setdefault(imp.importer, set()).add(imp.target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    components.append(sorted(component))
    return sorted(components)


def find_circles(root: Path, packages=PACKAGES) -> list[str]:
    """One message per import circle: its modules, then each import inside it with file:line."""
    imports = all_imports(root, packages)
    messages = []
    for component in strongly_connected(import_graph(imports)):
        members = set(component)
        edges = sorted({f"  {i.importer} -> {i.target}  ({_where(root, i)})" for i in imports
                        if not i.type_checking and i.importer in members and i.target in members
                        and i.importer != i.target})
        messages.append(f"circle of {len(component)}: {', '.join(component)}\n" + "\n".join(edges))
    return messages


def _where(root: Path, imp: Import) -> str:
    return f"{imp.path.relative_to(root).as_posix()}:{imp.line}"


def _private(name: str) -> bool:
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


def _module_aliases(tree: ast.AST, modules: dict[str, Path], module: str, path: Path) -> dict[str, str]:
    """Local name -> our module it is bound to (`import a.b as m`, `import a.b`, `from a import b`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    aliases[alias.asname] = alias.name
                elif not alias.asname and alias.name.split(".")[0] in modules:
                    aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(node, module, path)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    return aliases


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _private_use(owner: str, name: str, importer: str, modules: dict[str, Path]) -> bool:
    """Whether `importer` using `owner.name` takes another module's private name. A private
    submodule may be used by its own package (as import-linter's private_modules has it)."""
    if not _private(name) or owner == importer:
        return False
    if f"{owner}.{name}" in modules:
        return not (importer == owner or importer.startswith(owner + "."))
    return True


def find_private_uses(root: Path, packages=PACKAGES) -> list[str]:
    """`from x import _y` and `x._y` (x one of our modules, bound by an import) in another module."""
    modules = find_modules(root, packages)
    problems = []
    for module, path, tree in _sources(modules):
        aliases = _module_aliases(tree, modules, module, path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _base_of(node, module, path)
                if _own(base, modules) != base:
                    continue
                for alias in node.names:
                    if _private_use(base, alias.name, module, modules):
                        problems.append((path, node.lineno, f"{module} imports {base}.{alias.name}"))
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                chain = _dotted(node.value)
                if not chain or chain[0] not in aliases:
                    continue
                owner = aliases[chain[0]]
                for part in chain[1:]:
                    if f"{owner}.{part}" not in modules:
                        break
                    owner = f"{owner}.{part}"
                else:
                    if _private_use(owner, node.attr, module, modules):
                        problems.append((path, node.lineno, f"{module} uses {owner}.{node.attr}"))
    return [f"{path.relative_to(root).as_posix()}:{line}: {what}"
            for path, line, what in sorted(set(problems))]


def _comment_lines(source: str) -> tuple[set[int], set[int]]:
    """(lines holding a comment, lines holding nothing but a comment)."""
    comments, only = set(), set()
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row = token.start[0]
            comments.add(row)
            if lines[row - 1].strip().startswith("#"):
                only.add(row)
    return comments, only


def find_uncommented_lazy_imports(root: Path, packages=PACKAGES) -> list[str]:
    """Function-level imports of our modules without a comment saying why they are lazy: on the
    statement's own line(s), or a comment line right above it. A run of lazy imports one after
    the other shares the comment above its first."""
    problems: dict[tuple[Path, int, str], list[str]] = {}
    by_file: dict[Path, list[Import]] = {}
    for imp in all_imports(root, packages):
        if imp.lazy and not imp.type_checking:
            by_file.setdefault(imp.path, []).append(imp)
    for path, imports in sorted(by_file.items()):
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError:  # moved away meanwhile
            continue
        comments, comment_only = _comment_lines(source)
        tree = ast.parse(source)
        import_lines = {line for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}
        for imp in imports:
            if any(line in comments for line in range(imp.line, imp.end_line + 1)):
                continue
            above = imp.line - 1
            while above in import_lines and above not in comments:
                above -= 1
            if above in comment_only or (above in import_lines and above in comments):
                continue
            problems.setdefault((path, imp.line, imp.importer), []).append(imp.target)
    return [f"{path.relative_to(root).as_posix()}:{line}: {importer} imports {', '.join(sorted(set(targets)))} "
            f"inside a function with no comment saying why it is lazy"
            for (path, line, importer), targets in sorted(problems.items())]


# --------------------------------------------------------------------------------------------
# The checks, on this repository


def test_lint_imports_keeps_the_contracts():
    result = _lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_circles():
    circles = find_circles(REPO)
    assert not circles, "import circles between our modules:\n" + "\n".join(circles)


def test_no_module_uses_another_modules_private_names():
    uses = find_private_uses(REPO)
    assert not uses, "private names used across modules:\n" + "\n".join(uses)


def test_lazy_imports_say_why():
    missing = find_uncommented_lazy_imports(REPO)
    assert not missing, (
        "a function-level import must not dodge a circle; one kept for start-up time carries a "
        "one-line comment (same line or the line above) saying so:\n" + "\n".join(missing))


# --------------------------------------------------------------------------------------------
# Each check can fail: a synthetic package


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_walker_finds_a_circle(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/b.py": "def f():\n    # lazy: start-up time\n    from . import a\n",
        "pkg/c.py": "import pkg.a\n",
    })
    circles = find_circles(root, ("pkg",))
    assert len(circles) == 1
    assert circles[0].startswith("circle of 2: pkg.a, pkg.b")
    assert "pkg.b -> pkg.a  (pkg/b.py:3)" in circles[0]


def test_walker_counts_an_init_importing_its_submodules(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.sub import helper\nVALUE = 1\n",
        "pkg/sub.py": "from pkg import VALUE\n",
    })
    assert find_circles(root, ("pkg",))[0].startswith("circle of 2: pkg, pkg.sub")


def test_walker_leaves_type_checking_imports_out_of_circles(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from pkg.a import Other\nthing = 1\n"),
    })
    assert find_circles(root, ("pkg",)) == []


def test_walker_resolves_relative_and_submodule_imports(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "from . import sub\n",
        "pkg/sub/__init__.py": "from .leaf import x\nfrom .. import other\n",
        "pkg/sub/leaf.py": "from pkg import sub as s\nx = 1\n",
        "pkg/other.py": "import pkg.sub.leaf as l\n",
    })
    edges = {(i.importer, i.target) for i in all_imports(root, ("pkg",))}
    assert edges == {("pkg", "pkg.sub"), ("pkg.sub", "pkg.sub.leaf"), ("pkg.sub", "pkg.other"),
                     ("pkg.sub.leaf", "pkg.sub"), ("pkg.other", "pkg.sub.leaf")}


def test_walker_finds_private_names(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "_hidden = 1\n__all__ = ['x']\n_self = 2\nprint(_self)\n",
        "pkg/b.py": "from pkg.a import _hidden, __all__\n",
        "pkg/c.py": "from pkg import a as alias\nprint(alias._hidden, alias.__all__)\n",
        "pkg/d.py": "import pkg.a\nprint(pkg.a._hidden)\n",
        "pkg/e.py": "import os\nprint(os._exit)\n",
        "pkg/_impl.py": "x = 1\n",
        "pkg/f.py": "from pkg import _impl\nfrom . import _impl as i\n",
        "other/__init__.py": "import pkg\nfrom pkg import _impl\nprint(pkg._impl.x)\n",
    })
    assert find_private_uses(root, ("pkg", "other")) == [
        "other/__init__.py:2: other imports pkg._impl",
        "other/__init__.py:3: other uses pkg._impl",
        "pkg/b.py:1: pkg.b imports pkg.a._hidden",
        "pkg/c.py:2: pkg.c uses pkg.a._hidden",
        "pkg/d.py:2: pkg.d uses pkg.a._hidden",
    ]


def test_walker_finds_lazy_imports_without_a_comment(tmp_path):
    root = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "x = 1\n",
        "pkg/b.py": """\
            import json


            def bare():
                from pkg.a import x
                import json as j
                return x


            def commented():
                # lazy: keeps `pkg --help` fast
                from pkg.a import x
                from pkg import a
                return x


            def same_line():
                from pkg.a import x  # lazy: start-up time
                return x


            def code_above():
                y = 1  # a comment about y
                from pkg import a
                return a
            """,
    })
    assert find_uncommented_lazy_imports(root, ("pkg",)) == [
        "pkg/b.py:5: pkg.b imports pkg.a inside a function with no comment saying why it is lazy",
        "pkg/b.py:24: pkg.b imports pkg.a inside a function with no comment saying why it is lazy",
    ]


def _importlinter_section() -> str:
    """The `[tool.importlinter]` tables of pyproject.toml, as TOML text."""
    kept, inside = [], False
    for line in (REPO / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            inside = line.lstrip("[").startswith("tool.importlinter")
        if inside:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return subprocess.run([lint_imports, "--no-cache", "--no-logo"], cwd=root, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(root)})


def test_the_contracts_cover_a_new_language_module(tmp_path):
    """The contracts of pyproject.toml, on a copy of the three packages' shape: a language module
    nobody listed that imports the compiler breaks them, and so does an upward import in runtime."""
    root = _write(tmp_path, {
        "policydsl/__init__.py": "",
        "policydsl/__main__.py": "from policydsl.cli import main\n",
        "policydsl/parser.py": "",
        "policydsl/brand_new.py": "from compiler.lower import lower\n",
        "policydsl/cli/__init__.py": "import runtime.service.loop\nmain = 1\n",
        "compiler/__init__.py": "",
        "compiler/lower.py": "from policydsl.parser import *\nlower = 1\n",
        "runtime/__init__.py": "",
        "runtime/cluster/__init__.py": "",
        "runtime/engine/__init__.py": "import runtime.cluster\nimport compiler.lower\n",
        "runtime/simulation/__init__.py": "import runtime.engine\n",
        "runtime/kube/__init__.py": "import runtime.engine\nimport runtime.service\n",
        "runtime/service/__init__.py": "import runtime.kube\n",
        "runtime/service/loop.py": "",
        "pyproject.toml": _importlinter_section(),
    })
    result = _lint_imports(root)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "policydsl.brand_new -> compiler.lower" in out, out
    assert "runtime.kube is not allowed to import runtime.service" in out, out
    assert "BROKEN" in out and "Contracts: " in out, out
    # and with the two bad imports gone, every contract is kept
    (root / "policydsl/brand_new.py").write_text("from policydsl.parser import *\n")
    (root / "runtime/kube/__init__.py").write_text("import runtime.engine\n")
    result = _lint_imports(root)
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------------------------
# docs/architecture.md does not drift

_BACKTICKED = re.compile(r"`([^`\n]+)`")
_PATHLIKE = re.compile(r"^[\w.\-]+(/[\w.\-*]*)+$|^[\w\-*]+\.(py|pyx|md|toml|lark)$")


def backticked_paths(text: str) -> list[str]:
    """Paths written in backticks: words with a slash, or a file name with an extension. A bare
    file name in a table row is taken inside the row's package (its first cell): `parser.py` in
    the row of `policydsl/` is policydsl/parser.py."""
    paths = []
    for line in text.splitlines():
        tokens = [t for t in _BACKTICKED.findall(line) if _PATHLIKE.match(t)]
        package = ""
        if line.startswith("|"):
            first = _BACKTICKED.findall(line.strip("|").split("|")[0])
            package = first[0] if first and first[0].endswith("/") else ""
        paths.extend(t if "/" in t or not package else package + t for t in tokens)
    return paths


def table_packages(text: str) -> set[str]:
    """The first cells of the markdown table rows, each a backticked folder (`runtime/engine/`)."""
    found = set()
    for line in text.splitlines():
        if line.startswith("|"):
            first = line.strip("|").split("|")[0]
            found.update(p.rstrip("/") for p in _BACKTICKED.findall(first) if p.endswith("/"))
    return found


def python_packages(root: Path, packages=PACKAGES) -> set[str]:
    return {init.parent.relative_to(root).as_posix() for package in packages
            for init in (root / package).rglob("__init__.py") if "__pycache__" not in init.parts}


def missing_paths(root: Path, text: str) -> list[str]:
    missing = []
    for token in backticked_paths(text):
        if "*" in token:
            if not list(root.glob(token)):
                missing.append(token)
        elif not (root / token).exists():
            missing.append(token)
    return missing


def test_architecture_paths_exist():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert len(backticked_paths(text)) > 20
    assert missing_paths(REPO, text) == []


def test_architecture_table_lists_every_package():
    documented = table_packages(ARCHITECTURE.read_text(encoding="utf-8"))
    undocumented = sorted(python_packages(REPO) - documented)
    assert not undocumented, f"packages missing from the table of docs/architecture.md: {undocumented}"
    gone = sorted(documented - python_packages(REPO))
    assert not gone, f"docs/architecture.md lists packages that no longer exist: {gone}"


def test_the_doc_checks_can_fail(tmp_path):
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/a.py": ""})
    doc = ("| package | owns |\n|---|---|\n| `pkg/` | `a.py`, `b.py` |\n\n"
           "`pkg/a.py`, `pkg/gone.py`, `pkg/*.py`, `x = a/b`, `a.py`\n")
    assert missing_paths(root, doc) == ["pkg/b.py", "pkg/gone.py", "a.py"]
    assert python_packages(root, ("pkg",)) - table_packages(doc) == {"pkg/sub"}


# --------------------------------------------------------------------------------------------
# Every import in the README files' and docs' python blocks works

_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "runtime" / "README.md",
            REPO / "runtime" / "kube" / "README.md"]


def doc_imports(text: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in the ```python blocks; names [] for `import module`."""
    found = []
    for block in _FENCE.findall(text):
        try:
            statements = [n for n in ast.walk(ast.parse(block)) if isinstance(n, (ast.Import, ast.ImportFrom))]
        except SyntaxError:  # a block with elisions: read its import lines one by one
            statements = []
            for line in block.splitlines():
                if re.match(r"\s*(from\s+\S+\s+)?import\s", line):
                    try:
                        statements.extend(ast.parse(line.strip()).body)
                    except SyntaxError:
                        found.append((line.strip(), ["<unparsable>"]))
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend((alias.name, []) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                found.append(("." * node.level + (node.module or ""), [a.name for a in node.names]))
    return found


_CHECK_IMPORTS = """
import importlib, json, sys
failures = []
for where, module, names in json.loads(sys.stdin.read()):
    try:
        mod = importlib.import_module(module)
        for name in names:
            if name != "*" and not hasattr(mod, name):
                importlib.import_module(f"{module}.{name}")
    except Exception as err:
        statement = f"from {module} import {', '.join(names)}" if names else f"import {module}"
        failures.append(f"{where}: {statement}: {type(err).__name__}: {err}")
print("\\n".join(failures))
sys.exit(1 if failures else 0)
"""


def broken_doc_imports(items: list[tuple[str, str, list[str]]], cwd: Path) -> str:
    result = subprocess.run([sys.executable, "-c", _CHECK_IMPORTS], input=json.dumps(items), cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return "" if result.returncode == 0 else (result.stdout + result.stderr).strip()


def test_public_import_paths_in_docs_work():
    items = [(path.relative_to(REPO).as_posix(), module, names)
             for path in doc_files() if path.exists()
             for module, names in doc_imports(path.read_text(encoding="utf-8"))]
    assert items, "no ```python block imports anything: the test would check nothing"
    broken = broken_doc_imports(items, REPO)
    assert not broken, "imports in the docs that no longer work:\n" + broken


def test_the_doc_import_check_can_fail(tmp_path):
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "good = 1\n"})
    text = "```python\nfrom pkg.a import good, gone\nimport pkg.missing\nx = f(...)\n```\n"
    items = [("doc.md", module, names) for module, names in doc_imports(text)]
    assert items == [("doc.md", "pkg.a", ["good", "gone"]), ("doc.md", "pkg.missing", [])]
    broken = broken_doc_imports(items, tmp_path)
    assert "from pkg.a import good, gone: ModuleNotFoundError" in broken
    assert "doc.md: import pkg.missing: ModuleNotFoundError" in broken
