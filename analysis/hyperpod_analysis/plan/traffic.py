"""Traffic scenarios in genai-bench's syntax, parsed and sampled the way genai-bench samples them.

Source: sgl-project/genai-bench ``genai_bench/scenarios/text.py`` (@059245a5): integer parameters only;

* ``D(in,out)``: deterministic, every request has ``in`` prompt and ``out`` output tokens;
* ``N(in_mean,in_std)/(out_mean,out_std)``: ``max(1, int(normal))`` prompt and ``max(2, int(normal))`` output;
* ``U(in_min,in_max)/(out_min,out_max)`` or ``U(in_max,out_max)`` (minimums 1): ``int(uniform(min, max))``, with
  the same floors of 1 and 2;
* ``P(prefix,suffix)/out``: every request shares one ``prefix``-token prefix (cached after the first) plus a
  unique ``suffix``, and asks for ``out`` tokens.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from hyperpod_core.errors import UsageError

_PAIR = r"\((\d+),(\d+)\)"
_DETERMINISTIC = re.compile(rf"^D{_PAIR}$")
_NORMAL = re.compile(rf"^N{_PAIR}/{_PAIR}$")
_UNIFORM = re.compile(rf"^U{_PAIR}(?:/{_PAIR})?$")
_PREFIX = re.compile(rf"^P{_PAIR}/(\d+)$")
ALLOWED = ("D(in,out), N(in_mean,in_std)/(out_mean,out_std), U(in_min,in_max)/(out_min,out_max) or "
           "P(prefix,suffix)/out (integers)")


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """One scenario: how prompt and output lengths are drawn."""

    text: str
    kind: str
    input: tuple[int, int]
    output: tuple[int, int]
    shared_prefix: int = 0
    """Prompt tokens every request shares (``P``): found in the prefix cache after the first request."""

    def sample(self, rng: random.Random) -> tuple[int, int]:
        """One request's (prompt tokens, output tokens)."""
        if self.kind in "DP":
            return self.input[0], self.output[0]
        if self.kind == "N":
            return (max(1, int(rng.gauss(self.input[0], self.input[1]))),
                    max(2, int(rng.gauss(self.output[0], self.output[1]))))
        return (max(1, int(rng.uniform(self.input[0], self.input[1]))),
                max(2, int(rng.uniform(self.output[0], self.output[1]))))

    @property
    def mean_input(self) -> float:
        return self.input[0] if self.kind in "DNP" else (self.input[0] + self.input[1]) / 2

    @property
    def mean_output(self) -> float:
        return self.output[0] if self.kind in "DNP" else (self.output[0] + self.output[1]) / 2

    def max_input(self) -> int:
        """A high percentile of prompt length (mean + 3.1 std, p99.9, for normal)."""
        if self.kind in "DP":
            return self.input[0]
        if self.kind == "N":
            return int(self.input[0] + 3.1 * self.input[1])
        return self.input[1]

    def max_total(self) -> int:
        if self.kind in "DP":
            high_out = self.output[0]
        elif self.kind == "N":
            high_out = int(self.output[0] + 3.1 * self.output[1])
        else:
            high_out = self.output[1]
        return self.max_input() + high_out


def parse(text: str) -> Traffic:
    """Parse one genai-bench text scenario; the error names what is allowed."""
    s = text.strip().replace(" ", "")
    if m := _DETERMINISTIC.match(s):
        t = Traffic(text=s, kind="D", input=(int(m[1]), 0), output=(int(m[2]), 0))
    elif m := _NORMAL.match(s):
        t = Traffic(text=s, kind="N", input=(int(m[1]), int(m[2])), output=(int(m[3]), int(m[4])))
    elif m := _UNIFORM.match(s):
        if m[3] is None:
            t = Traffic(text=s, kind="U", input=(1, int(m[1])), output=(1, int(m[2])))
        else:
            t = Traffic(text=s, kind="U", input=(int(m[1]), int(m[2])), output=(int(m[3]), int(m[4])))
        if t.input[0] > t.input[1] or t.output[0] > t.output[1]:
            raise UsageError(f"--traffic U(min,max) needs min <= max, got {text!r}")
    elif m := _PREFIX.match(s):
        prefix, suffix = int(m[1]), int(m[2])
        t = Traffic(text=s, kind="P", input=(prefix + suffix, 0), output=(int(m[3]), 0), shared_prefix=prefix)
    else:
        raise UsageError(f"--traffic must be {ALLOWED}, got {text!r}")
    if t.input[0] < 1 or t.output[0] < 1:
        raise UsageError(f"--traffic needs at least 1 input and 1 output token, got {text!r}")
    return t
