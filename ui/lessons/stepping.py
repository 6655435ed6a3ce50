"""The lesson that steps through one recurrent step, equation by equation, with the numbers the
bundled model's cell computed (lab.instruments.stepping); the two GRU conventions side by side."""

import inspect

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from lab.instruments.stepping import MAX_STEP_TOKENS, step_through
from lab.lessons.stepping import step_gist, what_to_watch
from lab.nets.equations import symbol, worked
from lab.nets.families import CELLS, FAMILIES, kinds
from lab.words import listing
from ui.cell_labels import cell_colour, cell_label, equations_latex
from ui.lessons.common import background, bundled, check_yourself, notice, open_full_page, uses
from ui.shared.cached_calls import checkpoint_key
from ui.shared.checkpoint_picker import cached_checkpoint
from ui.shared.coloured_text import span_html
from ui.shared.links import Field
from ui.shared.model_names import bundled_title
from ui.shared.plain_text import piece_label, plain, user_errors

SEED_GRU = bundled_title("char-gru-seed")  # the z-overwrites GRU, as every page names it
# the lesson's choices: each kind of cell with a bundled model; a kind of several families (the two GRU
# conventions) shows their models side by side
STEP_KINDS = {kind: members for kind, members in kinds().items() if all(f.bundled for f in members)}
STEP_MAX_CHARS = 200
UNITS_SHOWN = 6  # the most units a table shows
# the lesson's settings in a link (?lesson=step-through&cell=lstm&t=4&text=...)
SETTINGS = {
    "cell": (Field("choice", "Cell", choices=tuple(STEP_KINDS)), "lessons_step_cell"),
    "text": (Field("text", "Text", high=STEP_MAX_CHARS), "lessons_step_text"),
    "t": (Field("int", "Step", 1, MAX_STEP_TOKENS), "lessons_step_t"),
}
DEFAULTS = {"cell": "gru", "text": "To be, or not to be", "t": 1}


def number(value):
    return f"{value:.3f}".replace("-", "−")


def kind_label(kind):
    """A choice of the lesson's list: the cell's name, or the names of a kind's conventions side by side."""
    names = [f.name for f in STEP_KINDS[kind]]
    return names[0] if len(names) == 1 else f"{listing(names)}, side by side"


def worked_line(step, unit):
    """The cell's state update with unit `unit`'s numbers written in."""
    values = {name: number(v[unit]) for name, v in step.values.items()}
    return ", then ".join(worked(e, values) for e in step.equations if e.updates_state)


@st.cache_data(max_entries=32, show_spinner="Reading your text through the cell…")
def cached_steps(path, mtime, text):
    """lab.instruments.stepping.step_through of a checkpoint's first layer."""
    checkpoint = cached_checkpoint(path, mtime)
    return step_through(checkpoint.model, checkpoint.tokenizer, text)


def _move(by, last):
    st.session_state.lessons_step_t = min(max(1, st.session_state.lessons_step_t + by), last)


def step_controls(length):
    """The step slider and its two buttons -> t (1..length)."""
    st.session_state.lessons_step_t = min(max(1, st.session_state.lessons_step_t), length)
    cols = st.columns([1, 6, 1])
    cols[0].button(
        "◀ Previous",
        key="lessons_step_back",
        on_click=_move,
        args=(-1, length),
        disabled=st.session_state.lessons_step_t == 1,
    )
    if length > 1:
        cols[1].slider("Step t", 1, length, key="lessons_step_t", label_visibility="collapsed")
    cols[2].button(
        "Next ▶",
        key="lessons_step_next",
        on_click=_move,
        args=(1, length),
        disabled=st.session_state.lessons_step_t == length,
    )
    return st.session_state.lessons_step_t


