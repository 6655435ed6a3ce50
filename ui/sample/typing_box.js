// The Sample page's typing box: a text box that sends its text on every key press (not on Enter), and
// under it the bars of the model's likeliest next tokens and its layers' keep gates, drawn from the data
// the page sends back. The box is built once and kept, so the focus and the caret survive every rerun;
// bars that answer an older text than the box now holds are drawn faded until their answer arrives.
// Clicking a bar types its token. Every text is set with textContent: nothing typed becomes markup.
export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let root = parentElement.querySelector(".rnnlab-typing");
  if (!root) {
    root = document.createElement("div");
    root.className = "rnnlab-typing";
    const box = document.createElement("textarea");
    box.className = "rnnlab-typing-box";
    box.rows = 2;
    box.spellcheck = false;
    box.value = data.text;
    const bars = document.createElement("div");
    bars.className = "rnnlab-typing-bars";
    bars.setAttribute("role", "list");
    const keep = document.createElement("div");
    keep.className = "rnnlab-typing-keep";
    const note = document.createElement("div");
    note.className = "rnnlab-typing-note";
    note.setAttribute("aria-live", "polite");
    root.append(box, bars, keep, note);
    parentElement.appendChild(root);
    root.rnnlabSent = data.text;
    root.rnnlabPageText = data.text;
  }
  const [box, bars, keep, note] = root.children;
  box.setAttribute("aria-label", data.label);
  box.maxLength = data.max_chars;
  // a text the page set itself (data.n null: a restored link) replaces the box's; a text that answers one
  // this box sent never does, so an answer that arrives late cannot undo the characters typed since
  if (data.n === null && data.text !== root.rnnlabPageText) {
    box.value = data.text;
    root.rnnlabSent = data.text;
  }
  if (data.n === null) root.rnnlabPageText = data.text;

  const send = () => {
    if (box.value === root.rnnlabSent) return;
    root.rnnlabSent = box.value;
    setStateValue("typed", { text: box.value, n: Date.now() });
  };
  const type = (text) => {
    box.value = (box.value + text).slice(0, data.max_chars);
    box.focus();
    send();
  };

  // a span of `className` holding `text` (textContent: inert)
  const span = (className, text = "") => {
    const element = document.createElement("span");
    element.className = className;
    element.textContent = text;
    return element;
  };
  // a share in [0, 1] as a filled track and its percentage with `decimals`
  const track = (share, decimals) => {
    const filled = span("track");
    filled.appendChild(span("fill")).style.width = `${(100 * share).toFixed(1)}%`;
    return [filled, span("value", `${(100 * share).toFixed(decimals)}%`)];
  };

  const current = box.value === data.text;
  bars.classList.toggle("stale", !current);
  bars.replaceChildren(
    ...data.bars.map((bar) => {
      const row = document.createElement("button");
      row.type = "button";
      row.className = "rnnlab-typing-bar";
      row.setAttribute("role", "listitem");
      row.title = `Type it: ${bar.label}`;
      row.append(span("label", bar.label), ...track(bar.p, 1));
      row.addEventListener("click", () => type(bar.text));
      return row;
    }),
  );
  keep.replaceChildren(
    ...data.keep.map((layer) => {
      const row = document.createElement("div");
      row.className = "rnnlab-typing-keep-row";
      row.appendChild(span("label", layer.label));
      if (layer.value !== null) row.append(...track(layer.value, 0));
      return row;
    }),
  );
  note.textContent = data.note;

  box.addEventListener("input", send);
  return () => box.removeEventListener("input", send);
}
