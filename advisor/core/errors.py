"""The two kinds of error (STYLE.md, principle 7).

`InvalidInput` is the user's mistake: it names the field and what is allowed, and the CLI and the
API turn it into one line / one 422. `Infeasible` is an expected answer: a plan that does not fit
or cannot run on this cluster; the search collects it with its reason instead of failing.
"""

from __future__ import annotations


class AdvisorError(Exception):
    """Base class for errors the advisor reports to users (never a traceback)."""


class InvalidInput(AdvisorError):
    """Input that cannot be evaluated: names the field and the allowed values or range."""

    def __init__(self, field: str, message: str, allowed: str | None = None):
        self.field = field
        self.message = message
        self.allowed = allowed
        text = f"{field}: {message}"
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text)


class Infeasible(AdvisorError):
    """A plan that cannot run as asked (e.g. HSDP on one node, a batch that does not divide)."""

    def __init__(self, reason: str, fix: str | None = None):
        self.reason = reason
        self.fix = fix
        super().__init__(reason)
