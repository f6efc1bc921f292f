"""Issue 21, class 3: splitting a long phrase and repairing missing times cost time in proportion to the input."""

import random

from pstuts_pipeline.chunking.chunker import split_text_to_fit
from pstuts_pipeline.chunking.time_repair import repair_times
from pstuts_pipeline.sources import RawPhrase


class WordCounter:
    """One token per word, remembering how many characters it was asked to count in all."""

    def __init__(self):
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return len(text.split())


def test_splitting_counts_each_part_not_the_rest_of_the_text():
    counter = WordCounter()
    text = " ".join(f"word{i}" for i in range(200_000))  # 1.4 MB
    pieces = split_text_to_fit(text, counter, 254)
    assert " ".join(pieces) == text and all(len(p.split()) <= 254 for p in pieces)
    # Re-counting the rest per part would be ~800 parts x 0.7 MB = 560 M characters; bounded heads stay linear.
    assert counter.chars < 40 * len(text), counter.chars


def test_a_word_longer_than_the_window_is_cut_inside_it():
    pieces = split_text_to_fit("x" * 10_000, len, 100)
    assert "".join(pieces) == "x" * 10_000 and max(map(len, pieces)) == 100


def _old_repair_end(raw, i, begin):
    """The rule as the forward scan wrote it: the next known time at or after begin, after phrase i."""
    for phrase in raw[i + 1 :]:
        for value in (phrase.begin, phrase.end):
            if value is not None and value >= begin:
                return float(value)
    return None


def test_repair_gives_what_the_forward_scan_gave():
    rng = random.Random(21)
    for _ in range(200):
        raw = [
            RawPhrase(i, "a", *(None if rng.random() < 0.4 else round(rng.uniform(0, 60), 1) for _ in range(2)))
            for i in range(rng.randint(1, 30))
        ]
        repaired, _ = repair_times(raw)
        previous_end = 0.0
        for i, (phrase, fixed) in enumerate(zip(raw, repaired)):
            begin = previous_end if phrase.begin is None or phrase.begin < previous_end else phrase.begin
            end = phrase.end
            if end is None or end < begin:
                end = _old_repair_end(raw, i, begin)
                end = begin if end is None else end
            assert (fixed.begin, fixed.end) == (begin, end)
            previous_end = end


def test_repair_time_grows_linearly_with_phrases_without_times():
    import time

    def seconds(n: int) -> float:
        """CPU seconds, best of three: the machine is shared."""
        raw = [RawPhrase(i, "a", None, None) for i in range(n)] + [RawPhrase(n, "a", 5.0, 6.0)]
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            repair_times(raw)
            best = min(best, time.process_time() - started)
        return best

    # Four times the phrases: about four times the time (the forward scan took sixteen: 20k 21 s, 40k 67 s).
    assert seconds(40_000) < 8 * seconds(10_000)
