"""Libraries over plumbing (STYLE rule 16), checked on the source with an AST walk:

* no hand-written pagination where botocore has a paginator: a function that names a paginated operation
  (``client.list_endpoints``) and one of that paginator's request tokens (``NextToken=``, ``{"Marker": ...}``,
  ``kwargs["ContinuationToken"]``) is a loop boto3's ``get_paginator`` already does. Which operations paginate and
  with which tokens comes from botocore's own paginator models (``paginators-1.json`` of every service), the data
  ``client.can_paginate`` reads;
* one Kubernetes access layer in the command line: only ``hyperpod_dpd.kube`` imports the ``kubernetes`` client;
* one command line framework: no entry point parses its arguments with ``argparse`` (Typer is the framework).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from hyperpod_infra.bundle import parse_source

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Every folder of ours that holds code (the generated cdk8s bindings excluded: they call no AWS API).
CODE = ("core", "runtime", "infra", "constructs", "k8s", "cli", "analysis", "mainjob", "scripts")
GENERATED = REPO_ROOT / "k8s" / "hyperpod_k8s" / "imports"


def _python_files() -> list[Path]:
    files = [REPO_ROOT / "app.py"]
    for folder in CODE:
        for path in sorted((REPO_ROOT / folder).rglob("*")):
            if path.is_relative_to(GENERATED) or not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.suffix == ".py" or (path.parent.name == "scripts" and not path.suffix
                                        and path.read_bytes().startswith(b"#!/usr/bin/env python")):
                files.append(path)
    return files


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return parse_source(path)  # on a fresh thread when CPython 3.11.7 miscounts the AST depth (bundle.parse_source)


@functools.cache
def paginated_operations() -> dict[str, frozenset[str]]:
    """``{operation as a boto3 method name: its paginator's request tokens}`` over every service botocore has
    paginators for (an operation name shared by services gets the union of their tokens)."""
    import botocore.session
    from botocore import xform_name

    loader = botocore.session.get_session().get_component("data_loader")
    found: dict[str, set[str]] = {}
    for service in loader.list_available_services("paginators-1"):
        for operation, paginator in loader.load_service_model(service, "paginators-1")["pagination"].items():
            tokens = paginator.get("input_token") or []
            found.setdefault(xform_name(operation), set()).update([tokens] if isinstance(tokens, str) else tokens)
    return {op: frozenset(tokens) for op, tokens in found.items()}


def _strings_and_names(node: ast.AST) -> tuple[set[str], set[str]]:
    """The attribute names (``x.list_endpoints``) and the keyword names and string constants (``NextToken=``,
    ``"Marker"``) under ``node``; docstrings are not strings the code uses."""
    docstrings = {id(b.value) for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                                     | ast.ClassDef | ast.Module)
                  for b in n.body[:1] if isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)}
    attributes, tokens = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            attributes.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg:
            tokens.add(n.arg)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            tokens.add(n.value)
    return attributes, tokens


def hand_paginated(path: Path) -> list[str]:
    """``<file>:<line> <function>: <operation> with <token>`` for each function that pages an operation by hand."""
    paginated = paginated_operations()
    tree = _parsed(path)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        attributes, tokens = _strings_and_names(function)
        for operation in sorted(attributes & paginated.keys()):
            for token in sorted(tokens & paginated[operation]):
                where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path.name
                found.append(f"{where}:{function.lineno} {function.name}: {operation} with {token}")
    return found


def test_no_hand_written_pagination_where_botocore_has_a_paginator() -> None:
    found = [f for path in _python_files() for f in hand_paginated(path)]
    assert found == [], "use client.get_paginator(operation).paginate(...) instead"


def test_the_pagination_check_sees_token_loops_and_leaves_paginators_and_unpaginated_calls_alone(
        tmp_path: Path) -> None:
    """Guards the check: a token passed as a keyword, a dict key or a subscript is found next to a paginated
    operation; a paginator, and an operation without one (CloudWatch Logs ``GetLogEvents``), are not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "def a(sm, kwargs):\n    sm.list_endpoints(NextToken=kwargs['t'])\n"
        "def b(s3, kwargs):\n    kwargs['ContinuationToken'] = 't'\n    s3.list_objects_v2(**kwargs)\n"
        "def c(pages, elbv2):\n    pages(elbv2.describe_load_balancers, 'LoadBalancers', {'Marker': None})\n"
        "def d(s3):\n    return s3.get_paginator('list_objects_v2').paginate(Bucket='b')\n"
        "def e(logs):\n    return logs.get_log_events(logGroupName='g', logStreamName='s', nextToken='t')\n"
        "def f(sm):\n    '''NextToken in a docstring is prose.'''\n    return sm.list_endpoints()\n")
    assert hand_paginated(probe) == ["probe.py:1 a: list_endpoints with NextToken",
                                     "probe.py:3 b: list_objects_v2 with ContinuationToken",
                                     "probe.py:6 c: describe_load_balancers with Marker"]


