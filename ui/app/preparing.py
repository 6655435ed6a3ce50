"""What a visitor sees while `streamlit run serve.py` prepares: from the moment the server prints its address, a
page's address answers with how far the preparation has got ("The lab is preparing: importing the pages' code…
3 of 6 parts ready"), kept up to date, and opens the page itself the moment the lab is ready: never a blank wait.

The preparation (serve.py's: PyTorch imported, then ui.app.warm_up.prepare_server) takes its parts in order,
PARTS, and notes each in PREPARING as it starts and ends. serve.py runs it in a thread of its own
(`start_preparing`) and opens at once, with
WhilePreparing in front of Streamlit (a Starlette middleware, st.App's public `middleware`): until the
preparation is done, a page's address gets the notice, and Streamlit's health check answers 503 with the same
line, so that whatever waits for a server that is ready (a host's health check, benchmarks.app.AppServer) waits
as before; everything else (the scripts, the styles, a sign-in coming back) passes through. The notice asks the
health check every POLL_SECONDS (a line of text, not a page), shows its line, and reloads itself once the answer
is "ok" (without JavaScript: a reload every RELOAD_SECONDS). Once done, the middleware passes every request on,
and the first visit is as fast as after a server that opened prepared.

It imports nothing heavy (serve.py imports it before PyTorch: its first part is importing PyTorch)."""

import contextlib
import html
import logging
import threading
import time

from lab.server import shutdown

log = logging.getLogger(__name__)
THREAD_NAME = "rnnlab-warm-up"  # the thread that prepares, and warms up: ui.app.warm_up filters its log by it
POLL_SECONDS = 1  # how often the notice asks the health check how far the preparation has got
RELOAD_SECONDS = 2  # how often a browser without JavaScript reloads the notice

# the parts of the preparation, in the order it takes them, in the words a visitor reads
TORCH = "importing PyTorch"
SERVER = "setting up the server"
PAGES_CODE = "importing the pages' code"
MEMORY = "computing the Memory page's first charts"
SAMPLE = "computing the Sample page's first samples"
GATES = "computing the Gates page's first traces"
PARTS = (TORCH, SERVER, PAGES_CODE, MEMORY, SAMPLE, GATES)


class Progress:
    """How far a preparation of `parts` has got; written by the thread that prepares, read by any other."""

    def __init__(self, parts=PARTS, clock=time.monotonic):
        self.parts, self._clock, self._lock = tuple(parts), clock, threading.Lock()
        self._started = clock()
        self._done, self._now, self._finished = 0, self.parts[0], False

    @contextlib.contextmanager
    def part(self, name):
        """While the part `name` (one of `parts`) runs: it is the one named; after it, it and those before it
        are ready."""
        index = self.parts.index(name)
        with self._lock:
            self._now = name
        yield
        with self._lock:
            self._done = max(self._done, index + 1)

    def finish(self):
        """Done (or given up: the pages then compute what is missing themselves): every request passes."""
        with self._lock:
            self._finished = True

    @property
    def finished(self):
        return self._finished

    def line(self):
        """ "The lab is preparing: importing the pages' code… 2 of 6 parts ready (41 s so far)"."""
        with self._lock:
            done, now, seconds = self._done, self._now, self._clock() - self._started
        return f"The lab is preparing: {now}… {done} of {len(self.parts)} parts ready ({seconds:.0f} s so far)"

    def html(self, health="/_stcore/health"):
        """The page a visitor's browser shows while the lab prepares: the line, a bar and the parts, kept up to
        date from `health` (the health check's address); once it says "ok", the same address is loaded again (its
        settings kept), and the page itself opens."""
        with self._lock:
            done, now = self._done, self._now
        items = "".join(
            f"<li class='{'done' if i < done else 'now' if part == now else 'later'}'>"
            f"{'✓' if i < done else '…' if part == now else '·'} {html.escape(part)}</li>"
            for i, part in enumerate(self.parts)
        )
        return PAGE.format(
            reload=RELOAD_SECONDS,
            poll_ms=int(1000 * POLL_SECONDS),
            health=html.escape(health),
            line=html.escape(self.line()),
            done=done,
            total=len(self.parts),
            percent=round(100 * done / len(self.parts)),
            items=items,
        )


PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<noscript><meta http-equiv="refresh" content="{reload}"></noscript>
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>RNN Lab · preparing</title>
<style>
body {{ font-family: "Source Sans Pro", system-ui, sans-serif; color: #31333f; margin: 12vh auto; max-width: 40rem;
       padding: 0 1.5rem; line-height: 1.5; }}
