"""RNN Lab's entry point: `streamlit run app.py`.

It only names the pages, in the sidebar's order (ui.common.PAGES: Home first,
the default at the site's root), and runs the one the URL asks for. Each page
is a thin script in pages/ over the `lab` package.
"""
import streamlit as st

from ui.common import PAGES

st.navigation([st.Page(path, title=name, icon=icon, default=n == 0)
               for n, (name, (path, icon)) in enumerate(PAGES.items())]).run()
