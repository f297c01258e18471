"""What the docs say the app builds (how many stacks, templates, resources) is what it builds.

Every such figure in README.md and docs/*.md is listed in :data:`FIGURES` with what it must say, computed from the
session's build of config/default.yaml (tests/conftest.py ``stacks`` and ``templates``: no extra synthesis), and a
figure the list does not know fails, so a new one is tested or reworded. Issue 31 item 5 (newcomer friction 23:
docs/cli.md said "179 resources in 5 stacks" when the synth built 230 in 6). Timings measured on a date may name
what they measured; they state no count of stacks or resources. Figures nothing here can compute cheaply are not
stated at all: no doc counts the tests, and README.md quotes no ratio (docs/cli.md holds them, each with its date).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12}
#: A count of stacks, templates or resources: "6 templates", "230 resources", "six stacks", "Three stacks".
FIGURE = re.compile(rf"\b(\d[\d,]*|{'|'.join(WORDS)})\s+(?:CloudFormation\s+)?(?:stacks|templates|resources)\b", re.I)


@dataclass(frozen=True)
class Figure:
    doc: str
    phrase: str
    """A pattern whose groups are the figures, in order."""
    expected: Callable[[Any, dict[str, Any]], tuple[int, ...]] | None
    """``(stacks, templates) -> figures``; ``None``: the phrase counts something that is not ours (said why)."""


def _resources(templates: dict[str, Any]) -> int:
    return sum(len(t.to_json()["Resources"]) for t in templates.values())


def _observability_stacks(stacks: Any) -> int:
    """The stacks that exist only with ``observability.enabled`` (hyperpod_infra.app_builder.Stacks: ``None``
    without it)."""
    return sum(s is not None for s in (stacks.observability, stacks.observability_addon))


FIGURES = [
    Figure("docs/cli.md", r"the same (\d+) templates and (\d+) resources",
           lambda stacks, templates: (len(templates), _resources(templates))),
    Figure("docs/deploy.md", r"creates (\w+) stacks \((\w+) without observability\)",
           lambda stacks, templates: (len(stacks.all()), len(stacks.all()) - _observability_stacks(stacks))),
    Figure("docs/cluster.md", r"(\w+) stacks after `Network`: `Cluster` \(`<name>-cluster`\) and `HyperPod`",
           lambda stacks, templates: (len({"Cluster", "HyperPod"} & set(templates)),)),
    Figure("docs/platform.md", r"(\w+) stacks sit beside and on top of the network, cluster and HyperPod stacks",
           lambda stacks, templates: (len(set(templates) - {"Network", "Cluster", "HyperPod"}),)),
    # Kubernetes API resources of the HyperPod inference operator (InferenceEndpointConfig and its
    # SageMakerEndpointRegistration), not resources of our templates.
    Figure("docs/platform.md", r"the operator's (two) resources", None),
]


def _number(text: str) -> int:
    return WORDS.get(text.lower()) or int(text.replace(",", ""))


@pytest.mark.parametrize("figure", FIGURES, ids=lambda f: f"{f.doc}: {f.phrase[:40]}")
def test_each_figure_is_what_the_app_builds(figure: Figure, stacks, templates) -> None:
    text = " ".join((REPO / figure.doc).read_text(encoding="utf-8").split())
    found = re.search(figure.phrase, text, re.I)
    assert found, f"{figure.doc} no longer says {figure.phrase!r}: update FIGURES"
    if figure.expected is not None:
        assert tuple(_number(g) for g in found.groups()) == figure.expected(stacks, templates), found.group(0)


def test_every_figure_in_the_docs_is_listed() -> None:
    unknown = []
    for doc in DOCS:
        text = " ".join(doc.read_text(encoding="utf-8").split())
        known = [m.span() for f in FIGURES if REPO / f.doc == doc for m in re.finditer(f.phrase, text, re.I)]
        for m in FIGURE.finditer(text):
            if not any(start <= m.start() and m.end() <= end for start, end in known):
                unknown.append(f"{doc.relative_to(REPO)}: ...{text[max(0, m.start() - 30):m.end() + 30]}...")
    assert not unknown, "figures no test checks (add them to FIGURES, or word them without a count):\n" + \
        "\n".join(unknown)


#: A count of tests ("1,702 tests", "1701 passed"): it changes with every commit that adds one.
TEST_COUNT = re.compile(r"\b\d[\d,]*\s+(?:tests|passed|failed)\b", re.I)
#: A ratio ("3.4x", "2.5x"): every one the project states is a measurement (or the target it is measured against).
RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x\b")


def test_no_doc_counts_the_tests() -> None:
    """README.md said "The whole suite (1,702 tests)" and "both 1,702 passed": a count of tests is stale after the
    next commit that adds one, and nothing can check it without collecting the suite. Fails on main: README.md."""
    found = [f"{doc.relative_to(REPO)}: {m.group(0)!r}" for doc in DOCS
             for m in TEST_COUNT.finditer(" ".join(doc.read_text(encoding="utf-8").split()))]
    assert found == [], "word these without a count of tests"


def test_the_readme_quotes_no_measured_ratio() -> None:
    """The synth-speed ratios are measurements of a date: docs/cli.md holds them, each with its date, its load and
    the target. README.md quoted "3.4x" undated beside the target while docs/cli.md moved on; it now points there.
    Fails on main: "3.4x, the target is 2.5x"."""
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert [m.group(0) for m in RATIO.finditer(text)] == [], "README.md: link docs/cli.md instead of a ratio"
