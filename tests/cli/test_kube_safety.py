"""The Kubernetes commands act on this deployment's cluster only, and say what to do when the API fails.

Two fake API servers play two clusters (``day2_fakes.kube_server``): the outputs file names the first as this
deployment's (``EksApiEndpoint``, as ``cdk deploy --outputs-file`` writes the cluster stack's output); the
kubeconfig's current context points at the second. Every command that talks to Kubernetes must refuse before it
sends the second server a single request (``bench``: tests/cli/test_bench.py), and name the fix (``aws eks
update-kubeconfig`` for this cluster, or the ``--context`` that points at it). Kubeconfig entries are in the form
``aws eks update-kubeconfig`` writes (cluster and context named by the cluster ARN, user ``exec`` of ``aws
--region R eks get-token --cluster-name NAME``: AWS CLI ``eks update-kubeconfig`` reference).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from day2_fakes import EKS_CLUSTER, FakeCluster, deployed_at, kube_server, one_line_error

from fake_http import QuietHandler, local_url, serving
from hyperpod_dpd.kubeconfig import ClusterIdentity, KubeContext, is_cluster

pytest_plugins = ("day2_fixtures",)

ARN = f"arn:aws:eks:us-west-2:123456789012:cluster/{EKS_CLUSTER}"
OTHER_ARN = "arn:aws:eks:us-west-2:123456789012:cluster/someone-elses-eks"


def _kubeconfig(path: Path, contexts: dict[str, dict[str, Any]], current: str) -> Path:
    """A kubeconfig with one cluster, user and context per entry of ``contexts`` (``server``, optional
    ``cluster`` entry name, ``exec_args``, ``tls_server_name``)."""
    clusters, users, ctxs = [], [], []
    for name, c in contexts.items():
        cluster_name = c.get("cluster", name)
        cluster: dict[str, Any] = {"server": c["server"]}
        if c.get("tls_server_name"):
            cluster["tls-server-name"] = c["tls_server_name"]
        clusters.append({"name": cluster_name, "cluster": cluster})
        user: dict[str, Any] = {"token": "t"}
        if c.get("exec_args"):
            user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                             "args": c["exec_args"]}}
        users.append({"name": name, "user": user})
        ctxs.append({"name": name, "context": {"cluster": cluster_name, "user": name}})
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": current,
                                "clusters": clusters, "contexts": ctxs, "users": users}))
    return path


@pytest.fixture
def two_clusters(tmp_path: Path, config_file: Path) -> Iterator[tuple[FakeCluster, FakeCluster, Path]]:
    """This deployment's cluster (named by the outputs file) and another; the kubeconfig's current context is the
    other's, a second context (named by ARN, as update-kubeconfig names it) this one's."""
    ours, theirs = FakeCluster(), FakeCluster()
    ours.dpd_endpoint()
    theirs.dpd_endpoint()
    with ExitStack() as stack:
        our_url = stack.enter_context(kube_server(ours, tmp_path / "ours.kubeconfig"))
        their_url = stack.enter_context(kube_server(theirs, tmp_path / "theirs.kubeconfig"))
        deployed_at(config_file, our_url)
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", {
            ARN: {"server": our_url}, OTHER_ARN: {"server": their_url}}, current=OTHER_ARN)
        yield ours, theirs, kubeconfig


def _refusal(result: Any, their: FakeCluster) -> str:
    assert result.code == 2, (result.out, result.err)
    assert their.requests == [], "not one request to the other cluster"
    return one_line_error(result)


def _expected(config_file: Path, ours: str, theirs: str) -> str:
    return (f"error: kubeconfig context {OTHER_ARN!r} points at {theirs}, not at EKS cluster {EKS_CLUSTER} of this "
            f"config ({ours}, {config_file.with_suffix('.out') / 'cdk-outputs.json'}); run: aws eks update-kubeconfig "
            f"--name {EKS_CLUSTER} --region us-west-2, or pass --context {ARN}")


def _servers(kubeconfig: Path) -> dict[str, str]:
    data = json.loads(kubeconfig.read_text())
    return {c["name"]: c["cluster"]["server"] for c in data["clusters"]}


@pytest.mark.parametrize("command", [("status",), ("logs", "decode"), ("smoke", "--url", "http://127.0.0.1:9/v1"),
                                     ("status", "--json")])
def test_every_kubernetes_command_refuses_another_clusters_context(cli, config_file, two_clusters, command) -> None:
    _, theirs, kubeconfig = two_clusters
    servers = _servers(kubeconfig)
    result = cli(*command, "--config", str(config_file), "--kubeconfig", str(kubeconfig))
    assert _refusal(result, theirs) == _expected(config_file, servers[ARN], servers[OTHER_ARN])


def test_the_named_context_of_this_cluster_is_used(cli, config_file, two_clusters) -> None:
    ours, theirs, kubeconfig = two_clusters
    result = cli("logs", "router", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--context", ARN)
    assert result.code == 0, result.err
    assert ours.requests and theirs.requests == []


def test_a_context_that_is_not_in_the_kubeconfig_is_bad_input(cli, config_file, two_clusters) -> None:
    _, theirs, kubeconfig = two_clusters
    result = cli("logs", "router", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--context", "nope")
    assert _refusal(result, theirs) == (f"error: --context 'nope' is not in the kubeconfig ({kubeconfig}); its "
                                        f"contexts: {ARN}, {OTHER_ARN}")


# --- the identity rules, one by one -------------------------------------------------------------------------------


def _ctx(server: str = "https://0A1B2C.gr7.us-west-2.eks.amazonaws.com", *, cluster: str = "c", tls: str = "",
         args: tuple[str, ...] = ()) -> KubeContext:
    return KubeContext(name="x", server=server, cluster=cluster, tls_server_name=tls, exec_args=args)


IDENTITY = ClusterIdentity(name=EKS_CLUSTER, region="us-west-2", arn=ARN, source="outputs",
                           api_server="https://0A1B2C.gr7.us-west-2.eks.amazonaws.com")
NO_ENDPOINT = ClusterIdentity(name=EKS_CLUSTER, region="us-west-2", arn=None, api_server=None, source="no outputs")


@pytest.mark.parametrize(("ctx", "identity", "same"), [
    (_ctx(), IDENTITY, True),
    (_ctx("https://0a1b2c.gr7.us-west-2.eks.amazonaws.com:443/"), IDENTITY, True),  # host case, port, slash
    (_ctx("https://9Z9Z9Z.gr7.us-west-2.eks.amazonaws.com"), IDENTITY, False),
    (_ctx("https://0A1B2C.gr7.us-west-2.eks.amazonaws.com:8443"), IDENTITY, False),
    # An SSH tunnel to a private endpoint: the server is local, TLS still names the cluster's host.
    (_ctx("https://127.0.0.1:8443", tls="0a1b2c.gr7.us-west-2.eks.amazonaws.com"), IDENTITY, True),
    # The endpoint on record decides; the context's name does not.
    (_ctx("https://9Z9Z9Z.gr7.us-west-2.eks.amazonaws.com", cluster=ARN), IDENTITY, False),
    # No endpoint on record (an outputs file of an older release): the names update-kubeconfig writes.
    (_ctx(cluster=ARN), NO_ENDPOINT, True),
    (_ctx(cluster=OTHER_ARN), NO_ENDPOINT, False),
    (_ctx(cluster=ARN.replace("us-west-2", "us-east-1")), NO_ENDPOINT, False),
    (_ctx(args=("--region", "us-west-2", "eks", "get-token", "--cluster-name", EKS_CLUSTER, "--output", "json")),
     NO_ENDPOINT, True),
    (_ctx(args=("--region", "eu-west-1", "eks", "get-token", "--cluster-name", EKS_CLUSTER)), NO_ENDPOINT, False),
    (_ctx(), NO_ENDPOINT, False),
])
def test_which_context_is_this_cluster(ctx: KubeContext, identity: ClusterIdentity, same: bool) -> None:
    assert is_cluster(ctx, identity) is same


def test_without_an_endpoint_on_record_an_unnamed_context_is_refused(cli, config_file, tmp_path, cluster) -> None:
    with kube_server(cluster, tmp_path / "kubeconfig") as url:
        result = cli("logs", "router", "--config", str(config_file), "--kubeconfig", str(tmp_path / "kubeconfig"))
    assert result.code == 2 and cluster.requests == []
    assert one_line_error(result) == (
        f"error: cannot tell that kubeconfig context 'fake' ({url}) is EKS cluster {EKS_CLUSTER}: "
        f"{config_file.with_suffix('.out') / 'cdk-outputs.json'} records no API endpoint and the context does not name "
        f"the cluster; run: aws eks update-kubeconfig --name {EKS_CLUSTER} --region us-west-2")


def test_without_an_endpoint_on_record_the_update_kubeconfig_names_are_enough(cli, config_file, tmp_path,
                                                                             cluster) -> None:
    cluster.dpd_endpoint()
    with kube_server(cluster, tmp_path / "server.kubeconfig") as url:
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", {ARN: {"server": url, "cluster": ARN}}, current=ARN)
        result = cli("logs", "router", "--config", str(config_file), "--kubeconfig", str(kubeconfig))
    assert result.code == 0, result.err


# --- Kubernetes API errors: one line, and the fix their status calls for -------------------------------------------


#: nginx's error page, as an AWS load balancer in front of the API server (or a proxy) answers with it.
HTML_503 = ("<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 "
            "Service Temporarily Unavailable</h1></center>\r\n</body>\r\n</html>\r\n")


@pytest.fixture
def answering(config_file: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    """An API server that answers every request with ``(status, content type, body)``; the outputs file names it."""
    reply: dict[str, Any] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_body(reply["status"], reply["body"], reply["type"])

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        url = local_url(server)
        deployed_at(config_file, url)
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", {ARN: {"server": url}}, current=ARN)

        def answer(status: int, body: Any, content_type: str = "application/json") -> Path:
            reply.update(status=status, body=body, type=content_type)
            return kubeconfig
        yield answer


def _status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """The ``Status`` object the API server sends with a failed request (Kubernetes API conventions)."""
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code,
            "message": message}


@pytest.mark.parametrize(("status", "body", "content_type", "says", "fix"), [
    (503, HTML_503, "text/html", "Kubernetes API 503 Service Unavailable: an HTML page answered: 503 Service "
     "Temporarily Unavailable", "a load balancer or proxy answered instead of the API server"),
    (401, _status_body(401, "Unauthorized", "Unauthorized"), "application/json", "Kubernetes API 401 Unauthorized",
     "the API server rejected the credentials: aws sso login"),
    (403, _status_body(403, "Forbidden", 'pods is forbidden: User "arn:aws:sts::123456789012:assumed-role/Ops/alice" '
                       'cannot list resource "pods" in API group "" in the namespace "default"'), "application/json",
     'Kubernetes API 403 Forbidden: pods is forbidden: User "arn:aws:sts::123456789012:assumed-role/Ops/alice"',
     "check the EKS access entry of your IAM principal"),
    (500, _status_body(500, "InternalError", "etcdserver: request timed out"), "application/json",
     "Kubernetes API 500 Internal Server Error: etcdserver: request timed out",
     "the API server is overloaded or unavailable: run it again in a minute"),
])
def test_api_errors_are_one_line_with_the_fix_of_their_status(cli, config_file, answering, status, body,
                                                             content_type, says, fix) -> None:
    kubeconfig = answering(status, body, content_type)
    result = cli("logs", "decode", "--config", str(config_file), "--kubeconfig", str(kubeconfig))
    line = one_line_error(result)
    assert result.code == 1
    assert line.startswith(f"error: listing the decode pods: {says}") and f"; fix: {fix}" in line
    assert "<" not in line


def test_status_rows_carry_the_fix_of_the_kubernetes_error(cli, config_file, answering, monkeypatch) -> None:
    """status keeps going when Kubernetes fails: the row says what failed, its next step the fix for that status."""
    from hyperpod_dpd.commands import status as status_module

    monkeypatch.setattr(status_module, "hyperpod_checks", lambda dep: [])
    monkeypatch.setattr(status_module, "addon_checks", lambda dep: [])
    kubeconfig = answering(403, _status_body(403, "Forbidden", "nodes is forbidden"))
    result = cli("status", "--config", str(config_file), "--kubeconfig", str(kubeconfig), "--json")
    rows = {c["name"]: c for c in json.loads(result.out)["checks"]}
    row = rows[f"GPU nodes of {EKS_CLUSTER}"]
    assert row["detail"] == ("listing the nodes labelled hyperpod-dpd/pool: Kubernetes API 403 Forbidden: nodes is "
                             "forbidden")
    assert row["next_step"].startswith("check the EKS access entry of your IAM principal")
