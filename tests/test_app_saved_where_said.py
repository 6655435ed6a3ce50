"""What the app says happened, happened: every success message about a student's file is checked where
it says the result is (saved -> listed on the Sample and Gates pages, or on the Checkpoints page alone for
a model that reads no text; deleted -> gone from them; uploaded -> sampled on Sample; "Deleted N unreadable
files" -> N files were unreadable, and they are gone), and a student's file is never hidden by a bundled one
of the same name (issue 43, item 6). Also the upload's plain words: its cells' equations as a formula, a damaged file's
error in plain words, and no page showing a shell command when it has no model to offer."""

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import lab.training.checkpoints
import ui.checkpoints.listing
import ui.shared.checkpoint_picker
import ui.shared.sessions
from lab.data import CharTokenizer
from lab.nets.models import ClassifierConfig, LMConfig, build_model
from lab.server.spaces import space_dir
from lab.training.checkpoints import BUNDLED_DIR, checkpoint_bytes, list_checkpoints
from lab.words import count
from ui.cell_labels import equations_latex

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SAMPLE, GATES, MEMORY, CHECKPOINTS = (
    "pages/2_Sample.py",
    "pages/3_Gates.py",
    "pages/4_Memory.py",
    "pages/5_Checkpoints.py",
)
PICKERS = {SAMPLE: "sample_checkpoint", GATES: "gates_checkpoint"}
VOCABULARY = "abcdefgh \n"  # the student's tiny model's characters: no bundled model writes only these


@pytest.fixture(autouse=True)
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user_checkpoints"
    monkeypatch.setenv("RNNLAB_USER_DIR", str(folder))
    return folder


def said(elements):
    """What elements show a student: their Markdown with ui.shared.plain_text.plain's escapes read."""
    return re.sub(r"\\(.)", r"\1", " ".join(str(e.value) for e in elements))


def clean(at):
    assert not at.exception, [e.value for e in at.exception]
    return at


def tiny_lstm(name):
    """A student's LSTM that only knows VOCABULARY, saved under `name` (its header's name)."""
    tokenizer = CharTokenizer(VOCABULARY)
    model = build_model(LMConfig(cell="lstm", vocab_size=tokenizer.vocab_size, embed_dim=4, hidden_size=16))
    return checkpoint_bytes(model, tokenizer, {"history": [], "steps": 5}, name, 1)


def upload_and_save(at, filename, data):
    """Upload `data` on the Checkpoints page, save it under the name the page proposes -> the message."""
    uploads = at.session_state["ckpt_uploads"] if "ckpt_uploads" in at.session_state else 0
    clean(at.file_uploader(key=f"ckpt_upload_{uploads}").set_value((filename, data, "")).run())
    clean(at.button(key="ckpt_save").click().run())
    return said(at.success)


def listed_name(message):
    """The name a save's or a delete's message says the Sample and Gates pages list the file under, and the
    value their pickers (and links) hold for it: a name the student gave, "_latest" added."""
    found = re.search(r"the Sample and Gates pages (?:no longer )?list it as “([^”]+)”", message)
    assert found, message
    return found[1], f"{found[1]}_latest"


def options_on(at, page):
    clean(at.switch_page(page).run())
    return at.selectbox(key=PICKERS[page]).options


