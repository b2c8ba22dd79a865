"""What a scan found: the report of one artifact, and the error that refuses it."""

from __future__ import annotations

import dataclasses
import json

from zoo.errors import ZooError
from zoo.deploy.formats.unsafe import Finding


class UnsafeArtifactError(ZooError, PermissionError):
    """An artifact refused because it holds ops that reach outside the model; `findings` says which."""

    def __init__(self, message: str, findings: list["Finding"]):
        self.findings = findings
        super().__init__(message)

    def __str__(self) -> str:
        return self.args[0]


@dataclasses.dataclass
class ScanReport:
    """The scan of one artifact: its kind and every finding. `clean` means nothing was found."""

    path: str
    kind: str
    findings: list[Finding]
    seconds: float = 0.0
    items: int = 0  # nodes, layers or operators looked at

    @property
    def clean(self) -> bool:
        return not self.findings

    def unaccepted(self, allow=()) -> list[Finding]:
        """The findings whose op is not in `allow` (names the user reviewed and accepts)."""
        allowed = set(allow)
        return [f for f in self.findings if f.op not in allowed]

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "clean": self.clean, "items_scanned": self.items,
                "seconds": round(self.seconds, 4), "findings": [f.to_dict() for f in self.findings]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def table(self) -> str:
        """A plain-text table: one row per finding, or one line saying the artifact is clean."""
        head = f"{self.path} ({self.kind}, {self.items} items scanned in {self.seconds:.2f} s): "
        if self.clean:
            return head + "clean"
        rows = [("op", "capability", "count", "location", "why")] + [
            (f.op, str(f.capability), str(f.count), f.location, f.why) for f in self.findings]
        widths = [max(len(r[c]) for r in rows) for c in range(4)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:4], widths)) + "  " + r[4] for r in rows]
        return head + f"{len(self.findings)} unsafe\n" + "\n".join("  " + line.rstrip() for line in lines)


def describe(findings: list[Finding], limit: int = 8) -> str:
    """'ReadFile (filesystem) in function ...; EagerPyFunc (code_execution) in ...' for error messages."""
    parts = [f"{f.op} ({f.capability}) in {f.location}" for f in findings[:limit]]
    if len(findings) > limit:
        parts.append(f"... and {len(findings) - limit} more (run `zoo scan` for the list)")
    return "; ".join(parts)
