"""What the Memory page shows before a student changes anything: its text and the bundled models of
its charts. The server computes these views in the background once a first page is drawn
(ui.app.warm_up), so they are here, where both can read them."""

TEXT = (
    "Ham:\nTo be, or not to be,--that is the question:--\nWhether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune\nOr to take arms against a sea of troubles,\n"
    "And by opposing end them?--To die,--to sleep,--\nNo more; and by a sleep to say we end\n"
    "The heartache, and the thousand natural shocks\nThat flesh is heir to,--'tis a consummation\n"
)
RETENTION_MODELS = ["char-gru-seed_latest", "char-gru-torch_latest", "char-lstm_latest", "char-scan_latest"]
GRADIENT_MODELS = ["char-rnn_latest", *RETENTION_MODELS]
REACH_MODELS = GRADIENT_MODELS  # one model of each cell, the vanilla RNN included
REACH_LAG = 128  # the reach chart follows a change this many tokens, or to the end of a shorter text
GRADIENT_STEPS = 100  # T: the gradient chart reads the text's first T + 1 characters
