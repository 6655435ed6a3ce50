"""RNN Lab home page (placeholder until the app issue lands): lists the model families."""
import streamlit as st

from lab.presets import PRESETS

st.set_page_config(page_title="RNN Lab", layout="wide")
st.title("RNN Lab")
st.write("Train small recurrent networks and watch them remember and forget.")
st.table([{"preset": p.name, "seed": p.seed, "description": p.description} for p in PRESETS.values()])
