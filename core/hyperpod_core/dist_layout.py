"""Where the cdk8s app writes each manifest in ``dist/``: one folder per endpoint, so that ``kubectl apply -f
dist/<endpoint>/endpoint/`` applies exactly one endpoint.

The DPD and the colocated InferenceEndpointConfig carry the same name (applying one replaces the other), so a
folder holding both would apply both, the last one winning. The endpoint's ``apply`` chooses which one
``endpoint/`` holds; the other goes to ``alternate/`` (the benchmark's baseline). Each endpoint of the config
(``endpoints``) has its own folder ``dist/<endpoint name>/``:

* ``<name>/endpoint/<name>-<apply>.k8s.yaml``: the endpoint to apply, and beside it
  ``<name>/endpoint/<name>-address.k8s.yaml``: the endpoint's stable Service ``<name>`` (an ExternalName to its routing
  service, which ``hyperpod-dpd rollout`` repoints at a later revision);
* ``<name>/alternate/<name>-<other>.k8s.yaml``: the other mode, which ``bench`` switches to (``endpoint.apply`` and
  ``hyperpod-dpd rollout`` change the mode an endpoint serves);
* ``<name>/reference/``: the endpoint layouts only ``hyperpod-dpd bench`` applies: ``<name>-reference-1p1d.k8s.yaml``
  and ``-1node.k8s.yaml``, the aws-reference experiment's (1 prefill + 1 decode replica; one colocated replica), and
  ``<name>-equal-gpu-pinned.k8s.yaml``, the equal-gpu experiment's DPD endpoint: the configured one with its
  replicas pinned (autoscaling off), so that the GPUs a run records are the GPUs it ran on;
* ``<name>/benchmark/<name>-benchmark.k8s.yaml``: the endpoint's suspended benchmark Jobs.

The deployment's own files stay at the root of ``dist/``:

* ``dashboards/*.json``: the dashboards to import into Grafana (every endpoint's);
* ``in-cluster-observability/<name>-observability.k8s.yaml``: each endpoint's PrometheusRule and Grafana-sidecar
  ConfigMaps, and ``in-cluster-observability/dpd-cluster-alerts.k8s.yaml`` (:func:`cluster_alerts_file`): the
  deployment's one cluster-wide PrometheusRule ``dpd-cluster-alerts``, in the namespace ``default`` however the
  endpoints are listed or ordered; only with ``observability.in_cluster_manifests``. No endpoint's file can bear that
  name: every endpoint file ends in one of the fixed suffixes above, never ``-alerts``.

Without the deploy outputs (bucket, workspace URL, cluster ARN) or the endpoint's staged weights' revision, the
endpoint, reference and benchmark manifests of that endpoint still hold placeholders: they go under
``<name>/placeholders/`` instead, with a ``README.txt`` saying why and what resolves each value, and none of the
endpoint's folders above exists, so the apply commands (``kubectl apply -f dist/<name>/endpoint/``, ``hyperpod-dpd
bench``) fail instead of applying them. Each endpoint decides for itself: one whose revision is known is deployable
while another's is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

Mode = Literal["dpd", "colocated"]
MODES: Final[tuple[Mode, ...]] = ("dpd", "colocated")

ENDPOINT: Final = "endpoint"
ALTERNATE: Final = "alternate"
REFERENCE: Final = "reference"
BENCHMARK: Final = "benchmark"
DASHBOARDS: Final = "dashboards"
IN_CLUSTER: Final = "in-cluster-observability"
#: The deployment's cluster-wide PrometheusRule: its name, its chart's ID and so its file's name.
CLUSTER_ALERTS: Final = "dpd-cluster-alerts"
PLACEHOLDERS: Final = "placeholders"
PLACEHOLDERS_README: Final = "README.txt"
#: File-name suffixes of the aws-reference layouts (not ``-dpd``/``-colocated``, so a file name says its folder).
REFERENCE_SUFFIX: Final[dict[Mode, str]] = {"dpd": "reference-1p1d", "colocated": "reference-1node"}
#: File-name suffix of the equal-gpu experiment's DPD layout (replicas pinned; same rule: not ``-dpd``).
PINNED_SUFFIX: Final = "equal-gpu-pinned"


def other(mode: Mode) -> Mode:
    return "colocated" if mode == "dpd" else "dpd"


@dataclass(frozen=True, kw_only=True)
class DistLayout:
    """Endpoint ``name``'s files in the ``dist/`` folder ``root``, with ``applied`` in ``endpoint/``."""

    root: Path
    """The ``dist/`` folder (every endpoint's folder and the deployment's files are in it)."""
    name: str
    applied: Mode
    unresolved: bool
    """A deploy output or the endpoint's revision was missing: its endpoint, reference and benchmark manifests are
    under ``<name>/placeholders/``."""

    @property
    def folder(self) -> Path:
        """The endpoint's own folder, ``<root>/<name>/``."""
        return self.root / self.name

    @property
    def base(self) -> Path:
        """Where the endpoint's manifests that depend on deploy-time values go."""
        return self.folder / PLACEHOLDERS if self.unresolved else self.folder

    @property
    def endpoint_dir(self) -> Path:
        """The folder ``kubectl apply -f`` applies (one endpoint)."""
        return self.base / ENDPOINT

    def endpoint_file(self, mode: Mode) -> Path:
        """The configured manifest of ``mode``: in ``endpoint/`` when it is ``applied``, else in ``alternate/``."""
        folder = ENDPOINT if mode == self.applied else ALTERNATE
        return self.base / folder / f"{self.name}-{mode}.k8s.yaml"

    @property
    def address_file(self) -> Path:
        """The endpoint's stable Service, applied with the endpoint (``endpoint/``)."""
        return self.base / ENDPOINT / f"{self.name}-address.k8s.yaml"

    def reference_file(self, mode: Mode) -> Path:
        return self.base / REFERENCE / f"{self.name}-{REFERENCE_SUFFIX[mode]}.k8s.yaml"

    @property
    def pinned_file(self) -> Path:
        """The equal-gpu experiment's DPD layout: the configured DPD endpoint with autoscaling off."""
        return self.base / REFERENCE / f"{self.name}-{PINNED_SUFFIX}.k8s.yaml"

    @property
    def benchmark_file(self) -> Path:
        return self.base / BENCHMARK / f"{self.name}-benchmark.k8s.yaml"

    @property
    def dashboards_dir(self) -> Path:
        """The deployment's dashboards (every endpoint's), at the root."""
        return self.root / DASHBOARDS

    @property
    def in_cluster_file(self) -> Path:
        """The endpoint's in-cluster observability objects, in the deployment's folder at the root."""
        return self.root / IN_CLUSTER / f"{self.name}-observability.k8s.yaml"

    def place(self, chart_file: str) -> Path:
        """Where one of this endpoint's charts' files (``<chart id>.k8s.yaml`` as cdk8s writes it) belongs."""
        for mode in MODES:
            if chart_file == self.endpoint_file(mode).name:
                return self.endpoint_file(mode)
            if chart_file == self.reference_file(mode).name:
                return self.reference_file(mode)
        if chart_file == self.address_file.name:
            return self.address_file
        if chart_file == self.pinned_file.name:
            return self.pinned_file
        if chart_file == self.benchmark_file.name:
            return self.benchmark_file
        if chart_file == self.in_cluster_file.name:
            return self.in_cluster_file
        raise ValueError(f"chart file {chart_file!r} has no place in the dist/ layout")

    @classmethod
    def of(cls, root: Path, name: str, applied: Mode, *, unresolved: bool = False) -> DistLayout:
        """Endpoint ``name``'s layout in the ``dist/`` folder ``root``."""
        return cls(root=root, name=name, applied=applied, unresolved=unresolved)

    @classmethod
    def found(cls, root: Path, name: str, applied: Mode) -> DistLayout:
        """The layout a synth left in ``root`` for endpoint ``name``: ``unresolved`` when its ``placeholders/`` is
        there."""
        return cls(root=root, name=name, applied=applied, unresolved=(root / name / PLACEHOLDERS).is_dir())


