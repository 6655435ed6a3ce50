"""How often a live view redraws while its runs train: the class's redraws share the server's one interpreter.
Thirty students watching their runs on 1-second timers made 30 redraws a second, and a visitor's Home then waited
minutes (benchmarks.class_scenarios, lesson 10 pressed by 30); every live view of every page reads this."""

# all watching students' live charts together redraw about this often a second, so that a class leaves most of
# the server's one interpreter to the pages: a redraw took ~70 ms of it (benchmarks/class_of_30.py, 30 watching)
CLASS_REDRAWS_PER_SECOND = 3.0
REFRESH_STEPS = (2.0, 5.0, 10.0, 20.0, 30.0)  # few steps: each slowing of a student's chart redraws their page


def live_refresh_seconds(watching, waiting_for_first_point):
    """How often a student's live view redraws: every 2 s while one of their runs trains toward its first
    point, else as often as CLASS_REDRAWS_PER_SECOND shared by the `watching` sessions (those with a run
    training or waiting in the queue) allows: every 2 s for six of them, 10 s for thirty."""
    if waiting_for_first_point:
        return REFRESH_STEPS[0]
    share = watching / CLASS_REDRAWS_PER_SECOND
    return next((step for step in REFRESH_STEPS if step >= share), REFRESH_STEPS[-1])
