"""Checkpoints: the bundled models and your own, their summaries and histories; download,
upload (validated, never executed) and delete (yours only)."""

import collections
import math
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.nets.models import config_to_dict, model_summary, recurrent_layers
from lab.schema import printable_part
from lab.server.uploads import load_upload
from lab.training.checkpoints import (
    SUFFIX,
    CheckpointError,
    delete_checkpoint,
    read_info,
    sanitize_name,
    save_checkpoint,
    scan_checkpoints,
)
from lab.words import count
from ui.app.frame import setup_page
from ui.cell_labels import cell_label, equations_latex
from ui.shared.chart_style import WHITE
from ui.shared.checkpoint_picker import (
    NO_CHECKPOINTS,
    cached_checkpoint,
    choose_checkpoint,
    forget_deleted,
    listed_name,
    reads_text,
)
from ui.shared.common import page_link, parameter_count, show_anchors
from ui.shared.links import Field, mirror_to_url, restore_from_url
from ui.shared.model_names import TOKENIZER_LABELS, describe_info, info_title
from ui.shared.plain_text import plain, preformatted, said, user_errors, without_paths
from ui.shared.sessions import room_check, session_key, user_dir

setup_page("Checkpoints")
st.title("📦 Checkpoints")
st.caption(
    "Every model the lab can load: the bundled ones (trained on the bundled Shakespeare) and yours "
    "(saved by the Train page or uploaded in this browser; nobody else sees them, and they are kept "
    "for a while after your last visit). Files are safetensors: loading one never runs code."
)
show_anchors("nanogpt_cpu", "nanogpt_gpu", "leviathan", "uniform_char")

SETTINGS = {"model": (Field("text", "Checkpoint"), "ckpt_choice")}  # ?model=char-lstm_latest
DEFAULTS = {"model": "char-lstm_latest"}  # the best bundled character model
restore_from_url(SETTINGS, DEFAULTS)
VERSIONED_RUN = re.compile(r"(.+)_v\d+")  # name_vN: one version of a run

if "ckpt_flash" in st.session_state:  # the outcome of an upload or delete, shown after the rerun
    kind, message = st.session_state.pop("ckpt_flash")
    getattr(st, kind)(message)


# lab.training.train.TrainConfig's fields a checkpoint records -> what a student reads
TRAINED_WITH = {
    "lr": "learning rate",
    "batch_size": "batch size",
    "block_size": "block size",
    "label_smoothing": "label smoothing",
    "stateful": "stateful",
    "max_seconds": "time budget (s)",
    "max_steps": "step budget",
}
FAMILY_NAMES = {"lm": "language model", "scan_markov": "n-gram scan", "classifier": "sequence classifier"}


def final_metrics(info):
    """The validation figure of the weights the file holds: its own record (a bundled model keeps its
    best evaluation's weights), else its history's last evaluation."""
    if "val_nats_per_char" in info.metrics:
        return info.metrics["val_nats_per_char"]
    history = info.metrics.get("history") or [{}]
    last = history[-1]
    return last.get("val_nats_per_char", last.get("val_accuracy", math.nan))


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
        else ("error", f"Deleted {deleted}; could not delete {plain('; '.join(failed))}.")
    )


infos, problems = scan_checkpoints(user_dir())
if problems:  # a hand-edited or damaged file is named and can be removed; it never breaks the page
    readable = {info.path for info in infos}
    unreadable = sorted(p for p in user_dir().glob("*.safetensors") if p not in readable)
    with st.container(border=True):
        st.warning(
            f"{count(len(problems), 'file')} could not be read and {'is' if len(problems) == 1 else 'are'} not listed:"
        )
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
if not infos:
    st.warning(NO_CHECKPOINTS)
