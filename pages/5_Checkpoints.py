"""Checkpoints: the bundled models and your own, their summaries and histories; download,
upload (validated, never executed) and delete (yours only)."""

import streamlit as st

from lab.lessons.models import ModelFigures, bigger_does_worse
from ui.app.frame import setup_page
from ui.checkpoints.details import show_checkpoint
from ui.checkpoints.listing import DEFAULTS, SETTINGS, checkpoint_table, readable_checkpoints, show_outcome
from ui.checkpoints.upload import upload_section
from ui.shared.boundary import page_part
from ui.shared.checkpoint_picker import NO_CHECKPOINTS, choose_checkpoint
from ui.shared.common import show_anchors
from ui.shared.links import mirror_to_url, restore_from_url
from ui.shared.model_names import info_title

setup_page("Checkpoints")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("📦 Checkpoints")
    st.caption(
        "Every model the lab can load: the bundled ones (trained on the bundled Shakespeare) and yours "
        "(saved by the Train page or uploaded in this browser; nobody else sees them, and they are kept "
        "for a while after your last visit). Files are safetensors: loading one never runs code."
    )
    restore_from_url(SETTINGS, DEFAULTS)
    infos, versions = readable_checkpoints()
    # why a bigger bundled model can score worse, beside the published and the bundled Leviathan, said only while
    # the bundled models' own figures show it (in the anchors' expander: the page stays within three screens)
    bigger = bigger_does_worse([ModelFigures.of(info_title(i), i) for i in infos if i.bundled])
    show_anchors("nanogpt_cpu", "nanogpt_gpu", "leviathan", "uniform_char", note=bigger)
    show_outcome()
    if not infos:
        st.warning(NO_CHECKPOINTS)
    else:
        checkpoint_table(infos, versions)
        info = choose_checkpoint("ckpt_choice", "Inspect a checkpoint", infos, default_name=DEFAULTS["model"])
        mirror_to_url(SETTINGS, DEFAULTS)
        show_checkpoint(info)

    # ---------------------------------------------------------------------------
    # upload

    st.header("Upload a checkpoint")
    st.caption(
        "A model file saved by RNN Lab (its name ends in .safetensors). It is checked before anything is written: "
        "a Python pickle (which could run code when loaded), a damaged file, or weights that do not match their "
        "description are refused."
    )
    upload_section()