h1 {{ font-size: 2.2rem; margin: 0 0 1rem; }}
.bar {{ background: #f0f2f6; border-radius: 0.5rem; height: 0.75rem; overflow: hidden; }}
.bar div {{ background: #ff4b4b; height: 100%; }}
ul {{ list-style: none; padding: 0; }} li {{ margin: 0.25rem 0; }}
li.done {{ color: #21853b; }} li.now {{ font-weight: 600; }} li.later {{ color: #808495; }}
p.small {{ color: #808495; font-size: 0.9rem; }}
</style></head>
<body><main>
<h1>RNN Lab</h1>
<p id="preparing">{line}.</p>
<div class="bar" role="progressbar" aria-valuenow="{done}" aria-valuemin="0" aria-valuemax="{total}">
<div style="width: {percent}%"></div></div>
<ul>{items}</ul>
<p class="small">A fresh server prepares once for its first visitors, so that no page waits for it later. This page
follows it and opens the lab as soon as it is ready: there is nothing to do but wait.</p>
</main>
<script>
(() => {{
  const line = document.getElementById("preparing"), bar = document.querySelector(".bar div");
  const items = document.querySelectorAll("li"), marks = {{done: "✓", now: "…", later: "·"}};
  const poll = async () => {{
    try {{
      const answer = await fetch("{health}", {{cache: "no-store"}});
      const text = (await answer.text()).trim();
      if (answer.ok && text === "ok") {{ window.location.reload(); return; }}
      const ready = text.match(/(\d+) of (\d+) parts ready/);
      if (ready) {{
        const done = Number(ready[1]);
        line.textContent = text + ".";
        bar.style.width = Math.round(100 * done / Number(ready[2])) + "%";
        items.forEach((item, i) => {{
          item.className = i < done ? "done" : i === done ? "now" : "later";
          item.textContent = marks[item.className] + item.textContent.slice(1);
        }});
      }}
    }} catch (error) {{}}  // the server restarting: ask again
    setTimeout(poll, {poll_ms});
  }};
  setTimeout(poll, {poll_ms});
}})();
</script>
</body></html>
"""

PREPARING = Progress()  # this server's preparation (serve.py's); under `streamlit run app.py` no page reads it
# where Streamlit serves what is not a page: its own endpoints, files, and the sign-in's way back
NOT_PAGES = ("/_stcore/", "/static/", "/media/", "/component/", "/app/static/", "/auth/", "/oauth2callback")


def is_page(path):
    """Whether a request's path is a page's address ("/", "/Train"), not a file or an endpoint."""
    return not path.startswith(NOT_PAGES) and "." not in path.rsplit("/", 1)[-1]


class WhilePreparing:
    """An ASGI middleware for st.App: while `progress` is not finished, a page's address (GET or HEAD) answers
    with its notice and the health check with 503 and its line; every other request, and every request once
    finished, goes on to the app."""

    def __init__(self, app, progress=None):
        self.app, self.progress = app, progress or PREPARING

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not self.progress.finished:
            path, method = scope.get("path", "/"), scope.get("method", "GET")
            if path.endswith("/_stcore/health"):
                return await _answer(send, 503, "text/plain", self.progress.line(), method)
            if method in ("GET", "HEAD") and is_page(path):
                return await _answer(send, 200, "text/html", self.progress.html(health_address()), method)
        await self.app(scope, receive, send)


def health_address():
    """The health check's address, under the app's base path (Streamlit's server.baseUrlPath) when it has one."""
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}/_stcore/health" if base else "/_stcore/health"


async def _answer(send, status, kind, text, method):
    body = text.encode("utf-8")
    headers = [
        (b"content-type", f"{kind}; charset=utf-8".encode()),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),  # the next reload asks the server again
    ]
    if status == 503:
        headers.append((b"retry-after", str(RELOAD_SECONDS).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


def start_preparing(prepare):
    """Run `prepare()` (serve.py's: PyTorch imported, then ui.app.warm_up.prepare_server, each part noted in
    PREPARING) in a thread of the server's own, joined as the server ends (lab.server.shutdown). PREPARING is
    finished whatever happens: a failed part is in the server's log, and the pages compute what it would have."""

    def run():
        try:
            prepare()
        except Exception:
            log.exception("preparing for the first visitors failed; the pages compute what they need when visited")
        finally:
            PREPARING.finish()

    thread = threading.Thread(target=run, name=THREAD_NAME, daemon=True)
    thread.start()
    shutdown.join_at_exit(thread)
    return thread
