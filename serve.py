"""RNN Lab's server: `streamlit run serve.py`.

It serves the same app as `streamlit run app.py` (app.py is Home, pages/ the other pages), but it
prepares itself before it opens: PyTorch and every page's code imported, training's lazy set-up
done, what the Memory, Sample and Gates pages first show computed (ui.app.warm_up.prepare_server, about
10 s on 2 cores). A first visitor then waits for none of it: Home's first visit took 5.3 s after a
plain start (2.2 s after this one), most of it importing PyTorch (BENCHMARKS-HISTORY.md, "One screen,
two seconds"). Streamlit runs this file's `app` (st.App) on its own web server and calls `prepare`
before it accepts a connection.

A server setting out of its bounds (lab.settings) stops it first, with one line that names the variable
and what it may be, and exit status 2.
"""

import contextlib
import sys

import anyio
import streamlit as st

from lab.errors import LabError
from lab.settings import server_settings

try:
    server_settings()
except LabError as error:
    print(error, file=sys.stderr, flush=True)
    sys.exit(2)


@contextlib.asynccontextmanager
async def prepare(_app):
    from ui.app.warm_up import prepare_server

    await anyio.to_thread.run_sync(prepare_server)
    yield


app = st.App("app.py", lifespan=prepare)
