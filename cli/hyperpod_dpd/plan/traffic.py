"""Traffic scenarios in genai-bench's syntax, parsed and sampled.

genai-bench names a scenario by its input/output token distribution (``genai_bench/scenarios/text.py``):

* ``D(in,out)``: deterministic, every request has ``in`` prompt and ``out`` output tokens;
* ``N(in_mean,in_std)/(out_mean,out_std)``: normal, truncated at 1 token;
* ``U(in_min,in_max)/(out_min,out_max)``: uniform integers in each range (``U(in_max,out_max)`` = from 1).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from hyperpod_dpd.errors import UsageError

_NUM = r"\s*(\d+(?:\.\d+)?)\s*"
_PAIR = rf"\({_NUM},{_NUM}\)"
_DETERMINISTIC = re.compile(rf"^D{_PAIR}$")
_NORMAL = re.compile(rf"^N{_PAIR}/{_PAIR}$")
_UNIFORM = re.compile(rf"^U{_PAIR}(?:/{_PAIR})?$")
ALLOWED = "D(in,out), N(in_mean,in_std)/(out_mean,out_std) or U(in_min,in_max)/(out_min,out_max)"


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """One scenario: how prompt and output lengths are drawn."""

    text: str
    kind: str
    input: tuple[float, float]
    output: tuple[float, float]

    def sample(self, rng: random.Random) -> tuple[int, int]:
        """One request's (prompt tokens, output tokens)."""
        return self._draw(rng, self.input), self._draw(rng, self.output)

    def _draw(self, rng: random.Random, p: tuple[float, float]) -> int:
        if self.kind == "D":
            return int(p[0])
        if self.kind == "N":
            return max(1, round(rng.gauss(p[0], p[1])))
        return rng.randint(int(p[0]), int(p[1]))

    @property
    def mean_input(self) -> float:
        return self.input[0] if self.kind in "DN" else (self.input[0] + self.input[1]) / 2

    @property
    def mean_output(self) -> float:
        return self.output[0] if self.kind in "DN" else (self.output[0] + self.output[1]) / 2

    def max_input(self) -> int:
        """A high percentile of prompt length (p99.9 for normal), for buffer and threshold sizing."""
        if self.kind == "D":
            return int(self.input[0])
        if self.kind == "N":
            return int(self.input[0] + 3.1 * self.input[1])
        return int(self.input[1])

    def max_total(self) -> int:
        hi_out = self.output[0] if self.kind == "D" else (
            self.output[0] + 3.1 * self.output[1] if self.kind == "N" else self.output[1])
        return self.max_input() + int(hi_out)


def parse(text: str) -> Traffic:
    """Parse one genai-bench scenario; the error names what is allowed."""
    s = text.strip().replace(" ", "")
    if m := _DETERMINISTIC.match(s):
        a, b = float(m[1]), float(m[2])
        t = Traffic(text=s, kind="D", input=(a, 0), output=(b, 0))
    elif m := _NORMAL.match(s):
        t = Traffic(text=s, kind="N", input=(float(m[1]), float(m[2])), output=(float(m[3]), float(m[4])))
    elif m := _UNIFORM.match(s):
        if m[3] is None:
            t = Traffic(text=s, kind="U", input=(1, float(m[1])), output=(1, float(m[2])))
        else:
            t = Traffic(text=s, kind="U", input=(float(m[1]), float(m[2])), output=(float(m[3]), float(m[4])))
        if t.input[0] > t.input[1] or t.output[0] > t.output[1]:
            raise UsageError(f"--traffic U(min,max) needs min <= max, got {text!r}")
    else:
        raise UsageError(f"--traffic must be {ALLOWED}, got {text!r}")
    if t.input[0] < 1 or t.output[0] < 1:
        raise UsageError(f"--traffic needs at least 1 input and 1 output token, got {text!r}")
    return t
