"""Uploading a checkpoint on the Checkpoints page: checked before anything is written (parsed as
safetensors, never unpickled: lab.server.uploads.load_upload, counted in the server's budget), then saved
into the student's own folder under a name they choose."""

import streamlit as st

from lab.nets.models import config_to_dict, recurrent_layers
from lab.schema import printable_part
from lab.server.uploads import load_upload
from lab.training.checkpoints import SUFFIX, read_info, sanitize_name, save_checkpoint
from ui.cell_labels import cell_label, equations_latex
from ui.checkpoints.listing import FAMILY_NAMES, where_listed
from ui.shared.common import parameter_count
from ui.shared.plain_text import plain, user_errors
from ui.shared.sessions import room_check, session_key, user_dir


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


def upload_section():
    """The uploader, what it found in the file, and saving it."""
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
