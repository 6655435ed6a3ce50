"""Signing in with a school's accounts (Google, Microsoft: any OpenID Connect provider), through
Streamlit's own st.login, set up in the [auth] section of the app's secrets (README, "Running a class").

Optional: without that section nobody signs in and every browser has a space of its own (ui.shared.sessions).
With it, the sidebar offers sign-in; a signed-in person's space, share of the training budget and cap
on runs are keyed by who the provider says they are (lab.server.spaces.identity_space_key), so they
are one on every device. RNNLAB_REQUIRE_SIGN_IN makes every page ask for it first.

Streamlit keeps the identity in a cookie it signs with the secrets' `cookie_secret` and refuses once
it is older than its lifetime; a cookie it cannot verify (forged, or signed with another secret) is
no sign-in at all, so st.user is the only identity this module reads. Streamlit's sign-out deletes the
cookie from the browser that signed out only: "Sign out" here also revokes, on this server, every cookie
of that person issued until then (lab.server.spaces.sign_out), so a copy taken before opens nothing.

Streamlit brings every sign-in back to the app's root, Home. The page where "Sign in" was pressed, with its
settings (its address's query), is remembered for that browser when it is pressed (`remember_return`, keyed by
the browser's space cookie, ui.shared.sessions), and the frame of Home takes it back once, for an identity issued
after the press (`take_return`): the student lands where they were (ui.app.frame).
"""

import hmac
import threading
import time
from dataclasses import dataclass

import streamlit as st

from lab.server.spaces import CLOCK_SKEW_SECONDS, sign_out, signed_out
from lab.settings import server_settings
from ui.shared.plain_text import plain

TEACHER_FLAG = "_rnnlab_teacher_by_key"  # this session typed the teacher key (lab.settings: RNNLAB_TEACHER_KEY)


@dataclass(frozen=True)
class Identity:
    issuer: str  # the provider (its `iss`)
    subject: str  # who, for that provider (its `sub`: never reused, unlike an email)
    email: str  # lower case; "" when the provider sent none or said it is not verified
    name: str  # what the sidebar says ("" when none)


def identity_from(claims):
    """The identity in st.user's claims, or None when nobody is signed in (or the provider's answer
    lacks who they are)."""
    if not claims.get("is_logged_in"):
        return None
    issuer, subject = claims.get("iss"), claims.get("sub")
    if not (isinstance(issuer, str) and isinstance(subject, str) and issuer and subject):
        return None
    email = claims.get("email")
    verified = claims.get("email_verified", True) is not False  # a provider that says "not verified" is believed
    email = email.strip().lower() if isinstance(email, str) and verified else ""
    name = claims.get("name")
    return Identity(issuer, subject, email, name if isinstance(name, str) else "")


def sign_in_set_up():
    """Whether the app's secrets have an [auth] section (st.login's providers)."""
    try:
        return "auth" in st.secrets
    except FileNotFoundError:  # no secrets file at all
        return False


def identity():
    """This session's signed-in person, or None: None too when the identity cookie was issued before that
    person's last sign-out on this server (lab.server.spaces.signed_out)."""
    person = identity_from(st.user) if sign_in_set_up() else None
    if person is None or signed_out(server_settings().user_dir, person.issuer, person.subject, st.user.get("iat")):
        return None
    return person


def providers():
    """The provider names for st.login: the [auth] section's named subsections ([auth.google]), or
    [None] for its one unnamed provider."""
    named = [name for name, value in st.secrets["auth"].items() if hasattr(value, "items")]
    return named or [None]


def sign_in_buttons(key, on_press=None):
    """One button per provider, each starting st.login's redirect to it (after `on_press()`, when given)."""
    for provider in providers():
        label = f"Sign in with {provider.capitalize()}" if provider else "Sign in"
        if st.button(label, key=f"{key}_{provider or 'default'}", type="primary"):
            if on_press is not None:
                on_press()
            st.login(*[provider] if provider else [])


def must_sign_in():
    """Whether this visitor sees only how to sign in: RNNLAB_REQUIRE_SIGN_IN, and nobody signed in."""
    return server_settings().require_sign_in and identity() is None


