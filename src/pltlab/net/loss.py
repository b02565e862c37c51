"""The link's loss models as the emulator takes them: random per packet, or bursty
(Gilbert-Elliott, rust/src/link/loss.rs) from a loss rate and a mean burst length."""

from pltlab.errors import PltError


def gilbert(loss: float, burst: float) -> tuple[float, float] | None:
    """The Gilbert-Elliott transition probabilities (p: good -> bad, r: bad -> good; the bad state
    loses every packet, the good none) whose mean loss is ``loss`` and mean burst ``burst``
    packets: r = 1 / burst, p / (p + r) = loss. None: random loss (burst 1, no loss, or all).
    One PltError line when no such chain exists (a loss above burst / (burst + 1))."""
    if burst == 1 or loss in (0, 1):
        return None
    r = 1 / burst
    p = loss * r / (1 - loss)
    if p > 1:
        raise PltError(
            f"loss {loss:.6g} in bursts of {burst:g} packets: at most {burst / (burst + 1):.4g} "
            "(each burst is followed by at least one packet that passes)"
        )
    return p, r
