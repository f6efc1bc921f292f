"""Progress text shared by the CLI's bars and the training log: the time so far, the rate and the time left."""


def timing(done: int, total: int | None, elapsed: float, unit: str) -> str:
    """'95 s elapsed, 0.52 steps/s, about 240 s left'; only the elapsed time until some units are done."""
    text = f"{elapsed:.0f} s elapsed"
    if total and 0 < done < total and elapsed > 0:
        rate = done / elapsed
        text += f", {rate:.2f} {unit}/s, about {(total - done) / rate:.0f} s left"
    return text
