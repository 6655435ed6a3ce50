"""Home's tab of the presets: the lab's model families as named presets, with what each is, what it
reads and its parameter count beside the published one."""

import pandas as pd
import streamlit as st

from lab.nets.models import config_to_dict
from lab.training.presets import PRESETS
from ui.shared.common import parameter_count, preset_words
from ui.shared.model_names import PRESET_TITLES, TOKENIZER_LABELS


@st.cache_data(show_spinner=False)
def preset_table():
    rows = []
    for preset in PRESETS.values():
        model = preset.model
        rows.append(
            {
                "preset": PRESET_TITLES[preset.name],
                "what it is": preset_words(preset.name),
                "reads": TOKENIZER_LABELS.get(preset.tokenizer, "pixels"),
                "parameters": parameter_count(config_to_dict(model)),
                "published count": f"{preset.expected_params:,}" if preset.expected_params else "",
            }
        )
    return pd.DataFrame(rows)


def show_presets(presets):
    """The presets' table in the tab `presets`."""
    presets.caption(
        "The lab's model families as named presets; the Train page starts from one. "
        "Character models are counted at 65 characters, subword models at 1,000 pieces."
    )
    presets.dataframe(
        preset_table(),
        hide_index=True,
        width="stretch",
        column_config={
            "parameters": st.column_config.NumberColumn(format="localized"),
            "what it is": st.column_config.TextColumn(width="large"),
        },
    )
