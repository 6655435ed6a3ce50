"""One checkpoint in detail on the Checkpoints page: what it is, how it was trained and saved, its
download, links to the pages that read it, deleting it (the student's own only), its metrics history
and its summary, every weight tensor."""

from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.nets.models import model_summary
from lab.words import count
from ui.checkpoints.listing import delete
from ui.shared.chart_style import WHITE
from ui.shared.checkpoint_picker import cached_checkpoint, listed_name, reads_text
from ui.shared.common import page_link
from ui.shared.model_names import TOKENIZER_LABELS, describe_info, info_title
from ui.shared.plain_text import plain, preformatted, user_errors

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


def show_checkpoint(info):
    """The chosen checkpoint, loaded (cached), in detail."""
    checkpoint = None
    with user_errors(f"Loading {info_title(info)}"):
        checkpoint = cached_checkpoint(str(info.path), info.path.stat().st_mtime)
    if checkpoint is not None:
        details_col, history_col = st.columns([2, 3], gap="large")
        with details_col:
            st.subheader(plain(info_title(info)))
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
