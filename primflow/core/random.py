"""Global random state: ``pf.seed(n)`` makes every random op reproducible.

Random primitives take an integer ``key`` parameter and are pure functions of it; this
module hands out a fresh key per call from a counter, so results depend only on the seed
and the order of calls (and a traced program can take keys as data later).
"""

from __future__ import annotations

_SEED = 0
_counter = 0
_epoch = 0  # how many times seed() ran: pf.jit tells a reseed from ordinary draws by it


def seed(value: int) -> None:
    """Seeds primflow's global random generator.

    Example:
        >>> import primflow as pf
        >>> pf.seed(0); a = pf.rand([2]).numpy()
        >>> pf.seed(0); b = pf.rand([2]).numpy()
        >>> bool((a == b).all())
        True
    """
    global _SEED, _counter, _epoch
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"seed must be a non-negative int, got {value!r}")
    _SEED = value
    _counter = 0
    _epoch += 1


def next_key() -> int:
    """A fresh 63-bit key derived from the seed and a call counter (splitmix64 mixing)."""
    global _counter
    _counter += 1
    z = (_SEED * 0x9E3779B97F4A7C15 + _counter * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1


# ---- internal API for the layers above (pf.jit replays and restores the generator) --------

def get_state() -> tuple:
    """The generator's state as ``(seed, counter)``: the seed last given to ``seed`` and how
    many keys were drawn since. ``set_state`` restores it; the ``counter`` of two states of
    one seed tells how many keys were drawn between them."""
    return (_SEED, _counter)


def set_state(state: tuple) -> None:
    """Restores a state from ``get_state`` (does not count as a reseed)."""
    global _SEED, _counter
    _SEED, _counter = state


def reseed_count() -> int:
    """How many times ``seed`` ran: a changed count tells a reseed from ordinary draws."""
    return _epoch
