"""The teaching instruments: what a trained model does while it reads and writes, measured.

    sampling     one seeded sampler: greedy, temperature, top-k, top-p
    prediction   which earlier tokens drove one prediction; the next token as you type
    introspect   gate traces of every layer over a text
    stepping     one recurrent step, equation by equation, with the cell's own numbers
    memory       how long a model remembers: retention, memory spread, state resets, gradients through time
    features     features of a text (brackets, line position, speaker headings, character classes)
    units        which units track a feature, or fire on a span
    race         races between runs: who leads, equal-parameter widths, the bundled models' long race
    learning     a fresh model learning one paragraph, sampled at log-spaced steps
    scans        the selective scan's recurrence by the loop and by the parallel scan, timed

May import lab.errors, lab.schema, lab.data, lab.nets and lab.training; never the server or the pages.
"""
