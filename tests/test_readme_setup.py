"""The README's set-up section: exactly two commands for a fresh machine, and the CPU-only route beside
the first, with its size and time."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def set_up_section():
    text = README.read_text(encoding="utf-8")
    start = text.index("## Set up")
    return text[start : text.index("\n## ", start + 1)]


def test_the_set_up_section_holds_exactly_two_commands():
    blocks = re.findall(r"```bash\n(.*?)```", set_up_section(), flags=re.S)
    assert [b.strip() for b in blocks] == [
        "pip install -r requirements.txt && streamlit run serve.py",
        "pip install -r requirements-dev.txt && python -m pytest",
    ]


def test_the_cpu_only_route_is_beside_the_first_command_with_its_size_and_time():
    section = set_up_section()
    route = section.index("--index-url https://download.pytorch.org/whl/cpu")  # in the set-up section
    assert route - section.index("streamlit run serve.py") < 1200, "next to the first command"
    sentence = section[route - 400 : route + 400]
    assert re.search(r"\d+(\.\d+)? GB", sentence), "the route's size"
    assert re.search(r"\d+(\.\d+)? minutes", sentence), "the route's time"