def require_sign_in(on_press=None):
    """On every page, first: with RNNLAB_REQUIRE_SIGN_IN, a visitor who is not signed in sees only how to
    sign in (`on_press`: called as a sign-in button is pressed, before the redirect)."""
    if not must_sign_in():
        return
    st.title("Sign in")
    if not sign_in_set_up():
        st.error(
            "This server asks everyone to sign in, but no way to sign in is set up: whoever runs it adds the "
            "sign-in section to the app's secrets (the README's “Running a class”)."
        )
        st.stop()
    st.markdown("This class's lab asks you to sign in first, with your school account.")
    sign_in_buttons("signin_required", on_press)
    st.stop()


def sign_in_box(on_press=None):
    """In the sidebar: who is signed in and "Sign out", or "Sign in" (when sign-in is set up; `on_press` as for
    require_sign_in)."""
    if not sign_in_set_up():
        return
    person = identity()
    if person is None:
        st.caption("Sign in to keep your files on any device.")
        sign_in_buttons("signin_sidebar", on_press)
        return
    st.caption(f"Signed in as {plain(person.name or person.email or 'you')}")
    if st.button("Sign out", key="signin_out", help="Your files stay: sign in again, on any device, to find them."):
        # first: every copy of this browser's cookie (and any older one) no longer signs anyone in here
        sign_out(server_settings().user_dir, person.issuer, person.subject, st.user.get("iat"))
        st.logout()


def is_teacher():
    """Whether this session sees the Class page's teacher's view: signed in with one of the teachers'
    emails (RNNLAB_TEACHER_EMAILS), or the teacher key was typed in it (RNNLAB_TEACHER_KEY)."""
    person = identity()
    if person is not None and person.email and person.email in server_settings().teacher_emails:
        return True
    return bool(st.session_state.get(TEACHER_FLAG))


def try_teacher_key(typed):
    """Whether `typed` is the teacher key (compared in constant time); remembered for this session."""
    key = server_settings().teacher_key
    if key is not None and hmac.compare_digest(str(typed).encode(), key.encode()):
        st.session_state[TEACHER_FLAG] = True
    return bool(st.session_state.get(TEACHER_FLAG))


# ---------------------------------------------------------------------------
# back to the page where "Sign in" was pressed

RETURN_SECONDS = 600  # a sign-in that takes longer lands on Home, as Streamlit's own does
MAX_RETURN_QUERY_CHARS = 4000  # a longer query (a typed text in it) is not kept: the page opens with its defaults
MAX_PENDING_RETURNS = 10_000  # sign-ins in flight on one server at once; beyond, the oldest lands on Home


@st.cache_resource
def _returns():
    """browser key -> (page, query, when "Sign in" was pressed): each browser's sign-in in flight, this server's."""
    return {"lock": threading.Lock(), "pending": {}}


def remember_return(browser, page, query, now=None):
    """`browser` (its space cookie's key) pressed "Sign in" on `page` (a name of ui.shared.common.PAGES) whose
    address had `query` ({name: value}): where its sign-in returns to. A browser without a key is not remembered."""
    if not browser:
        return
    now = time.time() if now is None else now
    query = {str(k): str(v) for k, v in query.items()}
    if sum(len(k) + len(v) + 2 for k, v in query.items()) > MAX_RETURN_QUERY_CHARS:
        query = {}
    store = _returns()
    with store["lock"]:
        pending = store["pending"]
        for stale in [key for key, (_, _, pressed) in pending.items() if now - pressed > RETURN_SECONDS]:
            del pending[stale]
        while len(pending) >= MAX_PENDING_RETURNS:
            del pending[next(iter(pending))]  # the oldest (a dict keeps its order of insertion)
        pending.pop(browser, None)
        pending[browser] = (page, query, now)


def take_return(browser, issued_at, now=None):
    """Where `browser`'s sign-in returns to: (page, query) once, for an identity issued (`issued_at`, its `iat`)
    after "Sign in" was pressed, at most RETURN_SECONDS ago; else None (no sign-in pressed here, an identity from
    before the press: a sign-in that was given up)."""
    if not browser:
        return None
    now = time.time() if now is None else now
    store = _returns()
    with store["lock"]:
        entry = store["pending"].get(browser)
        if entry is None:
            return None
        page, query, pressed = entry
        try:
            issued = float(issued_at)
        except (TypeError, ValueError):
            return None
        if now - pressed > RETURN_SECONDS:
            del store["pending"][browser]
            return None
        if not pressed - CLOCK_SKEW_SECONDS <= issued <= now + CLOCK_SKEW_SECONDS:
            return None  # not this sign-in's identity: the press is kept for the one it starts
        del store["pending"][browser]
    return page, query
