"""RNN Lab's backend: recurrent cells, models, data, training, sampling and introspection.

Never imports Streamlit: the app (app.py, pages/) and the command line
(`python -m lab`) are two clients of the same functions.
"""
__version__ = "0.1.0"
