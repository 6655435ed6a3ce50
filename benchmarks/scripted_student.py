"""A student without a browser: one Streamlit session driven over the websocket a browser opens, speaking
its messages (Streamlit's own protobufs), so that a class of 30 loads the server as 30 open pages do and not
the 2 cores it is measured on as 30 Chromiums would.

It does what a page does to the server: asks for a page's script run (with the page's query string and the
cookies the browser would send), presses a button by its key, and runs every fragment the server asked to
be rerun every so often (`st.fragment(run_every=...)`: the live chart, the heartbeat) on the same timer a
browser keeps, until it is closed. It draws nothing.

    student = ScriptedStudent(server.url, "Train", "hidden=64&seconds=60", {SPACE_COOKIE: key})
    student.open()             # the page's first script run, to its end
    student.press("train_start")
    student.keep_open()        # a thread that answers the page's timers, as an open tab does
    ...
    student.close(); student.ends  # how each script run ended: "page", "fragment", "cut short"
"""

import contextlib
import re
import threading
import time
import urllib.parse

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from websockets.sync.client import connect

from lab.server.priority import lower_this_thread

ENDS = {
    ForwardMsg.FINISHED_SUCCESSFULLY: "page",
    ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY: "fragment",
    ForwardMsg.FINISHED_EARLY_FOR_RERUN: "cut short",
}


class ScriptedStudent:
    def __init__(self, server_url, page, query, cookies):
        self.url = urllib.parse.urlparse(server_url)._replace(scheme="ws", path="/_stcore/stream").geturl()
        self.page, self.query, self.cookies = page, query, cookies
        self.widgets = {}  # widget key -> its id, from the elements the server sent
        self.timers = {}  # fragment id -> (interval in s, when it is next due): what the page reruns by itself
        self.ends, self.errors = [], []  # errors: the exceptions and error boxes the page drew
        self.page_hash = ""  # the page's script hash, as the server named it: what a browser sends back
        self.watched, self.seen = {}, {}  # name -> a compiled pattern; name -> when a text first matched it
        self.said = {}  # name -> (the groups of the latest text that matched it, when): figures the page gave
        self._socket, self._thread, self._closed = None, None, threading.Event()
        self._exits = contextlib.ExitStack()  # the connection's

    def open(self, timeout=300):
        header = "; ".join(f"{name}={value}" for name, value in self.cookies.items())
        connection = connect(self.url, additional_headers={"Cookie": header}, max_size=None, open_timeout=timeout)
        self._socket = self._exits.enter_context(connection)
        self._rerun()
        self._read_until_run_ends(timeout)
        return self

    def press(self, key, timeout=300):
        """Click the button with this key, and read until that script run ends."""
        self._rerun(WidgetStates(widgets=[WidgetState(id=self.widgets[key], trigger_value=True)]))
        self._read_until_run_ends(timeout)

    def keep_open(self):
        """From now on a thread of its own reads the server's messages and runs the page's timers (so press
        nothing after this)."""
        self._thread = threading.Thread(target=self._answer_timers, daemon=True)
        self._thread.start()

    def close(self):
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._exits.close()

    def _rerun(self, widget_states=None, fragment_id=""):
        state = ClientState(
            query_string=self.query,
            page_name=self.page,
            # with its hash too, as a browser sends it: a page's own st.rerun() reruns the page the server's
            # context names, which without it is the main script (Home)
            page_script_hash=self.page_hash,
            widget_states=widget_states or WidgetStates(),
            fragment_id=fragment_id,
            is_auto_rerun=bool(fragment_id),
        )
        self._socket.send(BackMsg(rerun_script=state).SerializeToString())

    def _read_until_run_ends(self, timeout):
        deadline = time.monotonic() + timeout
        while not self._read(deadline - time.monotonic()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the {self.page} page's script did not end in {timeout} s")

    def _read(self, timeout):
        """Read one message (waiting at most `timeout` s) -> whether it ended a script run."""
        try:
            message = ForwardMsg.FromString(self._socket.recv(timeout=max(timeout, 0.001)))
        except TimeoutError:
            return False
        kind = message.WhichOneof("type")
        if kind == "new_session":
            if not message.metadata.run.fragment_ids:  # a whole run: the page sets its timers anew
                self.timers.clear()
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            element_type = element.WhichOneof("type") or ""
            widget_id = getattr(getattr(element, element_type, None), "id", "")
            if widget_id.startswith("$$ID-"):  # "$$ID-<hash>-<key>" for a widget given a key
                self.widgets[widget_id.split("-", 2)[2]] = widget_id
            if element_type == "exception":
                self.errors.append(element.exception.message)
            elif element_type == "alert" and element.alert.format == Alert.ERROR:
                self.errors.append(element.alert.body)
            self._watch(element, element_type)
        elif kind == "navigation":  # the page the server resolved: a browser sends its hash back with each rerun
            self.page_hash = message.navigation.page_script_hash or self.page_hash
        elif kind == "auto_rerun":
            interval = message.auto_rerun.interval
            self.timers[message.auto_rerun.fragment_id] = (interval, time.monotonic() + interval)
        elif kind == "stop_auto_rerun":
            for fragment_id in message.stop_auto_rerun.fragment_ids:
                self.timers.pop(fragment_id, None)
        elif kind == "script_finished":
            self.ends.append(ENDS.get(message.script_finished, "other"))
            return True
        return False

    def watch_for(self, **patterns):
        """Note when the page first shows a text (Markdown, a notice, a progress bar's) matching each of these
        regular expressions: self.seen[name], a time.monotonic()."""
        self.watched.update({name: re.compile(pattern) for name, pattern in patterns.items()})

    def _watch(self, element, element_type):
        text = {"markdown": "body", "alert": "body", "progress": "text"}.get(element_type)
        if text is None or not self.watched:
            return
        body = getattr(getattr(element, element_type), text).replace("\\", "")  # as drawn: Markdown's escapes gone
        for name, pattern in self.watched.items():
            match = pattern.search(body)
            if match:
                self.seen.setdefault(name, time.monotonic())
                self.said[name] = (match.groups(), time.monotonic())

    def _answer_timers(self):
        lower_this_thread()  # as a class's browsers run on laptops of their own, not beside the server
        while not self._closed.is_set():
            now = time.monotonic()
            for fragment_id, (interval, due) in list(self.timers.items()):
                if due <= now:
                    self.timers[fragment_id] = (interval, now + interval)
                    self._rerun(fragment_id=fragment_id)
            next_due = min((due for _, due in self.timers.values()), default=now + 0.5)
            self._read(min(max(next_due - time.monotonic(), 0.01), 0.5))
