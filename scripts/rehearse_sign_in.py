"""Rehearse signing in, offline, on any port: the app's secrets for a sign-in through oidc-provider-mock (an
OpenID Connect provider made for tests, in requirements-dev.txt), and the two commands that start it and the app.

    python -m scripts.rehearse_sign_in --port 8502

writes .streamlit/rehearsal-secrets.toml (git-ignored; never the app's own secrets.toml) and prints:

    oidc-provider-mock --port 9400 --user-claims '{"sub": "teacher@school.test", ...}' ...
    streamlit run serve.py --server.port 8502 --secrets.files .streamlit/rehearsal-secrets.toml

The provider's sign-in page offers a teacher (one of RNNLAB_TEACHER_EMAILS, set in the secrets) and two students:
press one to sign in as them. The provider sends the browser back to the secrets' redirect_uri, which must be the
app's own address and port, ending in /oauth2callback (st.login's way back): a server on port 8502 needs
http://localhost:8502/oauth2callback, which is why the port is the script's one argument (README, "Running a
class").
"""

import argparse
import json
import secrets
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECRETS = Path(".streamlit") / "rehearsal-secrets.toml"  # beside the app's own secrets.toml, never it
PROVIDER_PORT = 9400  # oidc-provider-mock's own default
TEACHER = "teacher@school.test"
STUDENTS = ("ada@school.test", "bob@school.test")
MARK = "# written by python -m scripts.rehearse_sign_in: a rehearsal's secrets, safe to overwrite"


def redirect_uri(port, host="localhost"):
    """Where the provider sends a signed-in browser back: the app's address at its port, and st.login's path."""
    return f"http://{host}:{port}/oauth2callback"


def users():
    """The people the provider's page offers, each with the claims the lab reads (ui.shared.sign_in.identity)."""
    return [
        {"sub": email, "email": email, "email_verified": True, "name": email.split("@")[0].title()}
        for email in (TEACHER, *STUDENTS)
    ]


def secrets_text(port, provider_port=PROVIDER_PORT, host="localhost", provider_host=None, cookie_secret=None):
    """The secrets of a server at `host`:`port` whose sign-in is the provider at `provider_port` (TOML)."""
    cookie_secret = cookie_secret or secrets.token_urlsafe(32)
    provider = f"http://{provider_host or host}:{provider_port}"
    entries = {
        "redirect_uri": redirect_uri(port, host),
        "cookie_secret": cookie_secret,
        "client_id": "rnnlab-rehearsal",  # oidc-provider-mock takes any client that does not register
        "client_secret": "rnnlab-rehearsal-secret",
        "server_metadata_url": f"{provider}/.well-known/openid-configuration",
    }
    lines = [MARK, f"RNNLAB_TEACHER_EMAILS = {json.dumps(TEACHER)}", "", "[auth]"]
    lines += [f"{name} = {json.dumps(value)}" for name, value in entries.items()]  # a JSON string is a TOML one
    return "\n".join(lines) + "\n"


def commands(port, secrets_path, provider_port=PROVIDER_PORT):
    """The provider's command and the app's, as a teacher types them."""
    provider = ["oidc-provider-mock", "--port", str(provider_port)]
    for claims in users():
        provider += ["--user-claims", json.dumps(claims)]
    app = ["streamlit", "run", "serve.py", "--server.port", str(port), "--secrets.files", str(secrets_path)]
    return shlex.join(provider), shlex.join(app)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scripts.rehearse_sign_in", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8501, help="the app's port (default 8501, Streamlit's)")
    parser.add_argument("--provider-port", type=int, default=PROVIDER_PORT, help="the provider's port (default 9400)")
    parser.add_argument(
        "--secrets", type=Path, default=DEFAULT_SECRETS, help=f"where to write (default {DEFAULT_SECRETS})"
    )
    args = parser.parse_args(argv)
    for port in (args.port, args.provider_port):
        if not 1 <= port <= 65535:
            parser.error(f"a port is a number from 1 to 65535, got {port}")
    if args.port == args.provider_port:
        parser.error("the app and the provider need two different ports")
    if args.secrets.exists() and not args.secrets.read_text(encoding="utf-8", errors="replace").startswith(MARK):
        parser.error(f"{args.secrets} exists and is not a rehearsal's secrets: name another file with --secrets")
    args.secrets.parent.mkdir(parents=True, exist_ok=True)
    args.secrets.write_text(secrets_text(args.port, args.provider_port), encoding="utf-8")
    provider, app = commands(args.port, args.secrets, args.provider_port)
    print(f"Wrote {args.secrets}: sign-in through a provider at port {args.provider_port}, back to")
    print(f"{redirect_uri(args.port)} (the app's port). In two terminals, from the repository's root:\n")
    print(f"    {provider}\n")
    print(f"    {app}\n")
    print(f"Open http://localhost:{args.port}, press Sign in, and choose who signs in on the provider's page:")
    print(f"{TEACHER} (a teacher: the Class page's teacher's view) or a student ({', '.join(STUDENTS)}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