def embedding_chart(step, name):
    fig = go.Figure(
        go.Bar(
            y=step.x,
            marker_color=cell_colour(step.cell),
            hovertemplate="feature %{x}: %{y:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=120,
        margin=dict(l=40, r=10, t=30, b=20),
        bargap=0.1,
        title=dict(text=f"x_t, {name}: {len(step.x)} numbers", font=dict(size=13)),
    )
    return fig


def show_equations(step, name, units):
    """The cell's equations, then one table of every number they read and write, in the order they are
    computed (one table per equation made the lesson four screens long)."""
    st.markdown(f"**{plain(name)}** · {cell_label(step.cell)}")
    st.plotly_chart(embedding_chart(step, name), key=f"lessons_step_x_{step.cell}")
    st.latex(equations_latex(step.cell))
    tables = [step.table(equation, units).set_index("unit") for equation in step.equations]
    table = pd.concat(tables, axis=1)
    table = table.loc[:, ~table.columns.duplicated()].reset_index()  # h_{t-1} is read by several equations
    table = table.rename(columns=lambda c: c if c == "unit" else symbol(FAMILIES[step.cell].latex, c))
    st.table(table.style.format({c: "{:.3f}" for c in table.columns if c != "unit"}), hide_index=True)


def same_decision(seed, torch_, units):
    """The GRUs' update gates side by side: what each convention calls z, and what each keeps."""
    st.markdown(
        "**One decision, two letters.** What each GRU keeps of its old state and overwrites with its "
        "candidate, at this step:"
    )
    shares = {
        f"{SEED_GRU}: z_t (overwrites)": seed.values["z"][units],
        f"{SEED_GRU}: 1 − z_t (keeps)": seed.keep[units],
        "PyTorch: 1 − z_t (overwrites)": 1 - torch_.keep[units],
        "PyTorch: z_t (keeps)": torch_.keep[units],
    }
    # a row per share and a column per unit: four rows, however many units are shown
    table = pd.DataFrame(
        {"share": list(shares), **{f"unit {u}": [v[n] for v in shares.values()] for n, u in enumerate(units)}}
    )
    st.table(table.style.format({c: "{:.3f}" for c in table.columns if c != "share"}), hide_index=True)


def one_step():
    background("equations")
    for name, (_, key) in SETTINGS.items():  # a return visit in the session starts from the lesson's defaults
        st.session_state.setdefault(key, DEFAULTS[name])
    cols = st.columns([2, 1])
    text = cols[0].text_input("Your text (a few words)", max_chars=STEP_MAX_CHARS, key="lessons_step_text")
    choice = cols[1].selectbox("Cell", list(STEP_KINDS), format_func=kind_label, key="lessons_step_cell")
    models = [f.bundled for f in STEP_KINDS[choice]]
    checkpoints = [bundled(name) for name in models]
    if None in checkpoints:
        return
    stepped = []
    with user_errors("Reading your text"):
        stepped = [cached_steps(*checkpoint_key(checkpoint), text) for checkpoint in checkpoints]
    if not stepped:
        return
    length = min(s.length for s in stepped)
    hidden = min(len(s.step(1).values["h"]) for s in stepped)
    t = step_controls(length)
    steps = [s.step(t) for s in stepped]
    names = [bundled_title(name) for name in models]
    st.html(span_html(stepped[0].trace.token_texts, t - 1, t))
    if [u for u in st.session_state.get("lessons_step_units", []) if u >= hidden]:
        del st.session_state["lessons_step_units"]  # units another model had
    first_units = list(range(min(5, hidden)))
    # the step in words and the choice of units in one row, so that the numbers come on the first screen
    said, choose = st.columns([3, 2], vertical_alignment="bottom")
    said.markdown(
        f"**Step t = {t} of {length}**: the cell reads “{piece_label(steps[0].token)}” and "
        "turns h_{t−1}, the state the steps before left, into h_t."
    )
    choose.multiselect(
        "Units shown", list(range(hidden)), default=first_units, max_selections=UNITS_SHOWN, key="lessons_step_units"
    )
    units = st.session_state.lessons_step_units or [0]
    for column, step, name in zip(st.columns(len(steps)), steps, names):
        with column:
            show_equations(step, name, units)
    side_by_side = len(steps) > 1  # the two GRU conventions
    if side_by_side:
        same_decision(*steps, units)
    unit = units[0]
    worked = "\n".join(f"- {plain(name)}, unit {unit}: " + worked_line(step, unit) for step, name in zip(steps, names))
    kept = [(name, step.cell, float(np.mean(step.keep))) for step, name in zip(steps, names) if step.keep is not None]
    moved = None if kept else float(np.mean(np.abs(steps[0].values["h"] - steps[0].values["h_prev"])))
    layer, layers = stepped[0].layer, checkpoints[0].config.num_layers  # the layer the numbers are of
    gist = step_gist([(plain(name), cell, share) for name, cell, share in kept], moved, layer, layers)
    conventions = (
        "\n\nThe two GRUs are separately trained models, so their units hold different things, but "
        f"read the table above: the convention of the {SEED_GRU} writes the share it overwrites as "
        "z and keeps 1 − z; PyTorch's writes the share it keeps as z. The same decision, opposite "
        "letters."
        if side_by_side
        else ""
    )
    uses(*zip(models, checkpoints))
    notice(
        "Every number above is the cell's own, recorded while it read your text (not recomputed). Check the "
        f"last equation by hand for unit {unit}:\n{worked}\n\n{gist}{conventions}\n\nPress **Next ▶** and "
        + what_to_watch([step.cell for step in steps])
    )
    if st.toggle("Show code", key="lessons_step_code", help="The lab source of the cells on this screen."):
        for cell in dict.fromkeys(step.cell for step in steps):
            st.caption(f"The lab's code for the {cell_label(cell)}: one line per equation above")
            st.code(inspect.getsource(CELLS[cell].forward), language="python")
    check_yourself(
        "A unit of the PyTorch-convention GRU has z_t = 0.9, h_{t−1} = 0.5 and candidate n_t = −0.2. "
        "What is h_t, and what would the update gate of a GRU in the other convention (z overwrites, "
        f"like the {SEED_GRU}) read to make the same decision?",
        "h_t = (1 − 0.9) · (−0.2) + 0.9 · 0.5 = 0.43: it keeps 90% of its old state. In the other "
        "convention z is the share overwritten, so the same decision is z_t = 0.1, and "
        "h_t = (1 − 0.1) · 0.5 + 0.1 · (−0.2) = 0.43 again. Same arithmetic, the letter flipped.",
    )
    open_full_page(
        "Gates",
        f"Open the Gates page on {names[0]} with your text (one unit at every step)",
        section="unit",
        model=models[0],
        text=text,
        unit=unit,
    )