def cluster_alerts_file(root: Path) -> Path:
    """The deployment's cluster-wide PrometheusRule in the ``dist/`` folder ``root``: one file, whichever endpoint
    comes first."""
    return root / IN_CLUSTER / f"{CLUSTER_ALERTS}.k8s.yaml"


def apply_commands(endpoint_dir: str, rollout: str) -> list[str]:
    """The two ways to apply ``endpoint/``, each with when it fits (whether the endpoint is live cannot be known
    offline): ``kubectl apply`` while nothing of it is live (the endpoint and its stable Service); ``rollout`` (the
    ``hyperpod-dpd rollout`` command line of this endpoint) once it is: it compares the live endpoint with this one
    and changes it the safe way that fits, blue/green, in place or replace with the downtime said first
    (docs/endpoint.md, "Changing an endpoint"). ``kubectl apply`` over a live endpoint changes both roles' pod
    templates in place: a pool without a free node keeps the new pod Pending while the old one holds the GPUs (the
    fourth review's defect 1)."""
    return [f"kubectl apply -f {endpoint_dir}   # nothing of it live yet: the endpoint and its stable Service",
            f"{rollout}   # it is live: blue/green, in place or replace, whichever is safe (--dry-run: the plan)"]


def placeholders_readme(missing: list[str], name: str) -> str:
    """Why endpoint ``name``'s ``placeholders/`` exists and, per unresolved value, what resolves it
    (:func:`hyperpod_core.inputs.remedy`: the deploy outputs for the values only ``cdk deploy`` knows, ``stage-model``
    or the endpoint's ``model.revision`` for the weights' revision)."""
    from hyperpod_core.inputs import remedies

    return (f"These manifests of endpoint {name} are NOT deployable: they still hold placeholders for "
            f"{', '.join(missing)}.\n"
            "Each value, with what resolves it:\n"
            + "".join(f"  {line}\n" for line in remedies(missing))
            + f"Then synthesize again: the manifests go to dist/{name}/endpoint/, dist/{name}/alternate/,\n"
              f"dist/{name}/reference/ and dist/{name}/benchmark/ (docs/endpoint.md).\n")
