"""RNN Lab's server: `streamlit run serve.py`.

It serves the same app as `streamlit run app.py` (app.py is Home, pages/ the other pages), but it prepares
itself for its first visitors as it opens: PyTorch and every page's code imported, training's lazy set-up done,
what the Memory, Sample and Gates pages first show computed (ui.app.warm_up.prepare_server). A first visitor then
waits for none of it: Home's first visit took 5.3 s after a plain start (2.2 s after a prepared one), most of it
importing PyTorch (BENCHMARKS-HISTORY.md, "One screen, two seconds").

The server answers from the moment it prints its address: until the preparation is done, a page's address shows
how far it has got and reloads itself, and the health check answers 503 (ui.app.preparing.WhilePreparing, a
middleware of st.App's); then every page opens as usual. Streamlit runs this file's `app` (st.App) on its own web
server and calls `prepare` as it starts, which starts the preparation in a thread and returns at once.

A server setting out of its bounds (lab.settings) stops it first, with one line that names the variable
and what it may be, and exit status 2.
"""

import contextlib
import sys

import streamlit as st
from starlette.middleware import Middleware

from lab.errors import LabError
from lab.settings import server_settings
from ui.app.preparing import PREPARING, TORCH, WhilePreparing, start_preparing

try:
    server_settings()
except LabError as error:
    print(error, file=sys.stderr, flush=True)
    sys.exit(2)


def prepare_for_the_first_visitors():
    """The server's preparation, its first part PyTorch's import (in a thread: ui.app.preparing.start_preparing)."""
    with PREPARING.part(TORCH):
        from ui.app.warm_up import prepare_server  # PyTorch, pandas and plotly with it

    prepare_server()


@contextlib.asynccontextmanager
async def prepare(_app):
    start_preparing(prepare_for_the_first_visitors)  # the server answers meanwhile, with how far it has got
    yield


app = st.App("app.py", lifespan=prepare, middleware=[Middleware(WhilePreparing)])
