"""What the pages show of text they did not write (from a file, a link or a user): made inert inside
Markdown, so it renders as the characters it is, text that is not a program in a fixed-width block,
and bad input shown as one plain line, never a traceback, never a path of the server's folders."""

import contextlib
import html
import re

import streamlit as st

from lab.data import DataError
from lab.server.spaces import is_space_key
from lab.settings import server_settings
from lab.training.checkpoints import CheckpointError
from ui.shared.coloured_text import visible_piece

# Every ASCII punctuation character: Markdown lets a backslash escape each one, and escaped, none can
# start a link, an image, HTML, emphasis, code, a :colour[...] directive, :emoji:, $LaTeX$ or, since
# "www\." and "http\:\/\/" are no longer what GitHub's autolinks look for, a bare URL or address
_MARKDOWN_SYNTAX = re.compile(r"([!-/:-@\[-`{-~])")


# what the renderer turns into a link by itself, escaped or not (GitHub's autolinks): a URL's scheme,
# "www." and an address's "@". An invisible word joiner after its first character breaks each.
_AUTOLINK_STARTS = re.compile(r"(?i)(?<=h)(?=ttps?\\?:)|(?<=f)(?=tp\\?:)|(?<=w)(?=ww\\?\.)|(?<=@)")
WORD_JOINER = "\u2060"


def plain(text):
    """`text` (from a file, a link or a user) made inert inside Markdown: every punctuation character
    is backslash-escaped and every autolink broken, so it renders as the characters it is, never as a
    link, an image or HTML."""
    escaped = _MARKDOWN_SYNTAX.sub(r"\\\1", str(text)).replace("\n", "  \n")
    return _AUTOLINK_STARTS.sub(WORD_JOINER, escaped)


# a run of characters with a folder separator in it: a path, or a fraction such as nats/char
_PATH_LIKE = re.compile(r"""[^\s'"()\[\]<>]*[\\/][^\s'"()\[\]<>]*""")
_SPACE_KEY_LIKE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{38}(?![A-Za-z0-9_-])")  # lab.server.spaces.SPACE_KEY


def _file_name(match):
    """A path as its last part (a file's name), unless it is a URL or a fraction (one relative `a/b`)."""
    text = match.group(0)
    if "://" in text:
        return text
    parts = [part for part in re.split(r"[\\/]", text) if part]
    absolute = re.match(r"([A-Za-z]:)?[\\/]|~", text) is not None
    server = any(part == "user_checkpoints" or part.startswith("rnnlab-") for part in parts)
    if not (absolute or server or len(parts) > 2) or not parts:
        return text if parts else "a folder"
    return parts[-1] if not _SPACE_KEY_LIKE.fullmatch(parts[-1]) else "your folder"


def without_paths(text):
    """`text` (an error's message) with every path of the server's disk cut to its file's name, and any
    space key (lab.server.spaces: a student's folder, which its key opens) replaced by "your folder": a
    message may name the file, never where the server keeps it."""
    text = _PATH_LIKE.sub(_file_name, str(text))
    root = server_settings().user_dir  # every session's space is in it (ui.shared.sessions.users_root)
    return _SPACE_KEY_LIKE.sub(lambda m: "your folder" if is_space_key(root, m.group(0)) else m.group(0), text)


def said(message):
    """An error's message (an exception, a job's one line) as a page shows it: without the server's
    paths, made inert inside Markdown (`plain`)."""
    return plain(without_paths(message))


PRE_STYLE = (  # as st.code draws a block: Streamlit's code font and colours
    "margin:0 0 1rem;padding:0.75rem 1rem;background:#f8f9fb;border-radius:0.5rem;color:#31333f;"
    "font-family:'Source Code Pro',monospace;font-size:0.85rem;line-height:1.6;overflow-x:auto;"
)


def preformatted(text, wrap=True):
    """Text that is not a program (a sample, a command, a model summary) in a fixed-width block, escaped:
    shown as the characters it is. Not st.code, whose syntax highlighter's script costs every page
    opened by its link about 0.4 s in the browser (BENCHMARKS.md, "One screen, two seconds"); the
    cells' Python source keeps st.code. `wrap`: long lines wrap, else the block scrolls sideways."""
    space = "pre-wrap;overflow-wrap:anywhere" if wrap else "pre"
    st.html(f'<pre class="rnnlab-pre" style="{PRE_STYLE}white-space:{space}">{html.escape(str(text))}</pre>')


def piece_label(piece):
    """A token as a widget label (Markdown): whitespace made visible, nothing in it live."""
    return plain(visible_piece(piece))


@contextlib.contextmanager
def user_errors(what="That"):
    """Show bad input (ValueError and friends) as a clear st.error, never a traceback. `what` is plain text,
    never Markdown: it often names a file or a model ("Checking NAME.safetensors"), so it is made inert
    here (`plain`), as the exception's message is (`said`), and callers pass it unescaped."""
    doing = plain(what)
    try:
        yield
    except (CheckpointError, DataError, ValueError) as e:
        st.error(f"{doing} did not work: {said(e)}")
    except OSError as e:  # its reason in words, and the file's name at most
        named = f" ({said(e.filename)})" if e.filename else ""
        st.error(f"{doing} did not work: a file problem: {said(e.strerror or e)}{named}")
