// The Gates page's passage, selectable with the mouse or the keyboard (Shift and the arrow keys). Sends
// the selection as {start, end, n}: character offsets into the passage (characters as Python counts
// them, so an emoji is one, not two UTF-16 units) and a number that differs on every selection, so that
// choosing the same stretch again still counts as a choice. The chosen span arrives as data and is
// highlighted; the text itself is built once and kept while it stays the same, so a rerun keeps the
// focus and the selection.
export default function (component) {
  const { data, parentElement, setStateValue } = component;
  const tokens = data.tokens;
  let box = parentElement.querySelector(".rnnlab-span-text");
  const same =
    box && box.rnnlabTokens && box.rnnlabTokens.length === tokens.length && box.rnnlabTokens.every((t, i) => t === tokens[i]);
  if (!same) {
    if (box) box.remove();
    box = document.createElement("div");
    box.className = "rnnlab-span-text";
    box.tabIndex = 0;
    box.setAttribute("role", "textbox");
    box.setAttribute("aria-readonly", "true");
    box.setAttribute("aria-multiline", "true");
    tokens.forEach((text, i) => {
      const piece = document.createElement("span");
      piece.dataset.t = String(i);
      if (text.includes("\n")) piece.className = "newline"; // a visible mark, drawn by CSS: not part of the text
      piece.textContent = text;
      box.appendChild(piece);
    });
    box.rnnlabTokens = tokens;
    parentElement.appendChild(box);
  }
  box.setAttribute("aria-label", data.label);
  box.querySelectorAll("span[data-t]").forEach((piece) => {
    const t = Number(piece.dataset.t);
    piece.classList.toggle("chosen", data.start <= t && t < data.end);
  });

  const characters = (text) => Array.from(text).length; // code points, as Python's len()
  const total = () => characters(box.textContent);
  // a boundary of the selection as a character offset into the passage, clamped to it
  const offsetOf = (node, offset) => {
    const whole = document.createRange();
    whole.selectNodeContents(box);
    const where = whole.comparePoint(node, offset);
    if (where < 0) return 0;
    if (where > 0) return total();
    const before = document.createRange();
    before.setStart(box, 0);
    before.setEnd(node, offset);
    return characters(before.toString());
  };
  const selectionInBox = () => {
    const selection = window.getSelection();
    if (!selection || selection.rangeCount === 0) return null;
    const range = selection.getRangeAt(0);
    const start = offsetOf(range.startContainer, range.startOffset);
    const end = offsetOf(range.endContainer, range.endOffset);
    return end > start ? { start, end } : null;
  };
  let sent = null;
  const send = (fromMouse) => {
    const chosen = selectionInBox();
    if (!chosen || (sent && sent.start === chosen.start && sent.end === chosen.end)) return;
    sent = chosen;
    setStateValue("span", { ...chosen, n: Date.now() });
    // the highlight shows the span from now on; a keyboard selection stays, for the next Shift and arrow
    if (fromMouse === true) window.getSelection().removeAllRanges();
  };
  // the chosen span as the native selection, so that Shift and the arrow keys move its end
  const selectChosen = () => {
    const chosen = box.querySelectorAll("span.chosen");
    if (chosen.length === 0) return;
    const range = document.createRange();
    range.setStartBefore(chosen[0]);
    range.setEndAfter(chosen[chosen.length - 1]);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  };

  let pressed = false;
  let moved = false; // Shift and an arrow key moved the selection since Shift went down
  const onMouseDown = () => {
    pressed = true;
  };
  const onMouseUp = () => {
    if (!pressed) return;
    pressed = false;
    setTimeout(() => send(true), 0); // the selection is final once the mouseup has been handled
  };
  const STEPS = {
    ArrowRight: ["forward", "character"],
    ArrowLeft: ["backward", "character"],
    ArrowDown: ["forward", "line"],
    ArrowUp: ["backward", "line"],
    End: ["forward", "lineboundary"],
    Home: ["backward", "lineboundary"],
  };
  const onKeyDown = (event) => {
    const step = STEPS[event.key];
    if (!step || !event.shiftKey) return;
    event.preventDefault();
    const selection = window.getSelection();
    const inside = selection.rangeCount > 0 && box.contains(selection.focusNode);
    if (!inside) selectChosen();
    const unit = (event.ctrlKey || event.altKey) && step[1] === "character" ? "word" : step[1];
    selection.modify("extend", step[0], unit);
    moved = true;
  };
  const onKeyUp = (event) => {
    if ((event.key === "Shift" && moved) || event.key === "Enter") send();
    if (event.key === "Shift") moved = false;
  };
  box.addEventListener("mousedown", onMouseDown);
  document.addEventListener("mouseup", onMouseUp);
  box.addEventListener("keydown", onKeyDown);
  box.addEventListener("keyup", onKeyUp);
  return () => {
    box.removeEventListener("mousedown", onMouseDown);
    document.removeEventListener("mouseup", onMouseUp);
    box.removeEventListener("keydown", onKeyDown);
    box.removeEventListener("keyup", onKeyUp);
  };
}