else:
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
        column_config={
            "params": st.column_config.NumberColumn(format="localized"),
            "val nats/char": st.column_config.NumberColumn(format="%.3f"),
        },
    )

    info = choose_checkpoint("ckpt_choice", "Inspect a checkpoint", infos, default_name=DEFAULTS["model"])
    mirror_to_url(SETTINGS, DEFAULTS)
    checkpoint = None
    with user_errors(f"Loading {info_title(info)}"):
        checkpoint = cached_checkpoint(str(info.path), info.path.stat().st_mtime)
    if checkpoint is not None:
        details_col, history_col = st.columns([2, 3], gap="large")
        with details_col:
            st.subheader(info_title(info))
            st.caption(plain(describe_info(info)))
            meta, tokenizer, metrics = checkpoint.meta, checkpoint.tokenizer, checkpoint.metrics
            conventions = model_summary(checkpoint.model).conventions
            lines = [
                f"**{'Convention' if len(conventions) == 1 else 'Conventions'}:** "
                + "; ".join(plain(c) for c in conventions),
                f"**Saved:** {plain(meta.get('timestamp', '?'))} · lab {plain(meta.get('lab_version', '?'))} · "
                f"version {plain(meta.get('version', '?'))}",
            ]
            if tokenizer is not None:
                reads = TOKENIZER_LABELS.get(tokenizer.kind, tokenizer.kind)
                lines.append(f"**Reads:** {plain(reads)}, a vocabulary of {count(tokenizer.vocab_size, 'token')}")
            train_config = metrics.get("train_config")
            if train_config:
                lines.append(
                    "**Trained with:** "
                    + ", ".join(
                        f"{label} {plain(train_config[k])}"
                        for k, label in TRAINED_WITH.items()
                        if train_config.get(k) is not None
                    )
                )
            if metrics.get("reason"):
                lines.append(
                    f"**Ended:** {plain(metrics['reason'])} after "
                    + (count(metrics["steps"], "step") if metrics.get("steps") is not None else "? steps")
                    + f", "
                    f"{metrics.get('elapsed', 0):.0f} s"
                )
            st.markdown("  \n".join(lines))
            with st.container(horizontal=True):
                st.download_button(
                    "⬇ Download the file",
                    data=lambda path=info.path: Path(path).read_bytes(),
                    file_name=info.path.name,
                    mime="application/octet-stream",
                    key="ckpt_download",
                )
                if reads_text(info):  # the link opens the page on this very file
                    page_link("Sample", label="Sample from it", query_params={"model": listed_name(info)})
                    page_link("Gates", label="See its gates", query_params={"model": listed_name(info)})
            if not info.bundled:
                every = " and every version of it" if info.name.endswith("_latest") else ""
                confirm = st.checkbox(f"Yes, delete “{plain(info_title(info))}”{every}", key="ckpt_confirm_delete")
                st.button("🗑 Delete", key="ckpt_delete", disabled=not confirm, on_click=delete, args=(info,))
            else:
                st.caption("Bundled checkpoints cannot be deleted from the app.")
        with history_col:
            history = metrics.get("history") or []
            if not history:
                st.info("This checkpoint has no metrics history.")
            else:
                df = pd.DataFrame(history)
                fig = go.Figure()
                for column, name, dash in (
                    ("val_loss", "val loss", "solid"),
                    ("train_loss", "train loss", "dot"),
                    ("val_nats_per_char", "val nats/char", "dash"),
                ):
                    if column in df and not (column == "val_nats_per_char" and df[column].equals(df["val_loss"])):
                        fig.add_trace(
                            go.Scatter(
                                x=df["step"], y=df[column], mode="lines+markers", name=name, line=dict(dash=dash)
                            )
                        )
                fig.update_layout(
                    height=340,
                    margin=dict(l=10, r=10, t=50, b=10),
                    xaxis_title="step",
                    yaxis_title="nats",
                    template=WHITE,
                    title="Metrics history",
                    legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
                )
                st.plotly_chart(fig, key="ckpt_history", width="stretch")
        with st.expander("Model summary (every weight tensor, its shape and parameter count)", expanded=True):
            preformatted(model_summary(checkpoint.model, info_title(info)).format(), wrap=False)

# ---------------------------------------------------------------------------
# upload

st.header("Upload a checkpoint")
st.caption(
    "A model file saved by RNN Lab (its name ends in .safetensors). It is checked before anything is written: "
    "a Python pickle (which could run code when loaded), a damaged file, or weights that do not match their "
    "description are refused."
)


def upload_summary(checkpoint):
    """What the page shows of a checked upload: kept between reruns instead of the model."""
    params = parameter_count(config_to_dict(checkpoint.config))
    cells = list(dict.fromkeys(layer.cell for layer in recurrent_layers(checkpoint.model)))
    family = FAMILY_NAMES.get(checkpoint.config.family, checkpoint.config.family)
    return {
        "name": checkpoint.meta.get("name"),
        "description": f"a {family} of {params:,} parameters, {' and '.join(map(cell_label, cells))} cells",
        "cells": cells,
    }


# a new key after each save empties the uploader
upload = st.file_uploader(
    "Checkpoint file",
    type=["safetensors", "pt", "pth", "pkl", "bin", "ckpt"],
    key=f"ckpt_upload_{st.session_state.setdefault('ckpt_uploads', 0)}",
)
if upload is not None:
    # read once per upload, counted in the server's budget; a rerun shows what that reading found
    checked = st.session_state.get("ckpt_checked")
    if checked is None or checked[0] != upload.file_id:
        checked = (upload.file_id, None)
        with user_errors(f"Checking {upload.name}"):
            checkpoint = load_upload(upload.getvalue(), session_key())  # parsed as safetensors, never unpickled
            checked = (upload.file_id, upload_summary(checkpoint))
        st.session_state.ckpt_checked = checked
    summary = checked[1]
    if summary is not None:
        st.success(f"{plain(upload.name)} is a valid RNN Lab checkpoint: {summary['description']}.")
        for cell in summary["cells"]:  # its equations as a formula, not as Markdown that would eat the "*"
            st.latex(equations_latex(cell))
        stem = upload.name.rsplit(".", 1)[0].removesuffix("_latest")
        name = st.text_input("Save as", value=summary["name"] or stem, key="ckpt_save_name", max_chars=64)
        if st.button("Save to my checkpoints", key="ckpt_save", type="primary"):
            with user_errors("Saving"):
                checkpoint = load_upload(upload.getvalue(), session_key())
                extra = {**checkpoint.meta.get("extra", {}), "uploaded": printable_part(upload.name)}
                path = save_checkpoint(
                    user_dir(),
                    sanitize_name(name),
                    checkpoint.model,
                    checkpoint.tokenizer,
                    checkpoint.metrics,
                    extra,
                    room=room_check(),
                )
                saved = read_info(path.with_name(f"{path.name.rsplit('_v', 1)[0]}_latest{SUFFIX}"))
                st.session_state.ckpt_flash = (
                    "success",
                    f"Saved: {where_listed(saved, 'list')}.",
                )
                st.session_state.ckpt_uploads += 1
                st.rerun()