@pytest.mark.parametrize(("service", "operation"), [("logs", "get_log_events"), ("sagemaker", "list_endpoints")])
def test_the_paginator_table_is_what_can_paginate_says(service: str, operation: str) -> None:
    """The table the check reads agrees with boto3's ``can_paginate`` on the real service models."""
    import boto3

    client = boto3.client(service, region_name="us-west-2", aws_access_key_id="k", aws_secret_access_key="s")
    assert (operation in paginated_operations()) == client.can_paginate(operation)


def _runtime_imports(path: Path) -> set[str]:
    """Modules ``path`` imports when it runs (at module level or in a function), not those under
    ``if TYPE_CHECKING:`` (annotations only)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.add(child.module)
            visit(child)

    visit(_parsed(path))
    return found


def _is_kube_layer(path: Path) -> bool:
    """The command line's Kubernetes layer: ``hyperpod_dpd/kube.py`` and ``kubeconfig.py`` (the context check and
    the connection, split out of it), or further modules it is split into (``kube_*.py`` beside it, or a
    ``hyperpod_dpd/kube/`` package)."""
    cli = REPO_ROOT / "cli" / "hyperpod_dpd"
    return (path.parent == cli and (path.stem in ("kube", "kubeconfig") or path.stem.startswith("kube_"))) or \
        path.is_relative_to(cli / "kube")


def kubernetes_importers(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(REPO_ROOT)) for p in paths if not _is_kube_layer(p)
            and any(m.split(".")[0] == "kubernetes" for m in _runtime_imports(p))]


def test_one_kubernetes_access_layer_in_the_command_line() -> None:
    """Only ``hyperpod_dpd.kube`` builds clients of the official ``kubernetes`` package; ``bench`` and every other
    command call Kubernetes through it (the Lambdas' small client, ``hyperpod_runtime.eks.kube``, says why it is not
    the official one)."""
    assert kubernetes_importers(_python_files()) == []


def test_the_kubernetes_check_sees_lazy_imports_and_skips_annotations(tmp_path: Path) -> None:
    typed_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kubernetes.client import ApiClient\n"
    probe, typed = tmp_path / "probe.py", tmp_path / "typed.py"
    probe.write_text(typed_only + "def f():\n    from kubernetes import client\n")
    typed.write_text(typed_only)
    assert _runtime_imports(probe) == {"typing", "kubernetes"} and _runtime_imports(typed) == {"typing"}


#: Argument parsers other than Typer's.
OTHER_PARSERS = {"argparse", "optparse", "getopt"}


def test_one_command_line_framework_for_every_entry_point() -> None:
    """Every entry point that takes options parses them with Typer (``hyperpod_core.errors.run_app`` runs it under
    the one-line guard). What reads ``sys.argv`` itself takes one positional value at most and says why it may:
    ``hyperpod_core.config``'s and ``telemetry.reference``'s file (the core imports no framework),
    ``lint_worker``'s (a child the main job starts), ``scripts/admin-principal-arn``'s (standard library only: it
    runs before the venv exists)."""
    found = [f"{p.relative_to(REPO_ROOT)} imports {m}" for p in _python_files()
             for m in sorted(_runtime_imports(p)) if m.split(".")[0] in OTHER_PARSERS]
    assert found == []