def test_a_bundled_model_uploaded_back_and_saved_is_listed_beside_the_bundled_one():
    """The issue's case: the bundled LSTM uploaded back and saved keeps its name, char-lstm. The message
    names where it is listed, and there it is, beside the bundled file, which it does not replace."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    message = upload_and_save(
        at, "char-lstm_latest.safetensors", (BUNDLED_DIR / "char-lstm_latest.safetensors").read_bytes()
    )
    assert message.startswith("Saved: ")
    mine, _ = listed_name(message)
    assert mine == "yours: char-lstm"
    table = at.dataframe[0].value.set_index("name")
    assert (table.loc["Character LSTM", "where"], table.loc[mine, "where"]) == ("bundled", "yours")
    for page in PICKERS:
        options = options_on(at, page)  # as the student reads them: a bundled model with its size
        assert mine in options and "Character LSTM · 5.1M" in options, (page, options)
    clean(at.switch_page(MEMORY).run())
    assert {mine, "Character LSTM"} <= set(at.multiselect(key="memory_reach_checkpoints").options)


def test_a_students_model_named_like_a_bundled_one_is_the_one_sampled_and_traced():
    """Uploaded -> sampled on Sample: a tiny model of the student's, named like the bundled LSTM, is the
    one that writes (only its own ten characters), and the one the Gates page reads (16 units); the
    bundled one of that name is still there, and writes other characters."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    shown, mine = listed_name(upload_and_save(at, "mine.safetensors", tiny_lstm("char-lstm")))
    assert (shown, mine) == ("yours: char-lstm", "yours: char-lstm_latest")
    clean(at.selectbox(key="ckpt_choice").set_value(mine).run())
    links = {link.proto.page: link.proto.query_string for link in at.main.get("page_link")}
    assert links["Sample"] == links["Gates"] == "model=yours%3A+char-lstm_latest"  # "Sample from it": this file

    at.session_state["sample_prompt"] = at.session_state["sample_typed"] = "abc"  # its characters only
    at.session_state["sample_tokens"] = 30
    at.query_params["model"] = mine  # as "Sample from it" opens the page
    clean(at.switch_page(SAMPLE).run())
    assert at.selectbox(key="sample_checkpoint").value == mine and not at.error, said(at.error)

    def written():
        boxes = [h.proto.body for h in at.get("html") if '<span title="p = ' in h.proto.body]
        return set("".join(re.findall(r">([^<]*)</span>", "".join(boxes))).replace("↵", "\n"))

    assert written() and written() <= set(VOCABULARY)
    clean(at.selectbox(key="sample_checkpoint").set_value("char-lstm_latest").run())
    assert written() - set(VOCABULARY)  # the bundled LSTM, still listed, writes other characters

    at.query_params.clear()
    at.session_state["gates_checkpoint"] = mine
    at.session_state["gates_text"] = "abc def gha bcd efg hab cde fgh"
    at.session_state["gates_section"] = "unit"
    clean(at.switch_page(GATES).run())
    assert at.selectbox(key="gates_checkpoint").value == mine
    assert at.number_input(key="gates_unit").max == 15  # the student's 16 units, not the bundled 640


def test_deleting_a_model_takes_it_off_the_sample_and_gates_pages():
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    shown, mine = listed_name(upload_and_save(at, "gone.safetensors", tiny_lstm("gone")))
    assert all(shown in options_on(at, page) for page in PICKERS)
    clean(at.selectbox(key="gates_checkpoint").set_value(mine).run())  # the Gates page shows it last
    clean(at.switch_page(CHECKPOINTS).run())
    clean(at.selectbox(key="ckpt_choice").set_value(mine).run())
    clean(at.checkbox(key="ckpt_confirm_delete").check().run())
    clean(at.button(key="ckpt_delete").click().run())
    message = said(at.success)
    assert message.startswith("Deleted, with every saved version of it")
    assert listed_name(message) == (shown, mine) and "no longer list it" in message
    for page in PICKERS:
        assert shown not in options_on(at, page), page
        assert not at.warning  # the delete's own message said it: no second notice (issue 41, item 6)
    assert at.selectbox(key="gates_checkpoint").value != mine  # where it was shown, another model now


