"""Training: the one loop every model family trains with, what it learns from, and what it saves.

    train         the engine: `train(model, task, config, emit, should_stop, resume)`, events, resumable runs
    process       readying a process to train: CPU threads, malloc, a warm-up of two tiny steps
    tasks         LMTask, NgramTask (seed 004's mixed 2-5-gram samples), ClassificationTask: batches, evaluation
    presets       the seeds' model families as named presets, with their exact parameter counts
    distributed   torchrun: one run data-parallel, or a study's runs shared out
    ngram         scoring any model by context length, and a Kneser-Ney character n-gram baseline
    checkpoints   one safetensors format, loaded without executing code, its header validated whole

May import lab.errors, lab.schema, lab.data and lab.nets; never the instruments, the server or the pages.
"""
