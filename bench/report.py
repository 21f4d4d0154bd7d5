"""Plain-text tables for the workload reports (no dependencies)."""

from __future__ import annotations

NA = "n/a"


def ok(result) -> bool:
    return bool(result) and result.get("status") == "ok" and result.get("value") is not None


def value(result):
    return result["value"] if ok(result) else None


def cell(result, fmt="{:.2f}") -> str:
    """The formatted value, or n/a (not installed / not run) or ERR."""
    if result and result.get("status") == "error":
        return "ERR"
    return fmt.format(result["value"]) if ok(result) else NA


def ratio(a, b, fmt="{:.2f}x") -> str:
    """a / b for two values (or None); n/a when either is missing."""
    if a is None or b is None or b == 0:
        return NA
    return fmt.format(a / b)


def table(headers, rows, align=None) -> str:
    """Aligned columns; ``align`` is a string of 'l'/'r' per column (default: first left)."""
    rows = [[str(c) for c in r] for r in rows]
    headers = [str(h) for h in headers]
    align = align or "l" + "r" * (len(headers) - 1)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(cells, widths, align)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def per_round(a, b, label="per round") -> str:
    """`` (per round: r1, r2, ...)``: the ratio a/b in each round of a multi-round run, or ""
    when either result has no per-round values."""
    if not (ok(a) and ok(b) and "rounds_values" in a and "rounds_values" in b):
        return ""
    return (f" ({label}: "
            + ", ".join(f"{x / y:.2f}" for x, y in zip(a["rounds_values"], b["rounds_values"]))
            + ")")


def lookup(results):
    """``(r, v)``: ``r(framework, config)`` the result of a cell (None when absent) and
    ``v(framework, config)`` its value (None unless it ran ok)."""

    def r(fw, cfg):
        return results.get((fw, cfg))

    def v(fw, cfg):
        return value(r(fw, cfg))

    return r, v
