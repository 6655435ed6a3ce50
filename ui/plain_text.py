"""What the pages show of text they did not write (from a file, a link or a user): made inert inside
Markdown, so it renders as the characters it is, text that is not a program in a fixed-width block,
and bad input shown as one plain line, never a traceback."""

import contextlib
import html
import re

import streamlit as st

from lab.data import DataError
from lab.training.checkpoints import CheckpointError
from ui.coloured_text import visible_piece

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
    """Show bad input (ValueError and friends) as a clear st.error, never a traceback."""
    try:
        yield
    except (CheckpointError, DataError, ValueError) as e:
        st.error(f"{what} did not work: {plain(e)}")
    except OSError as e:
        st.error(f"{what} did not work: a file problem: {plain(e)}")
