"""Parameter types the CLI's commands share."""

from __future__ import annotations

import math
from typing import Any

import click


class Seconds(click.FloatRange):
    """A number of seconds in a range. NaN passes every range check (its comparisons
    are all false), so it is refused here by name."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if math.isnan(seconds):
            self.fail("nan is not a number of seconds", param, ctx)
        return seconds
