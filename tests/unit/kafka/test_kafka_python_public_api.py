"""transcoder uses kafka-python through its public API only: no private module, name or attribute of kafka-python
is imported, read, called, overridden or replaced anywhere under transcoder/.

"Private" is kafka-python's own leading underscore: every `_name` it defines (a module, class, function, method or
attribute assigned anywhere in the installed package) is one. The check reads transcoder's source with `ast`:
- an import of a private module or name of kafka-python;
- an attribute `._x` on anything but `self`/`cls` where kafka-python defines `_x` (the value's type is not known
  statically, so the name decides: `admin._manager`, `self._client()._manager`);
- any private attribute on a name bound by a kafka-python import (`kafka.admin._cluster`, `Errors._x`);
- `getattr`/`hasattr`/`setattr`/`delattr` with a string naming a private name of kafka-python;
- an assignment to an attribute of a kafka-python module or class (replacing its code: a patch);
- in a class deriving from a kafka-python class, a method named like one of kafka-python's private names (an
  override of its internals), or `self._x` so named that the class does not assign itself (reading them; an
  attribute the subclass sets in its own methods is its own).
No allow-list. The first tests show each rule catching the code that this rule replaced.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import kafka
import pytest

import transcoder

KAFKA_PYTHON = Path(kafka.__file__).parent
TRANSCODER = Path(transcoder.__file__).parent
ACCESSORS = {"getattr", "hasattr", "setattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@cache
def kafka_python_private_names() -> frozenset[str]:
    """Every private name the installed kafka-python defines: modules, classes, functions, methods, attributes."""
    names: set[str] = set()
    for path in KAFKA_PYTHON.rglob("*.py"):
        names.update(part.removesuffix(".py") for part in path.relative_to(KAFKA_PYTHON).parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return frozenset(n for n in names if _private(n))


def _kafka_module(module: str | None) -> bool:
    return module is not None and (module == "kafka" or module.startswith("kafka."))


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` uses a private name of kafka-python: "file:line: what", one per use."""
    tree = ast.parse(source, filename)
    private = kafka_python_private_names()
    bound: set[str] = set()  # names bound by kafka-python imports, anywhere in the module
    found: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _kafka_module(alias.name):
                    bound.add(alias.asname or alias.name.split(".")[0])
                    if any(_private(p) for p in alias.name.split(".")):
                        flag(node, f"imports the private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and _kafka_module(node.module):
            assert node.module is not None
            if any(_private(p) for p in node.module.split(".")):
                flag(node, f"imports from the private module {node.module}")
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if _private(alias.name):
                    flag(node, f"imports the private name {alias.name} from {node.module}")

    kafka_classes: list[ast.ClassDef] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node)
            if root in bound:
                flag(node, f"uses {ast.unparse(node)}, private in kafka-python")
            elif node.attr in private and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                flag(node, f"reads {ast.unparse(node)}: kafka-python's private name {node.attr}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ACCESSORS:
            for arg in node.args[1:2]:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in private:
                    flag(node, f"{node.func.id}(..., {arg.value!r}): kafka-python's private name")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if isinstance(t, ast.Attribute) and _root(t) in bound:
                        flag(node, f"replaces {ast.unparse(t)} in kafka-python")
        if isinstance(node, ast.ClassDef) and any(_root(b) in bound for b in node.bases):
            kafka_classes.append(node)

    for cls in kafka_classes:
        own = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
               and isinstance(n.value, ast.Name) and n.value.id == "self"}
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in private:
                flag(node, f"{cls.name} overrides kafka-python's private {node.name}")
            elif (isinstance(node, ast.Attribute) and node.attr in private and node.attr not in own
                  and isinstance(node.value, ast.Name) and node.value.id == "self"):
                flag(node, f"{cls.name} uses kafka-python's private {node.attr}")
    return found


# What transcoder did before (transcoder/kafka/protocol.py and transport.py, issue 30): each is caught.
@pytest.mark.parametrize("source", [
    "def f(self):\n    manager = self._client()._manager\n",
    "def f(self, admin):\n    return self._run(admin._get_cluster_metadata, [])\n",
    "from kafka.net import manager\nmanager.KafkaTCPTransport, manager.KafkaSSLTransport = 1, 2\n",
    "def f(tcp):\n    return hasattr(tcp, '_sock_recv')\n",
    ("from kafka.net.transport import KafkaTCPTransport\nclass Big(KafkaTCPTransport):\n"
    "    def _sock_recv(self):\n        return self._sock.recv(1 << 18)\n"),
    "from kafka.admin._cluster import ClusterAdminMixin\n",
    "import kafka.admin\nkafka.admin._cluster\n",
    "from kafka.protocol.parser import KafkaProtocol\ndef f(p: KafkaProtocol):\n    return p._correlation_id\n",
])
def test_each_way_of_reaching_into_kafka_python_is_caught(source: str) -> None:
    assert private_uses(source)


@pytest.mark.parametrize("source", [
    "from kafka.net import KafkaConnectionManager\ndef f(m: KafkaConnectionManager, r):\n    return m.send(r)\n",
    "class C:\n    def __init__(self):\n        self._manager = None\n    def f(self):\n        return self._manager\n",
    "import kafka.errors\ndef f(code):\n    return kafka.errors.for_code(code).__name__\n",
    ("from kafka.net.sasl.oauth import AbstractTokenProvider\nclass P(AbstractTokenProvider):\n"
    "    def __init__(self):\n        self._lock = None\n    def token(self):\n        return self._lock\n"),
])
def test_public_names_and_transcoders_own_private_attributes_pass(source: str) -> None:
    assert private_uses(source) == []


def test_the_private_names_are_kafka_pythons_own() -> None:
    names = kafka_python_private_names()
    assert {"_manager", "_get_cluster_metadata", "_sock_recv", "_conns"} <= names
    assert "send" not in names and "__init__" not in names


def test_no_module_under_transcoder_uses_a_private_name_of_kafka_python() -> None:
    found = [use for path in sorted(TRANSCODER.rglob("*.py"))
             for use in private_uses(path.read_text(encoding="utf-8"), str(path.relative_to(TRANSCODER.parent)))]
    assert found == []
