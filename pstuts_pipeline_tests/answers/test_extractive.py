"""The offline answer reads on its own: an instruction sharing the question's words, with its own moment."""

from pstuts_pipeline.answers.extractive import choose, leans_back

FREE_TRANSFORM = [
    (1.2, "Free Transform is probably the command I use most often in Photoshop."),
    (5.15, "So let's see how it works."),
    (15.5, "Then go up to the Edit menu and choose Free Transform."),
    (18.0, "Or, much faster, press Command+T on a Mac or Control+T on Windows."),
]
OUTRO = [(81.2, "Alright, give Free Transform a try on your own images.")]
CROP = [
    (20.0, "Select the Crop tool in the toolbar."),
    (22.8, "As soon as you do that, a crop border appears around the whole image."),
]


def test_an_instruction_beats_an_outro_and_an_introduction():
    text, time, rank = choose("How do I open Free Transform?", [OUTRO, FREE_TRANSFORM], [OUTRO[0][1], ""])
    assert text == "Then go up to the Edit menu and choose Free Transform." and (time, rank) == (15.5, 1)


def test_a_sentence_leaning_on_the_one_before_comes_with_it_and_its_time():
    assert leans_back(CROP[1][1]) and leans_back("So it snaps back.") and not leans_back(CROP[0][1])
    text, time, _ = choose("how do I crop an image", [CROP], [CROP[1][1]])
    assert text.startswith("Select the Crop tool") and time == 20.0


def test_no_phrases_no_answer():
    assert choose("anything", [[]], [""]) == ("", 0.0, 0)
