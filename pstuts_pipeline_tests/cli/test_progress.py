"""Progress of long commands: plain lines with counts, rate and time left when the output is not a terminal."""

import io
import os

from rich.console import Console

from pstuts_pipeline.cli.ingest import follow_run
from pstuts_pipeline.cli.progress import Tracker
from pstuts_pipeline.training.skeleton import timing


def test_timing_gives_the_rate_and_the_time_left_once_some_work_is_done():
    assert timing(0, 10, 3.0, "steps") == "3 s elapsed"
    assert timing(5, 10, 10.0, "steps") == "10 s elapsed, 0.50 steps/s, about 10 s left"
    assert timing(10, 10, 20.0, "steps") == "20 s elapsed"
    assert timing(3, None, 4.0, "videos") == "4 s elapsed"


def test_a_log_gets_one_plain_line_per_change():
    out = io.StringIO()
    with Tracker(Console(file=out, force_terminal=False, width=40), "pstuts evaluate", "questions") as progress:
        progress.update(0, None, "loading")
        progress.update(0, 300)
        progress.update(128, 300)
        progress.update(128, 300)  # the same again: not repeated
        progress.update(300, 300)
    lines = out.getvalue().splitlines()  # never wrapped, however narrow the console
    assert [line.split(",")[0] for line in lines] == [
        "pstuts evaluate: loading",
        "pstuts evaluate (0/300 questions)",
        "pstuts evaluate (128/300 questions)",
        "pstuts evaluate (300/300 questions)",
    ]
    assert "questions/s, about" in lines[2] and "left" not in lines[3]


def test_a_run_s_steps_count_towards_the_whole_ingest():
    heard: list[tuple[int, int | None, str]] = []
    follow = follow_run(lambda done, total, what: heard.append((done, total, what)), 7, 14, "run 2/2: 3 videos")
    follow([])
    follow(["raw_transcripts", "phrase_documents"])
    follow(None)  # the instance could not say this time: nothing shown, nothing goes backwards
    assert heard == [(7, 14, "run 2/2: 3 videos, starting"), (9, 14, "run 2/2: 3 videos, phrase_documents done")]


def test_progress_reaches_the_user_while_a_run_redirects_the_descriptor(tmp_path):
    watched = (tmp_path / "terminal").open("w")
    with Tracker(Console(file=watched, force_terminal=False), "pstuts ingest", "steps") as progress:
        saved = os.dup(watched.fileno())
        with (tmp_path / "compute.log").open("w") as compute_log:
            os.dup2(compute_log.fileno(), watched.fileno())  # what a run does to fds 1 and 2 while its steps run
            progress.update(3, 10, "kamradt_chunks done")
        os.dup2(saved, watched.fileno())
        os.close(saved)
    watched.close()
    assert "pstuts ingest: kamradt_chunks done (3/10 steps)" in (tmp_path / "terminal").read_text()
    assert (tmp_path / "compute.log").read_text() == ""


def test_a_run_s_ended_steps_are_read_once_each_in_the_order_they_ended():
    import dagster as dg

    from pstuts_pipeline.cli.ingest import EndedSteps

    @dg.op
    def first() -> int:
        return 1

    @dg.op(out=dg.Out(is_required=False))
    def second(value: int):  # noqa: ANN202 - yields nothing, so the step after it is skipped
        if value > 1:
            yield dg.Output(value)

    @dg.op
    def third(value: int) -> int:
        return value

    @dg.job
    def job() -> None:
        third(second(first()))

    with dg.instance_for_test() as instance:
        assert EndedSteps(instance, "not-created-yet")() == []
        run_id = job.execute_in_process(instance=instance).run_id
        ended = EndedSteps(instance, run_id)
        assert ended() == ["first", "second", "third"]  # third skipped: ended all the same
        assert ended() == ["first", "second", "third"] and ended.cursor  # asked again: nothing new, nothing doubled