def test_a_model_that_reads_no_text_is_saved_where_its_message_says_and_deleted_from_there():
    """A sequence classifier (the Ablation page's kind of model) is listed on the Checkpoints page only: the
    save's message says so, names it as the list does, and the text pages do not offer it."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    pixels = checkpoint_bytes(build_model(ClassifierConfig(hidden_size=8)), None, {"history": []}, "pixels", 1)
    message = upload_and_save(at, "pixels.safetensors", pixels)
    found = re.fullmatch(
        r"Saved: this page's list shows it as “([^”]+)” \(the Sample and Gates pages read text models only\)\.",
        message,
    )
    assert found, message
    table = at.dataframe[0].value.set_index("name")
    assert (table.loc[found[1], "where"], table.loc[found[1], "family"]) == ("yours", "sequence classifier")
    for page in PICKERS:  # "read text models only": not offered there
        assert not [option for option in options_on(at, page) if "pixels" in option], page
    clean(at.switch_page(MEMORY).run())
    assert not [o for o in at.multiselect(key="memory_reach_checkpoints").options if "pixels" in o]
    clean(at.switch_page(CHECKPOINTS).run())
    clean(at.selectbox(key="ckpt_choice").set_value(f"{found[1]}_latest").run())
    clean(at.checkbox(key="ckpt_confirm_delete").check().run())
    clean(at.button(key="ckpt_delete").click().run())
    gone = said(at.success)
    assert f"this page's list no longer shows it as “{found[1]}”" in gone, gone
    assert found[1] not in at.dataframe[0].value["name"].tolist()


def test_deleted_unreadable_files_are_counted_as_they_were(user_dir):
    """The page names the files it cannot read and deletes them on request: its message counts the files
    that were unreadable (one, then three), and only those are gone; a readable file beside them stays."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    folder = space_dir(user_dir, at.session_state["_rnnlab_session_key"])
    (folder / "kept_latest.safetensors").write_bytes(tiny_lstm("kept"))
    whole = tiny_lstm("cut")
    damaged = [b"", b"not a checkpoint at all", whole[: len(whole) // 2]]  # empty, not safetensors, cut short
    for n in (1, 3):
        for i, data in enumerate(damaged[:n]):
            (folder / f"bad{i}_latest.safetensors").write_bytes(data)
        clean(at.run())
        assert f"{count(n, 'file')} could not be read" in said(at.warning), said(at.warning)
        clean(at.button(key="ckpt_delete_unreadable").click().run())
        assert said(at.success) == f"Deleted {count(n, 'unreadable file')}.", said(at.success)
        assert sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors") == ["kept_latest.safetensors"]
        assert "yours: kept" in at.selectbox(key="ckpt_choice").options  # the readable file is still listed


def test_a_link_from_before_yours_still_finds_the_students_file():
    """A student's link to their own model made before files were listed as "yours: …" (?model=NAME)
    opens that file when no bundled one has the name."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    upload_and_save(at, "old.safetensors", tiny_lstm("old-link"))
    at.query_params["model"] = "old-link_latest"
    at.session_state["sample_prompt"] = at.session_state["sample_typed"] = "abc"
    at.session_state["sample_tokens"] = 5
    clean(at.switch_page(SAMPLE).run())
    assert at.selectbox(key="sample_checkpoint").value == "yours: old-link_latest" and not at.warning


def test_the_upload_message_shows_the_cells_equations_as_a_formula():
    """The convention line ("c_t = f*c_{t-1} + i*g") read as Markdown lost its "*": the message now names
    the cells in words and draws their equations with LaTeX."""
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    clean(at.file_uploader(key="ckpt_upload_0").set_value(("f.safetensors", tiny_lstm("f"), "")).run())
    message = said(at.success)
    assert "is a valid RNN Lab checkpoint: a language model of" in message and "LSTM cells" in message
    assert "*" not in message and "_t" not in message  # no formula left for Markdown to read
    assert [latex.value.strip("$\n") for latex in at.latex] == [equations_latex("lstm")]


def test_a_damaged_upload_is_refused_in_plain_words():
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(CHECKPOINTS).run())
    broken = (2**40).to_bytes(8, "little") + b"{}"  # safetensors: "Error while deserializing: header too large"
    clean(at.file_uploader(key="ckpt_upload_0").set_value(("big.safetensors", broken, "")).run())
    error = said(at.error)
    assert "not a checkpoint RNN Lab can read: its header is damaged or too large" in error
    assert "deserializ" not in error.lower() and "Error while" not in error


@pytest.mark.parametrize("page", [SAMPLE, GATES, MEMORY, CHECKPOINTS])
def test_with_no_models_a_page_says_so_in_plain_words_not_with_a_command(page, monkeypatch):
    """A server without its bundled models, and a student who saved none: the page says what to do on
    its own pages, and shows no shell command or file name."""
    no_bundled = lambda user_dir=None, bundled_dir=None, include_versions=True: list_checkpoints(  # noqa: E731
        user_dir, None, include_versions
    )
    monkeypatch.setattr(ui.shared.checkpoint_picker, "list_checkpoints", no_bundled)
    scan = lab.training.checkpoints.scan_checkpoints
    without_bundled = lambda user_dir=None, *a, **k: scan(user_dir, None)  # noqa: E731
    monkeypatch.setattr(lab.training.checkpoints, "scan_checkpoints", without_bundled)
    monkeypatch.setattr(ui.checkpoints.listing, "scan_checkpoints", without_bundled)  # the Checkpoints page's list
    at = clean(AppTest.from_file(APP, default_timeout=120).switch_page(page).run())
    warning = said(at.warning)
    assert ui.shared.checkpoint_picker.NO_CHECKPOINTS in warning
    assert not re.search(r"python|scripts/|streamlit run|\.py\b|`", warning), warning
