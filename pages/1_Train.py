"""Train: pick a model family and a corpus, start a background run, watch the loss race live.

Widgets -> ui.train.settings (settings, their URL form, the lab configs) -> ui.train.runs (a
lab.server.jobs.TrainingJob per run, read into run logs) -> ui.train.chart; a fragment polls the
session's jobs every two seconds (less often on a busy server) and draws their events. The corpus
and its tokenized task come from ui.train.corpus. The settings are mirrored in the URL, so a link
opens with the same settings.
"""

import streamlit as st

from ui.app.frame import setup_page
from ui.shared.boundary import page_part
from ui.train import settings as ts
from ui.train.controls import start_and_stop
from ui.train.corpus import describe_task, load_task
from ui.train.form import checked_model, main_settings, more_settings
from ui.train.live import live_race

setup_page("Train")
with page_part():  # one plain line on the page for whatever fails below (ui.shared.boundary)
    st.title("🏋️ Train")
    st.caption(  # one line at a laptop's width: the live chart's top stays on its first screen
        "Train a recurrent language model and watch its loss fall; a race trains one cell of each kind at once. "
        "Closing this tab stops your runs."
    )
    # settings: URL at page load, then the session's own values
    saved = ts.restore_settings()
    # the first screen holds the main settings, Start beside them and the live chart (a laptop's 768 pixels hold
    # them); the other settings, which a student changes less often, wait in an expander under the chart
    fixed = main_settings()
    notices, controls, live = st.container(), st.container(), st.container()
    more = st.expander("More settings: the model's shape, the corpus, the training recipe")
    data_col, upload, ngram = more_settings(more, fixed, saved)
    values = ts.mirror_settings(saved)

    # the corpus and its tokenized task (cached), then the model it makes
    with notices:  # what stops Start is said beside it
        task, corpus_label = load_task(values, upload)
    with data_col:
        describe_task(values, task, ngram)
    model_config = checked_model(notices, values, task)

    running = start_and_stop(controls, values, model_config, task, corpus_label, fixed)
    with live:
        live_race(running, values, task, corpus_label)
