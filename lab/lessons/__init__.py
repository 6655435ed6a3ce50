"""What the lessons say, computed from the figures they show.

Every sentence of a lesson that compares, ranks or counts ("fastest", "most", "the same as greedy",
"half gone after ...") is written here, by a pure function that takes the numbers the lesson shows and
returns them with the sentence that reads them. The sentence is chosen from the numbers, never
assumed from a default setting, so that it holds wherever the student moves a control; and a
statistic over too little data says so, with its threshold, instead of reporting a finding. The pages
(ui.lessons) only lay the figures and these sentences out; tests/test_lesson_claims.py checks every
sentence against its numbers over the whole range of each control.

    words     numbers and lists in the words a student reads (precision that shows what a figure means)
    reading   the state is the memory, choosing the next token, characters or subwords; a model in words
    memory    keep or overwrite, why the vanilla RNN forgets, the gate-bias study, memory spread
    stepping  one step of a cell; the two scans raced
    toys      the toy tasks' reach; watching a model learn one paragraph
"""
