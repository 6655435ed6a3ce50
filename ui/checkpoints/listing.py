"""The Checkpoints page's list: the bundled models and the student's own (a run once, by its latest
version, its earlier versions counted beside it), the files that could not be read (named, and removable),
and deleting one."""

import collections
import re

import pandas as pd
import streamlit as st

from lab.instruments.race import validation_figure
from lab.training.checkpoints import CheckpointError, delete_checkpoint, scan_checkpoints
from lab.words import count
from ui.cell_labels import cell_label
from ui.shared.checkpoint_picker import forget_deleted, listed_name, reads_text
from ui.shared.common import parameter_count
from ui.shared.links import Field
from ui.shared.model_names import info_title
from ui.shared.plain_text import plain, preformatted, said, without_paths
from ui.shared.sessions import user_dir

SETTINGS = {"model": (Field("text", "Checkpoint"), "ckpt_choice")}  # ?model=char-lstm_latest
DEFAULTS = {"model": "char-lstm_latest"}  # the best bundled character model
VERSIONED_RUN = re.compile(r"(.+)_v\d+")  # name_vN: one version of a run
FAMILY_NAMES = {"lm": "language model", "scan_markov": "n-gram scan", "classifier": "sequence classifier"}


def show_outcome():
    """The outcome of an upload or delete, shown after the rerun that followed it."""
    if "ckpt_flash" in st.session_state:
        kind, message = st.session_state.pop("ckpt_flash")
        getattr(st, kind)(message)


def final_metrics(info):
    """The validation figure of the weights the file holds (lab.instruments.race.validation_figure: the one
    source Sample and the anchors read too)."""
    return validation_figure(info.metrics)


def params_of(info):
    try:
        return parameter_count(info.config)
    except (ValueError, TypeError):
        return None


def where_listed(info, listed):
    """Where a checkpoint of the student's is listed, or was: "the Sample and Gates pages list it as
    “yours: X”" (`listed`: "list", "no longer list") for a text model; this page only for any other."""
    if reads_text(info):
        return f"the Sample and Gates pages {listed} it as “{plain(info_title(info))}”"
    shows = "shows" if listed == "list" else "no longer shows"
    return (
        f"this page's list {shows} it as “{plain(info_title(info))}” (the Sample and Gates pages read text models only)"
    )


def delete(info):
    """Button callback (it runs before the page, so it may reset the widgets that showed the file)."""
    title = plain(info_title(info))
    try:
        removed = delete_checkpoint(info.path, user_dir())
        # the pages that showed it fall back to another model without a notice of their own
        forget_deleted({listed_name(info), info.name})
        every = ", with every saved version of it" if len(removed) > 1 else ""
        st.session_state.ckpt_flash = ("success", f"Deleted{every}: {where_listed(info, 'no longer list')}.")
    except (CheckpointError, OSError) as e:
        st.session_state.ckpt_flash = ("error", f"Deleting “{title}” did not work: {said(e)}")
    st.session_state.ckpt_confirm_delete = False
    st.session_state.pop("ckpt_choice", None)


def delete_unreadable(paths):
    """Button callback: remove this session's files that are not valid checkpoints; says how many went."""
    failed = []
    for path in paths:
        try:
            delete_checkpoint(path, user_dir())
        except (CheckpointError, OSError) as e:
            failed.append(f"{path.name} ({e})")
    deleted = count(len(paths) - len(failed), "unreadable file")
    st.session_state.ckpt_flash = (
        ("success", f"Deleted {deleted}.")
        if not failed
        else ("error", f"Deleted {deleted}; could not delete {said('; '.join(failed))}.")
    )


def readable_checkpoints():
    """This session's and the bundled checkpoints, each run once (by its latest version), with the files
    that could not be read named above the list -> (infos, earlier versions per run name)."""
    infos, problems = scan_checkpoints(user_dir())
    if problems:  # a hand-edited or damaged file is named and can be removed; it never breaks the page
        readable = {info.path for info in infos}
        unreadable = sorted(p for p in user_dir().glob("*.safetensors") if p not in readable)
        with st.container(border=True):
            be = "is" if len(problems) == 1 else "are"
            st.warning(f"{count(len(problems), 'file')} could not be read and {be} not listed:")
            preformatted("\n".join(without_paths(problem) for problem in problems))
            if unreadable:
                st.button(
                    "🗑 Delete your unreadable files",
                    key="ckpt_delete_unreadable",
                    on_click=delete_unreadable,
                    args=(unreadable,),
                )
    # a run is listed once, by its name_latest; its earlier versions are counted beside it
    versions = collections.Counter(VERSIONED_RUN.fullmatch(i.name)[1] for i in infos if VERSIONED_RUN.fullmatch(i.name))
    infos = [i for i in infos if i.bundled or not VERSIONED_RUN.fullmatch(i.name)]
    return infos, versions


ROWS_SHOWN, ROW_PIXELS = 8, 35  # a dataframe's rows (and its header) are 35 px tall


def checkpoint_table(infos, versions):
    """Every checkpoint listed, a row each."""
    rows = [
        {
            "name": info_title(i),
            "where": "bundled" if i.bundled else "yours",
            "family": FAMILY_NAMES.get(i.family, i.family),
            "cell": cell_label(i.cell),
            "params": params_of(i),
            "versions": "" if i.bundled else str(versions.get(i.name.removesuffix("_latest"), 0)),
            # per character only: a subword model's loss per token beside characters' would mislead
            "val nats/char": final_metrics(i),
            "saved": i.timestamp.replace("T", " ").replace("+00:00", " UTC"),
        }
        for i in infos
    ]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        # at most ROWS_SHOWN rows before the table scrolls: eleven bundled models and a student's files would
        # otherwise push the page past three laptop screens
        height=ROW_PIXELS * (min(len(rows), ROWS_SHOWN) + 1) + 3,
        column_config={
            "params": st.column_config.NumberColumn(format="localized"),
            "val nats/char": st.column_config.NumberColumn(format="%.3f"),
        },
    )
