"""What a page says of a run it shows that classmates share (lab.server.shared_runs): every page that starts
runs through lab.runs shows the same sentence."""

import time


def shared_run_text(run):
    """In plain words, when a run is shared with classmates who asked for the same settings and seed, or was
    trained before this student asked for it; "" for a run of one's own."""
    others = getattr(run, "classmates", 0)
    parts = []
    if others:
        classmates = "a classmate" if others == 1 else f"{others} classmates"
        parts.append(f"The same experiment as {classmates}: trained once, shown to each")
    elif getattr(run, "joined", False):
        parts.append("The same experiment as a classmate's earlier run: trained once, shown to each")
    if getattr(run, "joined_ended", False) and run.trained_at is not None:
        when = time.strftime("%H:%M", time.localtime(run.trained_at))
        parts.append(f"trained at {when}, so shown whole at once" if parts else f"Trained at {when}, shown whole")
    return "; ".join(parts) + ("." if parts else "")
